"""The journal record of a firing, written through a real systemd-journald (started standalone in a private mount
namespace, its files in the test's directory) and read back with journalctl: one record holding the whole event,
with OBJECT_PID= so that journald adds the process's own fields, no empty fields, the stack in MESSAGE; and a refused
reload as a record of its own."""
import json
import os
import signal
import subprocess

import pytest

from conftest import free_port, wait_until

JOURNALD = "/lib/systemd/systemd-journald"
FIRED = "5b6a1e30c8f84d5a9f8c1e2d7a4b3c01"
RELOAD = "5b6a1e30c8f84d5a9f8c1e2d7a4b3c07"

# Runs as root in a new mount namespace: a private /run/systemd/journal for journald's sockets, the test's directory
# as /run/log/journal for its (volatile) files and an empty /var/log/journal, so that nothing reaches the host's
# journal; journald in the background (its pid in a file, for the teardown), without NOTIFY_SOCKET, which is the
# test's listener for the daemon's READY=1 (journald would send its own); then the daemon.
SETUP = """#!/bin/sh
set -eu
mkdir -p /run/systemd/journal /run/log/journal
mount -t tmpfs tmpfs /run/systemd/journal
mount --bind "$JOURNAL_DIR" /run/log/journal
if [ -d /var/log/journal ]; then mount -t tmpfs tmpfs /var/log/journal; fi
env -u NOTIFY_SOCKET %s &
echo $! > "$JOURNALD_PID"
i=0
while [ ! -S /run/systemd/journal/socket ]; do
        i=$((i + 1)); [ $i -lt 500 ] || { echo "journald did not start" >&2; exit 1; }
        sleep 0.01
done
exec "$@"
"""

RULES = """
poll_interval: 200ms
archive:
  directory: "@ARCHIVE@"
rules:
  - name: jr-blocked
    class: blocked
    for: 1s
    comm: "jr-*"
    severity: critical
    actions: [snapshot, log]
"""


@pytest.fixture
def journald_daemon(daemon, tmp_path):
    if not os.access(JOURNALD, os.X_OK):
        pytest.skip("systemd-journald is not installed")
    jdir = tmp_path / "journal"
    jdir.mkdir()
    pidfile = tmp_path / "journald.pid"
    setup = tmp_path / "journald-ns"
    setup.write_text(SETUP % JOURNALD)
    setup.chmod(0o755)
    env = {"JOURNAL_DIR": str(jdir), "JOURNALD_PID": str(pidfile)}
    started = []

    def start(config):
        d = daemon(config, env=env, args=("--log-target=journal",),
                   wrapper=("unshare", "--mount", "--propagation", "private", "--", str(setup)))
        started.append(d)
        return d, jdir
    yield start
    for d in started:
        d.stop()
    if pidfile.exists():
        try:
            os.kill(int(pidfile.read_text()), signal.SIGTERM)
        except ProcessLookupError:
            pass


def journal(jdir, *matches):
    # --all: without it journalctl writes a field over 4096 bytes (a whole stack often is) as null.
    r = subprocess.run(["journalctl", "-D", str(jdir), "-o", "json", "--all", "--no-pager", *matches],
                       capture_output=True, text=True, timeout=30)
    return [json.loads(ln) for ln in r.stdout.splitlines() if ln.strip()]


def test_one_record_per_firing_with_everything_in_it(journald_daemon, fixture):
    d, jdir = journald_daemon(RULES)
    fx = fixture("block-read", "--name", "jr-hang").wait_wchan("pipe_read")
    recs = wait_until(lambda: journal(jdir, f"MESSAGE_ID={FIRED}", f"STACKWATCH_PID={fx.pid}"), timeout=20,
                      interval=0.1, what="the firing's record in the journal")
    assert len(recs) == 1, recs
    rec = recs[0]
    snaps = d.snapshots("--pid", str(fx.pid))
    assert len(snaps) == 1
    # The whole event in one record.
    assert rec["STACKWATCH_RULE"] == "jr-blocked" and rec["STACKWATCH_SEVERITY"] == "critical"
    assert rec["PRIORITY"] == "2"
    assert rec["STACKWATCH_CLASS"] == "blocked" and rec["STACKWATCH_COMM"] == "jr-hang"
    assert rec["STACKWATCH_TID"] == str(fx.pid) and rec["STACKWATCH_SNAPSHOT_ID"] == snaps[0]["id"]
    assert rec["STACKWATCH_EXE"].endswith("/tests/fixtures/bin/block-read")
    assert rec["STACKWATCH_CMDLINE"].endswith("block-read --name jr-hang")
    assert rec["STACKWATCH_CGROUP"].startswith("/")
    assert 1_000_000 <= int(rec["STACKWATCH_DURATION_USEC"]) < 60_000_000
    msg = rec["MESSAGE"]
    assert msg.startswith(f'Rule "jr-blocked" fired: pid {fx.pid} (jr-hang) thread {fx.pid} blocked for '), msg
    assert f"; snapshot {snaps[0]['id']} " in msg and f"Stack of thread {fx.pid}:" in msg
    assert any("br_level_20" in ln for ln in msg.splitlines()[2:6]), msg
    # OBJECT_PID=: journald itself adds the process's fields, so the record shows up under the process and its unit.
    assert rec["OBJECT_PID"] == str(fx.pid)
    assert rec["OBJECT_COMM"] == "jr-hang" and rec["OBJECT_EXE"].endswith("block-read"), sorted(rec)
    assert [r["__CURSOR"] for r in journal(jdir, f"OBJECT_PID={fx.pid}")] == [rec["__CURSOR"]]
    # No field is written empty (they all were, set or not).
    empty = [k for k, v in rec.items() if v == "" and k.startswith("STACKWATCH_")]
    assert empty == [], empty
    assert "STACKWATCH_ERROR" not in rec and "STACKWATCH_HOOK" not in rec
    assert "STACKWATCH_PAGE_URL" not in rec  # no TCP listener: no page to link to
    # Everything the daemon logs went to that journal, not to stderr.
    assert journal(jdir, "SYSLOG_IDENTIFIER=stackwatchd", "-g", "starting")
    assert "fired" not in d.log_text()


def test_the_record_links_the_snapshot_page_with_a_tcp_listener(journald_daemon, fixture, tmp_path):
    token = tmp_path / "token"
    token.write_text("s3cr3t\n")
    token.chmod(0o600)
    port = free_port()
    d, jdir = journald_daemon(RULES + f"http:\n  socket: \"@SOCKET@\"\n  listen: 127.0.0.1:{port}\n  token_file: {token}\n")
    fx = fixture("block-read", "--name", "jr-hang").wait_wchan("pipe_read")
    recs = wait_until(lambda: journal(jdir, f"MESSAGE_ID={FIRED}", f"STACKWATCH_PID={fx.pid}"), timeout=20,
                      interval=0.1, what="the firing's record in the journal")
    sid = d.snapshots("--pid", str(fx.pid))[0]["id"]
    assert recs[0]["STACKWATCH_PAGE_URL"] == f"http://127.0.0.1:{port}/#/snapshots/{sid}"


def test_a_refused_reload_is_a_record_with_the_error(journald_daemon, fixture):
    d, jdir = journald_daemon(RULES)
    wait_until(lambda: journal(jdir, "SYSLOG_IDENTIFIER=stackwatchd", "-g", "starting"), timeout=20, interval=0.1,
               what="the daemon's first message")
    d.write_config("rules:\n  - name: [broken\n")
    d.proc.send_signal(signal.SIGHUP)
    recs = wait_until(lambda: journal(jdir, f"MESSAGE_ID={RELOAD}"), timeout=20, interval=0.1,
                      what="the reload record")
    assert recs[0]["PRIORITY"] == "3" and recs[0]["STACKWATCH_ERROR"].startswith(f"{d.config}:3:")
    assert "keeping the running configuration" in recs[0]["MESSAGE"]


def archive_config(mode, extra=""):
    return f"""
poll_interval: 200ms
archive:
  directory: "@ARCHIVE@"
  journal: {mode}
{extra}
rules:
  - name: jr-blocked
    class: blocked
    for: 1s
    comm: ["jr-*", threads64]
    actions: [snapshot, log]
"""


def ctl(*args, rc=0):
    from conftest import stackctl
    return stackctl(*args, check_rc=rc)


def test_full_mode_carries_the_snapshot_shown_as_from_the_archive(journald_daemon, fixture):
    d, jdir = journald_daemon(archive_config("full"))
    fx = fixture("block-read", "--name", "jr-full").wait_wchan("pipe_read")
    rec = wait_until(lambda: journal(jdir, f"MESSAGE_ID={FIRED}", f"STACKWATCH_PID={fx.pid}"), timeout=20,
                     interval=0.1, what="the firing's record")[0]
    sid = rec["STACKWATCH_SNAPSHOT_ID"]
    archive_file = os.path.join(d.archive, sid + ".json.zst")
    assert int(rec["STACKWATCH_SNAPSHOT_SIZE"]) == os.path.getsize(archive_file)
    assert "STACKWATCH_SNAPSHOT_TRUNCATED" not in rec and "STACKWATCH_STACK" in rec
    # The binary field is the archive file, byte for byte (journalctl -o json gives binary data as a byte list).
    assert bytes(rec["STACKWATCH_SNAPSHOT_FILE"]) == open(archive_file, "rb").read()
    # list --journal: the snapshot, with its host; show --journal: byte-identical to show from the archive, in text,
    # JSON and folded form.
    out = ctl("list", "--journal", "-D", jdir, "--no-legend").stdout.decode()
    line = next(ln for ln in out.splitlines() if ln.endswith(sid))
    assert os.uname().nodename in line.split() and str(fx.pid) in line.split()
    for fmt in ((), ("--json",), ("--folded",)):
        local = ctl("--archive", d.archive, "show", *fmt, sid).stdout
        assert ctl("show", "--journal", "-D", jdir, *fmt, sid).stdout == local
    assert ctl("show", "--journal", "-D", jdir, "jr-full").stdout == ctl("--archive", d.archive, "show", sid).stdout
    ctl("show", "--journal", "-D", jdir, "--host", "no-such-host", "jr-full", rc=3)
    ctl("list", "--journal", "-D", jdir, "--host", os.uname().nodename, "COMM=jr-full")
    # --file GLOB names the same files; -m reads every machine's journal here (this test's records are not in it).
    files = os.path.join(jdir, "*", "*.journal")
    assert sid in ctl("list", "--journal", "--file", files, "--no-legend").stdout.decode()
    assert ctl("show", "--journal", "--file", files, sid).stdout == ctl("--archive", d.archive, "show", sid).stdout
    assert ctl("list", "--journal", "-m", "--no-legend", rc=None).returncode in (0, 3)
    assert "No journal files match" in ctl("list", "--journal", "--file", "/nonexistent/*.journal", rc=3).stderr.decode()
    # Without --journal, journal options are an error.
    assert "add --journal" in ctl("list", "-D", jdir, rc=2).stderr.decode()


def test_the_size_bound_leaves_the_file_out_and_says_so(journald_daemon, fixture):
    d, jdir = journald_daemon(archive_config("full", "  journal_max_size: 1K"))
    fx = fixture("threads64")
    rec = wait_until(lambda: journal(jdir, f"MESSAGE_ID={FIRED}", f"STACKWATCH_PID={fx.pid}"), timeout=30,
                     interval=0.1, what="the firing's record")[0]
    sid = rec["STACKWATCH_SNAPSHOT_ID"]
    size = os.path.getsize(os.path.join(d.archive, sid + ".json.zst"))
    assert size > 1024, size
    assert rec["STACKWATCH_SNAPSHOT_TRUNCATED"] == "1" and int(rec["STACKWATCH_SNAPSHOT_SIZE"]) == size
    assert "STACKWATCH_SNAPSHOT_FILE" not in rec
    r = ctl("show", "--journal", "-D", jdir, "--json", sid, rc=3)
    assert "not in the journal" in r.stderr.decode()


def test_summary_mode_carries_the_culprit_stack_only(journald_daemon, fixture):
    d, jdir = journald_daemon(archive_config("summary"))
    fx = fixture("block-read", "--name", "jr-sum").wait_wchan("pipe_read")
    rec = wait_until(lambda: journal(jdir, f"MESSAGE_ID={FIRED}", f"STACKWATCH_PID={fx.pid}"), timeout=20,
                     interval=0.1, what="the firing's record")[0]
    assert "STACKWATCH_SNAPSHOT_FILE" not in rec and "STACKWATCH_SNAPSHOT_SIZE" not in rec
    stack = rec["STACKWATCH_STACK"]
    assert stack.startswith(f"TID {fx.pid}:") and "br_level_20" in stack and "[k] " in stack
    r = ctl("show", "--journal", "-D", jdir, rec["STACKWATCH_SNAPSHOT_ID"])
    assert r.stdout.decode() == stack and "archive.journal: summary" in r.stderr.decode()


RESOLVED = "5b6a1e30c8f84d5a9f8c1e2d7a4b3c08"
HOOK = "5b6a1e30c8f84d5a9f8c1e2d7a4b3c05"


def test_the_recovery_is_a_full_record_and_hook_records_say_which(journald_daemon, fixture, tmp_path):
    """journalctl -u UNIT (OBJECT_PID=) shows the recovery as it shows the hang: MESSAGE_ID, the process, the rule,
    how long it lasted; and each hook record says whether its hook was told of the firing or of the recovery."""
    hook = tmp_path / "hook"
    hook.write_text("#!/bin/sh\nexit 0\n")
    hook.chmod(0o755)
    d, jdir = journald_daemon(RULES.replace("actions: [snapshot, log]", f"actions: [snapshot, log, hook]\n"
                                            f"    hook: [{json.dumps(str(hook))}]"))
    fx = fixture("block-read", "--name", "jr-back").wait_wchan("pipe_read")
    fired = wait_until(lambda: journal(jdir, f"MESSAGE_ID={FIRED}", f"STACKWATCH_PID={fx.pid}"), timeout=20,
                       interval=0.1, what="the firing's record")[0]
    assert fired["STACKWATCH_STATE"] == "firing"
    fx.kill()
    rec = wait_until(lambda: journal(jdir, f"MESSAGE_ID={RESOLVED}", f"STACKWATCH_PID={fx.pid}"), timeout=20,
                     interval=0.1, what="the recovery's record")[0]
    assert rec["OBJECT_PID"] == str(fx.pid) and rec["STACKWATCH_STATE"] == "resolved"
    assert rec["STACKWATCH_RULE"] == "jr-blocked" and rec["STACKWATCH_CLASS"] == "blocked"
    assert rec["STACKWATCH_COMM"] == "jr-back" and rec["STACKWATCH_SNAPSHOT_ID"] == fired["STACKWATCH_SNAPSHOT_ID"]
    assert int(rec["STACKWATCH_DURATION_USEC"]) >= 1_000_000 and rec["STACKWATCH_DURATION"].endswith("s")
    assert rec["MESSAGE"].startswith('Rule "jr-blocked" resolved: ')
    hooks = wait_until(lambda: (lambda r: r if {x.get("STACKWATCH_STATE") for x in r} == {"firing", "resolved"}
                                else None)(journal(jdir, f"MESSAGE_ID={HOOK}", f"STACKWATCH_PID={fx.pid}")),
                       timeout=20, interval=0.1, what="hook records of both")
    assert any('(resolved)' in x["MESSAGE"] for x in hooks) and any('(firing)' in x["MESSAGE"] for x in hooks)
