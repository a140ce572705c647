"""C++ names as eu-stack and gdb show them: a C++ service (g++ -O2 -g: a namespace, a class template, operator()
and a lambda inlined into it) dumped with demangled names in text, JSON (the raw name kept as linkage_name) and
folded output, inlined frames included; --no-demangle and eu-stack's -r give the names as the binary has them."""
import json
import os
import re
import shutil
import subprocess

import pytest

from conftest import SRCDIR, stackctl, wait_until

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


# Debian's rustc (apt-get install rustc), not one from rustup that may be on PATH first.
RUSTC = "/usr/bin/rustc"
RUST_HANDLE = {"legacy": "<rust_names::eco::server::Server<T> as rust_names::eco::server::Handler>::handle",
               "v0": "<rust_names::eco::server::Server<u32> as rust_names::eco::server::Handler>::handle"}
RUST_CLOSURE = {"legacy": "::{{closure}}", "v0": "::{closure#0}"}


@pytest.fixture(params=["legacy", "v0"])
def rust(request, tmp_path):
    if not os.access(RUSTC, os.X_OK):
        pytest.skip("no Debian rustc (apt-get install rustc)")
    binary = tmp_path / f"rust-names-{request.param}"
    # Legacy is rustc's default (asking for it by name needs -Z unstable-options in 1.63); v0 is asked for.
    mangling = ["-C", "symbol-mangling-version=v0"] if request.param == "v0" else []
    subprocess.run([RUSTC, "-g", "-C", "opt-level=2", *mangling, "-o", str(binary),
                    os.path.join(SRCDIR, "tests", "fixtures", "rust-names.rs")], check=True)
    p = subprocess.Popen([str(binary)], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
    assert p.stdout.readline().strip() == b"READY"
    wait_until(lambda: "pipe_read" in open(f"/proc/{p.pid}/wchan").read(), what="the Rust fixture in read()")
    yield request.param, p
    p.kill()
    p.wait()


def test_rust_names_and_inlined_frames(rust):
    """Legacy (_ZN…17h<hash>E) and v0 (_R…) names readable, and the frames rustc inlined shown as gdb shows them:
    std's FileDesc::read and File::read inside <File as Read>::read, the closure inside handle()."""
    mangling, p = rust
    handle, closure = RUST_HANDLE[mangling], RUST_HANDLE[mangling] + RUST_CLOSURE[mangling]
    doc = json.loads(stackctl("dump", "--json", "--no-kernel", p.pid, check_rc=0).stdout)
    frames = doc["threads"][0]["frames"]
    names = [f["function"] for f in frames]
    i = names.index(closure)
    assert frames[i]["inlined"] and names[i + 1] == handle and not frames[i + 1]["inlined"], names
    assert frames[i]["linkage_name"].startswith("_ZN" if mangling == "legacy" else "_R"), frames[i]
    assert names[i + 2] == "rust_names::main"
    assert names[i - 3:i] == ["std::sys::unix::fd::FileDesc::read", "std::sys::unix::fs::File::read",
                              "<std::fs::File as std::io::Read>::read"], names
    assert [f["inlined"] for f in frames[i - 3:i]] == [True, True, False]
    src = open(os.path.join(SRCDIR, "tests", "fixtures", "rust-names.rs")).read().splitlines()
    call = next(n for n, ln in enumerate(src, 1) if "wait(self.bias" in ln)
    assert frames[i]["file"].endswith("rust-names.rs") and frames[i + 1]["line"] == call  # the closure's call site
    text = stackctl("dump", "--no-kernel", p.pid, check_rc=0).stdout.decode()
    assert f" {closure} - " in text and f" {handle}+0x" in text and "17h" not in text
    raw = stackctl("dump", "--no-demangle", "--no-kernel", p.pid, check_rc=0).stdout.decode()
    assert handle not in raw


@pytest.mark.skipif(not shutil.which("gdb"), reason="no gdb")
def test_rust_frames_agree_with_gdb(rust):
    """gdb's bt (v0: gdb's own Rust names, {impl#0} for the impl) has the same frames in the same order: the three
    std reads, the closure, handle, main."""
    mangling, p = rust
    r = subprocess.run(["gdb", "-p", str(p.pid), "-batch", "-ex", "bt"], capture_output=True, text=True, timeout=120)
    ours = [f["function"] for f in json.loads(stackctl("dump", "--json", "--no-kernel", p.pid,
                                                       check_rc=0).stdout)["threads"][0]["frames"]]
    gdb = re.findall(r"^#\d+\s+(?:0x[0-9a-f]+ in )?(\S+)", r.stdout, re.M)
    assert len(gdb) >= 6, r.stdout[-2000:]
    # Frames 1-5 (0 is libc's read), by the last path component both print (gdb: handle<u32>, closure#0<u32>).
    last = [re.sub(r"<[^<>]*>$", "", g).split("::")[-1] for g in gdb[1:6]]
    assert last[:3] == ["read"] * 3 and last[3] in ("{closure#0}", "{{closure}}") and last[4] == "handle", gdb
    assert [n.split("::")[-1] for n in ours[1:7]] == ["read", "read", "read", RUST_CLOSURE[mangling][2:], "handle",
                                                     "main"], ours
