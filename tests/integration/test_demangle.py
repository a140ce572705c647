"""C++ names as eu-stack and gdb show them: a C++ service (g++ -O2 -g: a namespace, a class template, operator()
and a lambda inlined into it) dumped with demangled names in text, JSON (the raw name kept as linkage_name) and
folded output, inlined frames included; --no-demangle and eu-stack's -r give the names as the binary has them."""
import json
import os
import shutil
import subprocess

import pytest

from conftest import SRCDIR, stackctl

OUTER = "eco::detail::Server<long>::operator()(int)"
LAMBDA = OUTER + "::{lambda()#1}::operator()() const"


@pytest.fixture
def cxx(tmp_path):
    if not shutil.which("g++"):
        pytest.skip("no g++")
    binary = tmp_path / "cxx-names"
    subprocess.run(["g++", "-std=c++17", "-O2", "-g", "-o", str(binary),
                    os.path.join(SRCDIR, "tests", "fixtures", "cxx-names.cc")], check=True)
    p = subprocess.Popen([str(binary)], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
    assert p.stdout.readline().strip() == b"READY"
    yield p
    p.kill()
    p.wait()


def test_cxx_names_are_demangled_everywhere(cxx):
    doc = json.loads(stackctl("dump", "--json", "--no-kernel", cxx.pid, check_rc=0).stdout)
    frames = doc["threads"][0]["frames"]
    names = [f["function"] for f in frames]
    # read() in libc, then the lambda (inlined, its linkage name from the abstract origin), then operator(), main.
    i = names.index(LAMBDA)
    assert frames[i]["inlined"] and frames[i]["linkage_name"] == "_ZZN3eco6detail6ServerIlEclEiENKUlvE_clEv"
    assert names[i + 1] == OUTER and frames[i + 1]["linkage_name"] == "_ZN3eco6detail6ServerIlEclEi"
    assert not frames[i + 1]["inlined"] and names[i + 2] == "main" and "linkage_name" not in frames[i + 2]
    assert names[i - 1].startswith("read") and "linkage_name" not in frames[i - 1]
    text = stackctl("dump", "--no-kernel", cxx.pid, check_rc=0).stdout.decode()
    assert f" {LAMBDA} - " in text and f" {OUTER}+0x" in text and "_ZN3eco" not in text
    folded = stackctl("dump", "--folded", "--no-kernel", cxx.pid, check_rc=0).stdout.decode()
    assert f"{OUTER};{LAMBDA.replace(' ', '_')};read" in folded, folded  # folded: no spaces
    # Raw, as the binary has them: --no-demangle, or eu-stack's -r.
    for opt in ("--no-demangle", "-r"):
        raw = stackctl("dump", opt, "--no-kernel", cxx.pid, check_rc=0).stdout.decode()
        assert " _ZN3eco6detail6ServerIlEclEi+0x" in raw and " _ZZN3eco6detail6ServerIlEclEiENKUlvE_clEv - " in raw
        assert "eco::detail" not in raw
    raw_doc = json.loads(stackctl("dump", "--json", "--no-demangle", "--no-kernel", cxx.pid, check_rc=0).stdout)
    assert all("linkage_name" not in f for f in raw_doc["threads"][0]["frames"])


@pytest.mark.skipif(not shutil.which("gdb"), reason="no gdb")
def test_the_names_agree_with_gdb(cxx):
    """gdb -batch bt (it stops the process; ours does not): the same two C++ frames, named the same."""
    r = subprocess.run(["gdb", "-p", str(cxx.pid), "-batch", "-ex", "bt"], capture_output=True, text=True,
                       timeout=120)
    assert OUTER in r.stdout and "{lambda()#1}::operator()() const" in r.stdout, r.stdout[-2000:]
