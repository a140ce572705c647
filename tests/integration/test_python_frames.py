"""Python frames (issue 27): a CPython program's own functions, files and lines in every dump, read without stopping
it, checked against CPython's own faulthandler for every CPython on the machine."""
import contextlib
import glob
import json
import os
import re
import shutil
import signal
import subprocess

import pytest

from conftest import SRCDIR, dump_json, stackctl, tracer_of, wait_until

PYDIR = os.path.join(SRCDIR, "tests", "fixtures", "python")
SYSTEM_PYTHON = "/usr/bin/python3"


SUPPORTED_MINORS = range(8, 14)     # CPython 3.8 to 3.13


def pyenv_pythons(minor):
    """pyenv's builds of CPython 3.MINOR here (shared libpython), oldest first."""
    return sorted(glob.glob(f"/root/.pyenv/versions/3.{minor}.*/bin/python3.{minor}"))


def pythons():
    """Every CPython 3.8+ here as a test param: the system one (CI has it), and a pyenv build (shared libpython) of
    each supported minor version. A version that is not here is a param too, skipped with the reason, so that the
    report shows what was not tested."""
    found = [pytest.param(SYSTEM_PYTHON, id="system", marks=() if os.path.exists(SYSTEM_PYTHON) else
                          pytest.mark.skip(reason=f"the system CPython is not installed here: no {SYSTEM_PYTHON}"))]
    for minor in SUPPORTED_MINORS:
        exes = pyenv_pythons(minor)
        for exe in exes:
            found.append(pytest.param(exe, id=os.path.basename(os.path.dirname(os.path.dirname(exe)))))
        if not exes:
            found.append(pytest.param(None, id=f"3.{minor}", marks=pytest.mark.skip(
                reason=f"CPython 3.{minor} not installed here: no /root/.pyenv/versions/3.{minor}.*/bin/python3.{minor}"
                       " (STACKWATCH_PYTHONS adds others)")))
    # A later version (3.14+) is read through its _Py_DebugOffsets: tested where pyenv has one.
    for exe in sorted(glob.glob("/root/.pyenv/versions/3.*/bin/python3.*")):
        m = re.search(r"/python3\.(\d+)$", exe)
        if m and int(m.group(1)) > max(SUPPORTED_MINORS):
            found.append(pytest.param(exe, id=os.path.basename(os.path.dirname(os.path.dirname(exe)))))
    extra = os.environ.get("STACKWATCH_PYTHONS")
    for exe in extra.split(":") if extra else []:
        found.append(pytest.param(exe, id=exe))
    return found


def version_of(exe):
    return subprocess.run([exe, "-c", "import sys; print('%d.%d.%d' % sys.version_info[:3])"],
                          capture_output=True, text=True, check=True).stdout.strip()


def escaped(s):
    """A string as faulthandler writes it: ASCII kept, others as \\xNN, \\uNNNN or \\UNNNNNNNN."""
    out = []
    for ch in s:
        c = ord(ch)
        out.append(ch if c < 128 else "\\x%02x" % c if c < 256 else "\\u%04x" % c if c < 65536 else "\\U%08x" % c)
    return "".join(out)


def parse_faulthandler(text):
    """{thread ident: [(file, line, function), …] innermost first}."""
    threads, cur = {}, None
    for line in text.splitlines():
        m = re.match(r"(?:Current thread|Thread) 0x([0-9a-f]+) \(most recent call first\):", line)
        if m:
            cur = threads.setdefault(int(m.group(1), 16), [])
            continue
        m = re.match(r'  File "(.*)", line (\d+) in (.*)$', line)
        if m and cur is not None:
            cur.append((m.group(1), int(m.group(2)), m.group(3)))
    return threads


def our_frames(thread):
    """A dumped thread's Python frames as faulthandler shows them: (file, line, co_name), innermost first."""
    return [(escaped(f["file"]), f["line"] or 0, escaped(f["function"].split(".")[-1]))
            for f in thread["frames"] if f.get("kind") == "python"]


class Oracle:
    """tests/fixtures/python/oracle.py under one interpreter, its library in a directory named with a character
    outside the BMP (so that file names come in UCS-4)."""

    def __init__(self, exe, tmp_path):
        libdir = tmp_path / "lib-\U0001f40d"
        libdir.mkdir()
        shutil.copy(os.path.join(PYDIR, "oracle_lib.py"), libdir)
        self.p = subprocess.Popen([exe, os.path.join(PYDIR, "oracle.py"), str(libdir)], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True, encoding="utf-8")
        line = self.p.stdout.readline()
        assert line.startswith("threads "), line
        self.threads = json.loads(line[len("threads "):])

    def ask(self, cmd):
        self.p.stdin.write(cmd + "\n")
        self.p.stdin.flush()
        return self.p.stdout.readline().strip()

    def parked(self):
        """Each reader blocked in read() on its own pipe (the fd it printed), per /proc."""
        for name, (tid, _, fd) in self.threads.items():
            if fd < 0:
                continue
            try:
                with open(f"/proc/{self.p.pid}/task/{tid}/syscall") as f:
                    sc = f.read().split()
            except OSError:
                return False
            if sc[:2] != ["0", hex(fd)]:
                return False
        return True

    def close(self):
        try:
            self.p.stdin.write("quit\n")
            self.p.stdin.close()
        except BrokenPipeError:
            pass
        try:
            self.p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()


@pytest.mark.parametrize("exe", pythons())
def test_frames_equal_faulthandler(exe, tmp_path):
    """100 dumps of a program whose threads move to new frames between dumps (readers blocked in read(), a
    sleeper, a thread spinning in pure Python): every Python frame of every worker equals what faulthandler
    prints right after, and no thread is left stopped or traced."""
    version = version_of(exe)
    o = Oracle(exe, tmp_path)
    try:
        tid_of = {ident: tid for tid, ident, _ in o.threads.values()}
        compared = 0
        for seed in range(100):
            assert o.ask(f"step {seed}") == "ready"
            wait_until(o.parked, timeout=10, what="readers parked in read()")
            doc = dump_json("--no-source", o.p.pid)[0]
            reply = o.ask("oracle")
            assert reply.startswith("oracle "), reply
            path = reply[len("oracle "):]
            with open(path, encoding="ascii", errors="replace") as f:
                oracle = parse_faulthandler(f.read())
            os.unlink(path)
            # Before 3.11 the build has no Py_Version: the version comes from the file's name, major.minor.
            assert doc["python"]["version"] == (version if tuple(map(int, version.split("."))) >= (3, 11) else version.rsplit(".", 1)[0])
            ours = {t["tid"]: t for t in doc["threads"]}
            for ident, expected in oracle.items():
                tid = tid_of.get(ident)
                if tid is None:
                    continue  # the main thread: it ran on between our dump and its own
                got = our_frames(ours[tid])
                assert got == expected, f"{version} seed {seed} thread {tid}:\nours   {got}\noracle {expected}"
                compared += 1
        assert compared == 100 * len(o.threads)
        for tid, _, _ in o.threads.values():
            assert tracer_of(o.p.pid, tid) == 0
    finally:
        o.close()


def test_text_reads_like_a_traceback(tmp_path):
    """The text dump shows Python frames as Python users read them, in place of the interpreter's frame."""
    o = Oracle(SYSTEM_PYTHON, tmp_path)
    try:
        assert o.ask("step 7") == "ready"
        wait_until(o.parked, timeout=10, what="readers parked in read()")
        out = stackctl("dump", o.p.pid, check_rc=0).stdout.decode()
        assert re.search(r'#\d+ +File ".*/oracle_lib\.py", line \d+, in descend\n', out)
        assert re.search(r'#\d+ +File ".*/oracle\.py", line \d+, in Worker\.park\n', out)
        assert "_PyEval_EvalFrameDefault" not in out
        assert "python 3." in out
        plain = stackctl("dump", "--no-python", o.p.pid, check_rc=0).stdout.decode()
        assert 'File "' not in plain and "_PyEval_EvalFrameDefault" in plain
    finally:
        o.close()


def start_fixture(name, *args, exe=SYSTEM_PYTHON):
    p = subprocess.Popen([exe, os.path.join(PYDIR, name), *args], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    return p


def settled(pid, n_futex):
    """N_FUTEX threads of PID blocked in futex()."""
    def check():
        n = 0
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{tid}/syscall") as f:
                    n += f.read().split()[0] == "202"
            except OSError:
                pass
        return n >= n_futex
    return check


def python_lines(thread):
    return [(os.path.basename(f["file"]), f["line"], f["function"]) for f in thread["frames"]
            if f.get("kind") == "python"]


@pytest.mark.parametrize("exe", pythons())
def test_rlock_abba_is_a_deadlock(exe):
    """Two threads each waiting for the RLock the other holds: edges to the owners, and a DEADLOCK, on every
    CPython (the lock object is found among the top frame's locals and stack: a frame object's up to 3.10, an
    interpreter frame's from 3.11)."""
    p = start_fixture("abba.py", "rlock", exe=exe)
    try:
        wait_until(settled(p.pid, 3), timeout=10, what="three threads in futex()")
        doc = dump_json("--peers=1", p.pid)[0]
        chain = doc["wait_chain"]
        rl = [e for e in chain["edges"] if e["object"].startswith("threading.RLock")]
        assert len(rl) == 2 and {e["from"]["tid"] for e in rl} == {e["to"]["tid"] for e in rl}, rl
        assert chain["deadlock"]
        text = stackctl("dump", "--peers=1", p.pid).stdout.decode()
        assert re.search(r"DEADLOCK in \d+ \(python3[.\d]*\): thread \d+", text), text
        waits = {t["tid"]: t["python"]["waits"] for t in doc["threads"] if t.get("python", {}).get("waits")}
        # 3.13's Thread.join() waits on the thread handle's event, which names no thread: not a join of ours.
        joins = ["join"] if tuple(map(int, version_of(exe).split(".")[:2])) < (3, 13) else []
        assert sorted(w["kind"] for w in waits.values() if w["kind"] != "join") == ["rlock", "rlock"], waits
        assert [w["kind"] for w in waits.values() if w["kind"] == "join"] in (joins, ["join"]), waits
    finally:
        p.kill()
        p.wait()


@pytest.mark.parametrize("exe", pythons())
def test_a_join_leads_through_the_joined_thread(exe):
    """The main thread in t.join() of a worker that reads a pipe from a sleeping child: the chain names the thread it
    joins (3.8-3.12: the tstate lock it waits on is the one that thread's state keeps) and goes on through it to the
    child. 3.13 joins on the thread handle's event: the edge says it is a join, no thread named."""
    p = subprocess.Popen([exe, os.path.join(PYDIR, "join_reader.py")], stdout=subprocess.PIPE, text=True)
    sleeper = None
    try:
        word, sleeper = p.stdout.readline().split()
        assert word == "ready"
        sleeper = int(sleeper)
        worker = [int(t) for t in os.listdir(f"/proc/{p.pid}/task") if int(t) != p.pid]
        assert len(worker) == 1
        wait_until(settled(p.pid, 1), timeout=10, what="the main thread in futex()")
        wait_until(lambda: open(f"/proc/{p.pid}/task/{worker[0]}/syscall").read().split()[0] == "0",
                   what="the worker in read()")
        [doc] = dump_json("--peers=2", "--tid", p.pid, p.pid)
        edges = doc["wait_chain"]["edges"]
        [join] = [e for e in edges if e["from"]["tid"] == p.pid]
        if tuple(map(int, version_of(exe).split(".")[:2])) >= (3, 13):
            assert join["kind"] == "other" and join["to"] is None, join
            assert join["reason"] == "it waits for a thread to exit (Thread.join)", join
            return
        assert join["kind"] == "join" and join["to"]["tid"] == worker[0], join
        [read] = [e for e in edges if e["from"]["tid"] == worker[0]]
        assert read["kind"] == "pipe" and read["to"]["pid"] == sleeper, read
        text = stackctl("dump", "--peers=2", "--tid", p.pid, "--no-kernel", p.pid, check_rc=0).stdout.decode()
        comm = doc["process"]["comm"]
        assert f"futex → the exit of thread {worker[0]} → {p.pid} ({comm}) thread {worker[0]}" in text, text
    finally:
        p.kill()
        p.wait()
        if sleeper:  # it never writes, so the closed pipe would not end it
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(sleeper), signal.SIGKILL)


@pytest.mark.parametrize("exe", pythons())
def test_lock_abba_shows_both_waiters_lines(exe):
    """threading.Lock records no owner: the chain says so, and each waiter's Python line shows the ABBA."""
    p = start_fixture("abba.py", "lock", exe=exe)
    try:
        wait_until(settled(p.pid, 3), timeout=10, what="three threads in futex()")
        doc = dump_json("--peers=1", p.pid)[0]
        edges = [e for e in doc["wait_chain"]["edges"] if e["object"].startswith("threading.Lock")]
        owned = [e for e in edges if "no owner recorded (threading.Lock)" in (e["reason"] or "")]
        assert len(owned) == 2, edges
        assert not doc["wait_chain"]["deadlock"]
        tops = sorted(python_lines(t)[0] for t in doc["threads"] if t["tid"] in {e["from"]["tid"] for e in owned})
        assert tops == [("abba.py", 12, "one"), ("abba.py", 19, "b_then_a")], tops
    finally:
        p.kill()
        p.wait()


@pytest.mark.parametrize("exe", pythons())
def test_gil_held_in_a_blocking_call(exe):
    """A thread waiting for the GIL has an edge to its holder, which the chain shows blocked in a syscall."""
    p = start_fixture("gil_held.py", exe=exe)
    try:
        wait_until(settled(p.pid, 1), timeout=10, what="a thread waiting for the GIL")
        # The waiter wakes every switch interval (5 ms) to ask again: a capture may catch it between two waits, on
        # a CPU, when its wait names nothing. Each capture that saw it in futex() must give the edge.
        for _ in range(10):
            doc = dump_json("--peers=1", p.pid)[0]
            [waiter] = [t for t in doc["threads"] if t["tid"] != p.pid]
            if waiter["syscall"].get("name") == "futex":
                break
        else:
            raise AssertionError(f"10 captures never saw the GIL waiter in futex(): {waiter}")
        assert doc["python"]["gil_holder"] == p.pid
        main = [t for t in doc["threads"] if t["tid"] == p.pid][0]
        assert main["python"]["holds_gil"]
        with open(os.path.join(PYDIR, "gil_held.py")) as f:
            line = [n for n, text in enumerate(f, 1) if "PyDLL(None).sleep" in text][0]
        assert python_lines(main)[0] == ("gil_held.py", line, "hold_gil_in_sleep")
        gil = [e for e in doc["wait_chain"]["edges"] if e["kind"] == "gil"]
        assert len(gil) == 1 and gil[0]["to"]["pid"] == p.pid and gil[0]["to"]["tid"] in (None, p.pid), gil
        assert "holds the GIL while blocked in a syscall" in gil[0]["reason"]
    finally:
        p.kill()
        p.wait()


@pytest.mark.parametrize("exe", pythons())
def test_one_thread_by_tid(exe, tmp_path):
    """--tid captures one thread: its Python frames are still read (before 3.11 the thread states name pthreads,
    not TIDs, and the TID inside each pthread is found through the process's every thread, not the one asked)."""
    o = Oracle(exe, tmp_path)
    try:
        assert o.ask("step 3") == "ready"
        wait_until(o.parked, timeout=10, what="readers parked in read()")
        tid, ident, _ = o.threads["reader1"]
        doc = dump_json("--no-source", "--tid", tid, o.p.pid)[0]
        path = o.ask("oracle")[len("oracle "):]
        with open(path, encoding="ascii", errors="replace") as f:
            oracle = parse_faulthandler(f.read())
        os.unlink(path)
        assert [t["tid"] for t in doc["threads"]] == [tid]
        assert our_frames(doc["threads"][0]) == oracle[ident]
    finally:
        o.close()
