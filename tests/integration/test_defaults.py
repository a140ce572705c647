"""The defaults an unattended watchdog lives on: with no rule of its own, stackwatchd catches what is certainly a hang
(a pipe deadlock between two processes and a mutex ABBA within seconds; D state and busy loops classed at once for
their rules' durations) and raises nothing for a healthy workload of real programs around them (an interactive bash
at its prompt, an event-loop server and its idle client, a thread pool parked on condition variables, a program
waiting for input from an idle peer, a sleep). A thread's class is the same on a daemon without any rule."""
import os
import pty
import subprocess
import sys
import time

import pytest

from conftest import wait_until

# No "rules:" key: the built-in rules apply. Nothing else changed from the defaults but where files go.
DEFAULTS = """
archive:
  directory: "@ARCHIVE@"
"""
# No rule at all, sampled as often as the defaults sample (their shortest for:, 10 s, / 10).
NO_RULES = DEFAULTS + "poll_interval: 1s\nrules: []\n"

# Two processes, each reading the pipe only the other writes.
PIPE_DEADLOCK = """
import os, sys
a_r, a_w = os.pipe()
b_r, b_w = os.pipe()
if os.fork() == 0:
    os.close(a_w); os.close(b_r)
    os.read(a_r, 1)
    os._exit(0)
os.close(a_r); os.close(b_w)
print("READY", flush=True)
os.read(b_r, 1)
"""

# A thread pool whose workers wait for work (condition variables), an asyncio server with one idle client
# connected, and a main thread waiting for a line from its parent (the test, alive and idle).
HEALTHY_PY = """
import asyncio, concurrent.futures, socket, sys, threading
pool = concurrent.futures.ThreadPoolExecutor(4)
for f in [pool.submit(lambda: 1) for _ in range(8)]:
    f.result()
async def serve():
    async def handle(r, w):
        await r.read(1)
    srv = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = srv.sockets[0].getsockname()[1]
    client = socket.create_connection(("127.0.0.1", port))
    print("READY", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    client.close()
asyncio.run(serve())
"""


def start_healthy(tmp_path):
    """The healthy workload, under names of its own (sw-healthy-*), so that a metric or an alert names it."""
    for prog in ("bash", "sleep"):
        os.symlink(f"/bin/{prog}", tmp_path / f"sw-healthy-{prog}")
    procs = []
    # bash -i at its prompt on a terminal of its own: a read() of the pty that may last for hours.
    pid, master = pty.fork()
    if pid == 0:
        os.execv(str(tmp_path / "sw-healthy-bash"), ["sw-healthy-bash", "--norc", "--noprofile", "-i"])
    procs.append(pid)
    py = subprocess.Popen([sys.executable, "-c", "open('/proc/self/comm', 'w').write('sw-healthy-py')\n" + HEALTHY_PY],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert py.stdout.readline() == b"READY\n"
    sleeper = subprocess.Popen([tmp_path / "sw-healthy-sleep", "600"])
    return [pid, py.pid, sleeper.pid], (master, py, sleeper)


def stop_healthy(healthy, keep):
    master, py, sleeper = keep
    py.stdin.close()
    py.kill()
    py.wait()
    sleeper.kill()
    sleeper.wait()
    os.kill(healthy[0], 9)
    os.waitpid(healthy[0], 0)
    os.close(master)


def classes_of(d, pids):
    """{(pid, tid): class} of the threads of PIDS, as the daemon's /processes?all=1 says."""
    doc = d.get_json("/processes?all=1")
    return {(t["pid"], t["tid"]): t["class"] for t in doc["threads"] if t["pid"] in pids}


def test_the_defaults_catch_certain_hangs_and_nothing_else(daemon, fixture, tmp_path):
    healthy, keep = start_healthy(tmp_path)
    dl = subprocess.Popen([sys.executable, "-c", PIPE_DEADLOCK], stdout=subprocess.PIPE)
    try:
        assert dl.stdout.readline() == b"READY\n"
        d = daemon(DEFAULTS)
        plain = daemon(NO_RULES.replace("@ARCHIVE@", str(tmp_path / "plain-archive")))
        t0 = time.monotonic()
        abba = fixture("deadlock-abba")
        busy = fixture("busy-loop")
        dstate = fixture("dstate-vfork", "60", ready=False)

        def fired(pid):
            return [s for s in d.snapshots() if s["pid"] == pid]
        # The pipe deadlock: one snapshot of the cycle, by the built-in deadlock rule, within seconds.
        snaps = wait_until(lambda: fired(dl.pid) or [s for s in d.snapshots() if s["rule"] == "deadlock" and
                                                    s["comm"].startswith("python")],
                           timeout=30, interval=0.2, what="the pipe deadlock's snapshot")
        assert snaps[0]["rule"] == "deadlock" and snaps[0]["class"] == "blocked", snaps
        # The mutex ABBA, likewise.
        abba_snaps = wait_until(lambda: fired(abba.pid), timeout=30, interval=0.2, what="the ABBA's snapshot")
        assert [s["rule"] for s in abba_snaps] == ["deadlock"], abba_snaps
        # /processes says what owes each blocked wait.
        why = {t["blocked_because"] for t in d.get_json("/processes")["threads"]
               if t["pid"] in (dl.pid, abba.pid) and t["class"] == "blocked"}
        assert any(w.startswith("a deadlock") for w in why), why
        took = time.monotonic() - t0
        assert took < 30, took
        # D state and the busy loop are classed at once; their rules wait 120 s and 60 s, as documented.
        wait_until(lambda: "blocked" in classes_of(d, {dstate.pid}).values(), timeout=10, interval=0.2,
                   what="the vfork parent blocked")
        wait_until(lambda: "busy-loop" in classes_of(d, {busy.pid}).values(), timeout=10, interval=0.2,
                   what="the busy loop classed")
        assert not fired(dstate.pid) and not fired(busy.pid)
        # The healthy workload: watched all along, never blocked, never a snapshot.
        d.wait_scans(3)
        seen = classes_of(d, set(healthy))
        assert {p for p, _ in seen} == set(healthy), seen
        assert "blocked" not in seen.values() and "busy-loop" not in seen.values(), seen
        assert not [s for s in d.snapshots() if s["pid"] in healthy]
        # The same classes on a daemon with no rule at all (hangs and healthy alike; the busy loop's and the
        # pipe deadlock's are the ones that can only be told the same way from the same evidence).
        watched = set(healthy) | {abba.pid, dstate.pid}
        def differ():
            a, b = classes_of(plain, watched), classes_of(d, watched)
            return {k: (a.get(k), b.get(k)) for k in set(a) | set(b) if a.get(k) != b.get(k)}
        last = {}
        try:
            wait_until(lambda: not last.update(diff=differ()) and not last["diff"], timeout=15, interval=0.5,
                       what="the same classes with and without rules")
        except AssertionError:
            raise AssertionError(f"classes differ (without rules, with): {last['diff']}")
        assert not os.listdir(tmp_path / "plain-archive")
    finally:
        dl.kill()
        dl.wait()
        stop_healthy(healthy, keep)


SOAK = """
archive:
  directory: "@ARCHIVE@"
http:
  socket: "@SOCKET@"
  listen: 127.0.0.1:0
  token_file: {token}
"""


@pytest.mark.skipif(not os.environ.get("STACKWATCH_SOAK_SECONDS"),
                    reason="a soak of minutes: set STACKWATCH_SOAK_SECONDS (e.g. 300) to run it")
def test_a_healthy_workload_raises_nothing_for_minutes(daemon, tmp_path):
    """The defaults and the shipped Prometheus rules, unchanged, evaluated by a real Prometheus scraping the daemon,
    around the healthy workload for STACKWATCH_SOAK_SECONDS: no snapshot of it, no alert on it, pending or firing,
    and its threads never in a problem class."""
    from conftest import Server, free_port, http_json
    from test_prometheus import PROMETHEUS, RULES
    if not os.access(PROMETHEUS, os.X_OK):
        pytest.skip("prometheus is not installed")
    seconds = int(os.environ["STACKWATCH_SOAK_SECONDS"])
    token = tmp_path / "token"
    token.write_text("soak-token\n")
    token.chmod(0o600)
    healthy, keep = start_healthy(tmp_path)
    prom = None
    try:
        d = daemon(SOAK.format(token=token))
        host, port = d.tcp_address()
        (tmp_path / "prometheus.yml").write_text(f"""
global:
  scrape_interval: 5s
  evaluation_interval: 5s
rule_files: ["{RULES}"]
scrape_configs:
  - job_name: stackwatch
    authorization:
      type: Bearer
      credentials_file: {token}
    static_configs:
      - targets: ["{host}:{port}"]
""")
        pport = free_port()
        prom = Server([PROMETHEUS, f"--config.file={tmp_path}/prometheus.yml", f"--storage.tsdb.path={tmp_path}/tsdb",
                       f"--web.listen-address=127.0.0.1:{pport}"], f"http://127.0.0.1:{pport}", "/-/ready",
                      str(tmp_path / "prometheus.log"), "Prometheus")

        def query(q):
            code, doc = http_json(f"{prom.url}/api/v1/query?query={q}")
            return doc["data"]["result"] if code == 200 else []
        wait_until(lambda: any(r["value"][1] == "1" for r in query('up{job="stackwatch"}')), timeout=60,
                   interval=0.5, what="the target up")
        end = time.monotonic() + seconds
        problems = set()
        while time.monotonic() < end:
            seen = classes_of(d, set(healthy))
            problems |= {c for c in seen.values() if c not in ("waiting", "running")}
            time.sleep(5)  # a sampling cadence over minutes, not a synchronization
        assert not problems, problems
        assert not [s for s in d.snapshots() if s["pid"] in healthy]
        ours = 'comm=~"sw-healthy-.*"'
        assert not query(f'stackwatch_problem_threads{{{ours}}}')
        assert not query(f'max_over_time(stackwatch_problem_threads{{{ours}}}[{seconds}s])')
        assert not query(f'ALERTS{{{ours}}}')
        # The daemon's own alerts (down, stalled, reload, hooks) stay quiet too.
        assert not [a for a in query("ALERTS") if "comm" not in a["metric"]], query("ALERTS")
    finally:
        if prom:
            prom.stop()
        stop_healthy(healthy, keep)


GIL_CONTENTION = """
import threading
def spin():
    n = 0
    while True:
        n += 1
for _ in range(3):
    threading.Thread(target=spin, daemon=True).start()
print("ready", flush=True)
threading.Event().wait()
"""

PYFIX = os.path.join(os.environ.get("STACKWATCH_SRCDIR") or os.path.join(os.path.dirname(__file__), "..", ".."),
                     "tests", "fixtures", "python")


def test_python_lock_hangs_by_default(daemon, tmp_path):
    """A Python RLock ABBA is a deadlock the built-in rule snapshots, read from the interpreter; a thread waiting
    for the GIL that a blocked C call keeps is blocked, and says why (though it wakes every switch interval to ask
    for it); a Lock ABBA, whose locks name no owner, is not called a deadlock, but its two waiters are blocked on
    a lock, not idle."""
    procs = [subprocess.Popen(["/usr/bin/python3", os.path.join(PYFIX, f), *a], stdout=subprocess.PIPE)
             for f, a in (("abba.py", ["rlock"]), ("gil_held.py", []), ("abba.py", ["lock"]))]
    # Healthy contention: three threads of pure Python taking turns at the GIL, each waiting for it in turn.
    procs.append(subprocess.Popen(["/usr/bin/python3", "-c", GIL_CONTENTION], stdout=subprocess.PIPE))
    try:
        for p in procs:
            assert p.stdout.readline() == b"ready\n"
        rlock, gil, lock, contention = (p.pid for p in procs)
        d = daemon(DEFAULTS)

        def explain(pid):
            """On a failure: what the daemon says of PID's threads, and its log lines about PID."""
            print([t for t in d.get_json("/processes?all=1")["threads"] if t["pid"] == pid])
            print("\n".join(ln for ln in d.log_text().splitlines() if str(pid) in ln and "scan" not in ln))

        try:
            snaps = wait_until(lambda: [s for s in d.snapshots() if s["pid"] == rlock], timeout=40, interval=0.2,
                               what="the RLock ABBA's snapshot")
        except AssertionError:
            explain(rlock)
            raise
        assert [s["rule"] for s in snaps] == ["deadlock"], snaps

        def why(pid):
            return {t["tid"]: t["blocked_because"] for t in d.get_json("/processes")["threads"]
                    if t["pid"] == pid and t["class"] == "blocked"}
        assert any(w.startswith("a deadlock") for w in why(rlock).values()), why(rlock)
        try:
            gil_why = wait_until(lambda: why(gil), timeout=40, interval=0.2, what="the GIL waiter blocked")
        except AssertionError:
            explain(gil)
            raise
        assert list(gil_why.values()) == ["the GIL, which another thread keeps"], gil_why
        try:
            lock_why = wait_until(lambda: len(why(lock)) == 2 and why(lock), timeout=40, interval=0.2,
                                  what="the Lock ABBA's two waiters blocked")
        except AssertionError:
            explain(lock)
            raise
        assert set(lock_why.values()) == {"a threading.Lock that is held (it records no holder)"}, lock_why
        d.wait_scans(3)
        assert not why(contention), why(contention)
        assert not [s for s in d.snapshots() if s["pid"] in (gil, lock, contention)]
    finally:
        for p in procs:
            p.kill()
            p.wait()


def test_a_deadlock_among_many_parked_processes_is_caught(daemon):
    """150 processes parked in read() on pipes whose writer is alive (each a wait the daemon must judge, 4 a poll,
    each judged again after 5 s), then a Python RLock ABBA: its deadlock is judged in its turn and snapshotted by
    the built-in rule, not starved by the walks of the others (it never was in 60 s when the first processes in the
    table took every walk)."""
    readers = [subprocess.Popen(["cat"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL) for _ in range(150)]
    abba = None
    try:
        d = daemon(DEFAULTS)
        d.wait_scans(4)
        abba = subprocess.Popen(["/usr/bin/python3", os.path.join(PYFIX, "abba.py"), "rlock"], stdout=subprocess.PIPE)
        assert abba.stdout.readline() == b"ready\n"
        # Parked 2 s, judged at once (never walked before), then the deadlock rule's 10 s: some 15 s here, 32 s in
        # a CI run, whose auto poll interval the 150 processes' scans stretch. Starved, it never came in 60 s.
        snaps = wait_until(lambda: [s for s in d.snapshots() if s["pid"] == abba.pid], timeout=60, interval=0.2,
                           what="the RLock ABBA's snapshot among 150 parked readers")
        assert [s["rule"] for s in snaps] == ["deadlock"], snaps
    finally:
        for p in readers + ([abba] if abba else []):
            p.kill()
            p.wait()


LOCKF_HOLDER = """
import fcntl, sys
f = open(sys.argv[1], "w")
fcntl.lockf(f, fcntl.LOCK_EX)
print("held", flush=True)
sys.stdin.read()
"""
LOCKF_WAITER = """
import fcntl, sys
f = open(sys.argv[1], "w")
print("asking", flush=True)
fcntl.lockf(f, fcntl.LOCK_EX)
"""


def test_file_lock_waits_are_owed_by_default(daemon, tmp_path):
    """A file lock another process holds is owed as a mutex is, however the holder spends its time (here asleep, or
    reading an idle pipe): a flock(1) waiting behind another flock(1), and a python3 waiting in lockf() behind
    another one, are blocked within 3 s of asking, with the holder named; two flock(1)s that each hold one file and
    wait for the other's (through the shell each runs) are a deadlock the built-in rule snapshots."""
    d = daemon(DEFAULTS)
    lk, lk2, a, b = (str(tmp_path / n) for n in ("job.lock", "db.lock", "a.lock", "b.lock"))
    procs = [subprocess.Popen(["flock", lk, "sleep", "600"]),
             subprocess.Popen([sys.executable, "-c", LOCKF_HOLDER, lk2], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE)]
    try:
        wait_until(lambda: locked(lk), what="flock(1) holding its lock")
        assert procs[1].stdout.readline() == b"held\n"
        d.wait_scans(2)  # the daemon past its start: the waiters are new processes to a running daemon
        flock_waiter = subprocess.Popen(["flock", lk, "true"])
        lockf_waiter = subprocess.Popen([sys.executable, "-c", LOCKF_WAITER, lk2], stdout=subprocess.PIPE)
        procs += [flock_waiter, lockf_waiter]
        assert lockf_waiter.stdout.readline() == b"asking\n"
        t0 = time.monotonic()

        def why(pid):
            return [t["blocked_because"] for t in d.get_json("/processes")["threads"]
                    if t["pid"] == pid and t["class"] == "blocked"]
        for w in (flock_waiter, lockf_waiter):
            assert wait_until(lambda: why(w.pid), timeout=10, interval=0.1,
                              what=f"the waiter {w.pid} blocked") == ["a file lock another process holds"]
        took = time.monotonic() - t0
        # Seen parked at the first poll after it asked (1 s by default), owed once parked 2 s, at the first poll
        # after that: 2 s and two polls at most (2.6-3.0 s here; 4.0 s under ASan on /proc).
        scan = d.get_json("/healthz")["scan"]
        assert took < 2 + 2 * scan["poll_interval_ms"] / 1000 + 0.5, (took, scan)
        assert not why(procs[0].pid) and not why(procs[1].pid), "the holders are not blocked"
        # Neither is snapshotted yet: the built-in blocked rule waits 120 s.
        assert not [s for s in d.snapshots() if s["pid"] in (flock_waiter.pid, lockf_waiter.pid)]
        # The lock cycle: a holds a.lock and waits for b.lock, b the other way round.
        cyc = [subprocess.Popen(["flock", x, "sh", "-c", f"sleep 0.5; exec flock {y} true"])
               for x, y in ((a, b), (b, a))]
        procs += cyc
        snaps = wait_until(lambda: [s for s in d.snapshots() if s["rule"] == "deadlock" and
                                    s["pid"] in {p.pid for p in cyc} | set(descendants(cyc))],
                           timeout=40, interval=0.2, what="the flock cycle's snapshot")
        assert snaps[0]["class"] == "blocked", snaps
        assert any(w.startswith("a deadlock") for p in descendants(cyc) for w in why(p)), \
            {p: why(p) for p in descendants(cyc)}
    finally:
        for p in procs:
            for c in descendants([p]):
                os.kill(c, 9)
            p.kill()
            p.wait()


def locked(path):
    """Whether /proc/locks has a lock on PATH's inode."""
    try:
        ino = os.stat(path).st_ino
    except FileNotFoundError:
        return False
    with open("/proc/locks") as f:
        return any(line.split()[5].endswith(f":{ino}") for line in f if len(line.split()) > 5)


def descendants(procs):
    """The pids of the children and grandchildren of PROCS (Popen objects)."""
    out, todo = [], [p.pid for p in procs]
    while todo:
        pid = todo.pop()
        try:
            with open(f"/proc/{pid}/task/{pid}/children") as f:
                kids = [int(c) for c in f.read().split()]
        except FileNotFoundError:
            kids = []
        out += kids
        todo += kids
    return out
