"""The scan below the /proc floor: the BPF task iterator and /proc agree on every thread, and the daemon says which
it uses. Skipped with the reason where the build or the kernel has no BPF scan."""
import json
import os
import re
import shutil
import signal
import subprocess
import time

import pytest

from conftest import BUILDDIR, STACKCTL, STACKWATCHD, read_stat, stackctl, wait_until

SCAN_SOURCES = os.path.join(BUILDDIR, "tests", "helpers", "scan-sources")


def bpf_reason():
    """Why there is no BPF scan here, or None."""
    r = subprocess.run([SCAN_SOURCES, str(os.getpid())], capture_output=True, text=True, timeout=30)
    return None if r.returncode == 0 else r.stderr.strip()


@pytest.fixture
def bpf():
    why = bpf_reason()
    if why:
        pytest.skip(why)


def both_views(*pids):
    """{tid: (bpf view, /proc view)} of every thread of PIDS, the /proc files read right after the iterator."""
    r = subprocess.run([SCAN_SOURCES, *map(str, pids)], capture_output=True, text=True, timeout=30, check=True)
    out = {}
    for line in r.stdout.splitlines():
        o = json.loads(line)
        if o["proc"]:
            out[o["tid"]] = (o["bpf"], o["proc"])
    return out


EXACT = ("state", "ppid", "starttime", "num_threads", "kthread", "comm", "syscall")


def assert_agree(tid, b, p, moving):
    """One thread's two views: the same on every field both have; counters within their drift (the /proc read
    comes after the iterator, so never behind it). MOVING: it runs, so its syscall and CPU times move."""
    for k in EXACT:
        if moving and k in ("syscall", "state"):
            continue
        assert b.get(k) == p.get(k), f"thread {tid}: {k}: bpf {b.get(k)!r}, /proc {p.get(k)!r}"
    # /proc's wchan is read for every thread; the iterator looks where the scan needs it (D, frozen).
    if "wchan" in b and not moving:
        assert b["wchan"] == p["wchan"], f"thread {tid}: wchan: bpf {b['wchan']!r}, /proc {p['wchan']!r}"
    for k in ("run_ns", "timeslices", "faults"):
        assert b[k] <= p[k], f"thread {tid}: {k} went back: bpf {b[k]}, /proc {p[k]}"
        if not moving:
            assert b[k] == p[k], f"thread {tid}: {k}: bpf {b[k]}, /proc {p[k]}"
    # utime and stime: the same split of the runtime (/proc's cputime_adjust), in clock ticks. A busy thread runs
    # between the two reads, and /proc keeps its own high-water mark of the split: a few ticks apart at most.
    slack = 50 if moving else 1
    assert abs((b["utime"] + b["stime"]) - (p["utime"] + p["stime"])) <= slack, (tid, b, p)
    if "io" in p:
        assert "io" in b, f"thread {tid}: the iterator read no I/O counters"
        assert all(x <= y for x, y in zip(b["io"], p["io"])), (tid, b["io"], p["io"])
        if not moving:
            assert b["io"] == p["io"], (tid, b["io"], p["io"])


def test_bpf_and_proc_agree_on_every_thread(bpf, fixture, freezer):
    """One BPF pass and one /proc read agree on a population of every state the classifier tells apart: blocked in
    read(), sleeping, busy on a CPU, stopped, traced, D in vfork(), and frozen by a cgroup (v1: TASK_FROZEN, which
    /proc shows as D; v2: in the freezer's trap, S). The frozen ones are frozen in the record too, which /proc cannot
    say of a v2 task."""
    version, group, _, freeze = freezer
    crowd = fixture("thread-crowd", "--sleeping", "4", "8", "2")
    reader = fixture("block-read")
    stuck = fixture("dstate-vfork", "30", ready=False)
    stopped = fixture("block-read")
    os.kill(stopped.pid, signal.SIGSTOP)
    stopped.wait_state("T")
    traced = fixture("block-read")
    gdb = subprocess.Popen(["gdb", "-nx", "-batch", "-p", str(traced.pid), "-ex", "shell sleep 60"],
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    frozen = fixture("block-read")
    with open(os.path.join(group, "cgroup.procs"), "w") as f:
        f.write(str(frozen.pid))
    try:
        freeze()
        stuck.wait_state("D", timeout=10)
        traced.wait_state("t", timeout=30)
        reader.wait_wchan("pipe_read")
        views = both_views(crowd.pid, reader.pid, stuck.pid, stopped.pid, traced.pid, frozen.pid)
        assert len(views) >= 14 + 5, sorted(views)
        # The crowd's two spinning threads (runnable the whole time, on a CPU or waiting for one), and its main
        # thread, which may still be waking up: their times move between the two reads.
        busy = {t for t, (b, p) in views.items() if "R" in (b["state"], p["state"])}
        for tid, (b, p) in views.items():
            assert_agree(tid, b, p, moving=tid in busy or tid == crowd.pid)

        def view(pid):
            return views[pid][0]
        assert view(reader.pid)["state"] == "S" and view(reader.pid)["syscall"].startswith("0 ")  # read()
        assert view(stuck.pid)["state"] == "D" and view(stuck.pid)["wchan"], view(stuck.pid)
        assert view(stopped.pid)["state"] == "T" and view(traced.pid)["state"] == "t"
        assert view(frozen.pid)["frozen"] and view(frozen.pid)["state"] == ("D" if version == 1 else "S")
        assert not any(view(p)["frozen"] for p in (reader.pid, stuck.pid, stopped.pid, traced.pid))
        # The iterator saw both spinners runnable, with their syscall file's "running".
        spinning = [t for t, (b, _) in views.items() if b["state"] == "R" and b["syscall"] == "running"]
        assert len(spinning) >= 2 and all(views[t][0]["run_ns"] > 0 for t in spinning), spinning
    finally:
        gdb.kill()
        gdb.wait()
        os.kill(stopped.pid, signal.SIGCONT)


def status_scan(d):
    r = stackctl("--socket", d.socket, "status", check_rc=0)
    return r.stdout.decode()


def test_the_daemon_chooses_bpf_and_says_so(bpf, daemon):
    """With scan.source auto (the default), a daemon that may load BPF scans with it: one log line, stackctl status
    and /metrics say so; scan.source: proc keeps it on /proc, and says why."""
    d = daemon("archive:\n  directory: @ARCHIVE@\nscan:\n  source: auto\n")
    assert re.search(r"^Scanning with the BPF task iterator", d.log_text(), re.M), d.log_text()[-2000:]
    d.wait_scans(2)
    out = status_scan(d)
    assert re.search(r"Scan source: BPF task iterator", out), out
    _, _, body = d.get("/metrics")
    assert 'stackwatch_scan_source{source="bpf"} 1' in body.decode()
    assert 'stackwatch_scan_source{source="proc"} 0' in body.decode()
    assert re.search(r"^stackwatch_last_scan_cpu_seconds [0-9.]+$", body.decode(), re.M)

    # A reload that changes the source switches it, and says so.
    d.write_config("archive:\n  directory: @ARCHIVE@\nscan:\n  source: proc\n")
    d.proc.send_signal(signal.SIGHUP)
    wait_until(lambda: re.search(r"^Scanning /proc: scan.source is proc", d.log_text(), re.M), timeout=15,
               what="the reload's line")
    d.wait_scans(2)
    assert "Scan source: /proc (scan.source is proc)" in status_scan(d)
    _, _, body = d.get("/metrics")
    assert 'stackwatch_scan_source{source="proc"} 1' in body.decode()


def without_bpf_caps():
    """A wrapper that runs a command as root without CAP_BPF, CAP_PERFMON and CAP_SYS_ADMIN (what loading the
    iterator needs), or None when setpriv cannot."""
    setpriv = shutil.which("setpriv")
    if not setpriv:
        return None
    wrapper = [setpriv, "--bounding-set=-bpf,-perfmon,-sys_admin", "--inh-caps=-bpf,-perfmon,-sys_admin", "--"]
    r = subprocess.run([*wrapper, SCAN_SOURCES, str(os.getpid())], capture_output=True, text=True, timeout=30)
    return wrapper if r.returncode == 1 and "CAP_BPF" in r.stderr else None


def test_without_the_privileges_auto_scans_proc_and_bpf_refuses(bpf, daemon, tmp_path):
    """Where BPF cannot be loaded, auto falls back to /proc with one line saying why; scan.source: bpf refuses to
    start rather than watch nothing, naming the reason."""
    wrapper = without_bpf_caps()
    if not wrapper:
        pytest.skip("setpriv cannot drop CAP_BPF here")
    d = daemon("archive:\n  directory: @ARCHIVE@\nscan:\n  source: auto\n", wrapper=wrapper)
    assert re.search(r"^Scanning /proc: loading the BPF program: Operation not permitted \(it needs CAP_BPF and "
                     r"CAP_PERFMON\)", d.log_text(), re.M), d.log_text()[-2000:]
    d.wait_scans(2)

    config = tmp_path / "bpf.yaml"
    config.write_text(f"archive:\n  directory: {tmp_path}/a2\nscan:\n  source: bpf\nhttp:\n  socket: none\n")
    r = subprocess.run([*wrapper, STACKWATCHD, "--config", str(config)], capture_output=True, text=True, timeout=30)
    assert r.returncode != 0
    assert "The BPF scan cannot run (scan.source is bpf): loading the BPF program: Operation not permitted" in \
        r.stderr, r.stderr


def test_the_auto_interval_follows_the_scans_cost(bpf, daemon, fixture):
    """poll_interval auto (1 s with the built-in rules) keeps scanning within 1% of a core: 5,000 threads read
    from /proc cost some 40 ms a scan and stretch it; the BPF scan of the same threads keeps 1 s."""
    fixture("thread-crowd", "5000", "0", ready=True)
    interval = {}
    for source in ("proc", "bpf"):
        d = daemon(f"archive:\n  directory: @ARCHIVE@\nscan:\n  source: {source}\n")
        d.wait_scans(4, timeout=120)
        scan = d.get_json("/healthz")["scan"]
        interval[source] = (scan["poll_interval_ms"], scan["last_poll_cpu_us"])
        d.stop()
    proc_ms, proc_cpu = interval["proc"]
    bpf_ms, bpf_cpu = interval["bpf"]
    assert bpf_cpu * 2 < proc_cpu and bpf_ms < proc_ms, interval
    # Each stretched to 125 times its polls' CPU time (averaged: the last one may be some times less), within 1..10 s.
    # The release build's BPF scan of these threads costs some 8 ms: 1 s kept (not so under the sanitizers).
    for ms, cpu in interval.values():
        assert 1000 <= ms <= min(10000, max(1000, cpu * 125 * 4 // 1000)), interval
        if cpu * 125 // 1000 > 1500:
            assert ms > 1000, interval
        if cpu * 125 // 1000 < 750:
            assert ms == 1000, interval


def test_a_stretched_interval_is_not_a_stall(daemon, fixture):
    """/healthz calls the daemon stalled after 3 polls without a scan: polls of the interval in force, which auto
    stretches on /proc, not the configured 1 s (a 10,000-thread machine answered 503 between its 10 s polls)."""
    fixture("thread-crowd", "5000", "0", ready=True)
    d = daemon("archive:\n  directory: @ARCHIVE@\nscan:\n  source: proc\n")
    d.wait_scans(3, timeout=120)
    scan = d.get_json("/healthz")["scan"]
    if scan["poll_interval_ms"] < 5000:
        pytest.skip(f"5,000 threads scanned in {scan['last_poll_cpu_us']} us CPU: the interval stays at "
                    f"{scan['poll_interval_ms']} ms, under the 4 s after which a configured 1 s would say stalled")
    # Past 3 configured polls and a second since the last scan, before the next: healthy (get_json asserts 200).
    wait_until(lambda: d.get_json("/healthz")["scan"]["last_scan_age_ms"] > 4500, timeout=30, interval=0.2,
               what="4.5 s since the last scan")
    assert d.get_json("/healthz")["status"] == "ok"


WALK_COUNT = os.path.join(BUILDDIR, "tests", "helpers", "walk-count")

# A pool of threads each parked in read() on its own pipe; on stdin "end A B" ends threads A..B-1 (by creation) and
# "add N" starts N more, each answered with "ok" once they are gone or parked.
POOL = r"""
import os, sys, threading
pipes, threads = [], []
def park(fd):
    os.read(fd, 1)
def add(n):
    for _ in range(n):
        r, w = os.pipe()
        t = threading.Thread(target=park, args=(r,), daemon=True)
        t.start()
        pipes.append(w)
        threads.append(t)
add(int(sys.argv[1]))
print("ok", flush=True)
for line in sys.stdin:
    cmd, *a = line.split()
    if cmd == "end":
        for i in range(int(a[0]), int(a[1])):
            os.write(pipes[i], b"x")
            threads[i].join()
    else:
        add(int(a[0]))
    print("ok", flush=True)
"""


class Pool:
    def __init__(self, n):
        self.proc = subprocess.Popen(["python3", "-c", POOL, str(n)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True)
        self.pid = self.proc.pid
        assert self.proc.stdout.readline().strip() == "ok"
        self.wait_parked()

    def do(self, cmd):
        self.proc.stdin.write(cmd + "\n")
        self.proc.stdin.flush()
        assert self.proc.stdout.readline().strip() == "ok"
        self.wait_parked()

    def tids(self):
        return {int(t) for t in os.listdir(f"/proc/{self.pid}/task")}

    def wait_parked(self):
        """Until every thread but the main one sleeps in read() (a thread just started may not be there yet)."""
        def parked():
            return all((read_stat(self.pid, t) or ("", "S"))[1] == "S" for t in self.tids() if t != self.pid)
        wait_until(parked, timeout=30, interval=0.05, what="the pool's threads parked")

    def close(self):
        self.proc.kill()
        self.proc.wait()


class WalkCount:
    def __init__(self, walk, pid):
        self.proc = subprocess.Popen([WALK_COUNT, walk, str(pid)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline().strip()
        if line != "READY":
            err = self.proc.stderr.read()
            self.proc.wait()
            pytest.skip(f"no {walk} walk here: {err.strip()}")

    def passes(self, n, after_ms=0):
        """N passes of changes, each AFTER_MS after the last (the time between two of the daemon's polls)."""
        out = []
        for _ in range(n):
            self.proc.stdin.write(f"pass {after_ms}\n")
            self.proc.stdin.flush()
            out.append(json.loads(self.proc.stdout.readline()))
        return out

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


@pytest.mark.parametrize("walk", ["lanes", "list", "per-task"])
def test_every_walk_counts_each_thread_once_as_threads_come_and_go(bpf, walk):
    """The passes of changes meet every thread of a 600-thread pool exactly once, however they walk: the lanes walk a
    large process's list in four stretches from starts marked by the last walk, so the test ends the threads around
    every start, then adds more threads than were there (the last lane would carry them all): each pass still counts
    what /proc lists, none twice, and the lanes are walked again once marked anew."""
    pool = Pool(600)
    wc = WalkCount(walk, pool.pid)
    try:
        def check(passes, what):
            n = len(pool.tids())
            for p in passes:
                assert p["walk"] == walk and p["twice"] == 0 and p["seen"] == n, (what, n, passes)
            if walk == "lanes":
                # The starts are marked by a walk along one lane, and taken by the next.
                assert passes[-1]["laned"] >= 1, (what, passes)
            else:
                assert all(p["laned"] == 0 for p in passes), (what, passes)

        check(wc.passes(3), "600 threads parked")
        # The starts sit at a quarter, a half and three quarters of the list (the main thread first): end the
        # threads around each.
        pool.do("end 130 170")
        pool.do("end 280 320")
        pool.do("end 430 470")
        check(wc.passes(3), "120 ended around the starts")
        pool.do("add 900")
        check(wc.passes(3), "900 added")
        pool.do("end 0 300")
        check(wc.passes(3), "the first 300 ended")
    finally:
        wc.close()
        pool.close()


def test_the_daemon_follows_a_large_pool_as_threads_come_and_go(bpf, daemon):
    """The daemon's view of a 600-thread pool, walked along lanes, is /proc's after each change: threads ended around
    the lanes' starts are gone from /processes, threads added are there."""
    d = daemon("archive:\n  directory: @ARCHIVE@\nscan:\n  source: bpf\n")
    assert re.search(r"^Scanning with the BPF task iterator .*walk: lanes\.$", d.log_text(), re.M), \
        d.log_text()[-2000:]
    pool = Pool(600)
    try:
        def daemon_tids():
            return {t["tid"] for t in d.get_json("/processes?all=1")["threads"] if t["pid"] == pool.pid}

        for cmd in (None, "end 130 170", "end 280 320", "add 900", "end 0 300"):
            if cmd:
                pool.do(cmd)
            want = pool.tids()
            wait_until(lambda: daemon_tids() == want, timeout=15, interval=0.2,
                       what=f"the daemon's view after {cmd or 'the start'}: {len(want)} threads")
    finally:
        pool.close()


def test_the_walk_ring_grows_when_more_threads_move_than_it_holds(bpf, fixture):
    """2,500 threads waking every 100 ms move between any two passes: more whole records than the walk's first ring
    holds (512 KiB, some 1,700). That pass writes every thread's record per task, as before, and the ring is made
    again for twice what it wanted to write: the passes after it fit, and count every thread."""
    crowd = fixture("thread-crowd", "--waking", "2500", "0", "0")
    wc = WalkCount("lanes", crowd.pid)
    try:
        first = wc.passes(1, after_ms=300)
        assert first[0]["overflowed"] and first[0]["ring_kib"] >= 2048, first
        later = wc.passes(4, after_ms=300)
        n = len(os.listdir(f"/proc/{crowd.pid}/task"))
        assert all(not p["overflowed"] and p["seen"] == n and p["twice"] == 0 for p in later), (n, later)
    finally:
        wc.close()
