"""Java frames (HotSpot/OpenJDK): stackctl dump of a JVM asks the JVM for its thread dump through the attach
mechanism and merges its Java frames, monitors, j.u.c locks and Java-level deadlocks into the dump, checked
against the JVM's own `jcmd PID Thread.print -l` taken right after ours. tests/fixtures/java/Hung.java is the
program: two threads in a monitor deadlock (sync-a, sync-b), one holding a ReentrantLock (lock-holder) that
another waits for (lock-waiter). The JVM must never be left stopped, a JVM started with
-XX:+DisableAttachMechanism is said so and not sent a SIGQUIT (which would make it print a thread dump on its own
stdout), and --no-java leaves the JVM alone."""
import collections
import json
import os
import re
import select
import shutil
import signal
import subprocess
import tempfile
import time

import pytest

from conftest import STACKCTL, SRCDIR, assert_threads_untouched, dump_json, stackctl, thread_names, thread_states, wait_until
from test_journal import journald_daemon  # noqa: F401  (a fixture)

JAVA_SRC = os.path.join(SRCDIR, "tests", "fixtures", "java", "Hung.java")
JAVA = shutil.which("java")
JAVAC = shutil.which("javac")
JCMD = shutil.which("jcmd")

pytestmark = pytest.mark.skipif(not (JAVA and JAVAC),
                                reason="no JDK: java and javac are needed (apt-get install openjdk-17-jdk-headless)")
needs_jcmd = pytest.mark.skipif(not JCMD, reason="jcmd (the JDK's own thread dump, the oracle) is not installed")

# Hung deadlock's threads, by their Java names (also their comm: the JVM names the OS thread after the Java
# thread, cut to 15 bytes).
OURS = ("sync-a", "sync-b", "lock-holder", "lock-waiter")
NONFAIR = "java.util.concurrent.locks.ReentrantLock$NonfairSync"


def marker_line(name):
    """The line of Hung.java that carries the comment "// LINE:NAME" (see the list at the top of Hung.java)."""
    with open(JAVA_SRC, encoding="utf-8") as f:
        hits = [n for n, text in enumerate(f, 1) if text.rstrip().endswith(f"// LINE:{name}")]
    assert len(hits) == 1, f"{len(hits)} lines of {JAVA_SRC} marked LINE:{name}"
    return hits[0]


@pytest.fixture(scope="module")
def hung_classes(tmp_path_factory):
    """Hung.java compiled once for the module, with debug information (-g: line numbers, as any build has)."""
    out = tmp_path_factory.mktemp("java-classes")
    r = subprocess.run([JAVAC, "-g", "-d", str(out), JAVA_SRC], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"javac: {r.stderr}"
    return str(out)


class Jvm:
    """`java -cp CLASSES -Xss512k [ARGS] Hung MODE`, started in its own working directory (where an attacher puts
    its .attach_pid file), up to its "ready" line; what it prints later is kept (a thread dump it printed on a
    SIGQUIT would show there)."""

    def __init__(self, classes, mode, tmp, jvm_args=(), wrapper=()):
        self.cwd = tmp / f"jvm-{mode}-{len(os.listdir(tmp))}"
        self.cwd.mkdir()
        self.err = open(self.cwd / "stderr", "wb")
        self.proc = subprocess.Popen([*wrapper, JAVA, "-cp", classes, "-Xss512k", *jvm_args, "Hung", mode],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=self.err,
                                     cwd=self.cwd, env=dict(os.environ, FIXTURE_LIFETIME="300"))
        self.pid = self.proc.pid
        self.out = b""
        self.wait_ready(timeout=60)
        # Behind a wrapper (unshare --fork), the JVM is its child.
        while wrapper and not os.readlink(f"/proc/{self.pid}/exe").endswith("/java"):
            with open(f"/proc/{self.pid}/task/{self.pid}/children") as f:
                self.pid = int(f.read().split()[0])

    def _read(self, timeout):
        """What the JVM wrote on stdout within TIMEOUT seconds (less when it wrote something); b"" on EOF."""
        if not select.select([self.proc.stdout], [], [], max(timeout, 0))[0]:
            return None
        return os.read(self.proc.stdout.fileno(), 65536)

    def wait_ready(self, timeout):
        deadline = time.monotonic() + timeout
        while b"\n" not in self.out:
            chunk = self._read(deadline - time.monotonic())
            if chunk is None:
                raise AssertionError(f"the JVM printed no 'ready' within {timeout}s: {self.stderr()}")
            if not chunk:
                raise AssertionError(f"the JVM exited ({self.proc.wait()}) before 'ready': {self.stderr()}")
            self.out += chunk
        line, self.out = self.out.split(b"\n", 1)
        assert line == b"ready", line

    def output(self, within=0.0, stop_at=None):
        """Everything printed after "ready", reading for WITHIN seconds at most (without blocking when 0), or until
        STOP_AT shows up."""
        deadline = time.monotonic() + within
        while stop_at is None or stop_at not in self.out:
            chunk = self._read(deadline - time.monotonic())
            if not chunk:
                break
            self.out += chunk
        return self.out.decode(errors="replace")

    def stderr(self):
        self.err.flush()
        with open(self.cwd / "stderr", "rb") as f:
            return f.read().decode(errors="replace")[-3000:]

    def assert_untouched(self):
        """Running, and no thread of the JVM left stopped or traced."""
        assert self.proc.poll() is None, f"the JVM exited ({self.proc.returncode}): {self.stderr()}"
        assert_threads_untouched(self.pid, "JVM")

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=30)
        self.proc.stdout.close()
        self.err.close()


@pytest.fixture
def jvm(hung_classes, tmp_path):
    """Start Hung JVMs (each test its own: the first attach to a JVM is part of what is tested); all are killed at
    teardown."""
    started = []

    def start(mode="deadlock", *jvm_args, wrapper=()):
        j = Jvm(hung_classes, mode, tmp_path, jvm_args, wrapper)
        started.append(j)
        return j
    yield start
    for j in started:
        j.kill()


def dump(j, *args, check_rc=0):
    """stackctl dump --json of the JVM: the snapshot; the JVM must be left running, nothing stopped or traced."""
    [doc] = dump_json(*args, j.pid, check_rc=check_rc, timeout=120)
    j.assert_untouched()
    return doc


def java_frames(thread):
    """A dumped thread's Java frames, innermost first: (function, file, line) with a file that has no module prefix
    ("java.base@17/Thread.java": "Thread.java"), None for no file or no line (a native method, a hidden class)."""
    out = []
    for f in thread["frames"]:
        if f.get("kind") != "java":
            continue
        file = f.get("file")
        file = file.rsplit("/", 1)[-1] if file else None
        if file in ("Native Method", "Unknown Source"):
            file = None
        line = f.get("line")
        out.append((f["function"], file, line if isinstance(line, int) and line > 0 else None))
    return out


def native_frames(thread):
    return [f for f in thread["frames"] if f.get("kind", "native") == "native"]


def by_name(doc, pid):
    """{Java thread name: thread} of a snapshot, each of ours checked against the OS thread's comm."""
    threads = {t["java"]["name"]: t for t in doc["threads"] if t.get("java")}
    comms = thread_names(pid)
    for name in OURS:
        assert name in threads, f"no Java thread {name!r} in the dump: {sorted(threads)}"
        assert comms.get(threads[name]["tid"]) == name[:15], (name, threads[name]["tid"], comms)
    return threads


def locks_of(thread, kind):
    return [lk for lk in thread["java"].get("locks", []) if lk["kind"] == kind]


def addr(text):
    return int(text, 16)


# -- jcmd PID Thread.print -l, the oracle --

JThread = collections.namedtuple("JThread", "name number nid state frames locks")
ThreadDump = collections.namedtuple("ThreadDump", "vm threads deadlocks")

HEADER = re.compile(r'"(?P<name>.*)" #(?P<number>\d+) (?:\[\d+\] )?.*\bnid=(?P<nid>0x[0-9a-f]+|\d+)\b')
LOCK = re.compile(r"\t- (?P<kind>locked|waiting to lock|waiting on|parking to wait for|waiting to re-lock in wait\(\)"
                  r"|eliminated) +<(?P<addr>0x[0-9a-f]+)> \(a (?P<cls>.+)\)$")
OWNED = re.compile(r"\t- <(?P<addr>0x[0-9a-f]+)> \(a (?P<cls>.+)\)$")


def parse_location(loc):
    """What is between the parentheses of an "at" line -> (file, line): "Hung.java:48",
    "java.base@17.0.15/Thread.java:840" (a named module), "java.base@17.0.15/Native Method", "Unknown Source"."""
    loc = loc.rsplit("/", 1)[-1]
    if loc in ("Native Method", "Unknown Source", "Redefined"):
        return None, None
    m = re.fullmatch(r"(.+):(\d+)", loc)
    return (m.group(1), int(m.group(2))) if m else (loc, None)


def parse_thread_print(text):
    """`jcmd PID Thread.print -l` -> ThreadDump(vm banner, {OS tid: JThread}, number of Java-level deadlocks).

    A Java thread's block starts with '"name" #N [daemon] prio=… tid=0x… nid=0x<hex> …' (JDK 19 and later: '#N
    [tid]' and a decimal nid), then "   java.lang.Thread.State: STATE", then per frame "\\tat class.method(location)"
    followed by that frame's "\\t- locked <0x…> (a class)" (also "waiting to lock", "waiting on", "parking to wait
    for"), then "   Locked ownable synchronizers:" and "\\t- <0x…> (a class)" per j.u.c lock the thread owns (kind
    "owns" here), or "\\t- None". The VM's own threads ('"VM Thread" os_prio=0 …', no #N) have no Java frames and
    are left out; so is the deadlock section at the end ("Found one Java-level deadlock:", the threads again)."""
    m = re.search(r"^Full thread dump (.*):$", text, re.M)
    assert m, f"no 'Full thread dump' header in:\n{text[:2000]}"
    vm = m.group(1)
    threads, cur, owned = {}, None, False
    body, _, deadlock_part = text.partition("\nFound one Java-level deadlock:")
    for line in body.splitlines():
        h = HEADER.match(line)
        if h:
            nid = h.group("nid")
            cur = JThread(h.group("name"), int(h.group("number")), int(nid, 16 if nid.startswith("0x") else 10),
                          None, [], [])
            threads[cur.nid] = cur
            owned = False
            continue
        if line.startswith('"') or line.startswith("JNI global refs"):
            cur = None
            continue
        if cur is None:
            continue
        if line.startswith("   java.lang.Thread.State: "):
            threads[cur.nid] = cur = cur._replace(state=line[len("   java.lang.Thread.State: "):])
        elif line.startswith("\tat "):
            fm = re.fullmatch(r"\tat (\S+)\((.*)\)", line)
            assert fm, f"not a frame line: {line!r}"
            cur.frames.append((fm.group(1), *parse_location(fm.group(2))))
        elif line.strip() == "Locked ownable synchronizers:":
            owned = True
        elif owned and OWNED.match(line):
            o = OWNED.match(line)
            cur.locks.append(("owns", int(o.group("addr"), 16), o.group("cls")))
        elif LOCK.match(line):
            lk = LOCK.match(line)
            cur.locks.append((lk.group("kind"), int(lk.group("addr"), 16), lk.group("cls")))
    deadlocks = 0
    if deadlock_part:
        total = re.search(r"^Found (\d+) deadlocks?\.$", deadlock_part, re.M)
        deadlocks = int(total.group(1)) if total else 1
    return ThreadDump(vm, threads, deadlocks)


def jcmd_thread_print(pid):
    r = subprocess.run([JCMD, str(pid), "Thread.print", "-l"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"jcmd {pid} Thread.print -l: rc {r.returncode}: {r.stdout[-2000:]} {r.stderr}"
    return r.stdout


# -- wait chain edges, read whichever way an edge names its two ends --

def edge_from(e):
    """(pid, tid) waiting: "from": {"pid", "tid", "comm"} as every edge of lib/render/snapshot-json.c has it, or
    flat "pid"/"tid" keys."""
    if "from" in e:
        return (e["from"] or {}).get("pid"), (e["from"] or {}).get("tid")
    return e.get("pid"), e.get("tid")


def edge_to(e):
    """(pid, tid) waited for: "to" (null when nobody), or flat "peer_pid"/"peer_tid" keys."""
    if "to" in e:
        return (e["to"] or {}).get("pid"), (e["to"] or {}).get("tid")
    return e.get("peer_pid"), e.get("peer_tid")


def lock_cycle_tids(chain):
    lc = chain.get("lock_cycle")
    assert lc, f"no lock_cycle in {chain}"
    return lc["pid"], set(lc.get("threads", lc.get("tids")) or ())


# -- the tests --

def test_deadlock_jvm_frames_states_and_lock_owners(jvm):
    """sync-a and sync-b: Java frames in their named methods on the lines that take the second monitor, BLOCKED,
    each waiting to lock the monitor the other holds (its owner named by TID); lock-waiter parks for the
    ReentrantLock's NonfairSync that lock-holder owns."""
    j = jvm("deadlock")
    doc = dump(j)
    assert "error" not in doc["java"], doc["java"]
    assert "OpenJDK" in doc["java"]["vm"] or "HotSpot" in doc["java"]["vm"], doc["java"]
    threads = by_name(doc, j.pid)
    a, b = threads["sync-a"], threads["sync-b"]
    holder, waiter = threads["lock-holder"], threads["lock-waiter"]

    # The Java frames, innermost first, at the marked lines; the native frames are still there.
    assert java_frames(a)[0] == ("Hung.takeAthenB", "Hung.java", marker_line("takeAthenB-inner")), java_frames(a)
    assert java_frames(b)[0] == ("Hung.takeBthenA", "Hung.java", marker_line("takeBthenA-inner")), java_frames(b)
    assert ("Hung.holdLockAndSleep", "Hung.java", marker_line("holdLockAndSleep-sleep")) in java_frames(holder)
    assert ("Hung.waitForLock", "Hung.java", marker_line("waitForLock-lock")) in java_frames(waiter)
    for name, t in threads.items():
        if name in OURS:
            assert native_frames(t), f"{name}: no native frames left: {t['frames']}"

    # The monitor deadlock, each side naming the other as the owner of what it waits for.
    for me, other in ((a, b), (b, a)):
        name = me["java"]["name"]
        assert me["java"]["state"].startswith("BLOCKED"), me["java"]
        [want] = locks_of(me, "waiting to lock")
        [held] = locks_of(me, "locked")
        assert want["class"] == held["class"] == "java.lang.Object", me["java"]["locks"]
        assert want.get("owner") == other["tid"], f"{name} waits for {want}, held by {other['tid']}"
        assert addr(want["address"]) == addr(locks_of(other, "locked")[0]["address"]), (me["java"], other["java"])
        assert addr(want["address"]) != addr(held["address"])

    # The ReentrantLock: parked on its sync object, which lock-holder owns.
    assert waiter["java"]["state"].startswith("WAITING"), waiter["java"]
    assert holder["java"]["state"].startswith("TIMED_WAITING"), holder["java"]
    [park] = locks_of(waiter, "parking to wait for")
    assert park["class"] == NONFAIR, park
    assert park.get("owner") == holder["tid"], f"lock-waiter parks on {park}; lock-holder is {holder['tid']}"
    [owns] = locks_of(holder, "owns")
    assert addr(owns["address"]) == addr(park["address"]) and owns["class"] == NONFAIR, (owns, park)
    assert not locks_of(waiter, "owns") and not locks_of(a, "owns") and not locks_of(b, "owns")


@needs_jcmd
def test_java_frames_and_locks_equal_jcmd(jvm):
    """Right after our dump, the JDK's own jcmd Thread.print -l: every Java thread in both has the same name,
    state, Java frames (function, file, line, in order) and lock addresses; the VM banner is the dump's; jcmd finds
    the Java-level deadlock and so did we."""
    j = jvm("deadlock")
    doc = dump(j)
    text = jcmd_thread_print(j.pid)
    oracle = parse_thread_print(text)
    assert "Found one Java-level deadlock" in text
    assert oracle.deadlocks >= 1 and doc["java"]["deadlocks"] >= 1, (oracle.deadlocks, doc["java"])
    assert doc["java"]["vm"] == oracle.vm, (doc["java"]["vm"], oracle.vm)

    ours = {t["tid"]: t for t in doc["threads"]}
    compared = set()
    for nid, jt in oracle.threads.items():
        t = ours.get(nid)
        if t is None or not t.get("java"):
            continue  # a thread born after our dump (jcmd's own Attach Listener on a first attach)
        assert t["java"]["name"] == jt.name, (nid, t["java"], jt)
        assert t["java"]["state"] == jt.state, (jt.name, t["java"]["state"], jt.state)
        assert java_frames(t) == jt.frames, f"{jt.name}:\nours   {java_frames(t)}\noracle {jt.frames}"
        got = sorted(addr(lk["address"]) for lk in t["java"].get("locks", []))
        assert got == sorted(a for _, a, _ in jt.locks), \
            f"{jt.name}:\nours   {t['java'].get('locks')}\noracle {jt.locks}"
        if jt.name in OURS:
            got = sorted((lk["kind"], addr(lk["address"]), lk["class"]) for lk in t["java"]["locks"])
            assert got == sorted(jt.locks), f"{jt.name}:\nours   {got}\noracle {sorted(jt.locks)}"
        compared.add(jt.name)
    assert set(OURS) | {"main"} <= compared, compared

    # The deadlock: the threads our wait chain puts in its lock cycle are the ones jcmd's report names.
    [chained] = dump_json("--peers", "1", j.pid, timeout=120)
    j.assert_untouched()
    report = text.partition("\nFound one Java-level deadlock:")[2].partition("\nJava stack information")[0]
    named = set(re.findall(r'^"(.+)":$', report, re.M))
    assert named == {"sync-a", "sync-b"}, report
    tids = {name: tid for tid, name in thread_names(j.pid).items()}
    assert lock_cycle_tids(chained["wait_chain"]) == (j.pid, {tids[n] for n in named}), chained["wait_chain"]


def test_wait_chain_has_the_monitor_cycle_and_the_lock_edge(jvm):
    """--peers 1: monitor edges sync-a → sync-b and sync-b → sync-a, a deadlock whose lock cycle is those two
    threads, and an edge from lock-waiter to lock-holder."""
    j = jvm("deadlock")
    doc = dump(j, "--peers", "1")
    threads = by_name(doc, j.pid)
    a, b = threads["sync-a"]["tid"], threads["sync-b"]["tid"]
    holder, waiter = threads["lock-holder"]["tid"], threads["lock-waiter"]["tid"]
    chain = doc["wait_chain"]
    edges = {}
    for e in chain["edges"]:
        edges.setdefault(edge_from(e), []).append(e)

    for me, other in ((a, b), (b, a)):
        mine = [e for e in edges.get((j.pid, me), []) if e["kind"] == "monitor"]
        assert len(mine) == 1, f"monitor edges from {me}: {edges.get((j.pid, me))}"
        assert edge_to(mine[0]) == (j.pid, other), mine[0]
        assert isinstance(mine[0].get("object"), str) and mine[0]["object"], mine[0]
        if mine[0].get("address"):
            [want] = locks_of(threads["sync-a" if me == a else "sync-b"], "waiting to lock")
            assert addr(mine[0]["address"]) == addr(want["address"]), (mine[0], want)
    assert chain["deadlock"] is True
    assert lock_cycle_tids(chain) == (j.pid, {a, b}), chain.get("lock_cycle")

    assert any(edge_to(e) == (j.pid, holder) for e in edges.get((j.pid, waiter), [])), \
        f"no edge lock-waiter → lock-holder: {edges.get((j.pid, waiter))}"
    assert doc["java"]["deadlocks"] >= 1


def test_text_names_java_methods_lines_and_the_deadlock(jvm):
    """The text dump: each of our Java methods with Hung.java:LINE, and a DEADLOCK line."""
    j = jvm("deadlock")
    text = stackctl("dump", j.pid, check_rc=0, timeout=120).stdout.decode(errors="replace")
    j.assert_untouched()
    lines = text.splitlines()
    for function, marker in (("Hung.takeAthenB", "takeAthenB-inner"), ("Hung.takeBthenA", "takeBthenA-inner"),
                             ("Hung.holdLockAndSleep", "holdLockAndSleep-sleep"),
                             ("Hung.waitForLock", "waitForLock-lock")):
        where = f"Hung.java:{marker_line(marker)}"
        assert any(function in ln and where in ln for ln in lines), f"no line with {function} and {where}:\n{text}"
    assert any("DEADLOCK" in ln for ln in lines), f"no DEADLOCK line:\n{text}"
    # Folded, for a flame graph: the Java methods by function and file, under their threads.
    folded = stackctl("dump", "--folded", j.pid, check_rc=0, timeout=120).stdout.decode(errors="replace")
    assert any(ln.startswith("sync-a;") and ";Hung.takeAthenB_(Hung.java);" in ln for ln in folded.splitlines()), folded


def test_healthy_jvm_has_java_frames_and_no_deadlock(jvm):
    """A negative control: a JVM whose main thread only sleeps has its Java frames, no deadlock, no error."""
    j = jvm("plain")
    doc = dump(j)
    assert "error" not in doc["java"] and doc["java"]["deadlocks"] == 0, doc["java"]
    [main] = [t for t in doc["threads"] if (t.get("java") or {}).get("name") == "main"]
    # Outermost: Hung.main, in Thread.sleep (a native method, or more frames below it in later JDKs).
    assert java_frames(main)[-1] == ("Hung.main", "Hung.java", marker_line("main-sleep")), java_frames(main)
    assert java_frames(main)[0][0].startswith("java.lang.Thread.sleep"), java_frames(main)
    text = stackctl("dump", j.pid, check_rc=0, timeout=120).stdout.decode(errors="replace")
    j.assert_untouched()
    assert f"Hung.java:{marker_line('main-sleep')}" in text and "DEADLOCK" not in text, text


@needs_jcmd
def test_no_java_leaves_the_jvm_alone(jvm):
    """--no-java: native frames only, no Java keys; the JVM was not attached to (no Attach Listener thread, no
    attach socket) and still answers jcmd afterwards."""
    j = jvm("deadlock")
    doc = dump(j, "--no-java")
    assert "java" not in doc
    for t in doc["threads"]:
        assert "java" not in t, t
        assert not [f for f in t["frames"] if f.get("kind") == "java"], t["frames"]
    assert sum(len(native_frames(t)) for t in doc["threads"]) > 0
    ours = [t for t in doc["threads"] if t["comm"] in OURS]
    assert sorted(t["comm"] for t in ours) == sorted(OURS) and all(native_frames(t) for t in ours), ours
    assert "Attach Listener" not in thread_names(j.pid).values()
    assert not os.path.exists(f"/tmp/.java_pid{j.pid}")
    text = jcmd_thread_print(j.pid)
    assert '"sync-a" #' in text and "Hung.takeAthenB" in text and "Found one Java-level deadlock" in text
    j.assert_untouched()


@pytest.mark.parametrize("where", ["command line", "flags file", "command line, no performance data"])
def test_attach_disabled_is_said_and_no_sigquit_sent(jvm, tmp_path, where):
    """-XX:+DisableAttachMechanism, on the command line or in a flags file (which only the JVM's performance data
    tells): the dump says why it has no Java frames, keeps the native ones, and the JVM neither printed a thread
    dump (what a SIGQUIT would make it do) nor died; no .attach_pid file is left."""
    if where == "flags file":
        flags = tmp_path / "jvm.flags"
        flags.write_text("+DisableAttachMechanism\n")
        j = jvm("plain", f"-XX:Flags={flags}")
    elif where == "command line":
        j = jvm("plain", "-XX:+DisableAttachMechanism")
    else:
        # Without performance data, the command line decides.
        j = jvm("plain", "-XX:-UsePerfData", "-XX:+DisableAttachMechanism")
    r = stackctl("dump", "--json", j.pid, timeout=120)
    # Whether a JVM that refuses to be attached to makes the dump a partial one (5) is the feature's choice.
    assert r.returncode in (0, 5), f"rc {r.returncode}: {r.stderr.decode(errors='replace')}"
    [doc] = [json.loads(ln) for ln in r.stdout.decode().splitlines() if ln.strip()]
    assert "DisableAttachMechanism" in doc["java"].get("error", ""), doc.get("java")
    for t in doc["threads"]:
        assert not [f for f in t["frames"] if f.get("kind") == "java"], t["frames"]
    assert sum(len(native_frames(t)) for t in doc["threads"]) > 0
    # The text dump says it too, in words, above the native stacks.
    text = stackctl("dump", j.pid, timeout=120).stdout.decode(errors="replace")
    assert re.search(r"^.*no Java frames: .*DisableAttachMechanism", text, re.M), text[:3000]
    # A SIGQUIT's thread dump would be written by the JVM's Signal Dispatcher within a few ms: give it a second.
    out = j.output(within=1.0, stop_at=b"Full thread dump")
    assert "Full thread dump" not in out, out[:2000]
    j.assert_untouched()
    assert not os.path.exists(j.cwd / f".attach_pid{j.pid}") and not os.path.exists(f"/tmp/.attach_pid{j.pid}")


def test_jvm_is_never_left_stopped_and_pauses_briefly(jvm):
    """Two dumps of one JVM (the first attach, which starts the JVM's attach listener, then one through its
    socket): after each, no thread stopped or traced, the JVM's pause measured and under 2 s, no .attach_pid file
    left behind, nothing printed on the JVM's stdout."""
    j = jvm("deadlock")
    for attempt in ("first attach", "second attach"):
        doc = dump(j)
        for tid, state in thread_states(j.pid).items():
            assert state not in ("t", "T"), f"{attempt}: thread {tid} left in state {state}"
        pause = doc["java"]["pause_us"]
        assert isinstance(pause, int) and 0 < pause < 2_000_000, f"{attempt}: pause_us {pause}"
        # Counted with the capture's pauses (what the daemon's metrics and firings report).
        assert doc["capture"]["max_pause_us"] >= pause, (doc["capture"]["max_pause_us"], pause)
        assert not os.path.exists(j.cwd / f".attach_pid{j.pid}") and not os.path.exists(f"/tmp/.attach_pid{j.pid}")
        by_name(doc, j.pid)
    assert j.output() == "", j.output()


def test_daemon_snapshot_names_the_java_deadlock_in_the_journal(jvm, journald_daemon):  # noqa: F811
    """The daemon's snapshot of the deadlocked JVM, fired by a rule on the process (whichever of its threads
    fires it): the journal record names the deadlock's threads and the Java methods they are stuck in, with file
    and line, as the JVM's own dump has them; the archived snapshot holds the Java frames and the lock cycle."""
    from test_journal import FIRED, journal
    j = jvm("deadlock")
    d, jdir = journald_daemon("""
poll_interval: 200ms
archive:
  directory: "@ARCHIVE@"
rules:
  - name: java-stuck
    class: [waiting, blocked]
    comm: java
    for: 1s
    peers: 1
    cooldown: 1h
    actions: [snapshot, log]
""")
    recs = wait_until(lambda: journal(jdir, f"MESSAGE_ID={FIRED}", f"STACKWATCH_PID={j.pid}"), timeout=60,
                      interval=0.2, what="the firing's record in the journal")
    tids = {name: tid for tid, name in thread_names(j.pid).items()}
    first = recs[0]["MESSAGE"].splitlines()[0]
    for name, method, marker in (("sync-a", "takeAthenB", "takeAthenB-inner"),
                                 ("sync-b", "takeBthenA", "takeBthenA-inner")):
        place = f"thread {tids[name]} in Hung.{method} (Hung.java:{marker_line(marker)})"
        assert place in first or (recs[0]["STACKWATCH_TID"] == str(tids[name]) and
                                  f"in Hung.{method} (Hung.java:{marker_line(marker)})" in first), first
    assert "deadlock with" in first, first
    snaps = wait_until(lambda: [s for s in d.snapshots() if s["pid"] == j.pid], timeout=30, interval=0.2,
                       what="the snapshot in the archive")
    doc = json.loads(stackctl("--archive", d.archive, "show", "--json", snaps[0]["id"]).stdout)
    doc = doc[0] if isinstance(doc, list) else doc
    assert lock_cycle_tids(doc["wait_chain"]) == (j.pid, {tids["sync-a"], tids["sync-b"]}), doc["wait_chain"]
    a = by_name(doc, j.pid)["sync-a"]
    assert ("Hung.takeAthenB", "Hung.java", marker_line("takeAthenB-inner")) in java_frames(a), a
    # The problem: both sides of the monitor deadlock, by their Java methods, whichever thread fired.
    assert "Hung.takeAthenB" in doc["proto_signature"] and "Hung.takeBthenA" in doc["proto_signature"], doc
    assert recs[0]["STACKWATCH_SIGNATURE"] == doc["signature"]
    j.assert_untouched()


def test_a_jvm_that_does_not_answer_keeps_its_native_stacks(jvm):
    """A JVM that cannot answer (stopped here; in life, one that never reaches its safepoint): the dump waits for
    it no longer than its budget, says the JVM did not answer, and keeps the native stacks."""
    j = jvm("deadlock")
    dump(j)                             # its attach listener is up: the request gets through, the answer never
    os.kill(j.pid, signal.SIGSTOP)
    try:
        t0 = time.monotonic()
        [doc] = dump_json("--time-budget", "1500", j.pid, check_rc=None, timeout=120)
        took = time.monotonic() - t0
    finally:
        os.kill(j.pid, signal.SIGCONT)
    assert "did not answer" in doc["java"].get("error", ""), doc["java"]
    assert took < 1.5 + 3, took
    assert not any(f.get("kind") == "java" for t in doc["threads"] for f in t["frames"])
    assert sum(len(native_frames(t)) for t in doc["threads"]) > 0
    # Running again, it answers the next dump.
    wait_until(lambda: all(st not in ("t", "T") for st in thread_states(j.pid).values()), timeout=10,
               what="the JVM running again")
    assert "error" not in dump(j)["java"]


def test_a_jvm_in_a_container_is_asked_through_its_own_tmp(jvm, hung_classes):
    """A JVM in its own mount and pid namespaces, with a /tmp of its own (a container's): its attach socket and
    performance data are where only its root shows them, named by its pid in its namespace. The dump reaches it
    through /proc/PID/root and gets its Java frames; jcmd from here cannot even see it."""
    # The classes dir is bound back on its own path under the new /tmp, which hides it otherwise.
    script = ('mount --make-rprivate / && mount --bind "$0" /mnt && mount -t tmpfs tmpfs /tmp && '
              'mkdir -p "$0" && mount --bind /mnt "$0" && exec "$@"')
    j = jvm("deadlock", wrapper=("unshare", "--mount", "--pid", "--fork", "sh", "-c", script, hung_classes))
    with open(f"/proc/{j.pid}/status") as f:
        nspid = [ln.split()[1:] for ln in f if ln.startswith("NSpid:")][0]
    assert len(nspid) == 2 and nspid[1] != str(j.pid), nspid
    doc = dump(j)
    assert "error" not in doc["java"], doc["java"]
    a = by_name(doc, j.pid)["sync-a"]
    assert java_frames(a)[0] == ("Hung.takeAthenB", "Hung.java", marker_line("takeAthenB-inner")), java_frames(a)
    assert os.path.exists(f"/proc/{j.pid}/root/tmp/.java_pid{nspid[1]}")
    assert doc["java"]["deadlocks"] >= 1


def unit_capabilities():
    """The capabilities units/stackwatchd.service.in leaves the daemon (CapabilityBoundingSet), as setpriv names
    them."""
    with open(os.path.join(SRCDIR, "units", "stackwatchd.service.in")) as f:
        [line] = [ln for ln in f if ln.startswith("CapabilityBoundingSet=")]
    return [c.lower().removeprefix("cap_") for c in line.split("=", 1)[1].split()]


def test_another_users_jvm_answers_under_the_units_capabilities(jvm, tmp_path):
    """A JVM run by another user (nobody) answers only its own user: the capture asks it as that user. With only
    the capabilities the systemd unit gives the daemon (no CAP_DAC_OVERRIDE), the dump still gets its Java frames
    and deadlock; without CAP_SETUID and CAP_SETGID it says which capabilities are missing and keeps the native
    stacks."""
    if not shutil.which("setpriv"):
        pytest.skip("needs setpriv (util-linux)")
    # Somewhere nobody can read the classes: pytest's own temporary directories are root's alone.
    classes = tempfile.mkdtemp(prefix="stackwatch-java-")
    try:
        os.chmod(classes, 0o755)
        r = subprocess.run([JAVAC, "-g", "-d", classes, JAVA_SRC], capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        subprocess.run(["chmod", "-R", "a+rX", classes], check=True)
        j = Jvm(classes, "deadlock", tmp_path,
                wrapper=("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"))
        try:
            with open(f"/proc/{j.pid}/status") as f:
                assert [ln.split()[1] for ln in f if ln.startswith("Uid:")] == ["65534"]
            caps = unit_capabilities()
            assert "dac_override" not in caps, caps

            def unit_dump(caps):
                bounding = ",".join(["-all", *("+" + c for c in caps)])
                r = subprocess.run(["setpriv", f"--bounding-set={bounding}", "--inh-caps=-all", "--", STACKCTL,
                                    "dump", "--json", str(j.pid)], capture_output=True, timeout=120)
                assert r.returncode in (0, 5), f"rc {r.returncode}: {r.stderr.decode(errors='replace')}"
                j.assert_untouched()
                return json.loads(r.stdout.decode().splitlines()[0])

            doc = unit_dump(caps)
            assert "error" not in doc["java"], doc["java"]
            a = by_name(doc, j.pid)["sync-a"]
            assert java_frames(a)[0] == ("Hung.takeAthenB", "Hung.java", marker_line("takeAthenB-inner")), a
            assert doc["java"]["deadlocks"] >= 1

            doc = unit_dump([c for c in caps if c not in ("setuid", "setgid")])
            assert "CAP_SETUID and CAP_SETGID" in doc["java"].get("error", ""), doc["java"]
            assert sum(len(native_frames(t)) for t in doc["threads"]) > 0
        finally:
            j.kill()
    finally:
        shutil.rmtree(classes, ignore_errors=True)


def test_daemon_with_capture_java_off_leaves_the_jvm_alone(jvm, daemon):
    """capture.java: false: the daemon's snapshot of the deadlocked JVM has its native stacks and no Java keys,
    and the JVM was never asked (no attach listener, no socket): its stdout has no thread dump either."""
    j = jvm("deadlock")
    d = daemon("""
poll_interval: 200ms
archive:
  directory: "@ARCHIVE@"
capture:
  java: false
rules:
  - name: java-stuck
    class: [waiting, blocked]
    comm: java
    for: 1s
    cooldown: 1h
    actions: [snapshot]
""")
    snaps = wait_until(lambda: [s for s in d.snapshots() if s["pid"] == j.pid], timeout=60, interval=0.2,
                       what="the snapshot in the archive")
    doc = json.loads(stackctl("--archive", d.archive, "show", "--json", snaps[0]["id"]).stdout)
    doc = doc[0] if isinstance(doc, list) else doc
    assert "java" not in doc
    assert not any("java" in t or any(f.get("kind") == "java" for f in t["frames"]) for t in doc["threads"])
    assert sum(len(native_frames(t)) for t in doc["threads"]) > 0
    assert "Attach Listener" not in thread_names(j.pid).values()
    assert not os.path.exists(f"/tmp/.java_pid{j.pid}")
    assert j.output() == "", j.output()
    j.assert_untouched()
