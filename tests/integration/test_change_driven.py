"""Work follows change (issue 41): a verdict on parked waits is made again when a thread on its chain moves, not on a
timer, so a deadlock is classed blocked within the poll interval plus the 2 s park of forming, and fires the built-in
deadlock rule within its for: plus one poll; threads that stay parked cost no walk and, with the BPF scan, no
classification. Both scan sources (the suite runs on each)."""
import contextlib
import os
import re
import signal
import subprocess
import sys
import time

from conftest import SCAN_SOURCE, syscall_number, wait_until

DEFAULTS = """
archive:
  directory: "@ARCHIVE@"
"""

# A waits on a pipe only B writes (parked long before); B, on a line from the test, reads the pipe only A writes:
# the deadlock forms when B enters that read.
PIPE_DEADLOCK = """
import os, sys
a_r, a_w = os.pipe()
b_r, b_w = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(a_w); os.close(b_r)
    print("B", os.getpid(), a_r, flush=True)
    sys.stdin.readline()
    os.read(a_r, 1)
    os._exit(0)
os.close(a_r); os.close(b_w)
print("A", os.getpid(), flush=True)
os.read(b_r, 1)
"""

# THREADS threads parked in read() on a pipe whose other end a second process (the writer) holds, idle in pause(): the
# chain ends there, nothing on it moves, so they are judged once (waiting); the writer stopped, they are owed.
PARKED_READERS = """
import os, signal, sys, threading
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(r)
    signal.pause()
    os._exit(0)
os.close(w)
for _ in range(int(sys.argv[1])):
    threading.Thread(target=os.read, args=(r, 1), daemon=True).start()
print("READY", pid, flush=True)
os.read(r, 1)
"""


@contextlib.contextmanager
def parked_readers(n):
    """PARKED_READERS with N threads: (the readers' process, the writer's pid); both killed on the way out."""
    readers = subprocess.Popen([sys.executable, "-c", PARKED_READERS, str(n)], stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE)
    writer = None
    try:
        writer = int(readers.stdout.readline().split()[1])
        yield readers, writer
    finally:
        readers.kill()
        readers.wait()
        if writer:
            try:
                os.kill(writer, signal.SIGKILL)
            except ProcessLookupError:
                pass


def in_syscall(pid, tid, nr, arg0=None):
    """Whether thread TID of PID sleeps in syscall NR (with first argument ARG0), as /proc says."""
    try:
        with open(f"/proc/{pid}/task/{tid}/syscall") as f:
            fields = f.read().split()
    except OSError:
        return False
    return len(fields) > 1 and fields[0] == str(nr) and (arg0 is None or int(fields[1], 16) == arg0)


def classes(d, pids):
    return {(t["pid"], t["tid"]): t["class"] for t in d.get_json("/processes?all=1")["threads"] if t["pid"] in pids}


def poll_interval(d):
    return d.get_json("/healthz")["scan"]["poll_interval_ms"] / 1000


def blocked_after(d, pids, t0, what):
    """Seconds from T0 (monotonic) until every thread of PIDS is classed blocked, read every 50 ms."""
    wait_until(lambda: (c := classes(d, pids)) and set(c.values()) == {"blocked"}, timeout=20, interval=0.05,
               what=what)
    return time.monotonic() - t0


def test_a_pipe_deadlock_is_blocked_within_the_poll_and_the_park_of_forming(daemon):
    d = daemon(DEFAULTS)
    dl = subprocess.Popen([sys.executable, "-c", PIPE_DEADLOCK], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        lines = dict(dl.stdout.readline().split(maxsplit=1) for _ in range(2))
        b_pid, a_r = map(int, lines[b"B"].split())
        a_pid = int(lines[b"A"])
        # A parked (and judged: waiting, its peer B idle) long before the deadlock forms.
        wait_until(lambda: in_syscall(a_pid, a_pid, syscall_number("read")), timeout=10, what="A in read()")
        d.wait_scans(4)
        assert set(classes(d, {a_pid}).values()) == {"waiting"}
        interval = poll_interval(d)
        dl.stdin.write(b"go\n")
        dl.stdin.flush()
        wait_until(lambda: in_syscall(b_pid, b_pid, syscall_number("read"), a_r), timeout=10, interval=0.002,
                   what="B in read() of A's pipe")
        t0, t0_real = time.monotonic(), time.time()
        took = blocked_after(d, {a_pid, b_pid}, t0, "both ends of the deadlock blocked")
        # The bound: one poll to see B in its read, the 2 s park, and 0.3 s for this test's own polling.
        assert took <= interval + 2 + 0.3, (took, interval)
        snaps = wait_until(lambda: [s for s in d.snapshots() if s["rule"] == "deadlock" and
                                    s["pid"] in (a_pid, b_pid)], timeout=30, interval=0.1, what="the firing")
        fired = snaps[0]["timestamp_usec"] / 1e6 - t0_real
        # for: 10s counts from when the thread parked, B's at the latest: within it and one poll (and the capture's
        # own start, here 1 s at most).
        assert fired <= 10 + interval + 1, fired
        print(f"blocked after {took:.2f} s, fired after {fired:.2f} s (poll {interval} s)")
    finally:
        dl.kill()
        dl.wait()


def deadlock_walks_of(d, pids):
    return len([m for m in re.findall(r"^Deadlock walk from pid (\d+) ", d.log_text(), re.M) if int(m) in pids])


def test_a_deadlock_verdict_holds_while_nothing_on_its_chain_moves(daemon):
    """Readers blocked by their stopped writer are no deadlock: the deadlock rule's walk says so once, and is not
    made again while neither process moves (it was every 5 s: a pool parked for good was walked 12 times a
    minute)."""
    d = daemon(DEFAULTS)
    with parked_readers(20) as (readers, writer):
        os.kill(writer, signal.SIGSTOP)
        blocked_after(d, {readers.pid}, time.monotonic(), "the readers blocked by their stopped writer")
        wait_until(lambda: deadlock_walks_of(d, {readers.pid}) >= 1, timeout=10, interval=0.1,
                   what="the deadlock rule's walk")
        walked = deadlock_walks_of(d, {readers.pid})
        d.wait_scans(8)
        assert deadlock_walks_of(d, {readers.pid}) == walked, d.log_text()[-3000:]
        assert set(classes(d, {readers.pid}).values()) == {"blocked"}
        assert not [s for s in d.snapshots() if s["rule"] == "deadlock" and s["pid"] == readers.pid]


def test_a_mutex_abba_is_blocked_within_the_poll_and_the_park_of_forming(daemon, fixture):
    d = daemon(DEFAULTS)
    d.wait_scans(2)
    interval = poll_interval(d)
    abba = fixture("deadlock-abba", ready=False)
    futex = syscall_number("futex")

    def both_waiting():
        tids = [int(t) for t in os.listdir(f"/proc/{abba.pid}/task")]
        names = {}
        for t in tids:
            with open(f"/proc/{abba.pid}/task/{t}/comm") as f:
                names[f.read().strip()] = t
        return all(n in names and in_syscall(abba.pid, names[n], futex) for n in ("abba-a", "abba-b")) and names
    names = wait_until(both_waiting, timeout=10, interval=0.002, what="both threads in futex()")
    t0, t0_real = time.monotonic(), time.time()
    pair = {names["abba-a"], names["abba-b"]}

    def pair_blocked():
        c = classes(d, {abba.pid})
        return {c.get((abba.pid, t)) for t in pair} == {"blocked"}
    wait_until(pair_blocked, timeout=20, interval=0.05, what="the ABBA pair blocked")
    took = time.monotonic() - t0
    assert took <= interval + 2 + 0.3, (took, interval)
    snaps = wait_until(lambda: [s for s in d.snapshots() if s["pid"] == abba.pid], timeout=30, interval=0.1,
                       what="the deadlock rule's firing")
    assert snaps[0]["rule"] == "deadlock"
    fired = snaps[0]["timestamp_usec"] / 1e6 - t0_real
    assert fired <= 10 + interval + 1, fired
    print(f"blocked after {took:.2f} s, fired after {fired:.2f} s (poll {interval} s)")


def walks_of(d, pid):
    return len(re.findall(rf"^Walked the waits of pid {pid} ", d.log_text(), re.M))


def test_parked_threads_cost_no_walk_until_a_process_on_their_chain_moves(daemon):
    d = daemon(DEFAULTS)
    with parked_readers(200) as (readers, writer):
        # Judged once they have been parked 2 s: waiting (the writer is idle, not stuck).
        wait_until(lambda: walks_of(d, readers.pid) >= 1, timeout=20, interval=0.1, what="the first walk")
        d.wait_scans(2)
        assert set(classes(d, {readers.pid}).values()) == {"waiting"}
        # Then nothing on their chain moves for 7 polls: not walked again (a timer walked them every 5 s).
        walked = walks_of(d, readers.pid)
        d.wait_scans(7)
        assert walks_of(d, readers.pid) == walked
        if d.get_json("/healthz")["scan"]["source"] == "bpf":
            # And with the BPF scan, classing them costs nothing either: a scan classes the threads that moved.
            m = re.findall(r"^Scan \d+: (\d+) threads .* (\d+) threads classed so far", d.log_text(), re.M)
            (threads, before), (_, after) = map(lambda x: tuple(map(int, x)), (m[-4], m[-1]))
            per_scan = (after - before) / 3
            assert per_scan < threads - 150, (threads, per_scan)
        # The writer stops: the readers' wait is owed by a stopped peer, seen at the next poll (the writer moved).
        os.kill(writer, signal.SIGSTOP)
        t0 = time.monotonic()
        took = blocked_after(d, {readers.pid}, t0, "the readers blocked by their stopped writer")
        assert took <= poll_interval(d) + 0.3, took
        why = {t["blocked_because"] for t in d.get_json("/processes")["threads"] if t["pid"] == readers.pid}
        assert why == {"its peer is stopped, frozen or blocked"}, why
        # Continued, it moves again: waiting again at the next poll.
        os.kill(writer, signal.SIGCONT)
        wait_until(lambda: set(classes(d, {readers.pid}).values()) == {"waiting"}, timeout=5, interval=0.05,
                   what="the readers waiting again")


# THREADS threads parked in read() on a pipe the process itself holds both ends of, next to a ticker thread that
# wakes every 50 ms, and a main thread reading stdin, whose writer (TICKING_PEER) wakes as often: the process and its
# peer move on every poll, but the readers' wait does not (waiting: the ticker may still write). On SIGUSR1, the ticker
# parks in the same read: now nobody is left to write to it.
TICKING_READERS = """
import os, signal, sys, threading, time
r, w = os.pipe()
stop = threading.Event()
signal.signal(signal.SIGUSR1, lambda *_: stop.set())
def ticker():
    while not stop.is_set():
        time.sleep(0.05)
    os.read(r, 1)
for _ in range(int(sys.argv[1])):
    threading.Thread(target=os.read, args=(r, 1), daemon=True).start()
threading.Thread(target=ticker, daemon=True).start()
print("READY", r, flush=True)
sys.stdin.readline()
"""
TICKING_PEER = "import time\nwhile True: time.sleep(0.05)"


def test_threads_that_wake_each_poll_cost_no_walk_of_their_parked_neighbours(daemon):
    d = daemon(DEFAULTS)
    peer = subprocess.Popen([sys.executable, "-c", TICKING_PEER], stdout=subprocess.PIPE)
    p = subprocess.Popen([sys.executable, "-c", TICKING_READERS, "50"], stdin=peer.stdout, stdout=subprocess.PIPE)
    peer.stdout.close()
    try:
        r = int(p.stdout.readline().split()[1])
        tids = set(map(int, os.listdir(f"/proc/{p.pid}/task")))
        readers = wait_until(lambda: len(rs := {t for t in tids if in_syscall(p.pid, t, syscall_number("read"), r)})
                             == 50 and rs, timeout=10, what="50 readers in read()")
        wait_until(lambda: walks_of(d, p.pid) >= 1, timeout=20, interval=0.1, what="the first walk")
        d.wait_scans(2)
        assert {c for (_, t), c in classes(d, {p.pid}).items() if t in readers} == {"waiting"}
        # The ticker and the peer run at every poll; the waits the verdicts rest on stay where they were: no walk.
        walked = walks_of(d, p.pid)
        d.wait_scans(7)
        assert walks_of(d, p.pid) == walked
        # The ticker parks in the readers' read: every thread waits, none is left to write to their pipe.
        ticker = list(tids - readers - {p.pid})
        os.kill(p.pid, signal.SIGUSR1)
        wait_until(lambda: in_syscall(p.pid, ticker[0], syscall_number("read")), timeout=10, interval=0.002,
                   what="the ticker in read()")
        t0 = time.monotonic()
        wait_until(lambda: {c for k, c in classes(d, {p.pid}).items() if k[1] != p.pid} == {"blocked"}, timeout=20,
                   interval=0.05, what="the readers and the ticker blocked on their own pipe")
        took = time.monotonic() - t0
        assert took <= poll_interval(d) + 2 + 0.3, took
        # The main thread reads what the ticking peer may write: waiting still.
        assert classes(d, {p.pid})[(p.pid, p.pid)] == "waiting"
    finally:
        for q in (p, peer):
            q.kill()
            q.wait()
