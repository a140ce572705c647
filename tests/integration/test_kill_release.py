"""A capture child killed at any moment releases its target at once, even with a CPU hog per core (issue #34).

The kernel detaches a dead tracer's tracees only when the tracer has finished exiting; a capture child that held a
thread at a lowered priority then waited for a CPU behind the load while the target waited for it. Here the real
daemon captures a spinning thread (with the syscall probe, which holds it with PTRACE_SYSCALL stops) and a busy one
(stopped by the raw pass) over and over, and the test SIGKILLs its capture children at random moments: while the
probe holds the thread, during the raw pass, during the unwind. After each kill every thread of every target must be
out of t/T and untraced (TracerPid 0) quickly.

The bar of the issue is 50 ms at p99 (bench/kill-release measures it over 200 kills). This test makes fewer kills
(KILLS) on what may be a loaded 2-core CI machine, where the measuring loop itself waits for a CPU behind the hogs
and the other jobs, so a single kill past 50 ms can be noise: it asserts that no thread is ever left traced or
stopped (a hard 1 s deadline per kill), that the median is far below the bar, and that at most SLOW_ALLOWED kills
exceed it; and, deterministic, that a probe child holding the thread is at nice -20. The dying child's wait for a CPU grows with the load: before the fix, with 4 hogs per core, a probe
child killed at nice 0 left its thread stopped up to 60 ms (p99 54 ms), its /proc/PID/sched showing no CPU time
between the kill and its exit.
"""
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import time

import pytest

from conftest import wait_until

KILLS = 40
BAR_MS = 50
# Kills past BAR_MS the test tolerates: the p99 of the issue over 200 kills allows 2, so 1 of 40.
SLOW_ALLOWED = 1
RELEASE_DEADLINE = 1.0
PROBE_MS = 100

RULES = """
poll_interval: 100ms
archive:
  directory: @ARCHIVE@
  max_snapshots: 10
capture:
  max_per_minute: 600
rules:
  - name: kill-spin
    class: syscall-spin
    for: 0s
    comm: {spin}
    cooldown: 0s
    peers: 0
    probe: {probe}ms
  - name: kill-busy
    class: busy-loop
    for: 0s
    comm: {busy}
    cooldown: 0s
    peers: 0
"""


def stat_tail(pid):
    """/proc/PID/stat from field (3) on, split after the last ')'; None when gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return data[data.rindex(b")") + 2:].split()


def alive(pid):
    st = stat_tail(pid)
    return st is not None and st[0] not in (b"Z", b"X")


def children_of(ppid):
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = stat_tail(name)
            if st and int(st[1]) == ppid:
                out.append(int(name))
    return out


def tracer(pid):
    """TracerPid of PID's main thread (0: none; None: gone)."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            return int(re.search(rb"^TracerPid:\s+(\d+)", f.read(), re.M).group(1))
    except (FileNotFoundError, ProcessLookupError):
        return None


def held_by(pids, victim):
    """Threads of PIDS still held after VICTIM's kill: traced by it, or in t/T with no tracer."""
    out = []
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except (FileNotFoundError, ProcessLookupError):
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/status", "rb") as f:
                    status = f.read()
            except (FileNotFoundError, ProcessLookupError):
                continue
            state = re.search(rb"^State:\s+(\S)", status, re.M).group(1).decode()
            tracer = int(re.search(rb"^TracerPid:\s+(\d+)", status, re.M).group(1))
            if tracer == victim or (state in "tT" and tracer == 0):
                out.append(f"{pid}/{tid} {state} TracerPid {tracer}")
    return out


@pytest.fixture
def hogs():
    """A CPU hog per core, killed at teardown (and ending on its own when the test dies, or after 5 minutes)."""
    hog = (f"import os, time\nend = time.monotonic() + 300\n"
           f"while os.getppid() == {os.getpid()} and time.monotonic() < end:\n    pass\n")
    procs = [subprocess.Popen([sys.executable, "-c", hog]) for _ in range(os.cpu_count() or 1)]
    yield procs
    for p in procs:
        p.kill()
        p.wait()


def test_killed_capture_child_releases_target(daemon, fixture, hogs):
    # Names of this test's own, so that the daemon captures these processes only, not those of another test run on
    # the same machine.
    spin = fixture("spin-eagain", "--name", f"krs-{os.getpid()}")
    busy = fixture("busy-loop", "--name", f"krb-{os.getpid()}")
    targets = (spin.pid, busy.pid)
    d = daemon(RULES.format(spin=f"krs-{os.getpid()}", busy=f"krb-{os.getpid()}", probe=PROBE_MS))
    # The measuring loop ahead of the hogs when allowed (it is the clock of the test, not the subject); back to
    # its nice at the end, which is always allowed.
    nice = os.getpriority(os.PRIO_PROCESS, 0)
    try:
        os.setpriority(os.PRIO_PROCESS, 0, -10)
    except PermissionError:
        pass
    rng = random.Random(34)
    seen, release_ms, kinds, holding_nice = set(), [], {"probe": 0, "anytime": 0}, []
    try:
        while len(release_ms) < KILLS:
            kind = ("probe", "anytime")[len(release_ms) % 2]
            if kind == "probe":
                # While the probe holds the spinning thread (its tracer, a child of the daemon not killed yet):
                # somewhere in its window.
                def probe_child():
                    t = tracer(spin.pid)
                    st = stat_tail(t) if t and t not in seen else None
                    return t if st and int(st[1]) == d.proc.pid else None
                victim = wait_until(probe_child, timeout=30, interval=0.002,
                                    what="a probe holding the spinning thread")
                # Its nice (proc(5) field 19) while it holds the thread, seen between two looks that found it
                # holding: the probe keeps nice -20 from its seize to its detach.
                st = stat_tail(victim)
                if st and tracer(spin.pid) == victim:
                    holding_nice.append(int(st[16]))
                time.sleep(rng.uniform(0, PROBE_MS) / 1000)
            else:
                # Anywhere in a child's life: the probe, the raw pass, the unwind.
                victim = wait_until(lambda: [c for c in children_of(d.proc.pid) if c not in seen], timeout=30,
                                    interval=0.005, what="a capture child of the daemon")[-1]
                time.sleep(rng.uniform(0, 0.15))
            seen.add(victim)
            if not alive(victim):
                continue
            t0 = time.monotonic()
            os.kill(victim, signal.SIGKILL)
            try:
                wait_until(lambda: not held_by(targets, victim), timeout=RELEASE_DEADLINE, interval=0.001,
                           what=f"the release of the targets after the kill of {victim}")
            except AssertionError:
                raise AssertionError(f"still held {RELEASE_DEADLINE}s after the kill of capture child {victim}: "
                                     f"{held_by(targets, victim)}")
            release_ms.append((time.monotonic() - t0) * 1000)
            kinds[kind] += 1
    finally:
        os.setpriority(os.PRIO_PROCESS, 0, nice)

    slow = sorted(x for x in release_ms if x > BAR_MS)
    summary = (f"{len(release_ms)} kills {kinds}: median {statistics.median(release_ms):.2f} ms, "
               f"max {max(release_ms):.2f} ms, over {BAR_MS} ms: {slow}")
    # The cause, checked directly: a child that holds a thread is never at a lowered priority (where the daemon may
    # raise it: root here).
    if os.geteuid() == 0:
        assert len(holding_nice) >= KILLS // 4 and set(holding_nice) == {-20}, holding_nice
    assert statistics.median(release_ms) <= BAR_MS / 5, summary
    assert len(slow) <= SLOW_ALLOWED, summary
    # The daemon lived through it and saw the kills as crashed captures; stopped before the fixtures are checked,
    # so that no capture of its own is in flight then.
    assert d.proc.poll() is None
    assert re.search(r"capture process crashed", d.log_text()), "the kills were not seen as crashes"
    assert d.stop() == 0
