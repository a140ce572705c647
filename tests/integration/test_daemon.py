"""stackwatchd end to end: real fixtures in each class, the real daemon, its archive, sd_notify and reloads."""
import errno
import glob
import os
import re
import signal
import subprocess
import time

import pytest

from conftest import (BUILDDIR, SRCDIR, STACKWATCHD, TIME_SCALE, assert_chain, assert_proven_chain, functions,
                      read_stat, stackctl, thread_names, wait_until)

POLL = 0.2
FOR = 1.0
# Poll interval + threshold + capture time, with room for a loaded CI machine.
DEADLINE = FOR + 3 * POLL + 8

RULES = """
poll_interval: 200ms
archive:
  directory: @ARCHIVE@
capture:
  max_per_minute: 60
rules:
  - name: blocked-fixtures
    class: blocked
    for: 1s
    comm: [block-read, deadlock-abba, dstate-vfork]
    cooldown: 1h
  - name: busy-fixtures
    class: busy-loop
    for: 1s
    comm: busy-loop
    cooldown: 1h
  - name: spin-fixtures
    class: syscall-spin
    for: 1s
    comm: spin-eagain
    cooldown: 1h
    probe: 50ms
  - name: healthy
    class: [blocked, busy-loop, syscall-spin]
    for: 1s
    comm: [sw-idle-sleep, sw-io-dd, sw-io-sh]
    cooldown: 1h
"""
# The spin probe counts calls in its window: an emulated machine (TIME_SCALE > 1) makes fewer in 50 ms.
RULES = RULES.replace("probe: 50ms", f"probe: {round(50 * TIME_SCALE)}ms")


def snap_id(d, pid):
    return d.snapshots("--pid", str(pid))[0]["id"]


def one_snapshot_for(d, pid, rule):
    """Wait for the first snapshot of PID, then make sure the cooldown keeps it the only one."""
    snaps = wait_until(lambda: d.snapshots("--pid", str(pid)), timeout=DEADLINE, what=f"a snapshot of {pid}")
    assert [s["rule"] for s in snaps] == [rule]
    # Several more scans later, still one: the cooldown holds.
    d.wait_scans(6)
    snaps = d.snapshots("--pid", str(pid))
    assert len(snaps) == 1, snaps
    return d.show(snaps[0]["id"])


@pytest.mark.parametrize("name,args,rule,klass,chain,comm", [
    ("block-read", (), "blocked-fixtures", "blocked", [f"br_level_{i:02d}" for i in range(20, 0, -1)], None),
    ("dstate-vfork", ("30",), "blocked-fixtures", "blocked", [f"dv_level_{i:02d}" for i in range(12, 0, -1)], None),
    ("busy-loop", (), "busy-fixtures", "busy-loop", [f"bl_level_{i:02d}" for i in range(16, 0, -1)], None),
    ("spin-eagain", (), "spin-fixtures", "syscall-spin", [f"se_level_{i:02d}" for i in range(16, 0, -1)], None),
    ("deadlock-abba", (), "blocked-fixtures", "blocked", [f"ab_X_level_{i:02d}" for i in range(12, 0, -1)], "abba-"),
])
def test_class_fires_exactly_one_snapshot(daemon, fixture, name, args, rule, klass, chain, comm):
    d = daemon(RULES)
    fx = fixture(name, *args)
    start = time.monotonic()
    doc = one_snapshot_for(d, fx.pid, rule)
    assert time.monotonic() - start < DEADLINE + 6 * POLL + 1
    trig = doc["trigger"]
    assert trig["rule"] == rule and trig["class"] == klass
    assert trig["duration_us"] >= FOR * 1e6
    matched = next(t for t in doc["threads"] if t["tid"] == trig["tid"])
    if comm:
        side = matched["comm"][-1]
        assert matched["comm"].startswith(comm)
        chain = [c.replace("X", side) for c in chain]
    # On a failure, say how the thread was captured and what went wrong (the frames alone say nothing).
    assert matched["frames"], (matched["capture"], matched.get("kernel_stack"), doc["capture"], trig)
    assert_chain(matched, chain)
    if name == "dstate-vfork":
        assert trig["state"] == "D" and matched["capture"]["method"] == "passive"
        assert_proven_chain(matched, chain, "vfork")
    if klass == "syscall-spin":
        assert trig["syscalls_per_sec"] > 100 and trig["bytes_per_sec"] == 0
        # The probe names the call and its result, like "strace -p" would: read = -EAGAIN, many times in 50 ms.
        probe = trig["probe"]
        assert (probe["syscall"], probe["error"]) == ("read", "EAGAIN"), probe
        assert probe["result"] == -errno.EAGAIN
        assert 50_000 <= probe["window_us"] < 1_000_000
        assert probe["count"] >= 10 and probe["count"] >= 0.9 * probe["syscalls"], probe
        text = stackctl("--archive", d.archive, "show", snap_id(d, fx.pid)).stdout.decode()
        assert re.search(r"probe: read = -EAGAIN ×\d+ of \d+ syscalls in \d+ ms", text), text
    else:
        assert trig["probe"] is None
    if klass == "busy-loop":
        assert trig["cpu_percent"] > 80


def test_healthy_idle_and_real_io_produce_nothing(daemon, fixture, tmp_path):
    d = daemon(RULES)
    # Our own sleep, dd and sh under names of their own, which the "healthy" rule watches: a shell of the machine's
    # that really is blocked in read() (CI's, reading a pipe) must not count against them.
    for prog in ("sleep", "dd", "sh"):
        os.symlink(f"/bin/{prog}", tmp_path / f"sw-{'idle' if prog == 'sleep' else 'io'}-{prog}")
    idle = subprocess.Popen([tmp_path / "sw-idle-sleep", "60"])
    target = tmp_path / "io.dat"
    loop = f"while :; do {tmp_path}/sw-io-dd if=/dev/zero of={target} bs=64k count=256 status=none; done"
    io = subprocess.Popen([tmp_path / "sw-io-sh", "-c", loop])
    try:
        # The rule sees them by these names (comm is the name exec'd, the link's), once they have exec'd.
        names = ["sw-idle-sleep\n", "sw-io-sh\n"]
        wait_until(lambda: [open(f"/proc/{p.pid}/comm").read() for p in (idle, io)] == names,
                   what="the processes under their own names")
        # A busy loop started after them, as the control: once it has fired, the idle and the I/O processes have
        # been watched past every threshold; give them several more scans on top.
        busy = fixture("busy-loop")
        wait_until(lambda: d.snapshots("--pid", str(busy.pid)), timeout=DEADLINE, what="the control's snapshot")
        d.wait_scans(5)
        assert [s["pid"] for s in d.snapshots()] == [busy.pid]
        assert d.log_text().count("fired") == 1
    finally:
        idle.kill()
        io.kill()
        idle.wait()
        io.wait()


def test_sd_notify_ready_status_watchdog_stopping(daemon, fixture):
    d = daemon(RULES, env={"WATCHDOG_USEC": "400000"})
    d.notify.wait_for(lambda ln: ln.startswith("STATUS=watching "), what="STATUS=")
    wait_until(lambda: d.notify.count("WATCHDOG=1") >= 3, timeout=5, what="three WATCHDOG=1")
    d.proc.send_signal(signal.SIGTERM)
    assert d.proc.wait(timeout=10) == 0
    d.notify.wait_for(lambda ln: ln == "STOPPING=1", what="STOPPING=1")


def test_check_config(tmp_path):
    good = tmp_path / "good.yaml"
    good.write_text("rules:\n  - name: x\n    class: blocked\n    for: 5s\n")
    r = subprocess.run([STACKWATCHD, "--check-config", "--config", str(good)], capture_output=True, timeout=10)
    assert r.returncode == 0 and b"configuration OK" in r.stdout
    bad = tmp_path / "bad.yaml"
    bad.write_text("rules:\n  - name: x\n    class: blocked\n    for: soon\n")
    r = subprocess.run([STACKWATCHD, "--check-config", "--config", str(bad)], capture_output=True, timeout=10)
    assert r.returncode == 1
    assert f"{bad}:4:10:".encode() in r.stderr, r.stderr
    # A file named on the command line that is not there is an error, not the defaults.
    r = subprocess.run([STACKWATCHD, "--check-config", "--config", str(tmp_path / "none.yaml")], capture_output=True,
                       timeout=10)
    assert r.returncode == 1 and f"{tmp_path}/none.yaml: No such file".encode() in r.stderr, r
    assert b"configuration OK" not in r.stdout


def test_reload_bad_keeps_rules_good_applies(daemon, fixture):
    d = daemon(RULES.replace("comm: [block-read, deadlock-abba, dstate-vfork]", "comm: nothing-matches"))
    fx = fixture("block-read")
    fx.wait_wchan("pipe_read")
    # A broken file: the daemon says why and keeps going with what it had.
    d.write_config("rules:\n  - name: [broken\n")
    d.proc.send_signal(signal.SIGHUP)
    wait_until(lambda: "keeping the running configuration" in d.log_text(), what="reload refusal in the log")
    assert d.proc.poll() is None
    wait_until(lambda: d.notify.count("READY=1") >= 2, what="READY=1 after the failed reload")
    assert d.snapshots() == []
    # The refusal shows wherever an operator looks, not only in the log: STATUS=, /healthz and stackctl status
    # (exit 1), /metrics.
    assert any(ln.startswith("STATUS=RELOAD FAILED") for ln in d.notify.lines()), d.notify.lines()
    health = d.get_json("/healthz")
    assert health["config"]["reload"] == "failed" and health["config"]["error"].startswith(f"{d.config}:3:5: syntax")
    r = stackctl("--socket", d.socket, "status", check_rc=1)
    assert b"RELOAD FAILED" in r.stdout and b"previous configuration" in r.stderr, r
    metrics = d.get("/metrics")[2].decode()
    assert "stackwatch_config_last_reload_successful 0\n" in metrics
    assert "stackwatch_config_reload_failures_total 1\n" in metrics
    # A good file: its rules take effect.
    d.write_config(RULES)
    d.proc.send_signal(signal.SIGHUP)
    wait_until(lambda: "Configuration reloaded" in d.log_text(), what="reload")
    snaps = wait_until(lambda: d.snapshots("--pid", str(fx.pid)), timeout=DEADLINE, what="snapshot after reload")
    assert snaps[0]["rule"] == "blocked-fixtures"
    assert d.get_json("/healthz")["config"] == {"reload": "ok", "error": None, "reload_failures": 1,
                                                "loaded_usec": d.get_json("/healthz")["config"]["loaded_usec"]}
    assert "stackwatch_config_last_reload_successful 1\n" in d.get("/metrics")[2].decode()
    stackctl("--socket", d.socket, "status", check_rc=0)


FLOOD = """
poll_interval: 100ms
archive:
  directory: @ARCHIVE@
  max_snapshots: {max}
  every_firing: true
capture:
  max_per_minute: 600
rules:
  - name: flood
    class: busy-loop
    for: 0s
    comm: busy-loop
    cooldown: 0s
"""


def snapshots_logged(d):
    """How many firings the daemon logged with a snapshot written."""
    return len(re.findall(r"fired: .*; snapshot \S+ \(longest pause", d.log_text()))


def test_rotation_after_each_write_and_at_start(daemon, fixture):
    # After each write: 6 written into room for 3, and a clean stop lets the captures in flight finish and rotate.
    d = daemon(FLOOD.format(max=3))
    fx = fixture("busy-loop")
    wait_until(lambda: snapshots_logged(d) >= 6, timeout=40, what="6 snapshots written")
    d.stop()
    assert d.proc.returncode == 0
    assert "Rotated the archive" in d.log_text()
    kept = [s["id"] for s in d.snapshots()]
    assert len(kept) == 3
    fx.assert_untouched()
    fx.kill()

    # At start: a smaller limit applies before the first scan, oldest first.
    d = daemon(FLOOD.format(max=1))
    assert [s["id"] for s in d.snapshots()] == kept[-1:]


def test_kill9_mid_write_leaves_no_partial_snapshot(daemon, fixture, tmp_path):
    fixture("busy-loop")
    for round_ in range(3):
        d = daemon(FLOOD.format(max=1000))
        wait_until(lambda: snapshots_logged(d) >= 2 + round_, timeout=30, what="snapshots")
        time.sleep(0.05 * round_)
        d.proc.kill()
        d.proc.wait()
    archive = os.path.join(str(tmp_path), "archive")
    names = os.listdir(archive)
    snaps = [n for n in names if n.endswith(".json.zst")]
    assert snaps
    for n in names:
        assert n.endswith(".json.zst") or n.startswith(".tmp-") or n == "problems.jsonl", n
    # Every file under a snapshot name is a whole, readable snapshot.
    for n in snaps:
        r = stackctl("--archive", archive, "show", "--json", n[:-len(".json.zst")])
        assert r.returncode == 0, (n, r.stderr)


def metric(d, name):
    m = re.search(rf"^{name} (\S+)$", d.get("/metrics")[2].decode(), re.M)
    assert m, name
    return float(m.group(1))


def test_stale_temporary_files_swept_at_start_and_rotation(daemon, fixture, tmp_path):
    # What a daemon killed mid-write leaves where O_TMPFILE is missing (FUSE, NFS): temporary files of the
    # fallback's name, young and unlocked. One more is held locked, as a write in progress holds it.
    archive = tmp_path / "archive"
    archive.mkdir()
    orphans = [f".tmp-20260101T000000.00000{i}Z-{100 + i}-Abc12{i}" for i in range(3)]
    for name in orphans:
        (archive / name).write_bytes(b"\x50\x2a\x4d\x18partial")
    live = archive / ".tmp-20260101T000000.000009Z-109-Live00"
    live.write_bytes(b"writing")
    foreign = archive / ".tmp-notes"
    foreign.write_bytes(b"not ours")
    holder = subprocess.Popen(["python3", "-c", "import fcntl, sys; f = open(sys.argv[1], 'r+'); "
                               "fcntl.flock(f, fcntl.LOCK_EX); print('locked', flush=True); sys.stdin.read()",
                               str(live)], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert holder.stdout.readline() == b"locked\n"
        d = daemon(FLOOD.format(max=1000))
        names = set(os.listdir(archive))
        assert not names & set(orphans), names
        assert live.name in names and foreign.name in names
        assert metric(d, "stackwatch_archive_tmp_removed_total") == 3
        assert "Removed 3 temporary file(s)" in d.log_text()
        # The writer is gone: the sweep after the next write (rotation) takes its file, and only it.
        holder.stdin.close()
        holder.wait(timeout=10)
        d.wait_scans(2)
        assert live.exists()
        fixture("busy-loop")
        wait_until(lambda: not live.exists(), timeout=DEADLINE, what="the unlocked file swept at rotation")
        assert metric(d, "stackwatch_archive_tmp_removed_total") == 4
        assert foreign.exists()
        assert all(not s["id"].startswith(".") for s in d.snapshots())
    finally:
        holder.kill()
        holder.wait()


def test_full_filesystem_does_not_stop_the_daemon(daemon, fixture, tmp_path):
    archive = tmp_path / "archive"
    archive.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(archive)], check=True)
    try:
        # keep_free 0: let the small file system really fill up instead of vacuuming ahead of it.
        d = daemon(FLOOD.format(max=1000).replace("  max_snapshots: 1000", "  max_snapshots: 1000\n  keep_free: 0"),
                   env={"WATCHDOG_USEC": "400000"})
        fixture("busy-loop")
        wait_until(lambda: "No space left" in d.log_text(), timeout=40,
                   what="the archive filling up")
        pings = d.notify.count("WATCHDOG=1")
        wait_until(lambda: d.notify.count("WATCHDOG=1") >= pings + 3, timeout=5, what="the loop still running")
        assert d.proc.poll() is None
        d.stop()
    finally:
        subprocess.run(["umount", "-l", str(archive)])


def test_unit_file_verifies(tmp_path):
    with open(os.path.join(SRCDIR, "units", "stackwatchd.service.in")) as f:
        unit = f.read().replace("@sbindir@", os.path.join(BUILDDIR, "daemon"))
    path = tmp_path / "stackwatchd.service"
    path.write_text(unit)
    sock = tmp_path / "stackwatchd.socket"
    with open(os.path.join(SRCDIR, "units", "stackwatchd.socket")) as f:
        sock.write_text(f.read())
    # --man=no: the Documentation= pages are not installed in a build tree.
    r = subprocess.run(["systemd-analyze", "verify", "--man=no", str(path), str(sock)], capture_output=True,
                       timeout=60)
    problems = [ln for ln in r.stderr.decode().splitlines() if "stackwatchd." in ln]
    assert r.returncode == 0 and not problems, r.stderr.decode()
