"""stackctl against a fleet of daemons: a host that refuses the token, is not listening or does not answer is in
the exit status, never hidden by the others' answers; a hosts file names the daemons (each with its own token
file); every verb that reads a daemon asks each host (ps, status, rules, dump --via-daemon); and on the central
host, a snapshot the daemon left out of its journal record for its size is named as such."""
import json
import os
import re

from conftest import free_port, stackctl, wait_until
from test_journal import FIRED, archive_config, journal, journald_daemon  # noqa: F401 (a fixture)

RULES = """
poll_interval: 200ms
archive:
  directory: "@ARCHIVE@"
http:
  socket: "@SOCKET@"
  listen: 127.0.0.1:0
  token_file: {token}
rules:
  - name: fleet-never
    class: blocked
    for: 1h
    comm: nothing-has-this-name
    actions: [log]
"""


def token_file(tmp_path, name, value):
    p = tmp_path / name
    p.write_text(value + "\n")
    p.chmod(0o600)
    return p


def fleet(daemon, tmp_path):
    """Two daemons that take token A, one that takes token B; their host:port addresses."""
    ta = token_file(tmp_path, "token-a", "fleet-token-a")
    tb = token_file(tmp_path, "token-b", "fleet-token-b")
    a = daemon(RULES.format(token=ta))
    b = daemon(RULES.format(token=ta))
    c = daemon(RULES.format(token=tb))
    return ta, tb, ["%s:%d" % d.tcp_address() for d in (a, b, c)]


def host_args(*hosts):
    out = []
    for h in hosts:
        out += ["--host", h]
    return out


def test_a_refused_or_missing_host_makes_the_exit_status(daemon, tmp_path):
    ta, tb, (a, b, c) = fleet(daemon, tmp_path)
    dead = f"127.0.0.1:{free_port()}"
    base = ["--token-file", ta, "--timeout", "5"]

    # Every host answers: 0.
    stackctl(*host_args(a, b), *base, "ps", "--all", check_rc=0)
    stackctl(*host_args(a, b), *base, "status", check_rc=0)

    # C refuses token A: the table still shows every host, and the exit status is permission's (4).
    r = stackctl(*host_args(a, b, c), *base, "ps", "--all", check_rc=4)
    out = r.stdout.decode()
    assert {ln.split()[0] for ln in out.splitlines()[1:] if ln.strip() and not ln.startswith(" ")} >= {a, b}, out
    assert re.search(rf"^{re.escape(c)}\s+.*refused the token", out, re.M), out
    assert "from 2 of 3 hosts" in out
    r = stackctl(*host_args(a, b, c), *base, "status", check_rc=4)
    out = r.stdout.decode()
    for h in (a, b):
        assert re.search(rf"^{re.escape(h)}\s+ok\s+\d+", out, re.M), out
    # /healthz answers everyone that the daemon is up: without the details, C is not "ok" in the table.
    assert re.search(rf"^{re.escape(c)}\s+-\s+up, but it refused the token", out, re.M), out
    # One host alone says the same: a token was sent, and refused (not "the details need a token").
    r = stackctl("--host", c, *base, "status", check_rc=4)
    assert f"The daemon refused the token in {ta}: it says only that it is up." in r.stderr.decode(), r.stderr
    doc = json.loads(stackctl(*host_args(a, c), *base, "ps", "--json", check_rc=4).stdout)
    assert doc[c] is None and doc[a]["threads"] is not None

    # Nobody listens on DEAD: no daemon (6), the single-host code.
    r = stackctl(*host_args(a, dead), *base, "ps", "--all", check_rc=6)
    assert re.search(rf"^{re.escape(dead)}\s+.*not running", r.stdout.decode(), re.M), r.stdout
    stackctl(*host_args(a, dead), *base, "status", check_rc=6)
    # Two hosts, two different reasons: 1, each reason in its line.
    r = stackctl(*host_args(a, c, dead), *base, "ps", "--all", check_rc=1)
    out = r.stdout.decode()
    assert re.search(rf"^{re.escape(c)}\s+.*refused", out, re.M) and re.search(rf"^{re.escape(dead)}\s+", out, re.M)
    # list over the daemons' API follows the same rule.
    stackctl(*host_args(a, c), *base, "list", check_rc=4)


def test_a_hosts_file_names_the_daemons_and_their_tokens(daemon, tmp_path):
    ta, tb, (a, b, c) = fleet(daemon, tmp_path)
    hosts = tmp_path / "fleet.hosts"
    # Comments, blank lines, a URL with its scheme, a relative token file (next to the hosts file), and a line
    # without one, which takes --token-file's.
    hosts.write_text(f"# the fleet\n\nhttp://{a}/ {ta}\n  {b}    # no token file: --token-file's\n"
                     f"http://{c} token-b  # C takes another token\n")
    r = stackctl("--hosts", hosts, "--token-file", ta, "--timeout", "5", "status", check_rc=0)
    out = r.stdout.decode()
    for h in (f"http://{a}/", b, f"http://{c}"):
        assert re.search(rf"^{re.escape(h)}\s+ok\s+\d+", out, re.M), out
    # As --host each: ps and rules too; without --token-file, B's line has no token and is refused.
    stackctl("--hosts", hosts, "--token-file", ta, "ps", "--all", check_rc=0)
    r = stackctl("--hosts", hosts, "ps", "--all", check_rc=4)
    assert re.search(rf"^{re.escape(b)}\s+.*token", r.stdout.decode(), re.M), r.stdout
    # One line: that daemon, asked directly, with its own token.
    one = tmp_path / "one.hosts"
    one.write_text(f"{c} {tb}\n")
    assert stackctl("--hosts", one, "status", check_rc=0).stdout.decode().startswith("stackwatchd ")
    # --host and --hosts add up.
    r = stackctl("--host", a, "--hosts", one, "--token-file", ta, "status", check_rc=0)
    assert re.search(rf"^{re.escape(a)}\s+ok", r.stdout.decode(), re.M) and c in r.stdout.decode()

    # Errors name the file, the line and the column.
    bad = tmp_path / "bad.hosts"
    for text, want in ((f"{a}\n\n  ftp://x:1\n", rf"{bad}:3:3: invalid daemon URL 'ftp://x:1'"),
                       (f"{a} {ta} extra\n", rf"{bad}:1:{len(a) + len(str(ta)) + 3}: unexpected 'extra'"),
                       (f"{a}\n{a}\n", rf"{bad}:2:1: '{re.escape(a)}' is named twice"),
                       ("# nothing\n\n", rf"{bad}: no hosts in it")):
        bad.write_text(text)
        err = stackctl("--hosts", bad, "status", check_rc=2).stderr.decode()
        assert re.search(want, err), (text, err)
    err = stackctl("--hosts", tmp_path / "missing", "status", check_rc=2).stderr.decode()
    assert f"Failed to open the hosts file '{tmp_path / 'missing'}'" in err
    # A local dump asks no daemon: naming one is an error, not ignored.
    assert "dump asks one with --via-daemon" in stackctl("--hosts", one, "dump", "1", check_rc=2).stderr.decode()


def test_rules_and_dump_via_daemon_ask_every_host(daemon, fixture, tmp_path):
    ta, tb, (a, b, c) = fleet(daemon, tmp_path)
    base = ["--token-file", ta, "--timeout", "20"]
    # rules: one table with a HOST column, each host's rules; the refusing host is a line and the exit status.
    out = stackctl(*host_args(a, b), *base, "rules", check_rc=0).stdout.decode()
    lines = out.splitlines()
    assert lines[0].split()[:2] == ["HOST", "RULE"], out
    assert sorted(ln.split()[0] for ln in lines if "fleet-never" in ln) == sorted([a, b]), out
    assert "2 rules from 2 of 2 hosts." in out and f"Capture budget of {a}: " in out
    r = stackctl(*host_args(a, c), *base, "rules", check_rc=4)
    assert re.search(rf"^{re.escape(c)}\s+.*refused the token", r.stdout.decode(), re.M), r.stdout
    doc = json.loads(stackctl(*host_args(a, c), *base, "rules", "--json", check_rc=4).stdout)
    assert doc[c] is None and [x["name"] for x in doc[a]["rules"]] == ["fleet-never"]

    # dump --via-daemon PID: every host is asked for that process; each reply under a header naming its host. All
    # "hosts" here are this machine, so each has the fixture: its stack, twice.
    fx = fixture("block-read", "--name", "fleet-dump").wait_wchan("pipe_read")
    out = stackctl(*host_args(a, b), *base, "dump", "--via-daemon", fx.pid, check_rc=0).stdout.decode()
    parts = re.split(r"^==> (\S+) <==$", out, flags=re.M)
    assert parts[0] == "" and parts[1::2] == [a, b], out
    for text in parts[2::2]:
        assert f"TID {fx.pid}:" in text and "br_level_20" in text, out
    doc = json.loads(stackctl(*host_args(a, b), *base, "dump", "--via-daemon", "--json", fx.pid,
                              check_rc=0).stdout)
    assert set(doc) == {a, b} and all(d["process"]["pid"] == fx.pid for d in doc.values())
    folded = stackctl(*host_args(a, b), *base, "dump", "--via-daemon", "--folded", fx.pid,
                      check_rc=0).stdout.decode()
    assert {ln.split(";")[0] for ln in folded.splitlines()} == {a, b}, folded
    # A host that refuses: its line, and the exit status 4; the other's dump is still there.
    r = stackctl(*host_args(a, c), *base, "dump", "--via-daemon", fx.pid, check_rc=4)
    out = r.stdout.decode()
    assert f"==> {c} <==\nNo dump: " in out and "refused the token" in out and f"TID {fx.pid}:" in out, out
    # A process no host has: a line per host, and 3.
    gone = fixture("block-read")
    gone.kill()
    r = stackctl(*host_args(a, b), *base, "dump", "--via-daemon", gone.pid, check_rc=3)
    out = r.stdout.decode()
    assert out.count(f"No process {gone.pid} on this host.") == 2, out
    assert f"No process {gone.pid} on any of the 2 hosts." in r.stderr.decode()


def test_a_snapshot_over_journal_max_size_is_named_as_such(journald_daemon, fixture):
    # archive.journal: full, but a bound the snapshot of 64 threads is over: the daemon's record leaves the file out
    # and says so (STACKWATCH_SNAPSHOT_TRUNCATED=1).
    d, jdir = journald_daemon(archive_config("full", "  journal_max_size: 1K"))
    fx = fixture("threads64")
    rec = wait_until(lambda: journal(jdir, f"MESSAGE_ID={FIRED}", f"STACKWATCH_PID={fx.pid}"), timeout=30,
                     interval=0.1, what="the firing's record")[0]
    assert rec["STACKWATCH_SNAPSHOT_TRUNCATED"] == "1"
    sid, size, host = rec["STACKWATCH_SNAPSHOT_ID"], int(rec["STACKWATCH_SNAPSHOT_SIZE"]), rec["_HOSTNAME"]
    truth = (f"the snapshot ({size} bytes) was larger than archive.journal_max_size on {host}: the whole of it is in "
             "that host's archive")
    # show: the culprit's stack the record carries, and why only that: its size, not archive.journal: summary.
    r = stackctl("show", "--journal", "-D", jdir, sid, check_rc=0)
    err = r.stderr.decode()
    assert r.stdout.decode() == rec["STACKWATCH_STACK"]
    assert f"Only the culprit thread's stack is in the journal: {truth}." in err and "summary" not in err, err
    # JSON needs the whole snapshot: not found here (3), and why.
    err = stackctl("show", "--journal", "-D", jdir, "--json", sid, check_rc=3).stderr.decode()
    assert f"Snapshot '{sid}' is not in the journal: {truth}." in err, err
    # list --journal --json: a truncated key.
    [entry] = [e for e in json.loads(stackctl("list", "--journal", "-D", jdir, "--json", check_rc=0).stdout)
               if e["id"] == sid]
    assert entry["truncated"] is True and entry["in_journal"] is False, entry
    # --hosts applies here as --host does: each URL's host name is a machine whose records to keep.
    hosts = jdir.parent / "central.hosts"
    hosts.write_text(f"http://{host}:9177  # the machine the record came from\n")
    assert sid in stackctl("list", "--journal", "-D", jdir, "--hosts", hosts, check_rc=0).stdout.decode()
    hosts.write_text("http://no-such-host.example:9177\n")
    stackctl("list", "--journal", "-D", jdir, "--hosts", hosts, check_rc=3)
