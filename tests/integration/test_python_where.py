"""Python frames wherever the interpreter is (issue 27): in another mount namespace, embedded in a C program, in a
stripped, renamed or deleted executable; versions we do not read; a process that exits under our dumps and a
recursion deeper than we read; and what reading the frames adds to a busy thread's pause."""
import glob
import json
import os
import re
import select
import shutil
import statistics
import subprocess
import time

import pytest

from conftest import dump_json, stackctl, thread_states, tracer_of, wait_until
from test_python_frames import PYDIR, SUPPORTED_MINORS, our_frames, pyenv_pythons, pythons, version_of

WHERE = os.path.join(PYDIR, "where.py")


def marks():
    """{NAME: line} of the "# at:NAME" marks in where.py."""
    out = {}
    with open(WHERE) as f:
        for i, line in enumerate(f, 1):
            m = re.search(r"#.*\bat:(\w+)", line)
            if m:
                out[m.group(1)] = i
    return out


def where_stack(file, depth, leaf):
    """The frames where.py's main thread shows at DEPTH in LEAF (park or spin), innermost first, as our_frames()."""
    at = marks()
    return ([(file, at[leaf], leaf), (file, at["leaf"], "level")] + [(file, at["recurse"], "level")] * depth +
            [(file, at["main"], "main"), (file, at["module"], "<module>")])


def libpython_of(exe):
    """The libpython EXE loads (its DT_NEEDED, found as the interpreter says), or None for a static one."""
    out = subprocess.run(["readelf", "-d", exe], capture_output=True, text=True, check=True).stdout
    if not re.search(r"\(NEEDED\).*\[libpython", out):
        return None
    libdir, soname = subprocess.run([exe, "-c", "import sysconfig as s; print(s.get_config_var('LIBDIR')); "
                                     "print(s.get_config_var('INSTSONAME'))"], capture_output=True, text=True,
                                    check=True).stdout.split()
    return os.path.join(libdir, soname)


def prefix_of(exe):
    return subprocess.run([exe, "-c", "import sys; print(sys.prefix)"], capture_output=True, text=True,
                          check=True).stdout.strip()


def read_line(f, timeout, what):
    deadline = time.monotonic() + timeout
    buf = b""
    while not buf.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([f], [], [], left)[0]:
            raise AssertionError(f"no {what!r} line within {timeout}s")
        c = os.read(f.fileno(), 1)
        if not c:
            raise AssertionError(f"exited before {what!r}")
        buf += c
    return buf.decode().strip()


class Where:
    """where.py run by ARGV (the interpreter and its arguments, maybe behind a wrapper that execs it)."""

    def __init__(self, argv, env=None):
        self.p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  env=dict(os.environ, **(env or {})))
        self.pid = self.p.pid

    def ready(self, timeout=20):
        """The TID of the next thread that says it is where it waits."""
        line = read_line(self.p.stdout, timeout, "ready")
        assert line.startswith("ready "), line
        return int(line.split()[1])

    def wait_parked(self, tid, timeout=10):
        """Until thread TID is blocked in read() (the line "ready" comes just before)."""
        def parked():
            try:
                with open(f"/proc/{self.pid}/task/{tid}/syscall") as f:
                    return f.read().split()[0] == "0"
            except (OSError, IndexError):
                return False
        wait_until(parked, timeout, what=f"thread {tid} blocked in read()")

    def assert_untouched(self):
        """The target comes first: no thread left stopped or traced."""
        for tid, state in thread_states(self.pid).items():
            assert state not in ("t", "T"), f"thread {tid} left stopped"
            assert tracer_of(self.pid, tid) in (0, None), f"thread {tid} left traced"

    def close(self):
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait(timeout=10)
        self.p.stdout.close()
        self.p.stderr.close()


def asleep(pid, tid=None):
    """Whether the thread sleeps in a system call (time.sleep(): clock_nanosleep from 3.11, select before)."""
    try:
        with open(f"/proc/{pid}/task/{tid or pid}/syscall") as f:
            return f.read().split()[0] in ("230", "23", "270")
    except (OSError, IndexError):
        return False


def thread_of(doc, tid):
    ts = [t for t in doc["threads"] if t["tid"] == tid]
    assert len(ts) == 1, f"no thread {tid} in the dump"
    return ts[0]


def native_modules(doc, thread):
    """The paths of the modules of THREAD's named native frames."""
    return {doc["modules"][f["module"]]["path"] for f in thread["frames"]
            if f.get("kind") != "python" and f.get("function") and f.get("module") is not None}


def dump_where(w, tid, *args):
    doc = dump_json("--no-source", *args, w.pid)[0]
    return doc, thread_of(doc, tid)


def interpreters():
    """pythons(): "system", each pyenv version, and each supported version that is not here, skipped."""
    return pythons()


# ---- another mount namespace ----

@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"), reason="needs root and unshare(1)")
@pytest.mark.parametrize("exe", interpreters())
def test_mount_namespace(exe, tmp_path):
    """The interpreter (and its libpython) copied onto a tmpfs mounted in a private mount namespace, over a
    directory that is empty outside it: the files exist only inside. Its ELF is read through /proc/PID/root, its
    frames and lines are the script's."""
    ns = tmp_path / "ns"
    ns.mkdir()
    lib = libpython_of(exe)
    name = os.path.basename(exe)
    script = "\n".join([
        "set -e",
        f"mount -t tmpfs -o size=512m stackwatch-ns '{ns}'",
        f"mkdir '{ns}/bin' '{ns}/lib'",
        f"cp '{exe}' '{ns}/bin/{name}'",
        f"cp '{lib}' '{ns}/lib/'" if lib else ":",
        f"cp '{WHERE}' '{ns}/where.py'",
        f"exec '{ns}/bin/{name}' '{ns}/where.py' park 5",
    ])
    w = Where(["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
              env={"LD_LIBRARY_PATH": f"{ns}/lib", "PYTHONHOME": prefix_of(exe)})
    try:
        tid = w.ready()
        w.wait_parked(tid)
        inside = f"{ns}/bin/{name}"
        assert not os.path.exists(inside), "the interpreter must exist only inside the namespace"
        with open(f"/proc/{w.pid}/maps") as f:
            assert inside in f.read()
        doc, t = dump_where(w, tid)
        assert our_frames(t) == where_stack(f"{ns}/where.py", 5, "park")
        # Its native frames were named from the copy only the namespace has.
        ours = f"{ns}/lib/{os.path.basename(lib)}" if lib else inside
        assert ours in native_modules(doc, t)
        assert not doc["capture"]["errors"]
        w.assert_untouched()
    finally:
        w.close()


# ---- an embedded interpreter ----

EMBED_CODE = """import os, time
def embedded_wait():
    os.write(1, b"READY\\n")
    time.sleep(3600)
def embedded_main():
    embedded_wait()
embedded_main()
"""


def libpythons():
    """Each shared libpython 3.8+ here: Debian's and pyenv's; a supported version with neither is a skipped param."""
    found, minors = [], set()
    for lib in sorted(glob.glob("/usr/lib/x86_64-linux-gnu/libpython3.*.so.1.0")) + \
            sorted(glob.glob("/root/.pyenv/versions/3.*/lib/libpython3.*.so.1.0")):
        m = re.search(r"libpython3\.(\d+)\.so", lib)
        if m and int(m.group(1)) >= 8:
            minors.add(int(m.group(1)))
            home = "/usr" if lib.startswith("/usr/") else os.path.dirname(os.path.dirname(lib))
            found.append(pytest.param(lib, home, id=os.path.basename(home) if home != "/usr" else "debian"))
    for minor in SUPPORTED_MINORS:
        if minor not in minors:
            found.append(pytest.param(None, None, id=f"3.{minor}", marks=pytest.mark.skip(
                reason=f"CPython 3.{minor} not installed here: no libpython3.{minor}.so.1.0 in "
                       "/usr/lib/x86_64-linux-gnu or /root/.pyenv/versions/*/lib")))
    return found


@pytest.mark.parametrize("lib,home", libpythons())
def test_embedded(lib, home, fixture):
    """A C program (tests/fixtures/py-embed) that loads a libpython and runs code that sleeps: the executable has
    no _PyRuntime, the library does; the Python frames sit inside the C program's own call."""
    fx = fixture("py-embed", lib, EMBED_CODE, env={"PYTHONHOME": home})
    wait_until(lambda: asleep(fx.pid), 10, what="the embedded code asleep")
    doc = dump_json("--no-source", fx.pid)[0]
    assert doc["python"]["version"].startswith(re.search(r"libpython(3\.\d+)", lib).group(1))
    t = thread_of(doc, fx.pid)
    assert our_frames(t) == [("<string>", 4, "embedded_wait"), ("<string>", 6, "embedded_main"),
                             ("<string>", 7, "<module>")]
    names = [f["function"] for f in t["frames"]]
    last_py = max(i for i, f in enumerate(t["frames"]) if f.get("kind") == "python")
    assert "pe_run" in names[last_py:] and "main" in names[last_py:], names
    assert not doc["capture"]["errors"]


# ---- executables stripped, renamed, deleted ----

def build_id(path):
    out = subprocess.run(["readelf", "-n", path], capture_output=True, text=True, check=True).stdout
    return bytes.fromhex(re.search(r"Build ID: ([0-9a-f]+)", out).group(1))


def patch(path, *renames):
    """Rename strings in the ELF file PATH in place (each must occur once), and make its build-id another one:
    another build, not a namesake of the original the symbolizer may have met."""
    with open(path, "rb") as f:
        data = f.read()
    bid = build_id(path)
    for old, new in renames + ((bid, bid[:-1] + bytes([bid[-1] ^ 0xff])),):
        assert len(old) == len(new) and data.count(old) == 1, old
        data = data.replace(old, new)
    with open(path, "wb") as f:
        f.write(data)


def dynamic_symbols(path):
    out = subprocess.run(["nm", "-D", "--defined-only", path], capture_output=True, text=True, check=True).stdout
    return {line.split()[-1] for line in out.splitlines() if line.strip()}


def sections(path):
    out = subprocess.run(["readelf", "-SW", path], capture_output=True, text=True, check=True).stdout
    return set(re.findall(r"\]\s+(\S+)", out))


def run_where(exe, *args, env=None):
    return Where([exe, WHERE, *args], env=env)


def check_parked(w, depth=3):
    tid = w.ready()
    w.wait_parked(tid)
    doc, t = dump_where(w, tid)
    assert our_frames(t) == where_stack(WHERE, depth, "park")
    assert not doc["capture"]["errors"]
    w.assert_untouched()
    return doc, t


@pytest.mark.parametrize("exe", interpreters())
def test_stripped(exe, tmp_path):
    """strip --strip-all of the interpreter and its libpython (PIE for pyenv's): .symtab and debug info go,
    .dynsym stays, and _PyRuntime is found there."""
    lib = libpython_of(exe)
    target = str(tmp_path / ("lib/" + os.path.basename(lib) if lib else os.path.basename(exe)))
    os.makedirs(tmp_path / "lib", exist_ok=True)
    shutil.copy(lib or exe, target)
    subprocess.run(["strip", "--strip-all", target], check=True)
    assert ".symtab" not in sections(target) and "_PyRuntime" in dynamic_symbols(target)
    w = run_where(exe, "park", "3", env={"LD_LIBRARY_PATH": str(tmp_path / "lib")})
    try:
        doc, t = check_parked(w)
        if lib:
            assert target in native_modules(doc, t)
    finally:
        w.close()


# Another name for _PyRuntime in .dynsym, with the same GNU hash (h * 33 + c: 'R' + 1 and 'u' - 33 cancel out), so
# that the relocations a libpython makes against its own _PyRuntime still find it under its new name.
NOT_PYRUNTIME = (b"\0_PyRuntime\0", b"\0_PySTntime\0")
NOT_SECTION = (b"\0.PyRuntime\0", b"\0.QyRuntime\0")


def interpreter_copy(exe, tmp_path):
    """A copy of the file that holds EXE's _PyRuntime (EXE, or its libpython), named as the original, stripped of
    .symtab and debug info: (its path, the environment that makes EXE load the copy)."""
    lib = libpython_of(exe)
    target = str(tmp_path / ("lib/" + os.path.basename(lib) if lib else os.path.basename(os.path.realpath(exe))))
    os.makedirs(tmp_path / "lib", exist_ok=True)
    shutil.copy(lib or exe, target)
    subprocess.run(["strip", "--strip-all", target], check=True)
    return target, (target if not lib else exe), {"LD_LIBRARY_PATH": str(tmp_path / "lib")}


@pytest.mark.parametrize("exe", interpreters())
def test_no_dynamic_symbol(exe, tmp_path):
    """The interpreter (or its libpython), stripped, and its .dynsym no longer names _PyRuntime: the .PyRuntime
    section (3.10 and later) is where the runtime is; 3.8 and 3.9, which have no such section, are scanned."""
    target, run, env = interpreter_copy(exe, tmp_path)
    patch(target, NOT_PYRUNTIME)
    assert "_PyRuntime" not in dynamic_symbols(target)
    w = run_where(run, "park", "3", env=env)
    try:
        doc, t = check_parked(w)
        assert target in native_modules(doc, t)
    finally:
        w.close()


@pytest.mark.parametrize("exe", interpreters())
def test_no_symbol_nor_section(exe, tmp_path):
    """The same, and its .PyRuntime section renamed: the runtime is found by scanning the module's writable data
    for the interpreter and thread state that point at each other (3.13: its _Py_DebugOffsets)."""
    target, run, env = interpreter_copy(exe, tmp_path)
    patch(target, NOT_PYRUNTIME, *((NOT_SECTION,) if ".PyRuntime" in sections(target) else ()))
    assert "_PyRuntime" not in dynamic_symbols(target) and ".PyRuntime" not in sections(target)
    w = run_where(run, "park", "3", env=env)
    try:
        doc, t = check_parked(w)
        assert target in native_modules(doc, t)
    finally:
        w.close()


def pyenv_python(minor):
    """pyenv's CPython 3.MINOR, or None."""
    found = pyenv_pythons(minor)
    return found[-1] if found else None


def renamed_cases():
    """Debian's python3.11 renamed and deleted (Py_Version says its version); and, where pyenv has them, a
    3.8-3.10 (no Py_Version) renamed, and linked statically into a program of another name, whose version only
    its PY_VERSION string tells."""
    system = "/usr/bin/python3.11"
    cases = [pytest.param(system, how, id=f"system-{how}", marks=() if os.path.exists(system) else
                          pytest.mark.skip(reason=f"Debian's python3.11 is not installed here: no {system}"))
             for how in ("renamed", "deleted")]
    for minor in (8, 9, 10):
        exe = pyenv_python(minor)
        for how in ("renamed", "static"):
            cases.append(pytest.param(exe, how, id=f"3.{minor}-{how}", marks=() if exe else pytest.mark.skip(
                reason=f"CPython 3.{minor} not installed here: no /root/.pyenv/versions/3.{minor}.*/bin/python3.{minor}")))
    return cases


def static_program(exe, path):
    """A program PATH that links EXE's libpython3.X.a (its configure's LIBPL) and runs Python's own main: an
    application with the interpreter built in, under a name that says nothing. Skips when it cannot be built."""
    libpl, library, libs = subprocess.run(
        [exe, "-c", "import sysconfig as s; print(s.get_config_var('LIBPL')); print(s.get_config_var('LIBRARY')); "
         "print(s.get_config_var('LIBS'))"], capture_output=True, text=True, check=True).stdout.split("\n")[:3]
    archive = os.path.join(libpl, library)
    if not os.path.exists(archive) or not shutil.which("gcc"):
        pytest.skip(f"no {archive} or no gcc to link a program with {os.path.basename(exe)} built in")
    src = str(path) + ".c"
    with open(src, "w") as f:
        f.write("extern int Py_BytesMain(int, char **);\n"
                "int main(int argc, char **argv) { return Py_BytesMain(argc, argv); }\n")
    # -export-dynamic: the extension modules of lib-dynload find the interpreter's symbols in the program.
    subprocess.run(["gcc", "-o", str(path), src, archive, "-Xlinker", "-export-dynamic", *libs.split(), "-lm"],
                   check=True, capture_output=True)


@pytest.mark.parametrize("exe,how", renamed_cases())
def test_renamed_or_deleted(exe, how, tmp_path):
    """The interpreter as an executable of another name (what an application linked with libpython statically
    looks like), one deleted since it started (a Python upgraded under a running service: its maps name it
    "… (deleted)", and libdwfl reads it through /proc/PID/map_files), and a 3.8-3.10 linked into a program
    "srv-app": no Py_Version and no version in any file name, so the version (and the layout) comes from the
    PY_VERSION string in its .rodata, and the dump names the full version."""
    target = str(tmp_path / ("svc-worker" if how == "renamed" else "srv-app" if how == "static"
                             else os.path.basename(exe)))
    env = None
    if how == "static":
        static_program(exe, target)
        assert "libpython" not in subprocess.run(["ldd", target], capture_output=True, text=True).stdout
    else:
        shutil.copy(exe, target)
    if exe != "/usr/bin/python3.11":
        # The copy finds its libpython by its RUNPATH; its standard library from here.
        env = {"PYTHONHOME": prefix_of(exe)}
    w = run_where(target, "park", "3", env=env)
    try:
        if how == "deleted":
            tid = w.ready()
            os.unlink(target)
            w.wait_parked(tid)
            with open(f"/proc/{w.pid}/maps") as f:
                assert target + " (deleted)" in f.read()
            doc, t = dump_where(w, tid)
            assert our_frames(t) == where_stack(WHERE, 3, "park")
            assert not doc["capture"]["errors"]
        else:
            doc, t = check_parked(w)
        if how == "static":
            assert doc["python"]["version"] == version_of(exe)
            assert target in native_modules(doc, t)
        else:
            assert doc["python"]["version"].startswith(".".join(version_of(exe).split(".")[:2]))
    finally:
        w.close()


# ---- versions we do not read ----

def old_pythons():
    found = []
    for exe in sorted(glob.glob("/root/.pyenv/versions/[23].*/bin/python[23].*")):
        m = re.search(r"python(\d)\.(\d+)$", exe)
        if m and (int(m.group(1)), int(m.group(2))) < (3, 8):
            found.append(pytest.param(exe, id=os.path.basename(exe)))
    return found


@pytest.mark.parametrize("exe", old_pythons() or [pytest.param(None, marks=pytest.mark.skip("no CPython < 3.8"))])
def test_unsupported_version(exe):
    """CPython 2.7, 3.6, 3.7: the dump has the native frames, says why it has no Python frames, and exits as a
    partial dump does (5)."""
    p = subprocess.Popen([exe, "-c", "import os, time\nos.write(1, b'ready\\n')\ntime.sleep(3600)\n"],
                         stdout=subprocess.PIPE)
    try:
        assert read_line(p.stdout, 20, "ready") == "ready"
        wait_until(lambda: asleep(p.pid), 10, what="asleep")
        doc = dump_json("--no-source", p.pid, check_rc=5)[0]
        errors = doc["capture"]["errors"]
        assert len(errors) == 1 and errors[0].startswith("Python frames not read: "), errors
        assert "3.8 and later are read" in errors[0]
        assert doc.get("python") is None
        t = thread_of(doc, p.pid)
        assert any(f["function"] and "Py" in f["function"] for f in t["frames"]), t["frames"]
        assert t["frames"][-1]["function"] == "_start"  # the whole native stack
    finally:
        p.kill()
        p.wait()
        p.stdout.close()


# ---- hostile ----

@pytest.mark.parametrize("exe", interpreters())
def test_exit_under_dumps(exe):
    """where.py churn: threads parked and spinning (those stopped by ptrace) while the interpreter finalizes,
    freeing their thread states, and exits; dumps in a loop until it is gone. Each dump ends in time as a dump (0,
    or 5 for what vanished under it) or as "no such process" (3), never killed by a signal; the process is never
    kept from exiting; Python frames were read along the way."""
    seen_python = dumps = 0
    rcs = {}
    for ms in range(40, 440, 50):
        w = run_where(exe, "churn", str(ms))
        try:
            deadline = time.monotonic() + 30
            while w.p.poll() is None:
                assert time.monotonic() < deadline, f"churn {ms} ms still running after 30 s"
                r = stackctl("dump", "--json", "--no-source", w.pid, timeout=30)
                assert r.returncode in (0, 3, 5), f"rc {r.returncode}: {r.stderr.decode(errors='replace')}"
                rcs[r.returncode] = rcs.get(r.returncode, 0) + 1
                dumps += 1
                for line in r.stdout.decode().splitlines():
                    doc = json.loads(line)
                    seen_python += any(f.get("kind") == "python" for t in doc["threads"] for f in t["frames"])
            assert w.p.returncode == 0, w.p.stderr.read()
        finally:
            w.close()
    print(f"{exe}: {dumps} dumps, exit statuses {rcs}, {seen_python} with Python frames")
    assert dumps >= 8 and seen_python > 0, (dumps, seen_python)


@pytest.mark.parametrize("exe", interpreters())
def test_deep_recursion(exe):
    """A thread 2000 Python calls deep: its innermost frames are read up to the cap (--max-frames, at most 1024),
    the thread's note says they were cut, the dump says it was cut as for a native stack (truncated, exit status
    5), and neither dump takes long."""
    w = run_where(exe, "park", "2000")
    try:
        tid = w.ready()
        w.wait_parked(tid)
        full = where_stack(WHERE, 2000, "park")
        for args, cap in (((), 256), (("--max-frames", "4096"), 1024)):
            start = time.monotonic()
            r = stackctl("dump", "--json", "--no-source", *args, w.pid, timeout=30)
            took = time.monotonic() - start
            assert r.returncode == 5, r.stderr
            print(f"{exe} {args}: exit status {r.returncode}, {took * 1000:.0f} ms")
            t = thread_of(json.loads(r.stdout.decode().splitlines()[0]), tid)
            assert our_frames(t) == full[:cap]
            assert t["python"]["note"] == f"more than {cap} Python frames"
            assert t["capture"]["truncated"]
            assert took < 10, f"{took:.1f} s for a dump"
        w.assert_untouched()
    finally:
        w.close()


# ---- the pause ----

PAUSE_DUMPS = 21
PAUSE_DEPTH = 50            # Python frames of the busy thread
PAUSE_BUDGET_US = 200.0     # what reading them may add to its pause (issue 27, item 4)


@pytest.mark.parametrize("exe", interpreters())
def test_pause(exe):
    """A thread spinning in pure Python, 50 frames deep, is stopped by ptrace for each dump: reading its Python
    frames in that stop adds at most 0.2 ms to its pause. 21 dumps with and 21 without (--no-python), taken in
    turn so that the machine's noise falls on both; their medians are compared."""
    w = run_where(exe, "spin", str(PAUSE_DEPTH - 4))
    pauses = {True: [], False: []}
    try:
        tid = w.ready()
        # "ready" is printed from inside ready(): a dump at once may still find it there, a frame deeper (CI did).
        wait_until(lambda: our_frames(dump_where(w, tid)[1]) == where_stack(WHERE, PAUSE_DEPTH - 4, "spin"),
                   what="the thread spinning in spin()")
        for _ in range(PAUSE_DUMPS):
            for python in (True, False):
                doc, t = dump_where(w, tid, *(() if python else ("--no-python",)))
                assert t["capture"]["method"] == "ptrace", t["capture"]
                assert len(our_frames(t)) == (PAUSE_DEPTH if python else 0)
                pauses[python].append(t["capture"]["pause_us"])
        w.assert_untouched()
    finally:
        w.close()
    with_py, without = statistics.median(pauses[True]), statistics.median(pauses[False])
    print(f"{exe}: median pause {with_py:.1f} us with Python frames, {without:.1f} us without: "
          f"+{with_py - without:.1f} us (with: {min(pauses[True]):.1f}-{max(pauses[True]):.1f}, "
          f"without: {min(pauses[False]):.1f}-{max(pauses[False]):.1f})")
    assert with_py - without <= PAUSE_BUDGET_US


# ---- folded output ----

@pytest.mark.parametrize("exe", interpreters())
def test_folded(exe):
    """stackctl dump --folded: the thread's one line holds its Python frames as function_(file), outermost first as
    a flame graph stacks them, below the interpreter's native frames and above the read() it waits in; with
    --no-python the line has none."""
    w = run_where(exe, "park", "3")
    try:
        tid = w.ready()
        w.wait_parked(tid)
        lines = [line for line in stackctl("dump", "--folded", "-t", tid, w.pid, check_rc=0).stdout.decode()
                 .splitlines() if line.strip()]
        assert len(lines) == 1, lines
        stack, count = lines[0].rsplit(" ", 1)
        frames = stack.split(";")
        assert count == "1"
        py = [i for i, f in enumerate(frames) if f.endswith("_(where.py)")]
        assert [frames[i][:-len("_(where.py)")] for i in py] == ["<module>", "main", "level", "level", "level",
                                                                 "level", "park"], frames
        # Native frames stay where they run: the interpreter's entry above, the read() below the innermost.
        assert py[0] > 1 and "read" in frames[py[-1] + 1:], frames
        lines = stackctl("dump", "--folded", "--no-python", "-t", tid, w.pid, check_rc=0).stdout.decode()
        assert "_(where.py)" not in lines and ";read" in lines
        w.assert_untouched()
    finally:
        w.close()


# ---- threads without Python frames ----

# A thread started by _thread with a C function as its target has a thread state but never runs a Python frame; a
# thread that pthread_create() starts in libc's sleep() (through ctypes) has no thread state at all. Each is
# started alone, and its TID is the one task that appears; main then waits in read().
NO_FRAMES = r"""
import ctypes, os, time, _thread
def new_task(before):
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        extra = set(os.listdir("/proc/self/task")) - before
        if extra:
            return int(extra.pop())
        time.sleep(0.01)
    raise SystemExit("no new thread")
before = set(os.listdir("/proc/self/task"))
_thread.start_new_thread(time.sleep, (3600,))
c_state = new_task(before)
before = set(os.listdir("/proc/self/task"))
libc = ctypes.CDLL(None, use_errno=True)
handle = ctypes.c_ulong()
assert libc.pthread_create(ctypes.byref(handle), None, libc.sleep, ctypes.c_void_p(3600)) == 0
c_only = new_task(before)
r, _ = os.pipe()
print("ready %d %d" % (c_state, c_only), flush=True)
os.read(r, 1)
"""


@pytest.mark.parametrize("exe", interpreters())
def test_thread_without_python_frames(exe):
    """A thread that never ran Python code says so instead of showing native frames only, in text and JSON: "no
    Python frames" for one with a thread state (its target a C function), "no Python thread state" for one that C
    started; the main thread in read() has its frames and no note."""
    w = Where([exe, "-c", NO_FRAMES])
    try:
        line = read_line(w.p.stdout, 20, "ready")
        c_state, c_only = map(int, line.split()[1:])
        w.wait_parked(w.pid)
        wait_until(lambda: asleep(w.pid, c_state) and asleep(w.pid, c_only), 10, what="both threads asleep")
        doc = dump_json("--no-source", w.pid)[0]
        main, state, only = (thread_of(doc, t) for t in (w.pid, c_state, c_only))
        assert main["python"]["note"] is None and our_frames(main)[0][2] == "<module>"
        assert state["python"]["thread_state"] is True and state["python"]["note"] == "no Python frames"
        assert only["python"]["thread_state"] is False
        assert only["python"]["note"] == "no Python thread state (a thread running only C code)"
        for t in (state, only):
            assert not our_frames(t) and any(f.get("function") for f in t["frames"]), t["frames"]
        assert "sleep" in [f.get("function") for f in only["frames"]]
        text = stackctl("dump", "--no-group", w.pid, check_rc=0).stdout.decode()
        blocks = {int(m.group(1)): m.group(2) for m in re.finditer(r"^TID (\d+):.*\n((?:(?!TID ).*\n?)*)", text,
                                                                    re.M)}
        assert "  (python: no Python frames)\n" in blocks[c_state]
        assert "  (python: no Python thread state (a thread running only C code))\n" in blocks[c_only]
        assert "(python:" not in blocks[w.pid] and 'File "<string>"' in blocks[w.pid]
        w.assert_untouched()
    finally:
        w.close()
