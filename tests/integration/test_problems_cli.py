"""stackctl problems: one row per problem (every firing of one signature), from each source list reads: the archive
directory (its ledger and its snapshots), the journal's firing records, a daemon's GET /problems, and several daemons
at once, where the same hang on two hosts is one row with its counts added. Real hangs under the real daemon: the
two-process Python pipe deadlock of tests/fixtures/python/culprit.py, and block-read; two hosts are namespaces with
hostnames of their own, as in test_fleet.py."""
import json
import os
import re
import signal
import subprocess
import uuid

from conftest import free_port, http_json, stackctl, wait_until
from test_alertmanager import HOOK, am_alerts
from test_fleet import HOST, JOURNALD, REMOTE, UPLOAD, journal_records, needs_remote
from test_journal import FIRED, journal, journald_daemon  # noqa: F401  (journald_daemon is a fixture)
from test_python_daemon import culprit, unique_comm  # noqa: F401  (culprit is a fixture)

COLUMNS = ["SIGNATURE", "COUNT", "FIRST", "LAST", "HOSTS", "PROCESSES", "LATEST", "TITLE"]
NODENAME = os.uname().nodename


def deadlock_rule(comm, cooldown="1h", actions="snapshot, log"):
    return f"""
  - name: pr-deadlock
    class: blocked
    for: 1s
    comm: {json.dumps(comm)}
    deadlock: true
    cooldown: {cooldown}
    actions: [{actions}]
"""


def blocked_rule(comm, cooldown="1h", for_="1s"):
    return f"""
  - name: pr-blocked
    class: blocked
    for: {for_}
    comm: {json.dumps(comm)}
    cooldown: {cooldown}
    actions: [snapshot, log]
"""


def config(rules, archive="@ARCHIVE@", http="", hooks=""):
    return f"""
poll_interval: 200ms
archive:
  directory: "{archive}"
{http}
{hooks}
rules:
{rules}
"""


def problems(*args, rc=None):
    """stackctl problems --json ARGS (options and matches): the rows ([] when none match)."""
    r = stackctl("problems", "--json", *args)
    assert r.returncode in ((0, 3) if rc is None else (rc,)), r
    return json.loads(r.stdout) if r.stdout.strip() else []


def table(*args, rc=0):
    """stackctl ARGS problems as text: (header words, rows as dicts of the columns)."""
    out = stackctl(*args, check_rc=rc).stdout.decode()
    lines = out.splitlines()
    header = lines[0].split() if lines and lines[0].startswith("SIGNATURE") else None
    rows = []
    for ln in lines[1 if header else 0:]:
        # FIRST and LAST are two words each ("YYYY-MM-DD HH:MM:SS"); TITLE, last, has spaces of its own.
        sig, count, d1, t1, d2, t2, hosts, procs, latest, title = ln.split(None, 9)
        rows.append({"SIGNATURE": sig, "COUNT": count, "FIRST": f"{d1} {t1}", "LAST": f"{d2} {t2}", "HOSTS": hosts,
                     "PROCESSES": procs, "LATEST": latest, "TITLE": title})
    return header, rows


def snapshots_of(d, pids):
    return [s for s in d.snapshots() if s["pid"] in pids]


def test_usage_and_an_empty_archive(tmp_path):
    archive = tmp_path / "archive"
    archive.mkdir()
    r = stackctl("--archive", archive, "problems", check_rc=3)
    assert r.stdout == b"" and f"No problems in {archive}." in r.stderr.decode()
    r = stackctl("--archive", archive, "problems", "--json", check_rc=3)
    assert json.loads(r.stdout) == []
    r = stackctl("--archive", archive, "problems", "COMM=x", check_rc=3)
    assert f"No problems match in {archive}." in r.stderr.decode()
    # What a problem does not have is refused, never matched against nothing.
    for m in ("/usr/bin/python3", "EXE=/x", "UNIT=a.service", "RULE=r", "CLASS=blocked"):
        r = stackctl("--archive", archive, "problems", m, check_rc=2)
        assert "Problems match a PID, a COMM or a SIGNATURE" in r.stderr.decode(), m
    assert "a signature is 16 lowercase hex digits" in \
        stackctl("problems", "SIGNATURE=0123", check_rc=2).stderr.decode()
    assert "--rule does not apply to 'problems'" in stackctl("problems", "--rule", "x", check_rc=2).stderr.decode()
    assert "add --journal" in stackctl("problems", "-D", tmp_path, check_rc=2).stderr.decode()


def test_the_archive_has_a_row_per_problem_and_list_and_show_take_its_signature(daemon, culprit, fixture):
    dl, br = unique_comm("pr-dl"), unique_comm("pr-br")
    d = daemon(config(deadlock_rule(dl) + blocked_rule(br)))
    c = culprit(dl, "deadlock")
    pids = {c.tid("wait_for_child"), c.tid("wait_for_parent")}
    [snap_a] = wait_until(lambda: snapshots_of(d, pids), timeout=30, interval=0.1, what="the deadlock's snapshot")
    sig_a = snap_a["signature"]
    assert re.fullmatch(r"[0-9a-f]{16}", sig_a) and snap_a["title"].endswith(" (deadlock)"), snap_a
    wait_until(lambda: problems("--archive", d.archive), timeout=10, interval=0.1, what="the deadlock's problem")
    fx = fixture("block-read", "--name", br).wait_wchan("pipe_read")
    [snap_b] = wait_until(lambda: snapshots_of(d, {fx.pid}), timeout=30, interval=0.1, what="block-read's snapshot")
    sig_b = snap_b["signature"]
    assert sig_b != sig_a
    rows = wait_until(lambda: (lambda rs: rs if len(rs) == 2 else None)(problems("--archive", d.archive)),
                      timeout=10, interval=0.1, what="both problems")

    # Oldest first by when each was last seen; one firing each (a deadlock fires once), its one snapshot.
    a, b = rows
    assert [a["signature"], b["signature"]] == [sig_a, sig_b], rows
    assert a["last_usec"] <= b["last_usec"]
    for row, snap, procs in ((a, snap_a, pids), (b, snap_b, {fx.pid})):
        assert row["count"] == 1 and row["snapshots"] == 1, row
        assert row["title"] == snap["title"] and row["latest_id"] == row["first_id"] == snap["id"], row
        # The ledger names the firing's process and those its chain reached: both sides of the deadlock.
        assert {p["pid"] for p in row["processes"]} == procs, row
        assert row["hosts"] == [NODENAME] and row["open"] is False, row
        assert row["first_usec"] <= row["last_usec"] and abs(row["last_usec"] - snap["timestamp_usec"]) < 5_000_000
    assert {p["comm"] for p in a["processes"]} == {dl}

    # The table: the same rows, TITLE last.
    header, trows = table("--archive", d.archive, "problems")
    assert header == COLUMNS
    assert [r["SIGNATURE"] for r in trows] == [sig_a, sig_b]
    ta = trows[0]
    assert ta["COUNT"] == "1" and ta["HOSTS"] == "1" and ta["LATEST"] == snap_a["id"], ta
    assert set(map(int, ta["PROCESSES"].split(","))) == pids, ta
    assert ta["TITLE"] == snap_a["title"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", ta["FIRST"]) and ta["FIRST"] <= ta["LAST"]
    assert trows[1]["PROCESSES"] == str(fx.pid)
    assert table("--archive", d.archive, "problems", "--no-legend")[0] is None

    # -r, -1, -n as list has them.
    arch = ("--archive", d.archive)
    assert [r["signature"] for r in problems(*arch, "-r")] == [sig_b, sig_a]
    assert [r["signature"] for r in problems(*arch, "-1")] == [sig_b]
    assert [r["signature"] for r in problems(*arch, "-n", "1")] == [sig_b]
    assert [r["signature"] for r in problems(*arch, "-n", "5", "-r")] == [sig_b, sig_a]

    # Matches: a pid or comm of any of its processes, its signature; --pid, --since, --until.
    def sigs(*m):
        return [r["signature"] for r in problems(*arch, *m)]
    for pid in pids:
        assert sigs(str(pid)) == [sig_a]
    assert sigs("--pid", fx.pid) == [sig_b]
    assert sigs(f"COMM={br}") == [sig_b] and sigs(dl) == [sig_a]
    assert sigs("COMM=pr-*") == [sig_a, sig_b]
    assert sigs(sig_a) == [sig_a] and sigs(f"SIGNATURE={sig_b}") == [sig_b]
    assert sigs(sig_a, f"COMM={br}") == []
    assert sigs("--since", "1h") == [sig_a, sig_b] and sigs("--until", "@1") == []
    r = stackctl(*arch, "problems", "COMM=nothing-like-it", check_rc=3)
    assert f"No problems match in {d.archive}." in r.stderr.decode()

    # list SIGNATURE: that problem's snapshots; show SIGNATURE: its latest, as show ID prints it.
    assert [s["id"] for s in json.loads(stackctl(*arch, "list", "--json", sig_a, check_rc=0).stdout)] == \
        [snap_a["id"]]
    assert [s["id"] for s in json.loads(stackctl(*arch, "list", "--json", f"SIGNATURE={sig_b}",
                                                 check_rc=0).stdout)] == [snap_b["id"]]
    for fmt in ((), ("--json",)):
        assert stackctl(*arch, "show", *fmt, sig_a, check_rc=0).stdout == \
            stackctl(*arch, "show", *fmt, snap_a["id"], check_rc=0).stdout
    stackctl(*arch, "show", "0123456789abcdef", check_rc=3)

    # The daemon's API over its socket: the same rows, and it knows which are open now (both hangs last).
    over_socket = problems("--socket", d.socket, rc=0)
    assert [dict(r, open=False) for r in over_socket] == rows
    assert all(r["open"] for r in over_socket), over_socket
    assert [r["signature"] for r in problems("--socket", d.socket, f"COMM={br}", rc=0)] == [sig_b]


def test_firings_of_an_open_problem_count_without_snapshots(daemon, culprit):
    """A deadlock under a deadlock rule and a blocked rule with short cooldowns keeps firing; its captures are not
    stored again. COUNT counts every firing (the ledger's), its one snapshot stays LATEST."""
    comm = unique_comm("pr-many")
    d = daemon(config(deadlock_rule(comm, cooldown="2s") + blocked_rule(comm, cooldown="2s", for_="2s")))
    c = culprit(comm, "deadlock")
    pids = {c.tid("wait_for_child"), c.tid("wait_for_parent")}
    [row] = wait_until(lambda: [r for r in problems("--archive", d.archive) if r["count"] >= 3], timeout=60,
                       interval=0.2, what="three firings of the deadlock")
    [snap] = snapshots_of(d, pids)
    assert row["signature"] == snap["signature"] and row["snapshots"] == 1 and row["latest_id"] == snap["id"], row
    # The hang over, the count stands still: then every source says the same number, the ledger's lines. (A firing
    # caught while the kill undoes the deadlock, one side gone, is another problem: matched out by the signature.)
    sig = row["signature"]
    c.stop()

    def settled():
        before = problems("--archive", d.archive, sig)
        d.wait_scans(5)
        after = problems("--archive", d.archive, sig)
        return after if after == before else None
    [row] = wait_until(settled, timeout=30, interval=0.1, what="the count to settle")
    with open(os.path.join(d.archive, "problems.jsonl")) as f:
        lines = [json.loads(ln) for ln in f if ln.strip()]
    assert row["count"] == len([ln for ln in lines if ln["signature"] == row["signature"]]) >= 3, (row, lines)
    [api] = problems("--socket", d.socket, sig, rc=0)
    assert api["count"] == row["count"] and api["open"] is False, api
    _, [t] = table("--archive", d.archive, "problems", sig)
    assert t["COUNT"] == str(row["count"]) and t["LATEST"] == snap["id"], t


UTS = """#!/bin/sh
# A host of its own name: a UTS namespace whose hostname is $PR_HOST, then the daemon.
set -eu
hostname "$PR_HOST"
exec "$@"
"""


def token_file(tmp_path):
    p = tmp_path / "token"
    p.write_text("problems-token\n")
    p.chmod(0o600)
    return p


def test_the_same_hang_on_two_hosts_is_one_row(daemon, culprit, tmp_path):
    """Two daemons, each on a host of its own name (a UTS namespace), see the same deadlock: `stackctl problems
    --host A --host B` shows it once, with HOSTS 2 and COUNT 2, and show SIGNATURE prints the latest of its
    snapshots from the host that has it."""
    comm = unique_comm("pr-2h")
    token = token_file(tmp_path)
    setup = tmp_path / "uts-host"
    setup.write_text(UTS)
    setup.chmod(0o755)
    http = f'http:\n  socket: "@SOCKET@"\n  listen: 127.0.0.1:0\n  token_file: {token}\n'
    daemons, archives = [], []
    for name in ("pr-host-a", "pr-host-b"):
        archive = tmp_path / f"archive-{name}"
        daemons.append(daemon(config(deadlock_rule(comm), archive=archive, http=http), env={"PR_HOST": name},
                              wrapper=("unshare", "--uts", "--", str(setup))))
        archives.append(str(archive))
    c = culprit(comm, "deadlock")
    pids = {c.tid("wait_for_child"), c.tid("wait_for_parent")}
    # Each daemon fires once for the deadlock, and has it as its own problem, on its own host.
    own = []
    for d, name in zip(daemons, ("pr-host-a", "pr-host-b")):
        [p] = wait_until(lambda: d.get_json("/problems")["problems"], timeout=30, interval=0.1,
                         what=f"the deadlock in {name}'s problems")
        assert p["count"] == 1 and p["hosts"] == [name] and p["open"], p
        own.append(p)
    assert own[0]["signature"] == own[1]["signature"], own
    sig = own[0]["signature"]
    hosts = ["%s:%d" % d.tcp_address() for d in daemons]
    many = ["--host", hosts[0], "--host", hosts[1], "--token-file", token]

    [row] = problems(*many, rc=0)
    assert row["signature"] == sig and row["count"] == 2 and sorted(row["hosts"]) == ["pr-host-a", "pr-host-b"], row
    assert row["open"] and row["snapshots"] == 2 and row["title"] == own[0]["title"], row
    # Each host's processes, named after it: a pid is a process on one host.
    assert {(p["pid"], p["host"]) for p in row["processes"]} <= \
        {(pid, h) for pid in pids for h in ("pr-host-a", "pr-host-b")}, row
    assert {p["host"] for p in row["processes"]} == {"pr-host-a", "pr-host-b"}, row
    # The latest snapshot is the newer of the two, and the row says which daemon has it.
    newest = max(range(2), key=lambda i: (own[i]["last_usec"], i))
    assert row["latest_id"] == own[newest]["latest_id"] and row["latest_host"] == hosts[newest], row
    assert row["first_id"] == own[1 - newest]["latest_id"] or own[0]["last_usec"] == own[1]["last_usec"], row

    _, [t] = table(*many, "problems")
    assert (t["SIGNATURE"], t["COUNT"], t["HOSTS"], t["LATEST"]) == (sig, "2", "2", row["latest_id"]), t
    # show SIGNATURE: the latest of the problem's snapshots, from the daemon that has it.
    assert stackctl(*many, "show", sig, check_rc=0).stdout == \
        stackctl("--archive", archives[newest], "show", row["latest_id"], check_rc=0).stdout
    listed = json.loads(stackctl(*many, "list", "--json", sig, check_rc=0).stdout)
    assert sorted(e["host"] for e in listed) == sorted(hosts), listed

    # A host that does not answer is named and makes the exit status; the others' problem is still shown.
    dead = f"127.0.0.1:{free_port()}"
    r = stackctl(*many, "--host", dead, "--timeout", "3", "problems", "--json")
    assert r.returncode == 6, r
    [partial] = json.loads(r.stdout)
    assert partial["count"] == 2, partial
    assert re.search(rf"^{re.escape(dead)}: ", r.stderr.decode(), re.M), r.stderr


def test_the_journal_counts_every_firing_record(journald_daemon, culprit):
    comm = unique_comm("pr-jr")
    d, jdir = journald_daemon(config(deadlock_rule(comm, cooldown="2s") +
                                     blocked_rule(comm, cooldown="2s", for_="2s")))
    c = culprit(comm, "deadlock")
    pids = {c.tid("wait_for_child"), c.tid("wait_for_parent")}
    src = ("--journal", "-D", jdir)
    wait_until(lambda: [r for r in problems(*src) if r["count"] >= 2], timeout=60, interval=0.2,
               what="two firing records of the deadlock")
    c.stop()

    def settled():
        rows = problems(*src)
        scans = d.get_json("/processes")["scan"]["scans"]
        wait_until(lambda: d.get_json("/processes")["scan"]["scans"] >= scans + 5, timeout=10, what="five scans")
        return rows if rows and problems(*src) == rows else None
    rows = wait_until(settled, timeout=30, interval=0.1, what="the journal's count to settle")
    # The deadlock's problem is its snapshot's. A capture caught while the test's kill undoes the deadlock (one
    # side gone) shows another problem, a row of its own: not this one.
    [snap] = [s for s in snapshots_of(d, pids) if s["title"].endswith(" (deadlock)")]
    [row] = [r for r in rows if r["signature"] == snap["signature"]]
    recs = journal(jdir, f"MESSAGE_ID={FIRED}", f"STACKWATCH_SIGNATURE={row['signature']}")
    assert row["count"] == len(recs) >= 2, (row, len(recs))
    assert row["title"] == recs[-1]["STACKWATCH_TITLE"]
    assert row["first_usec"] == int(recs[0]["__REALTIME_TIMESTAMP"])
    assert row["last_usec"] == int(recs[-1]["__REALTIME_TIMESTAMP"])
    assert row["hosts"] == [NODENAME] and {p["pid"] for p in row["processes"]} <= pids, row
    # The records name the one snapshot the problem has: counted once, and it is LATEST.
    assert row["snapshots"] == 1 and row["latest_id"] == snap["id"] and row["latest_host"] == NODENAME, row
    # The archive's ledger counted the same firings.
    [arch] = problems("--archive", d.archive, row["signature"])
    assert (arch["signature"], arch["count"]) == (row["signature"], row["count"]), arch
    # list --journal SIGNATURE: the records of that problem, all naming its snapshot.
    listed = json.loads(stackctl(*src, "list", "--json", row["signature"], check_rc=0).stdout)
    assert listed and {e["id"] for e in listed} == {snap["id"]}, listed
    assert all(e["signature"] == row["signature"] and e["title"] for e in listed)
    # --host keeps one machine's records, as list has it.
    assert problems(*src, "--host", NODENAME, rc=0) == rows
    problems(*src, "--host", "no-such-host", rc=3)


@needs_remote
def test_a_central_journal_has_one_row_for_a_hang_two_hosts_saw(daemon, culprit, tmp_path):
    """Two hosts (each its own hostname, machine-id and journald, as in test_fleet.py) see the same deadlock and ship
    their journals to a systemd-journal-remote: on the central directory, problems --journal is one row, HOSTS 2,
    COUNT 2, each host's records its own with --host."""
    comm = unique_comm("pr-fl")
    names = ("pr-fleet-a", "pr-fleet-b")
    hosts, journalds = {}, []
    remote = None
    try:
        for name in names:
            hdir = tmp_path / name
            (hdir / "journal").mkdir(parents=True)
            setup = hdir / "host-ns"
            setup.write_text(HOST % JOURNALD)
            setup.chmod(0o755)
            env = {"FLEET_HOST": name, "FLEET_MACHINE_ID": uuid.uuid4().hex, "FLEET_DIR": str(hdir)}
            archive = tmp_path / f"archive-{name}"
            d = daemon(config(deadlock_rule(comm), archive=archive), env=env,
                       args=("--log-target=journal",),
                       wrapper=("unshare", "--mount", "--uts", "--propagation", "private", "--", str(setup)))
            journalds.append(int((hdir / "journald.pid").read_text()))
            hosts[name] = (d, hdir, archive)
        c = culprit(comm, "deadlock")
        pids = {c.tid("wait_for_child"), c.tid("wait_for_parent")}
        for name, (d, hdir, _) in hosts.items():
            wait_until(lambda: journal_records(hdir / "journal", f"MESSAGE_ID={FIRED}", f"STACKWATCH_COMM={comm}"),
                       timeout=30, interval=0.1, what=f"{name}'s firing record")

        central = tmp_path / "central"
        central.mkdir()
        port = free_port()
        remote = subprocess.Popen([REMOTE, f"--listen-http=127.0.0.1:{port}", f"--output={central}/all.journal",
                                   "--split-mode=none"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        wait_until(lambda: subprocess.run(["bash", "-c", f"exec 3<>/dev/tcp/127.0.0.1/{port}"],
                                          capture_output=True).returncode == 0,
                   timeout=15, interval=0.1, what="journal-remote listening")
        for name, (d, hdir, _) in hosts.items():
            jfiles = list((hdir / "journal").rglob("*.journal"))
            up = subprocess.run([UPLOAD, f"--url=http://127.0.0.1:{port}", f"--directory={jfiles[0].parent}",
                                 "--follow=no", f"--save-state={hdir}/upload.state"], capture_output=True, text=True,
                                timeout=60)
            assert up.returncode == 0, up.stderr[-2000:]
        src = ("--journal", "-D", central)
        [row] = wait_until(lambda: [r for r in problems(*src) if r["count"] == 2], timeout=20, interval=0.2,
                           what="both hosts' firings in the central journal")
        assert sorted(row["hosts"]) == sorted(names) and row["snapshots"] == 2, row
        assert {p["host"] for p in row["processes"]} == set(names), row
        assert {p["pid"] for p in row["processes"]} <= pids, row
        assert row["title"].endswith(f" ⇄ {comm} (deadlock)"), row
        _, [t] = table("problems", *src)
        assert (t["SIGNATURE"], t["COUNT"], t["HOSTS"]) == (row["signature"], "2", "2"), t
        # One machine's records: its one firing, its own snapshot.
        for name, (d, hdir, archive) in hosts.items():
            [one] = problems(*src, "--host", name, rc=0)
            [snap] = json.loads(stackctl("--archive", archive, "list", "--json", check_rc=0).stdout)
            assert one["count"] == 1 and one["hosts"] == [name] and one["latest_id"] == snap["id"], one
    finally:
        if remote:
            remote.send_signal(signal.SIGTERM)
            remote.wait(timeout=10)
        for d, *_ in hosts.values():
            d.stop()
        for pid in journalds:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass


def test_one_problem_on_two_hosts_is_one_group_in_alertmanager(daemon, alertmanager, culprit, tmp_path):
    """The same deadlock on two hosts (two daemons, each in a UTS namespace of its own name): each raises one alert,
    labelled with the problem's signature and title, and an Alertmanager routing by signature (as the README
    suggests) groups the two into one notification."""
    comm = unique_comm("am-2h")
    setup = tmp_path / "uts-host"
    setup.write_text(UTS)
    setup.chmod(0o755)
    for name in ("am-host-a", "am-host-b"):
        hooks = f"hooks:\n  command: [{json.dumps(HOOK)}, {json.dumps(alertmanager.url)}]\n  repeat_interval: 1h\n"
        daemon(config(deadlock_rule(comm, actions="snapshot, log, hook"), archive=tmp_path / f"archive-{name}",
                      hooks=hooks), env={"PR_HOST": name}, wrapper=("unshare", "--uts", "--", str(setup)))
    culprit(comm, "deadlock")
    alerts = wait_until(lambda: (lambda a: a if len(a) == 2 else None)(am_alerts(alertmanager, comm=comm)),
                        timeout=30, interval=0.2, what="an alert from each host")
    assert sorted(a["labels"]["host"] for a in alerts) == ["am-host-a", "am-host-b"], alerts
    sig, title = alerts[0]["labels"]["signature"], alerts[0]["labels"]["title"]
    assert re.fullmatch(r"[0-9a-f]{16}", sig) and title.endswith(f" ⇄ {comm} (deadlock)"), alerts[0]["labels"]
    assert all((a["labels"]["signature"], a["labels"]["title"]) == (sig, title) for a in alerts), alerts
    groups = wait_until(lambda: [g for g in http_json(alertmanager.url + "/api/v2/alerts/groups")[1]
                                 if g["labels"].get("signature") == sig], timeout=10, interval=0.2,
                        what="the problem's group")
    assert len(groups) == 1 and groups[0]["labels"] == {"signature": sig}, groups
    assert sorted(a["labels"]["host"] for a in groups[0]["alerts"]) == ["am-host-a", "am-host-b"], groups
