"""python-offsets against CPython itself. For every CPython on the machine (pyenv's builds, Debian's python3.X): our
table for its version, field by field, against offsetof() compiled with its own headers (the internal ones
included: tests/helpers/py-offsets-headers.c), then in the live interpreter, which reads its own memory where the
table says (tests/helpers/py-offsets-live.py: the lock objects, which no header gives, are checked there). For
3.13, the table py_offsets_from_debug() makes of a running process's _Py_DebugOffsets, read from outside with
process_vm_readv() as a capture reads a target, against the same."""
import glob
import os
import select
import shutil
import subprocess

import pytest

from conftest import BUILDDIR, SRCDIR

HELPER = os.path.join(BUILDDIR, "tests", "helpers", "py-offsets-print")
HEADERS_C = os.path.join(SRCDIR, "tests", "helpers", "py-offsets-headers.c")
LIVE = os.path.join(SRCDIR, "tests", "helpers", "py-offsets-live.py")
# Modules/_threadmodule.c is not installed: these are checked in the live interpreter only.
NOT_IN_HEADERS = {"lock_lock", "rlock_lock", "rlock_owner", "rlock_count"}
# Python 2 reads this too (pyenv may have a 2.7): no print function, no f-strings.
PROBE = "import sys, sysconfig; sys.stdout.write('%x %s\\n' % (sys.hexversion, sysconfig.get_paths()['include']))"
# A 3.13 that says where its _PyRuntime is, lets any process of ours read it (Yama's ptrace_scope 1 would allow
# only its parent), and waits.
RUNTIME_CHILD = """
import ctypes, sys
ctypes.CDLL(None).prctl(0x59616d61, ctypes.c_ulong(2**64 - 1), 0, 0, 0)  # PR_SET_PTRACER, PR_SET_PTRACER_ANY
print(hex(ctypes.addressof(ctypes.c_char.in_dll(ctypes.pythonapi, "_PyRuntime"))), flush=True)
sys.stdin.read()
"""


def find_interpreters():
    """(PY_VERSION_HEX, include directory, path) of every CPython found, each binary once."""
    root = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    paths = sorted(glob.glob(os.path.join(root, "versions", "*", "bin", "python"))) + \
        sorted(glob.glob("/usr/bin/python[23].[0-9]*"))
    seen, found = set(), []
    for path in paths:
        real = os.path.realpath(path)
        if path.endswith("-config") or not os.access(path, os.X_OK) or real in seen:
            continue
        seen.add(real)
        try:
            r = subprocess.run([path, "-c", PROBE], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if r.returncode == 0 and r.stdout.strip():
            version, include = r.stdout.split(None, 1)
            found.append((int(version, 16), include.strip(), path))
    return sorted(found)


def name(version):
    return f"{version >> 24}.{(version >> 16) & 0xff}.{(version >> 8) & 0xff}"


INTERPRETERS = find_interpreters()
SUPPORTED = [i for i in INTERPRETERS if 0x0308 <= i[0] >> 16 <= 0x030d]
IDS = [f"{name(v)}:{p}" for v, _, p in SUPPORTED]


def supported_params():
    """SUPPORTED as params, and each of 3.8-3.13 that no interpreter here is, skipped with the reason: the report
    shows which versions' tables were not checked against their headers."""
    have = {(v >> 16) & 0xff for v, _, _ in SUPPORTED}
    return [pytest.param(i, id=ident) for i, ident in zip(SUPPORTED, IDS)] + [
        pytest.param(None, id=f"3.{m}", marks=pytest.mark.skip(
            reason=f"CPython 3.{m} not installed here: no python3.{m} in ~/.pyenv/versions/*/bin or /usr/bin"))
        for m in range(8, 14) if m not in have]


def parse(text):
    return dict(line.split(None, 1) for line in text.splitlines() if line.strip())


def ours(*args):
    """The helper's table for ARGS (a version, or --debug PID ADDRESS) as {name: value}, values as printed."""
    if not os.access(HELPER, os.X_OK):
        pytest.skip(f"{HELPER} is not built (make tests/helpers/py-offsets-print)")
    r = subprocess.run([HELPER, *map(str, args)], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return r.stdout


def differences(a, b):
    return {k: (a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)}


@pytest.mark.parametrize("interp", supported_params())
def test_table_matches_the_headers(interp, tmp_path):
    version, include, path = interp
    if not os.path.isdir(os.path.join(include, "internal")):
        pytest.skip(f"{path}: no internal headers in {include} (its -dev package, or a build from source)")
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler")
    exe = tmp_path / "py-offsets-headers"
    r = subprocess.run([cc, "-w", "-I", include, "-I", os.path.join(include, "internal"), "-o", str(exe), HEADERS_C],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    theirs = parse(subprocess.run([str(exe)], capture_output=True, text=True, check=True, timeout=30).stdout)
    table = parse(ours(hex(version)))
    assert int(theirs.pop("version")) >> 16 == version >> 16
    assert int(table.pop("version")) == version
    for field in NOT_IN_HEADERS:
        assert table.pop(field)
    assert differences(table, theirs) == {}, f"ours, {name(version)}'s headers"


@pytest.mark.parametrize("interp", supported_params())
def test_table_matches_the_live_interpreter(interp):
    version, _, path = interp
    r = subprocess.run([path, LIVE], input=ours(hex(version)), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    # Every group was checked, the lock objects among them.
    assert "ok runtime_gil interp_gil gil_locked gil_last_holder" in r.stdout
    assert "ok lock_lock" in r.stdout and "ok rlock_lock rlock_owner rlock_count" in r.stdout


@pytest.fixture
def runtime_313(request):
    """A running 3.13 and the address of its _PyRuntime."""
    version, _, path = request.param
    p = subprocess.Popen([path, "-c", RUNTIME_CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert select.select([p.stdout], [], [], 30)[0], "the 3.13 child said nothing"
        address = p.stdout.readline().strip()
        assert address.startswith("0x"), address
        yield version, path, p.pid, address
    finally:
        p.kill()
        p.wait(timeout=10)
        p.stdin.close()
        p.stdout.close()


PY313 = [i for i in SUPPORTED if i[0] >> 16 == 0x030d]


@pytest.mark.parametrize("runtime_313", PY313, ids=[f"{name(v)}:{p}" for v, _, p in PY313], indirect=True)
def test_debug_offsets_of_a_running_313(runtime_313):
    version, path, pid, address = runtime_313
    debug_text = ours("--debug", pid, address)
    debug = parse(debug_text)
    # The table says which version wrote it: this interpreter, exactly.
    assert int(debug.pop("version")) == version
    # What it gives, and what we take from our 3.13 table for what it lacks, is our 3.13 table (itself checked
    # against the headers above), and holds in the interpreter.
    table = parse(ours(hex(version)))
    table.pop("version")
    assert differences(debug, table) == {}, "from _Py_DebugOffsets, from our 3.13 table"
    r = subprocess.run([path, LIVE], input=debug_text, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize("version", [0x020712f0, 0x030712f0, 0x030e00f0, 0x040000f0],
                         ids=["2.7", "3.7", "3.14", "4.0"])
def test_no_table_for_other_versions(version):
    if not os.access(HELPER, os.X_OK):
        pytest.skip(f"{HELPER} is not built (make tests/helpers/py-offsets-print)")
    r = subprocess.run([HELPER, hex(version)], capture_output=True, text=True, timeout=30)
    assert r.returncode == 1 and "Protocol not supported" in r.stderr, r.stdout + r.stderr
