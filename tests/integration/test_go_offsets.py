"""go-offsets against the Go toolchain on the machine. A small program it builds (goroutines, a channel, a mutex) has
DWARF that lays out runtime.g, runtime.m, runtime.sudog and runtime.semaRoot as that release does: every field of
the table go_offsets_for() holds for the release (printed by tests/helpers/go-offsets-print) is compared with it,
g_size included. Only the installed release can be checked so; the other tables were walked by hand from their
sources, which lib/runtime/go-offsets.c cites."""
import os
import re
import shutil
import subprocess

import pytest

from conftest import BUILDDIR

HELPER = os.path.join(BUILDDIR, "tests", "helpers", "go-offsets-print")
PROGRAM = """package main

import (
	"fmt"
	"sync"
)

func main() {
	var mu sync.Mutex
	var wg sync.WaitGroup
	ch := make(chan int)
	wg.Add(1)
	go func() {
		defer wg.Done()
		mu.Lock()
		ch <- 1
		mu.Unlock()
	}()
	fmt.Println(<-ch)
	wg.Wait()
}
"""
# Each field of GoOffsets and where DWARF has it: a structure, then members, each in the type of the one before.
FIELDS = {
    "g_stack_lo": ("runtime.g", "stack", "lo"),
    "g_stack_hi": ("runtime.g", "stack", "hi"),
    "g_m": ("runtime.g", "m"),
    "g_sched_sp": ("runtime.g", "sched", "sp"),
    "g_sched_pc": ("runtime.g", "sched", "pc"),
    "g_sched_bp": ("runtime.g", "sched", "bp"),
    "g_syscallsp": ("runtime.g", "syscallsp"),
    "g_syscallpc": ("runtime.g", "syscallpc"),
    "g_atomicstatus": ("runtime.g", "atomicstatus"),
    "g_goid": ("runtime.g", "goid"),
    "g_waitsince": ("runtime.g", "waitsince"),
    "g_waitreason": ("runtime.g", "waitreason"),
    "g_lockedm": ("runtime.g", "lockedm"),
    "g_gopc": ("runtime.g", "gopc"),
    "g_startpc": ("runtime.g", "startpc"),
    "g_waiting": ("runtime.g", "waiting"),
    "g_parentgoid": ("runtime.g", "parentGoid"),
    "m_procid": ("runtime.m", "procid"),
    "sudog_g": ("runtime.sudog", "g"),
    "sudog_next": ("runtime.sudog", "next"),
    "sudog_prev": ("runtime.sudog", "prev"),
    "sudog_elem": ("runtime.sudog", "elem"),
    "sudog_waitlink": ("runtime.sudog", "waitlink"),
    "sudog_c": ("runtime.sudog", "c"),
    "semaroot_treap": ("runtime.semaRoot", "treap"),
}
# What is a size rather than a place.
SIZES = {"g_size", "sudog_size"}

# readelf --debug-dump=info: " <1><5e7a4>: Abbrev Number: 39 (DW_TAG_structure_type)", then its attributes
# "    <5e7a5>   DW_AT_name        : runtime.g".
DIE = re.compile(r"^\s*<(\d+)><([0-9a-f]+)>: Abbrev Number: (\d+)(?: \((\w+)\))?")
ATTR = re.compile(r"^\s*<[0-9a-f]+>\s+(DW_AT_\w+)\s*:\s*(.*?)\s*$")
REF = re.compile(r"<0x([0-9a-f]+)>")


class Dwarf:
    """The DIEs of one binary: by offset, with their tag, attributes and children; structures by name."""

    def __init__(self, text):
        self.dies, self.structs = {}, {}
        stack = []
        die = None
        for line in text.splitlines():
            m = DIE.match(line)
            if m:
                depth, offset, abbrev, tag = int(m.group(1)), int(m.group(2), 16), int(m.group(3)), m.group(4)
                del stack[depth:]
                if abbrev == 0:
                    die = None
                    continue
                die = {"tag": tag, "attrs": {}, "children": []}
                self.dies[offset] = die
                if stack:
                    stack[-1]["children"].append(die)
                stack.append(die)
                continue
            m = ATTR.match(line)
            if m and die is not None:
                die["attrs"][m.group(1)] = m.group(2)
        for die in self.dies.values():
            name = die["attrs"].get("DW_AT_name")
            if die["tag"] == "DW_TAG_structure_type" and name:
                self.structs.setdefault(name, die)

    def type_of(self, die):
        m = REF.search(die["attrs"].get("DW_AT_type", ""))
        return self.dies[int(m.group(1), 16)] if m else None

    def resolve(self, die):
        """DIE's type with typedefs followed."""
        while die is not None and die["tag"] == "DW_TAG_typedef":
            die = self.type_of(die)
        return die

    def size(self, die):
        if "DW_AT_byte_size" in die["attrs"]:
            return int(die["attrs"]["DW_AT_byte_size"].split()[0], 0)
        if die["tag"] == "DW_TAG_pointer_type":
            return 8
        return self.size(self.type_of(die))

    def field(self, struct, *members):
        """(offset, size) of STRUCT.MEMBERS[0].MEMBERS[1]…, None when a member is missing."""
        die, offset = self.structs[struct], 0
        for name in members:
            member = next((c for c in die["children"]
                           if c["tag"] == "DW_TAG_member" and c["attrs"].get("DW_AT_name") == name), None)
            if member is None:
                return None
            location = member["attrs"]["DW_AT_data_member_location"]
            # A constant, or an expression "… (DW_OP_plus_uconst: 8)".
            m = re.search(r"DW_OP_plus_uconst: (\d+)", location)
            offset += int(m.group(1) if m else location.split()[0], 0)
            die = self.resolve(self.type_of(member))
        return offset, self.size(die)


def go_env(*names):
    """The values of NAMES from `go env`, and the environment a build needs (no module, a cache of its own)."""
    go = shutil.which("go")
    if not go:
        pytest.skip("no Go toolchain: `go` is not installed")
    env = dict(os.environ, GO111MODULE="off", GOFLAGS="", CGO_ENABLED="0")
    env.setdefault("HOME", "/root")
    r = subprocess.run([go, "env", *names], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    return go, env, r.stdout.split()


def ours(version):
    """The helper's table for VERSION ("go1.19.8") as {name: int or None}; skips when we have none for it."""
    if not os.access(HELPER, os.X_OK):
        pytest.skip(f"{HELPER} is not built (make tests/helpers/go-offsets-print)")
    r = subprocess.run([HELPER, version], capture_output=True, text=True, timeout=30)
    if r.returncode == 1:
        pytest.skip(f"{version}: {r.stderr.strip()} (lib/runtime/go-offsets.c has no table for it yet)")
    assert r.returncode == 0, r.stderr
    return {k: None if v == "none" else int(v) for k, v in (line.split() for line in r.stdout.splitlines())}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """(version, Dwarf) of the small program the installed Go builds."""
    go, env, (version,) = go_env("GOVERSION")
    if not shutil.which("readelf"):
        pytest.skip("no readelf (binutils) to read the DWARF with")
    tmp = tmp_path_factory.mktemp("go-offsets")
    env["GOCACHE"] = str(tmp / "cache")
    (tmp / "main.go").write_text(PROGRAM)
    r = subprocess.run([go, "build", "-o", "prog", "main.go"], cwd=tmp, capture_output=True, text=True, env=env,
                       timeout=600)
    assert r.returncode == 0, r.stderr
    r = subprocess.run(["readelf", "--debug-dump=info", str(tmp / "prog")], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    return version, Dwarf(r.stdout)


def test_the_installed_go_release_has_a_table(built):
    version, _ = built
    table = ours(version)
    assert set(table) == set(FIELDS) | SIZES, "a GoOffsets field this test does not know (add it to FIELDS)"


def test_table_matches_dwarf(built):
    version, dwarf = built
    table = ours(version)
    for struct in ("runtime.g", "runtime.m", "runtime.sudog", "runtime.semaRoot"):
        assert struct in dwarf.structs, f"{version}: no {struct} in the DWARF"

    theirs, g_end = {}, 0
    for name, path in FIELDS.items():
        found = dwarf.field(*path)
        theirs[name] = found[0] if found else None
        if found and name.startswith("g_"):
            g_end = max(g_end, found[0] + found[1])
    # g_size reads every g field, rounded up to 8 bytes; what runtime.g holds past them is not read.
    theirs["g_size"] = (g_end + 7) // 8 * 8
    theirs["sudog_size"] = dwarf.size(dwarf.structs["runtime.sudog"])
    assert theirs["g_size"] <= dwarf.size(dwarf.structs["runtime.g"])

    differences = {k: (table.get(k), theirs.get(k)) for k in sorted(table) if table.get(k) != theirs.get(k)}
    assert differences == {}, f"{version}: (ours, DWARF's)"
