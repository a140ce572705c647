"""Go goroutines (issue 28): every goroutine of a Go program, read from the runtime's allgs without stopping it,
checked against the runtime's own traceback (runtime.Stack(buf, true), which the program writes on SIGUSR1 right
after our dump) in a binary with DWARF, one without (-ldflags=-w: the per-version layout table) and a PIE; a
stripped one (-ldflags=-s -w) says why it has no goroutines. The contract is /work/go-spec.md: JSON keys "go",
"goroutine_stacks" and "goroutines", Go's own text format after the threads, --no-goroutines."""
import collections
import json
import os
import re
import shutil
import signal
import subprocess
import time

import pytest

from conftest import SRCDIR, Fixture, stackctl, thread_states, tracer_of

GODIR = os.path.join(SRCDIR, "tests", "fixtures", "go", "hung")
IDLE = 10000
# -buildmode=pie: a position-independent executable, loaded at a random base (the default check, relocated).
VARIANTS = {"dwarf": [], "nodwarf": ["-ldflags=-w"], "stripped": ["-ldflags=-s -w"], "pie": ["-buildmode=pie"]}
READABLE = [("dwarf", "dwarf"), ("nodwarf", "table"), ("pie", "dwarf")]   # (variant, go.layout)
# What each named goroutine of hung/main.go shows in runtime.Stack's header (Go 1.19).
REASONS = {"waitOnChan": "chan receive", "holdMutex": "chan receive", "lockMutex": "semacquire",
           "lockMutexToo": "semacquire", "selectForever": "select (no cases)", "sleeper": "sleep",
           "netReader": "IO wait", "lockedWaiter": "chan receive"}
# The goroutines the runtime itself runs in this program (Go 1.19), which runtime.Stack leaves out (its
# isSystemGoroutine(): started in a runtime.* function other than runtime.main): the ones of every program, the
# finalizer goroutine (os's files have finalizers), ensureSigM's (signal.Notify), and one GC mark worker per P from
# the first GC on. Another Go release may run others: then only the rule is checked.
SYSTEM_GO119 = {"runtime.forcegchelper": 1, "runtime.bgsweep": 1, "runtime.bgscavenge": 1, "runtime.runfinq": 1,
                "runtime.ensureSigM.func1": 1}


class GoBuilds:
    """tests/fixtures/go/hung, each variant built on first use and kept for the session (the PIE one compiles the
    standard library again, -shared: ~15 s of CPU; the others ~1 s)."""

    def __init__(self, go, tmp):
        self.go, self.tmp = go, tmp
        self.env = dict(os.environ, HOME=str(tmp), GOCACHE=str(tmp / "cache"), GOPATH=str(tmp / "gopath"),
                        GO111MODULE="off", GOFLAGS="")
        self.version = subprocess.run([go, "env", "GOVERSION"], env=self.env, capture_output=True, text=True,
                                      check=True, timeout=60).stdout.strip()
        self.paths = {}

    def binary(self, variant):
        if variant not in self.paths:
            out = str(self.tmp / f"hung-{variant}")
            flags = VARIANTS[variant]
            r = subprocess.run([self.go, "build", *flags, "-o", out, "main.go"], cwd=GODIR, env=self.env,
                               capture_output=True, text=True, timeout=600)
            assert r.returncode == 0, f"go build {' '.join(flags)}: {r.stderr}"
            self.paths[variant] = out
        return self.paths[variant]


@pytest.fixture(scope="session")
def go_builds(tmp_path_factory):
    """The Go toolchain, offline (GOPATH mode, a private HOME and build cache); skips without one."""
    go = shutil.which("go")
    if not go:
        pytest.skip("go is not installed (apt-get install golang-go)")
    return GoBuilds(go, tmp_path_factory.mktemp("go"))


# How long test_minutes_past_a_minute's program must have waited: past a minute, with a margin for a busy machine.
MINUTE_WAIT = 62


class Hung:
    """A started hung binary: its "ready" line parsed (pid, addresses, the named goroutines' ids; the SPIN
    goroutines on a CPU, main.spin …, are in spins by name, not in goids)."""

    def __init__(self, fixture, builds, variant, tmp_path, idle=IDLE, spin=0, env=None):
        self.oracle_path = str(tmp_path / f"oracle-{variant}.txt")
        self.started = time.monotonic()
        self.fx = fixture(builds.binary(variant), "-idle", str(idle), "-spin", str(spin), "-oracle", self.oracle_path,
                          env=env, ready=False)
        self.pid = self.fx.pid
        line = self.fx.wait_line_prefix(b"ready ", timeout=60).decode()
        f = line.split()
        assert int(f[1]) == self.pid, line
        kv = dict(x.split("=", 1) for x in f[2:])
        self.mutex, self.waitchan = int(kv["mutex"], 16), int(kv["waitchan"], 16)
        self.holdchan, self.idlechan = int(kv["holdchan"], 16), int(kv["idlechan"], 16)
        self.locked_tid, self.procs, self.idle = int(kv["lockedtid"]), int(kv["procs"]), int(kv["idle"])
        self.ready = time.monotonic()
        self.goids = {k: int(v) for k, v in (x.split(":") for x in kv["goids"].split(","))}
        self.spins = {k: self.goids.pop(k) for k in list(self.goids) if re.fullmatch(r"spin\d*", k)}
        assert set(self.goids) == set(REASONS) and self.idle == idle and len(self.spins) == spin, line

    def oracle(self):
        """SIGUSR1, then the traceback the program wrote: parse_traceback()'s result."""
        os.kill(self.pid, signal.SIGUSR1)
        self.fx.wait_line(b"done", timeout=60)
        with open(self.oracle_path) as f:
            return parse_traceback(f.read())


# offset: Go's "+0x2f", the frame's pc less its function's entry (a caller's pc is its return address); None where
# Go prints none (an inlined call, or a pc at its function's entry).
Frame = collections.namedtuple("Frame", "function file line inlined offset")
Goroutine = collections.namedtuple("Goroutine", "goid reason minutes locked frames created_by")
# What runtime.Stack prints instead of the frames of a goroutine on a CPU it could not stop (runtime/traceback.go).
UNAVAILABLE = "\tgoroutine running on other thread; stack unavailable"


def parse_location(line):
    """"\\t/x/main.go:12 +0x2f" (the offset absent for an inlined call) -> (file, line, offset or None)."""
    m = re.fullmatch(r"\t(.+):(\d+)(?: \+0x([0-9a-f]+))?", line)
    assert m, f"not a location line: {line!r}"
    return m.group(1), int(m.group(2)), int(m.group(3), 16) if m.group(3) else None


def parse_traceback(text):
    """runtime.Stack(buf, true) -> {goid: Goroutine}. Each goroutine is a header "goroutine N [reason, M minutes,
    locked to thread]:", then a pair of lines per frame, "function(args)" and "\\tfile:line +0xoff" ("(...)" for an
    inlined call), and "created by F" with its location; goroutines are separated by an empty line."""
    out = {}
    for block in text.rstrip("\n").split("\n\n"):
        lines = block.split("\n")
        m = re.fullmatch(r"goroutine (\d+) \[(.+)\]:", lines[0])
        assert m, f"not a goroutine header: {lines[0]!r}"
        reason, *rest = m.group(2).split(", ")
        minutes, locked = 0, False
        for r in rest:
            if r == "locked to thread":
                locked = True
            else:
                mm = re.fullmatch(r"(\d+) minutes", r)
                assert mm, f"unknown header part {r!r} in {lines[0]!r}"
                minutes = int(mm.group(1))
        frames, created_by, i = [], None, 1
        while i < len(lines):
            if lines[i] == UNAVAILABLE:
                i += 1
                continue
            assert i + 1 < len(lines), f"no location after {lines[i]!r}"
            if lines[i].startswith("created by "):
                # Go 1.21 adds " in goroutine N".
                created_by = (re.sub(r" in goroutine \d+$", "", lines[i][len("created by "):]),
                              *parse_location(lines[i + 1]))
            else:
                mm = re.fullmatch(r"(.+)\(([^()]*)\)", lines[i])
                assert mm, f"not a frame line: {lines[i]!r}"
                file, line, offset = parse_location(lines[i + 1])
                frames.append(Frame(mm.group(1), file, line, mm.group(2) == "...", offset))
            i += 2
        goid = int(m.group(1))
        assert goid not in out, f"goroutine {goid} twice"
        out[goid] = Goroutine(goid, reason, minutes, locked, frames, created_by)
    return out


def hidden(function):
    """A frame runtime.Stack does not show: an unexported runtime function (runtime.gopark, runtime.goexit …)."""
    return function is not None and re.match(r"runtime\.[a-z]", function) is not None


def go_dump(pid, *args, text=False):
    """stackctl dump [--json] ARGS PID; returns (exit status, the document or the text). A Go process's threads may
    leave a readable dump partial today (5: a thread's unwind cut), which is not the goroutines' business: 0 or 5."""
    r = stackctl("dump", *([] if text else ["--json"]), *args, pid, timeout=60)
    assert r.returncode in (0, 5), f"rc {r.returncode}: {r.stderr.decode(errors='replace')}"
    out = r.stdout.decode()
    if text:
        return r.returncode, out
    docs = [json.loads(line) for line in out.splitlines() if line.strip()]
    assert len(docs) == 1, f"{len(docs)} documents"
    return r.returncode, docs[0]


def goroutines(doc):
    """{goid: goroutine} of a dump, checked for the contract's shape: ordered by goid, no dead one, every stack
    index valid, every frame a Go frame. The one error allowed: a goroutine found on a CPU whose thread, captured
    a moment before, ran something else (the runtime's own wake by themselves)."""
    gs = doc["goroutines"]
    ids = [g["goid"] for g in gs]
    assert ids == sorted(set(ids)), "goroutines not ordered by goid, or one twice"
    stacks = doc["goroutine_stacks"]
    for g in gs:
        assert g["status"] in ("idle", "runnable", "running", "syscall", "waiting", "copystack", "preempted"), g
        if g["status"] == "running" and "ran something else" in g.get("error", ""):
            assert "stack" not in g, g
            continue
        assert "error" not in g, g
        assert 0 <= g["stack"] < len(stacks), g
    for s in stacks:
        assert s and all(f["kind"] == "go" and f["function"] for f in s), s
    assert doc["go"]["goroutines_total"] >= len(gs)
    assert doc["go"].get("truncated") is False
    assert "error" not in doc["go"], doc["go"]
    return {g["goid"]: g for g in gs}


def frames_of(doc, g):
    return doc["goroutine_stacks"][g["stack"]]


def go_offset(f):
    """A frame's offset as Go prints it: none for an inlined call, nor at its function's entry (traceback.go prints
    one only when frame.pc > f.entry())."""
    return None if f.get("inlined") or not f.get("offset") else f["offset"]


def visible(doc, g):
    """G's frames as runtime.Stack shows them: Frame tuples, innermost first."""
    return [Frame(f["function"], f.get("file"), f.get("line"), bool(f.get("inlined")), go_offset(f))
            for f in frames_of(doc, g) if not hidden(f["function"])]


def creator(g):
    """G's "created by" as runtime.Stack prints it: (function, file, line, offset)."""
    cb = g["created_by"]
    return cb["function"], cb["file"], cb["line"], go_offset(cb)


def minutes(g):
    """The minutes Go's header shows for G (goroutineheader(): whole minutes since waitsince, 0 when not known)."""
    return int(g["wait_seconds"] // 60) if "wait_seconds" in g else 0


def start_function(doc, g):
    """The function G was started in: its outermost frame but runtime.goexit."""
    fs = [f["function"] for f in frames_of(doc, g) if not (f["function"] or "").startswith("runtime.goexit")]
    assert fs, g
    return fs[-1]


def header_reason(g):
    """The reason runtime.Stack's header shows: the wait reason of a waiting goroutine, else its status."""
    return g["wait_reason"] if g["status"] == "waiting" and g.get("wait_reason") else g["status"]


def signal_loop(oracle):
    """os/signal's loop goroutine (signal.Notify's): woken by our SIGUSR1 between the two moments."""
    ids = [g.goid for g in oracle.values() if [f.function for f in g.frames][-1:] == ["os/signal.loop"]]
    assert len(ids) == 1, ids
    return ids[0]


def check_system(hung, builds, doc, ours, extra):
    """The goroutines in our dump that runtime.Stack leaves out are exactly the runtime's own."""
    starts = collections.Counter(start_function(doc, ours[i]) for i in extra)
    for f in starts:
        assert f.startswith("runtime.") and f != "runtime.main", f"goroutine started in {f} missing from the oracle"
    if builds.version.startswith("go1.19."):
        assert starts == collections.Counter(SYSTEM_GO119, **{"runtime.gcBgMarkWorker": hung.procs}), starts


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_fixture_and_oracle(fixture, go_builds, tmp_path, variant):
    """The fixture itself, read through the oracle alone (no reader involved): every named goroutine parked in its
    own function as its header says, the idle ones one identical stack, main the writer, os/signal's loop there;
    a second SIGUSR1 gives the same parked goroutines. What the other tests compare against."""
    hung = Hung(fixture, go_builds, variant, tmp_path, idle=1000)
    first = hung.oracle()
    for name, goid in hung.goids.items():
        o = first[goid]
        assert o.reason == REASONS[name] and o.locked == (name == "lockedWaiter"), (name, o)
        assert f"main.{name}" in [f.function for f in o.frames], (name, o.frames)
        assert o.created_by[0] == "main.main" and o.created_by[1].endswith("/hung/main.go"), o.created_by
    lock = [f.function for f in first[hung.goids["lockMutex"]].frames]
    assert lock == ["sync.runtime_SemacquireMutex", "sync.(*Mutex).lockSlow", "sync.(*Mutex).Lock",
                    "main.lockMutex"], lock
    assert [f.inlined for f in first[hung.goids["lockMutex"]].frames] == [False, False, True, False]
    idle = [o for o in first.values() if [f.function for f in o.frames] == ["main.idleWorker"]]
    assert len(idle) == 1000 and len({(tuple(o.frames), o.created_by, o.reason) for o in idle}) == 1
    assert first[1].reason == "running" and first[1].frames[-1].function == "main.main"
    loop = signal_loop(first)
    assert len(first) == 1000 + len(REASONS) + 2
    second = hung.oracle()
    assert sorted(second) == sorted(first)
    assert {k: v for k, v in second.items() if k not in (1, loop)} == \
        {k: v for k, v in first.items() if k not in (1, loop)}


@pytest.mark.parametrize("variant,layout", READABLE)
def test_goroutines_equal_runtime_stack(fixture, go_builds, tmp_path, variant, layout):
    """Our dump, then the runtime's own traceback: the same goroutines (ours also has the runtime's, which
    runtime.Stack hides), and for every goroutine but two the same wait reason, locked flag, frames (function,
    file:line, inlined calls, and Go's +0x offset of each frame that is not inlined: ours with the unexported runtime
    frames dropped), creator (its offset too) and minutes waited (none here). The two: main, which
    writes the oracle (running then, parked in main.main for us), and os/signal's loop, woken by the SIGUSR1: both
    present in both, each checked in our dump as it was. A --no-source dump has the same goroutines, and the
    program's the same functions (inlined ones, which it may leave out, apart). Every thread is left neither stopped
    nor traced."""
    hung = Hung(fixture, go_builds, variant, tmp_path)
    _, doc = go_dump(hung.pid)
    _, bare = go_dump(hung.pid, "--no-source")
    oracle = hung.oracle()

    assert doc["go"]["version"] == go_builds.version
    assert doc["go"]["layout"] == layout
    ours = goroutines(doc)
    loop = signal_loop(oracle)
    assert {1, loop} <= set(oracle) and len(oracle) == IDLE + len(REASONS) + 2, sorted(oracle)[:20]
    assert set(oracle) <= set(ours), f"missing from our dump: {sorted(set(oracle) - set(ours))[:20]}"
    check_system(hung, go_builds, doc, ours, set(ours) - set(oracle))

    compared = 0
    for goid, o in oracle.items():
        g = ours[goid]
        if goid in (1, loop):
            continue
        assert header_reason(g) == o.reason, (goid, g, o)
        assert bool(g.get("locked_to_thread")) == o.locked, (goid, g)
        assert visible(doc, g) == o.frames, f"goroutine {goid}:\nours   {visible(doc, g)}\noracle {o.frames}"
        assert creator(g) == o.created_by, (goid, g["created_by"], o.created_by)
        # Ours is read first: the oracle's minutes are ours, or one more if a minute turned in between.
        assert minutes(g) <= o.minutes <= minutes(g) + 1, (goid, g.get("wait_seconds"), o.minutes)
        compared += 1
    assert compared == IDLE + len(REASONS)

    # The two that moved, as they were for us.
    main = ours[1]
    assert header_reason(main) == "chan receive" and [f.function for f in visible(doc, main)] == ["main.main"]
    assert ours[loop]["status"] == "syscall"
    assert [f.function for f in visible(doc, ours[loop])] == ["os/signal.signal_recv", "os/signal.loop"]
    assert ours[loop]["created_by"]["function"] == oracle[loop].created_by[0]

    # Named goroutines: where the fixture says they are, the locked one on its own thread.
    for name, goid in hung.goids.items():
        assert header_reason(ours[goid]) == REASONS[name], (name, ours[goid])
        assert f"main.{name}" in [f.function for f in visible(doc, ours[goid])], name
    locked = ours[hung.goids["lockedWaiter"]]
    assert locked["locked_to_thread"] is True and locked["tid"] == hung.locked_tid, locked
    assert sum(bool(g.get("locked_to_thread")) for g in ours.values() if g["goid"] in oracle) == 1

    # --no-source: the same goroutines, stacks and functions; inlined frames only if it keeps them. The runtime's
    # own goroutines (the scavenger, between "sleep" and "GC scavenge wait") wake by themselves between the two
    # dumps: only the program's are compared.
    bare_gs = goroutines(bare)
    assert sorted(bare_gs) == sorted(ours)
    for goid, g in ours.items():
        if goid not in oracle:
            continue
        b = bare_gs[goid]
        assert (b["status"], b.get("wait_reason")) == (g["status"], g.get("wait_reason")), goid
        want = [f.function for f in visible(doc, g)]
        got = [f.function for f in visible(bare, b)]
        if got != want:
            assert got == [f.function for f in visible(doc, g) if not f.inlined], (goid, got, want)

    for tid, state in thread_states(hung.pid).items():
        assert state not in ("t", "T") and tracer_of(hung.pid, tid) == 0, (tid, state)


def test_wait_on_and_wait_seconds(fixture, go_builds, tmp_path):
    """lockMutex and lockMutexToo wait on the fixture's sync.Mutex (its address, not its semaphore's at +4), both
    with the same address as the fixture printed it; the 10,000 idle
    goroutines all on their one channel, waitOnChan and holdMutex on theirs. Every goroutine parked before the
    fixture's runtime.GC() (os/signal's loop too, in a system call) has a wait time, at least 0 and at most how long
    the fixture has lived (measured here) + 1 s; main, which parked after that GC, has none."""
    hung = Hung(fixture, go_builds, "dwarf", tmp_path)
    _, doc = go_dump(hung.pid, "--no-source")
    lived = time.monotonic() - hung.started
    ours = goroutines(doc)

    def wait_on(name):
        return ours[hung.goids[name]].get("wait_on")

    def addr(w):
        return (w["kind"], int(w["address"], 16)) if w else None

    assert addr(wait_on("lockMutex")) == ("sync.Mutex", hung.mutex), wait_on("lockMutex")
    assert addr(wait_on("lockMutexToo")) == ("sync.Mutex", hung.mutex), wait_on("lockMutexToo")
    assert addr(wait_on("waitOnChan")) == ("channel", hung.waitchan), wait_on("waitOnChan")
    assert addr(wait_on("holdMutex")) == ("channel", hung.holdchan), wait_on("holdMutex")
    idle = [g for g in ours.values() if [f.function for f in visible(doc, g)] == ["main.idleWorker"]]
    assert len(idle) == IDLE
    assert collections.Counter(addr(g.get("wait_on")) for g in idle) == {("channel", hung.idlechan): IDLE}

    loop = [g for g in ours.values() if [f.function for f in visible(doc, g)][-1:] == ["os/signal.loop"]]
    assert len(loop) == 1
    parked = idle + loop + [ours[i] for i in hung.goids.values()]
    for g in parked:
        assert "wait_seconds" in g, g
        assert 0 <= g["wait_seconds"] <= lived + 1, (g, lived)
    assert "wait_seconds" not in ours[1], ours[1]


def test_text_is_go_traceback(fixture, go_builds, tmp_path):
    """The text dump shows goroutines as Go does after the threads: waitOnChan's goroutine under its own header
    with its frame and source line, the idle ones as one group of 10,000 ids; --folded has a "go:" line per
    goroutine, its frames those of the JSON. Its summary names what several goroutines wait on together (the two
    waiters on the fixture's sync.Mutex, at the address the fixture printed, the oldest for as long as the JSON's
    longer wait; the 10,000 on their channel) and, as a leak, the one creator with 100 live goroutines or more:
    the idle ones' "created by" in the oracle, with as many as the oracle says it created."""
    hung = Hung(fixture, go_builds, "dwarf", tmp_path)
    _, doc = go_dump(hung.pid)
    _, text = go_dump(hung.pid, text=True)
    _, folded = go_dump(hung.pid, "--folded", text=True)
    oracle = hung.oracle()
    ours = goroutines(doc)

    goid = hung.goids["waitOnChan"]
    frame = oracle[goid].frames[0]
    assert frame.function == "main.waitOnChan"
    m = re.search(rf"^goroutine {goid} \[chan receive\]:\n((?:.*\n)*?)\n", text + "\n", re.M)
    assert m, text[-3000:]
    assert re.search(rf"^main\.waitOnChan\(.*\)\n\t{re.escape(frame.file)}:{frame.line} \+0x[0-9a-f]+$",
                     m.group(1), re.M), m.group(1)
    assert re.search(r"^created by main\.main$", m.group(1), re.M), m.group(1)

    idle = {i for i, o in oracle.items() if [f.function for f in o.frames] == ["main.idleWorker"]}
    assert len(idle) == IDLE
    groups = re.findall(rf"^{IDLE} goroutines \[chan receive\]:(.*)$", text, re.M)
    assert len(groups) == 1, text[-3000:]
    ids = {int(x) for x in re.findall(r"\d+", groups[0])}
    assert ids and ids <= idle, sorted(ids - idle)[:20]

    # The summary, between the "GOROUTINES" line and the first group.
    summary = re.search(r"^GOROUTINES of .*\n((?:  .*\n)*)\n", text, re.M)
    assert summary, text[-3000:]
    lines = summary.group(1).splitlines()
    waits = [g.get("wait_seconds") for g in ours.values() if g.get("wait_on", {}).get("kind") == "sync.Mutex"]
    assert len(waits) == 2 and None not in waits, waits
    m = [re.fullmatch(rf"  2 goroutines wait on the same sync\.Mutex 0x{hung.mutex:x}, the oldest for (\d+) s", ln)
         for ln in lines]
    assert sum(bool(x) for x in m) == 1, lines
    oldest = int(next(x for x in m if x).group(1))
    # The text is a second look, after the JSON's: its wait is as long, or a little longer (rounded to seconds).
    assert max(waits) - 1 <= oldest <= max(waits) + 5, (oldest, waits)
    assert f"  {IDLE} goroutines wait on the same channel 0x{hung.idlechan:x}" in \
        [ln.split(",")[0] for ln in lines], lines
    creators = collections.Counter(o.created_by[0] for o in oracle.values() if o.created_by)
    site = oracle[min(idle)].created_by[0]
    leaks = [ln for ln in lines if re.fullmatch(r"  \d+ goroutines created by .* are alive.*", ln)]
    leak = f"  {creators[site]} goroutines created by {site} are alive (a leak, if they should have ended)"
    assert leaks == [leak], (leaks, creators)
    assert creators[site] >= IDLE

    # Names as the native folded lines have them: ';' and ' ' are the format's separators ("chan_receive").
    def fold(name):
        return name.replace(";", ":").replace(" ", "_")
    # The two dumps are two looks: the runtime's own goroutines (the scavenger, the GC workers) wake by themselves
    # between them, or while a look reads them, and may differ; the program's parked ones may not.
    lines = [ln for ln in folded.splitlines() if ln.startswith("go:") and ";main." in ln]
    want = collections.Counter("go:%s;%s 1" % (fold(header_reason(g)), ";".join(
        fold(f["function"]) for f in reversed(frames_of(doc, g)))) for g in ours.values()
        if any(f["function"].startswith("main.") for f in frames_of(doc, g)))
    assert len(lines) >= IDLE
    assert collections.Counter(lines) == want


@pytest.mark.parametrize("variant", ["dwarf", "nodwarf"])
def test_running_goroutine_from_its_thread(fixture, go_builds, tmp_path, variant):
    """A goroutine on a CPU (main.spin, -spin) has no saved stack: it is listed as running, on the thread of its M
    (m.procid), with that thread's frames as we captured them up to its goroutine's start (runtime.goexit), main.spin
    among them at the line of its loop (without DWARF from the binary's own table, as a parked goroutine's), and the
    creator the oracle names. The oracle (runtime.Stack stops the world first, preempting it in its loop) shows it
    with main.spin at the same line, [running] or [runnable]. The thread on a CPU was stopped for its own capture, at most:
    no thread is left stopped or traced. A goroutine preempted (sysmon, every 10 ms) at the moment it is read is not
    on a CPU, or was not when its thread was captured: that dump is taken again (five tries)."""
    hung = Hung(fixture, go_builds, variant, tmp_path, idle=100, spin=1)
    goid = hung.spins["spin"]
    for _ in range(5):
        _, doc = go_dump(hung.pid)
        g = goroutines(doc)[goid]
        if g["status"] == "running" and "stack" in g:
            break
    else:
        pytest.fail(f"main.spin's goroutine not running in five dumps: {g}")
    oracle = hung.oracle()

    threads = {t["tid"]: t for t in doc["threads"]}
    assert g.get("tid") in threads and g.get("tid") in thread_states(hung.pid), (g, sorted(threads))
    fns = [f["function"] for f in frames_of(doc, g)]
    assert "main.spin" in fns, fns
    own = next(f for f in frames_of(doc, g) if f["function"] == "main.spin")
    thread = [f.get("function") for f in threads[g["tid"]]["frames"]]
    assert thread[-1].startswith("runtime.goexit"), thread
    assert fns == thread[:-1], f"goroutine {fns}\nthread {thread}"
    o = oracle[goid]
    assert o.reason in ("running", "runnable"), o
    spin = next(f for f in o.frames if f.function == "main.spin")
    assert (own["file"], own["line"]) == (spin.file, spin.line), (own, spin)
    assert creator(g) == o.created_by, (g["created_by"], o.created_by)
    assert "wait_seconds" not in g and "wait_on" not in g, g

    for tid, state in thread_states(hung.pid).items():
        assert state not in ("t", "T") and tracer_of(hung.pid, tid) == 0, (tid, state)


def test_running_goroutines_never_show_anothers_frames(fixture, go_builds, tmp_path):
    """Three goroutines on a CPU take turns on two (-spin 3: main.spin, spin2, spin3; GOMAXPROCS=2): sysmon preempts
    each every 10 ms, and the thread its M ran when we captured it may run another by the time the goroutines are
    read. A spinner listed as running shows its own function among its frames, or no frames and why: never another
    spinner's (before the fix, three in ten dumps did). Ten dumps: one at least shows a running spinner's own
    frames. No thread is left stopped or traced."""
    hung = Hung(fixture, go_builds, "dwarf", tmp_path, idle=10, spin=3, env={"GOMAXPROCS": "2"})
    assert hung.procs == 2
    own = unknown = 0
    for _ in range(10):
        _, doc = go_dump(hung.pid, "--no-source")
        gs = {g["goid"]: g for g in doc["goroutines"]}
        for name, goid in hung.spins.items():
            g = gs[goid]
            if g["status"] != "running":
                continue
            if "stack" not in g:
                assert "ran something else" in g.get("error", ""), g
                unknown += 1
                continue
            fns = [f["function"] for f in frames_of(doc, g)]
            assert f"main.{name}" in fns, (name, fns)
            own += 1
    assert own > 0, f"no spinner running with its frames in ten dumps ({unknown} without)"
    for tid, state in thread_states(hung.pid).items():
        assert state not in ("t", "T") and tracer_of(hung.pid, tid) == 0, (tid, state)


def ptrace_methods(doc):
    return {t["tid"]: t["capture"]["method"] for t in doc["threads"]}


def test_goroutines_stop_no_thread(fixture, go_builds, tmp_path):
    """Reading the goroutines stops nothing: each thread is captured the same way (ptrace or passive, as the
    thread capture decides) with and without --no-goroutines, no thread is stopped before or after, none is left
    traced. A thread on a CPU in either dump (sysmon waking, say) is stopped for its own capture: that pair is
    taken again (three tries)."""
    hung = Hung(fixture, go_builds, "dwarf", tmp_path)
    before = thread_states(hung.pid)
    assert before and not set(before.values()) & {"t", "T"}, before
    for _ in range(3):
        _, plain = go_dump(hung.pid, "--no-source", "--no-goroutines")
        _, doc = go_dump(hung.pid, "--no-source")
        if all(t["state"] != "R" for d in (plain, doc) for t in d["threads"]):
            break
    else:
        pytest.fail("a thread was on a CPU in every pair of dumps")
    assert "goroutines" not in plain and len(goroutines(doc)) >= IDLE + len(REASONS)
    assert ptrace_methods(doc) == ptrace_methods(plain)
    after = thread_states(hung.pid)
    for tid, state in after.items():
        assert state not in ("t", "T"), (tid, state)
        assert tracer_of(hung.pid, tid) == 0, tid


def test_no_goroutines(fixture, go_builds, tmp_path):
    """--no-goroutines: no goroutine in the JSON or in the text; without it, they are there."""
    hung = Hung(fixture, go_builds, "dwarf", tmp_path, idle=100)
    _, doc = go_dump(hung.pid, "--no-source", "--no-goroutines")
    assert "goroutines" not in doc and "goroutine_stacks" not in doc, sorted(doc)
    assert doc["threads"]
    _, text = go_dump(hung.pid, "--no-source", "--no-goroutines", text=True)
    assert not re.search(r"^(goroutine \d+|\d+ goroutines) \[", text, re.M)
    _, doc = go_dump(hung.pid, "--no-source")
    assert len(goroutines(doc)) >= 100 + len(REASONS)


def test_stripped_binary(fixture, go_builds, tmp_path):
    """-ldflags=-s -w: no symbols to find the runtime's variables by: go.error says the binary is stripped, there is
    no goroutine list, and every thread is still there with its frames. Assumed, as the contract does not say: the
    dump exits as a partial one (5), as when a CPython's frames cannot be read."""
    hung = Hung(fixture, go_builds, "stripped", tmp_path, idle=100)
    r = stackctl("dump", "--json", "--no-source", hung.pid, timeout=60)
    assert r.returncode == 5, f"rc {r.returncode}: {r.stderr.decode(errors='replace')}"
    doc = json.loads(r.stdout)
    assert "stripped" in doc["go"]["error"], doc.get("go")
    assert "goroutines" not in doc and "goroutine_stacks" not in doc
    tids = set(thread_states(hung.pid))
    assert {t["tid"] for t in doc["threads"]} == tids
    for t in doc["threads"]:
        assert t["frames"], t


@pytest.mark.parametrize("variant", ["dwarf", "nodwarf"])
def test_go_threads_unwind_to_their_stack_top(fixture, go_builds, tmp_path, variant):
    """The OS threads of a Go program, captured passively: each unwind reaches its Go stack's top (runtime.mstart,
    mcall, goexit) and ends there, with no frame found by stack scan: by the binary's CFI (DWARF build) or, without
    it (-w), by Go's own frame sizes (pclntab, method "pclntab"). The dump is whole (exit 0)."""
    hung = Hung(fixture, go_builds, variant, tmp_path, idle=20)
    rc, doc = go_dump(hung.pid, "--method", "passive")
    assert rc == 0, doc["capture"]["errors"]
    methods = set()
    for t in doc["threads"]:
        fns = [f.get("function") or "" for f in t["frames"]]
        assert t["capture"]["unwind_end"] == "the outermost frame of a Go stack", (t["tid"], fns)
        assert fns[-1].split(".abi0")[0] in ("runtime.mstart", "runtime.mcall", "runtime.goexit"), fns
        assert not t["capture"]["truncated"], t["tid"]
        methods |= {f["method"] for f in t["frames"]}
    assert "scan" not in methods and "fp" not in methods, methods
    assert ("pclntab" in methods) == (variant == "nodwarf"), methods


@pytest.fixture(scope="module", autouse=True)
def minute_hung(request, go_builds, tmp_path_factory):
    """test_minutes_past_a_minute's program, started with the module when that test is to run, so that its minute
    of waiting passes while the other tests run; None otherwise."""
    if not any(item.originalname == "test_minutes_past_a_minute" for item in request.session.items):
        yield None
        return
    started = []

    def start(name, *args, env=None, ready=True):
        started.append(Fixture(name, args, env))
        return started[-1]
    try:
        yield Hung(start, go_builds, "dwarf", tmp_path_factory.mktemp("minute"), idle=100)
        for fx in started:
            fx.assert_untouched()
    finally:
        for fx in started:
            fx.kill()


def test_minutes_past_a_minute(minute_hung):
    """Durations as Go shows them, once there is a minute to show: a program whose goroutines have waited over a
    minute (minute_hung, started with the module: this test waits what is left of MINUTE_WAIT s after its
    "ready", the only way to have the runtime's clock pass a minute) shows "1 minutes" (or more) in our dump as in
    the oracle's, read right after: for every goroutine the same whole minutes (the oracle's one more at most, were a
    minute to turn in between), the parked ones' all the same, 1 or more (all parked before the one GC that set their
    waitsince; 1 unless the other tests took two minutes); each named goroutine's text header (", 1 minutes" and
    ", locked to thread" where Go puts them) equal to the oracle's; the idle ones' group and the mutex's summary line
    say as many minutes too."""
    hung = minute_hung
    time.sleep(max(0.0, hung.ready + MINUTE_WAIT - time.monotonic()))
    _, doc = go_dump(hung.pid, "--no-source")
    _, text = go_dump(hung.pid, "--no-source", text=True)
    oracle = hung.oracle()
    with open(hung.oracle_path) as f:
        oracle_text = f.read()
    ours = goroutines(doc)
    m = minutes(ours[hung.goids["waitOnChan"]])
    assert m >= 1, ours[hung.goids["waitOnChan"]]
    loop = signal_loop(oracle)
    parked = set(hung.goids.values()) | {i for i, o in oracle.items()
                                        if [f.function for f in o.frames] == ["main.idleWorker"]}
    assert len(parked) == 100 + len(REASONS)
    for goid, o in oracle.items():
        if goid in (1, loop):
            continue
        g = ours[goid]
        assert minutes(g) <= o.minutes <= minutes(g) + 1, (goid, g.get("wait_seconds"), o.minutes)
        if goid in parked:
            assert minutes(g) == o.minutes == m, (goid, g.get("wait_seconds"), o.minutes, m)

    for name, goid in hung.goids.items():
        want = re.search(rf"^goroutine {goid} \[.*\]:$", oracle_text, re.M).group(0)
        assert f", {m} minutes" in want, want
        assert re.search(rf"^{re.escape(want)}$", text, re.M), (name, want)
    assert re.search(rf"^100 goroutines \[chan receive, {m} minutes\]: ", text, re.M), text[-3000:]
    assert re.search(rf"^  2 goroutines wait on the same sync\.Mutex 0x{hung.mutex:x}, the oldest for {m} minutes$",
                     text, re.M), text[:3000]
