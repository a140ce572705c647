"""Under pressure: the pause a capture causes stays short on an overloaded machine, and a process with thousands of
threads is dumped in full. The bounds here are generous (CI machines are shared, and this suite also runs under
ASan); bench/pressure measures the tight figures beside eu-stack and gdb."""
import contextlib
import json
import os
import re
import signal
import subprocess
import time

import pytest

from conftest import STACKCTL, dump_json, functions, wait_until

NCPU = os.cpu_count() or 1
# The longest pause a capture may record with 10 CPU hogs per core (issue 15: p99 729 ms before, 2 ms the aim).
PAUSE_BOUND_MS = 20.0
DUMPS = 12
RULES = """
archive:
  directory: @ARCHIVE@
capture:
  max_per_minute: 60
"""


def can_go_realtime():
    """Whether this process may use SCHED_FIFO (CAP_SYS_NICE, or RLIMIT_RTPRIO), as the unit grants stackwatchd."""
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
    except PermissionError:
        return False
    os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
    return True


needs_realtime = pytest.mark.skipif(not can_go_realtime(),
                                     reason="needs CAP_SYS_NICE or RLIMIT_RTPRIO >= 1 (the unit's LimitRTPRIO=1)")


@contextlib.contextmanager
def cpu_hogs(n):
    """N processes spinning in user space, each bounded in time, killed and reaped on the way out."""
    # timeout(1) leads a process group of its own with the shell: killing the group kills both.
    hogs = [subprocess.Popen(["timeout", "-s", "KILL", "300", "sh", "-c", "while :; do :; done"]) for _ in range(n)]
    try:
        # Every hog on the run queue before the test measures anything.
        wait_until(lambda: all(p.poll() is None and os.path.exists(f"/proc/{p.pid}/task") for p in hogs),
                   timeout=30, what="the CPU hogs")
        yield hogs
    finally:
        for p in hogs:
            os.killpg(p.pid, signal.SIGKILL)
        for p in hogs:
            p.wait()


def spinner_of(doc):
    """The pause-probe's spinning thread: the one whose frames hold its pp_level_12 loop."""
    for t in doc["threads"]:
        if "pp_level_12" in functions(t):
            return t
    raise AssertionError("no thread of the dump is in pp_level_12: "
                         + repr([(t["tid"], t["capture"], functions(t)[:4]) for t in doc["threads"]]))


def assert_pauses_short(pauses_ms, what):
    assert len(pauses_ms) == DUMPS
    assert max(pauses_ms) <= PAUSE_BOUND_MS, (
        f"{what}: longest recorded pause {max(pauses_ms):.3f} ms over {PAUSE_BOUND_MS} ms with {10 * NCPU} CPU hogs "
        f"on {NCPU} CPUs; all: {sorted(round(p, 3) for p in pauses_ms)}")


@needs_realtime
def test_stackctl_pause_under_10x_load(fixture):
    fx = fixture("pause-probe")
    pauses = []
    with cpu_hogs(10 * NCPU):
        for _ in range(DUMPS):
            doc = dump_json("--no-source", fx.pid, timeout=60)[0]
            t = spinner_of(doc)
            # Stopped, not read passively: the pause is real, and it is what was recorded.
            assert t["capture"]["method"] == "ptrace", t["capture"]
            assert t["capture"]["pause_us"] <= doc["capture"]["max_pause_us"]
            pauses.append(doc["capture"]["max_pause_us"] / 1000)
            # The target comes first: running on after every dump, not stopped, not traced.
            fx.assert_untouched()
    assert_pauses_short(pauses, "stackctl dump")


@needs_realtime
def test_daemon_capture_pause_under_10x_load(daemon, fixture):
    d = daemon(RULES)
    fx = fixture("pause-probe")
    pauses = []
    with cpu_hogs(10 * NCPU):
        for _ in range(DUMPS):
            doc = d.get_json(f"/stacks/{fx.pid}", timeout=60)
            spinner_of(doc)
            pauses.append(doc["capture"]["max_pause_us"] / 1000)
            fx.assert_untouched()
    assert_pauses_short(pauses, "the daemon's capture")


def test_2000_threads_dumped_in_full(fixture):
    # Issue 15's large process: 1,900 threads blocked in read(), 50 spinning on a CPU, 50 in nanosleep().
    fx = fixture("thread-crowd", "--sleeping", "50", "1900", "50", ready=False).wait_line(timeout=60)
    whole = None  # the capture time of the first whole dump
    for args in (("--no-source",), ()):
        t0 = time.monotonic()
        doc = dump_json(*args, fx.pid, timeout=120, check_rc=None)[0]
        wall = time.monotonic() - t0
        cap = doc["capture"]
        assert not cap["partial"] and not cap["truncated"] and cap["errors"] == [], (args, cap)
        assert cap["threads_total"] == 2001 and len(doc["threads"]) == 2001
        kinds = {"crowd_park": 0, "crowd_spin": 0, "crowd_nap": 0}
        for t in doc["threads"]:
            assert t["capture"].get("error") is None, (t["tid"], t["capture"])
            for fn in kinds:
                if fn in functions(t):
                    kinds[fn] += 1
        assert kinds == {"crowd_park": 1900, "crowd_spin": 50, "crowd_nap": 50}, (args, kinds)
        # Within the default time budget (the dump would say "partial" otherwise), and well under it on a plain
        # build: the bound is for CI's sanitizer build; bench/pressure has the figures.
        assert wall < 30, f"dump {args} of 2,001 threads took {wall:.1f} s"
        fx.assert_untouched()
        whole = whole or cap["duration_us"] / 1000

    # A capture's first round copies for an eighth of the budget; the running threads it left for ptrace and had no
    # time left to stop are stopped first in the next round, not skipped as if the budget were spent (a 1,000 ms dump
    # of these threads said "time budget (1000 ms) spent: stopped 32 of 50 threads" after 199 ms). Budgets one and a
    # half and two times a whole dump's: their first eighth is short of the copies and the stops, and the budget is
    # said spent, or a thread skipped for it, only once it is.
    for budget in (max(300, int(whole * f)) for f in (1.5, 2)):
        doc = dump_json("--no-source", "--time-budget", str(budget), fx.pid, timeout=120, check_rc=None)[0]
        cap = doc["capture"]
        said = [e for e in cap["errors"] if e.startswith(f"time budget ({budget} ms) spent")] + \
            [t["capture"]["error"] for t in doc["threads"] if "time budget" in (t["capture"]["error"] or "")]
        assert not said or cap["duration_us"] >= budget * 900, (budget, cap["duration_us"], said[:3])
        assert len(doc["threads"]) == 2001
    fx.assert_untouched()


def partial_dump(pid, *args):
    """A dump of PID cut by its time budget with some threads copied and some not: the budget doubles from 10 ms
    until one is (how far a budget gets depends on the machine, and on the sanitizer build)."""
    budget = 10
    while budget <= 10000:
        r = subprocess.run([STACKCTL, "dump", "--time-budget", str(budget), "--no-source", *args, str(pid)],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode in (0, 5), r  # 5: partial
        if r.returncode == 5 and "skipped: capture time budget" in r.stdout and (
                "copied 0 of" not in r.stdout):
            return budget, r.stdout
        budget *= 2
    raise AssertionError("no time budget up to 10 s gave a dump cut short with some threads copied")


def test_time_budget_names_the_threads_left_out(fixture):
    fx = fixture("thread-crowd", "--sleeping", "50", "1900", "50", ready=False).wait_line(timeout=60)
    _, out = partial_dump(fx.pid, "--json")
    doc = json.loads(out.splitlines()[0])
    skipped = [t for t in doc["threads"] if (t["capture"]["error"] or "").startswith("skipped: capture time budget")]
    assert 0 < len(skipped) < 2001 and len(doc["threads"]) == 2001
    assert f"copied {2001 - len(skipped)} of 2001 threads" in " ".join(doc["capture"]["errors"])

    # In text, the threads left out are one group, which counts and names them, says they were not read (no state
    # is made up for them) and why, after every group with a stack.
    budget, out = partial_dump(fx.pid)
    lines = out.splitlines()
    [i] = [i for i, ln in enumerate(lines) if ln.endswith(": not read [none]")]
    m = re.fullmatch(r"(\d+) threads \(TIDs ([-0-9, ]+)\): not read \[none\]", lines[i])
    assert m, lines[i]
    assert lines[i + 1].startswith(f"  ! skipped: capture time budget ({budget} ms) exhausted")
    named = sum(int(b) - int(a) + 1 if b else 1 for a, b in re.findall(r"(\d+)(?:-(\d+))?", m[2]))
    assert named == int(m[1]) and 0 < named < 2001
    assert not any(ln.startswith("TID ") or " threads (TIDs " in ln for ln in lines[i + 1:])

    # --no-group names each thread left out on a line of its own.
    budget, out = partial_dump(fx.pid, "--no-group")
    lines = out.splitlines()
    not_read = [i for i, ln in enumerate(lines) if ln.startswith("TID ") and ln.endswith(": not read [none]")]
    assert not_read, out[:2000]
    assert all(lines[i + 1].startswith(f"  ! skipped: capture time budget ({budget} ms) exhausted") for i in not_read)
    assert sum(ln.startswith("TID ") for ln in lines) == 2001
    fx.assert_untouched()


def assert_busy_first(doc, captured, total, spinners):
    """The thread budget's note says it kept the busy threads first: at least the SPINNERS, as any other thread the
    kernel had on a CPU or in D state at that instant (a parked thread woken for a moment, a page fault) counts too."""
    pattern = rf"thread budget: captured {captured} of {total} threads: the (\d+) on a CPU or in D state"
    busy = [int(m[1]) for e in doc["capture"]["errors"] if (m := re.match(pattern, e))]
    assert len(busy) == 1 and spinners <= busy[0] <= captured, doc["capture"]["errors"]


def test_thread_budget_keeps_the_threads_on_a_cpu(fixture):
    # Over the thread budget (4,096), the busy threads have the highest TIDs here: cutting by TID left every one of
    # them out, the very threads a hang report is about.
    fx = fixture("thread-crowd", "4300", "20", ready=False).wait_line(timeout=120)
    # A time budget that does not cut in first (the sanitizer build is slow): this is about the thread budget.
    doc = dump_json("--no-source", "--time-budget", "100000", fx.pid, timeout=200, check_rc=5)[0]
    assert doc["capture"]["threads_total"] == 4321 and len(doc["threads"]) == 4096
    spinning = [t for t in doc["threads"] if "crowd_spin" in functions(t)]
    assert len(spinning) == 20, [e for e in doc["capture"]["errors"]]
    assert_busy_first(doc, 4096, 4321, 20)
    tids = [t["tid"] for t in doc["threads"]]
    assert tids == sorted(tids)
    fx.assert_untouched()


def test_max_threads_caps_a_dump_and_the_daemons_captures(fixture, daemon):
    # The thread budget was a constant (4,096): a site with 10,000-thread JVMs, or a small device, could not move it.
    fx = fixture("thread-crowd", "60", "2", ready=False).wait_line(timeout=30)
    doc = dump_json("--no-source", "--max-threads", "10", fx.pid, check_rc=5)[0]
    assert doc["capture"]["threads_total"] == 63 and len(doc["threads"]) == 10, doc["capture"]
    assert_busy_first(doc, 10, 63, 2)
    assert len([t for t in doc["threads"] if "crowd_spin" in functions(t)]) == 2
    assert subprocess.run([STACKCTL, "dump", "--max-threads", "0", str(fx.pid)], capture_output=True).returncode == 2
    # The daemon's own captures, by capture.max_threads.
    d = daemon("capture:\n  max_threads: 10\nhttp:\n  socket: @SOCKET@\n")
    doc = d.get_json(f"/stacks/{fx.pid}")
    assert doc["capture"]["threads_total"] == 63 and len(doc["threads"]) == 10, doc["capture"]
    fx.assert_untouched()


def scan_metrics(d):
    text = d.get("/metrics")[2].decode()
    return [float(re.search(rf"^{name} (\S+)$", text, re.M).group(1))
            for name in ("stackwatch_scans_total", "stackwatch_scan_duration_seconds_sum")]


def test_scans_slower_than_the_interval_leave_the_loop_time_for_clients(fixture, daemon):
    # On a loaded machine a scan of thousands of threads outlasts a short poll interval. The next scan was armed
    # relative to the loop's clock from before the scan, so it followed at once: the loop scanned without a break,
    # and a 3.3 MB /stacks reply got one socket buffer per scan (seconds, after a 0.8 s capture).
    fx = fixture("thread-crowd", "4000", "0", ready=False).wait_line(timeout=60)
    d = daemon("poll_interval: 50ms\nhttp:\n  socket: @SOCKET@\n")
    with cpu_hogs(4 * NCPU):
        wait_until(lambda: scan_metrics(d)[0] >= 3, timeout=30, what="three scans")
        n0, busy0 = scan_metrics(d)
        t0 = time.monotonic()
        time.sleep(3)
        n1, busy1 = scan_metrics(d)
        wall = time.monotonic() - t0
    mean = (busy1 - busy0) / max(n1 - n0, 1)
    if mean < 0.05:
        pytest.skip(f"scans here take {mean * 1000:.0f} ms, less than the 50 ms interval: nothing to test")
    # Half an interval of rest at least after each scan: at most 2/3 of the loop scans, never all of it.
    assert (busy1 - busy0) / wall <= 0.75, f"scanning {100 * (busy1 - busy0) / wall:.0f}% of the time ({n1 - n0} scans)"
    fx.assert_untouched()


BUSY_RULE = """
poll_interval: 200ms
archive:
  directory: @ARCHIVE@
capture:
  max_per_minute: 60
rules:
  - name: busy-under-load
    class: busy-loop
    for: 1s
    comm: busy-loop
    cooldown: 1h
"""


def test_a_busy_loop_is_caught_under_10x_load(daemon, fixture):
    # Behind 10 hogs per core a busy loop gets a tenth of a CPU: judged by what it got, it was "running" and the
    # rule never fired. What it wanted (on a CPU, or runnable waiting for one: schedstat) says busy loop.
    with cpu_hogs(10 * NCPU):
        d = daemon(BUSY_RULE)
        fx = fixture("busy-loop")
        snaps = wait_until(lambda: d.snapshots("--pid", str(fx.pid)), timeout=30, what="the busy loop's snapshot")
        assert [s["class"] for s in snaps] == ["busy-loop"], snaps
        fx.assert_untouched()
