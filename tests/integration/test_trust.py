"""Trust the alerts: the daemon never classes itself or its own capture children, whatever a rule says, and a
thread's class is what it did over the interval, not the state it happened to be in when looked at."""
import json
import os
import subprocess

from conftest import stackctl, wait_until

CONFIG = """
poll_interval: 100ms
archive:
  directory: "@ARCHIVE@"
capture:
  max_per_minute: 600
rules:
  - name: anything
    class: [running, waiting, blocked, busy-loop, syscall-spin, stopped, zombie]
    for: 0s
    comm: [stackwatchd, sw-ours-control]
    cooldown: 1h
"""


def test_the_daemon_and_its_capture_children_are_never_classed(daemon, fixture, tmp_path):
    os.symlink("/bin/sleep", tmp_path / "sw-ours-control")
    control = subprocess.Popen([tmp_path / "sw-ours-control", "60"])
    try:
        d = daemon(CONFIG)
        me = d.proc.pid
        # The control fires, so the rule works; live captures make capture children meanwhile.
        fx = fixture("block-read").wait_wchan("pipe_read")
        wait_until(lambda: any(s["pid"] == control.pid for s in d.snapshots()), timeout=20,
                   what="the control's snapshot")
        for _ in range(5):
            # 429 while the rule's own captures hold the slots: the next try gets one.
            wait_until(lambda: d.get(f"/stacks/{fx.pid}")[0] == 200, timeout=20, interval=0.1,
                       what="a live capture")
        d.wait_scans(10)
        snaps = d.snapshots()
        assert not [s for s in snaps if s["pid"] == me], snaps
        # No snapshot of a process whose parent is the daemon (its capture children are its own).
        for s in snaps:
            doc = d.show(s["id"])
            assert doc.get("ppid") != me, s
        procs = d.get_json("/processes?all=1")
        pids = {t["pid"] for t in procs["threads"]}
        assert control.pid in pids and me not in pids
    finally:
        control.kill()
        control.wait()
