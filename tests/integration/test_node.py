"""Node.js's JavaScript frames, read from outside (issue 43), on the machine's Node 20 and Debian 12's Node 18 (unpacked
beside it by tests/fixtures/node/fetch-node18, run in a mount namespace of its own): each checked against Node's own
word. A blocked thread's frames equal the stack trace Node printed on the line of the blocking call (a sync read of a
FIFO, Atomics.wait, execSync); a spinning loop's frame equals the hottest frame and line of Node's own CPU profile;
a worker thread, an idle event loop, --no-node, a Node without V8's metadata and one whose metadata lacks what the
reader needs; the formats; and the daemon, whose journal record, hook and HTTP API name the JavaScript culprit."""
import glob
import gzip
import json
import os
import re
import select
import shutil
import subprocess
import time

import pytest

from conftest import SRCDIR, STACKCTL, dump_json, stackctl, wait_until
from test_journal import FIRED, journal, journald_daemon  # noqa: F401  (journald_daemon is a fixture)
from test_python_daemon import config, firings, recording_hook, spin_rule, unique_comm
from test_scan_source import bpf_reason, without_bpf_caps

HANG = os.path.join(SRCDIR, "tests", "fixtures", "node", "hang.js")
NODE18 = os.environ.get("STACKWATCH_NODE18") or os.path.join(SRCDIR, "tests", "fixtures", "node18")
SYSTEM_NODE = shutil.which("node")
# Node prints a frame as "    at F (FILE:LINE:COL)", "    at FILE:LINE:COL" for an anonymous top-level function, and
# "    at F (<anonymous>)" for a builtin (no script).
FRAME_RE = re.compile(r"^\s+at (?:(.*) \((.*):(\d+):(\d+)\)|(.*):(\d+):(\d+)|(.*) \(<anonymous>\))$")


def node_major(argv):
    out = subprocess.run(argv + ["-p", "process.versions.node"], capture_output=True, text=True, timeout=30)
    return int(out.stdout.split(".")[0]) if out.returncode == 0 else None


def node18_argv():
    """Debian's Node 18 (libnode.so.108): its externalized modules are looked for under /usr/share/nodejs, bound from
    the unpacked packages in a mount namespace of its own (a container as far as our reader is concerned)."""
    root = NODE18
    if not os.access(os.path.join(root, "usr", "bin", "node"), os.X_OK):
        return None
    script = ("mkdir -p /usr/share/nodejs && mount --bind \"$R/usr/share/nodejs\" /usr/share/nodejs && "
              "exec env LD_LIBRARY_PATH=\"$R/usr/lib/x86_64-linux-gnu\" \"$R/usr/bin/node\" \"$@\"")
    return ["env", f"R={root}", "unshare", "-m", "sh", "-c", script, "node18"]


def nodes():
    """[(label, argv)] of the Nodes this machine has: its own (20 here) and Debian's 18 when unpacked."""
    out = []
    if SYSTEM_NODE:
        major = node_major([SYSTEM_NODE])
        if major:
            out.append((f"node{major}", [SYSTEM_NODE]))
    argv = node18_argv()
    if argv and node_major(argv) == 18:
        out.append(("node18", argv))
    return out


NODES = nodes()
NODE_IDS = [label for label, _ in NODES]
if not any(label == "node18" for label in NODE_IDS):
    NODE_IDS.append("node18")
    NODES.append(("node18", None))


def need(argv, label):
    if argv is None:
        pytest.skip(f"{label} is not here: tests/fixtures/node/fetch-node18 (as root) unpacks Debian's Node 18")


class Hang:
    """tests/fixtures/node/hang.js MODE ARGS under ARGV; its first line (Node's oracle stack, its TID) read."""

    def __init__(self, argv, mode, *args, node_args=()):
        self.p = subprocess.Popen(list(argv) + list(node_args) + [HANG, mode, *map(str, args)],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        self.pid = self.p.pid
        ready, _, _ = select.select([self.p.stdout], [], [], 30)
        line = self.p.stdout.readline() if ready else b""
        assert line, f"hang.js {mode} printed nothing: {self.p.stderr.read1(4096) if not ready else b''!r}"
        self.first = json.loads(line)

    def oracle(self):
        """Node's own stack at the blocking line, without oracle() itself: [(function, file, line)], innermost
        first; " [as NAME]" (the property a function was called through, which V8 looks up) left out."""
        frames = []
        for ln in self.first["oracle"].splitlines()[1:]:
            m = FRAME_RE.match(ln)
            assert m, ln
            if m.group(1) is not None:
                frames.append((re.sub(r" \[as [^\]]*\]$", "", m.group(1)), m.group(2), int(m.group(3))))
            elif m.group(5) is not None:
                frames.append(("<anonymous>", m.group(5), int(m.group(6))))
            else:
                frames.append((m.group(8), None, None))
        # The fixture's own reporting: oracle(), and maybeOracle() where it is called through it.
        assert frames[0][0] == "oracle", frames
        return frames[2:] if frames[1][0] == "maybeOracle" else frames[1:]

    def stop(self):
        if self.p.poll() is None:
            os.killpg(self.pid, 9)
        self.p.wait()


def blocked_in_fifo(hang, tmp_path):
    """The machine's Node blocked opening a FIFO from readConfigSync() (hang.js fifo), seen blocked."""
    label, argv = NODES[0]
    need(argv, label)
    fifo = tmp_path / "config.fifo"
    os.mkfifo(fifo)
    h = hang(argv, "fifo", fifo)
    dump_until(h.pid, h.first["tid"], lambda t: node_state(t).startswith("blocked"), "the blocked read")
    return h


@pytest.fixture
def hang():
    started = []

    def start(argv, mode, *args, **kw):
        h = Hang(argv, mode, *args, **kw)
        started.append(h)
        return h
    yield start
    for h in started:
        h.stop()


def thread_of(doc, tid):
    return next(t for t in doc["threads"] if t["tid"] == tid)


def js_frames(thread):
    return [(f["function"], f.get("file"), f.get("line")) for f in thread["frames"] if f.get("kind") == "js"]


def dump_until(pid, tid, cond, what, *args, timeout=30):
    """Dump PID until thread TID satisfies COND (its JSON object); that document."""
    def once():
        [doc] = dump_json(pid, *args)
        return doc if cond(thread_of(doc, tid)) else None
    return wait_until(once, timeout=timeout, interval=0.05, what=what)


def node_state(thread):
    return (thread.get("node") or {}).get("state") or ""


@pytest.mark.parametrize("label,argv", NODES, ids=NODE_IDS)
@pytest.mark.parametrize("mode", ["fifo", "atomics", "exec", "optimized"])
def test_a_blocked_main_thread_shows_the_stack_node_itself_printed(hang, tmp_path, label, argv, mode):
    """Interpreted frames (fifo, atomics, exec), and a function TurboFan compiled, called back by a builtin
    (Array.prototype.forEach, named as Node names it: no script, no line)."""
    need(argv, label)
    fifo = tmp_path / "config.fifo"
    os.mkfifo(fifo)
    h = hang(argv, mode, *([fifo] if mode in ("fifo", "optimized") else []),
             node_args=("--allow-natives-syntax",) if mode == "optimized" else ())
    tid = h.first["tid"]
    if mode == "optimized":
        assert h.first["optimized"], h.first
    doc = dump_until(h.pid, tid, lambda t: node_state(t).startswith("blocked in a synchronous "),
                     f"the main thread blocked in {mode}")
    main = thread_of(doc, tid)
    ours, theirs = js_frames(main), h.oracle()
    # From the function that made the blocking call outwards: the same functions, scripts and lines, in order, to
    # the outermost (Node's loader); inside it, Node's own frames of the call (fs, child_process), or none (a builtin).
    k = next((i for i, f in enumerate(ours) if f[0] == theirs[0][0]), None)
    assert k is not None, (ours, theirs)
    assert ours[k:] == theirs, (ours, theirs)
    inner = {"fifo": "node:fs", "atomics": None, "exec": "node:child_process", "optimized": "node:fs"}[mode]
    if inner is None:
        assert k == 0, ours
    else:
        assert inner in [f[1] for f in ours[:k]] and all(f[1].startswith("node:") for f in ours[:k]), ours
    # Every frame with its column; the state names the syscall and the program's own innermost frame.
    js = [f for f in main["frames"] if f.get("kind") == "js"]
    assert all(f.get("column") for f in js if f.get("file")), js
    user = f"{theirs[0][0]} ({HANG}:{theirs[0][2]}:"
    assert user in node_state(main), main["node"]
    assert main["node"]["known"] and not main["node"].get("note"), main["node"]
    # Read without stopping it: a blocked thread is copied passively, and --method passive has the same frames.
    assert main["capture"]["method"] == "passive" and main["capture"]["pause_us"] == 0, main["capture"]
    [doc2] = dump_json(h.pid, "--method", "passive")
    assert js_frames(thread_of(doc2, tid)) == ours
    # The text prints them as Node does.
    text = stackctl("dump", h.pid, check_rc=0).stdout.decode()
    assert f"at {theirs[0][0]} ({HANG}:{theirs[0][2]}:" in text, text


def cpu_profile_hottest(path):
    """The hottest frame of a .cpuprofile: (function, script path, the line with the most ticks, its caller)."""
    prof = json.loads(open(path).read())
    nodes = {n["id"]: n for n in prof["nodes"]}
    parent = {c: n["id"] for n in prof["nodes"] for c in n.get("children", [])}
    hot = max(prof["nodes"], key=lambda n: n.get("hitCount", 0))
    ticks = max(hot.get("positionTicks", []), key=lambda p: p["ticks"])
    cf = hot["callFrame"]
    url = cf["url"][len("file://"):] if cf["url"].startswith("file://") else cf["url"]
    caller = nodes[parent[hot["id"]]]["callFrame"]["functionName"]
    return cf["functionName"], url, ticks["line"], caller


@pytest.mark.parametrize("label,argv", NODES, ids=NODE_IDS)
def test_a_spinning_loop_is_the_hottest_frame_of_nodes_own_profile(hang, tmp_path, label, argv):
    need(argv, label)
    prof = tmp_path / "prof"
    h = hang(argv, "spin", 6000, node_args=("--cpu-prof", f"--cpu-prof-dir={prof}"))
    tid = h.first["tid"]
    seen = []
    deadline = time.monotonic() + 4
    while time.monotonic() < deadline and len(seen) < 8:
        [doc] = dump_json(h.pid)
        main = thread_of(doc, tid)
        ours = js_frames(main)
        if ours and ours[0][0] == "busyLoopHere":
            seen.append((ours, main))
    # Caught at an instant inside a builtin its code calls without a frame of its own (an allocation, once the
    # counter leaves the small integers), the loop's frame has no line, and says why; never another line.
    lined = [(ours, main) for ours, main in seen if ours[0][2]]
    assert len(lined) >= 3, seen
    for ours, main in seen:
        if not ours[0][2]:
            assert "busyLoopHere: " in main["node"]["note"], main["node"]
    assert h.p.wait(timeout=30) == 0
    [path] = glob.glob(str(prof / "*.cpuprofile"))
    function, url, line, caller = cpu_profile_hottest(path)
    assert (function, url) == ("busyLoopHere", HANG), (function, url)
    for ours, main in lined:
        # The loop's own line (the whole loop is on it), then the timer's handler that called it.
        assert ours[0] == (function, url, line), (ours[0], (function, url, line))
        assert ours[1][0].endswith(caller) and ours[1][1] == HANG, ours
        assert node_state(main).startswith(f"running JavaScript: busyLoopHere ({HANG}:{line}:"), main["node"]


@pytest.mark.parametrize("label,argv", NODES, ids=NODE_IDS)
def test_a_worker_thread_and_an_idle_event_loop(hang, label, argv):
    need(argv, label)
    h = hang(argv, "worker")
    tid = h.first["tid"]

    # Caught inside a builtin its loop calls without a frame of its own, the frame has no line and its note says why
    # (test_a_spinning_loop_is_the_hottest_frame_of_nodes_own_profile): wait for a dump with the line.
    def spinning_worker(doc):
        return next((t for t in doc["threads"] if t["tid"] != tid and js_frames(t)[:1] and
                     js_frames(t)[0][0] == "busyLoopHere" and js_frames(t)[0][2]), None)
    doc = wait_until(lambda: (lambda d: d if spinning_worker(d) else None)(dump_json(h.pid)[0]), timeout=30,
                     interval=0.05, what="the worker's busyLoopHere")
    w = spinning_worker(doc)
    assert js_frames(w)[0][1] == HANG and js_frames(w)[0][2], js_frames(w)
    assert node_state(w).startswith("running JavaScript: busyLoopHere"), w["node"]
    # The main thread runs no JavaScript: its event loop waits.
    main = thread_of(doc, tid)
    assert js_frames(main) == [] and node_state(main) == "idle in the event loop (epoll_wait)", main.get("node")
    # Threads that never run JavaScript (libuv's pool, V8's platform threads) have no block at all.
    others = [t for t in doc["threads"] if t["tid"] not in (tid, w["tid"])]
    assert others and not any(t.get("node") for t in others), [t.get("node") for t in others]


def test_no_node_reads_nothing_of_v8(hang, tmp_path):
    h = blocked_in_fifo(hang, tmp_path)
    [doc] = dump_json(h.pid)
    assert js_frames(thread_of(doc, h.first["tid"]))
    [doc] = dump_json(h.pid, "--no-node")
    assert "node" not in doc
    for t in doc["threads"]:
        assert "node" not in t and not js_frames(t), t


def patched_node(src, dst, names):
    """A copy of the executable SRC with .symtab stripped and each of NAMES in .dynstr renamed (v8dbg_ to v8dbX_): a
    Node that runs as before but exports no such symbol."""
    subprocess.run(["objcopy", "--strip-all", src, dst], check=True)
    out = subprocess.run(["readelf", "-S", "-W", dst], capture_output=True, text=True, check=True).stdout
    m = re.search(r"\.dynstr\s+STRTAB\s+[0-9a-f]+\s+([0-9a-f]+)\s+([0-9a-f]+)", out)
    off, size = int(m.group(1), 16), int(m.group(2), 16)
    with open(dst, "r+b") as f:
        f.seek(off)
        table = f.read(size)
        for name in names:
            new = name.replace(b"v8dbg_", b"v8dbX_")
            assert table.count(b"\0" + name + b"\0") == 1, name
            table = table.replace(b"\0" + name + b"\0", b"\0" + new + b"\0")
        f.seek(off)
        f.write(table)
    os.chmod(dst, 0o755)
    return dst


@pytest.mark.skipif(not SYSTEM_NODE or not shutil.which("objcopy"), reason="needs the machine's node and objcopy")
@pytest.mark.parametrize("kind", ["stripped", "unknown"])
def test_a_node_without_what_the_reader_needs_says_so(hang, tmp_path, kind):
    exe = os.path.realpath(SYSTEM_NODE)
    if kind == "stripped":
        syms = subprocess.run(["nm", "-D", exe], capture_output=True, check=True).stdout.split(b"\n")
        names = [ln.split()[-1] for ln in syms if b" v8dbg_" in ln]
        want = "no V8 post-mortem metadata"
    else:
        # One constant the reader needs, as a V8 that no longer exports it (or never did).
        names = [b"v8dbg_scopeinfo_idx_first_vars"]
        want = "lacks constants this reader needs"
    node = patched_node(exe, str(tmp_path / "node"), names)
    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    h = hang([node], "fifo", fifo)
    [doc] = dump_json(h.pid)
    assert want in doc["node"]["error"], doc["node"]
    main = thread_of(doc, h.first["tid"])
    assert js_frames(main) == [] and "node" not in main, main.get("node")
    # The native stack is there as before.
    assert any((f.get("function") or "").startswith("uv_fs_open") for f in main["frames"]), main["frames"]
    text = stackctl("dump", h.pid, check_rc=0).stdout.decode()
    assert want in text and " at readConfigSync" not in text


def test_formats_show_the_javascript_frames(hang, tmp_path):
    h = blocked_in_fifo(hang, tmp_path)
    folded = stackctl("dump", "--folded", h.pid, check_rc=0).stdout.decode()
    assert re.search(r"startServer[^;]*;Server\.start[^;]*;Settings\.read[^;]*;readConfigSync[^;]*;Object\.readFileSync",
                     folded), folded
    svg = stackctl("dump", "--svg", h.pid, check_rc=0).stdout.decode()
    assert "readConfigSync" in svg and "Server.start" in svg
    out = tmp_path / "p.pb.gz"
    stackctl("dump", "--pprof", out, h.pid, check_rc=0)
    raw = gzip.decompress(out.read_bytes())
    assert b"readConfigSync" in raw and HANG.encode() in raw


def test_the_daemon_names_the_javascript_culprit(journald_daemon, hang, tmp_path):
    """A spinning event loop fires a busy-loop rule: the journal record, the hook and the HTTP API name the
    JavaScript function, script and line it runs, as `stackctl ps` would."""
    argv = NODES[0][1]
    need(argv, NODES[0][0])
    comm = unique_comm("nd-spin")
    hook, out = recording_hook(tmp_path)
    d, jdir = journald_daemon(config(spin_rule(comm), hook))
    h = hang(argv, "spin", f"title={comm}")
    line = next(i for i, ln in enumerate(open(HANG), 1) if ln.startswith("function busyLoopHere("))
    frame = f"busyLoopHere (hang.js:{line})"

    recs = wait_until(lambda: journal(jdir, f"MESSAGE_ID={FIRED}", f"STACKWATCH_PID={h.pid}"), timeout=30,
                      interval=0.1, what="the firing's record in the journal")
    rec = recs[0]
    assert rec["STACKWATCH_PYTHON_FRAME"] == frame, rec
    assert rec["MESSAGE"].splitlines()[0].split("; snapshot ")[0].endswith(f" in {frame}"), rec["MESSAGE"]
    ev = wait_until(lambda: firings(out), timeout=10, what="the hook's event")[0]
    assert ev["python_frame"] == frame and ev["env"] == frame, ev
    assert ev["frames"][0] == f"#0  {frame}", ev["frames"]
    # The problem is the JavaScript function, not V8's or libuv's frames.
    assert ev["title"] == f"{comm} busy-loop ← hang.js:busyLoopHere" and ev["signature"] == rec["STACKWATCH_SIGNATURE"]
    # The API: the frames of a live dump, as JSON and as a picture.
    doc = d.get_json(f"/stacks/{h.pid}")
    main = thread_of(doc, h.pid)
    assert js_frames(main)[0][:2] == ("busyLoopHere", HANG), js_frames(main)
    code, _, body = d.get(f"/stacks/{h.pid}?format=svg")
    assert code == 200 and b"busyLoopHere" in body


def test_a_read_in_readfilesync_is_read_with_every_register_stopping_nothing(hang, tmp_path):
    """readFileSync() of a FIFO that a writer holds open blocks in read() inside libuv, whose caller's frame the
    syscall record's registers cannot recover (uv__fs_work). With BPF the capture reads every register the kernel
    saved for the thread: the whole stack, its JavaScript frames, nothing stopped; without BPF (no CAP_BPF), the
    default method stops it once for them."""
    label, argv = NODES[0]
    need(argv, label)
    fifo = tmp_path / "config.fifo"
    os.mkfifo(fifo)
    writer = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)
    try:
        h = hang(argv, "fifo", fifo)
        tid = h.first["tid"]
        wait_until(lambda: "pipe_read" in open(f"/proc/{h.pid}/task/{tid}/wchan").read(), what="node in read()")
        why = bpf_reason()
        if why:
            pytest.skip(why)
        [doc] = dump_json(h.pid)
        main = thread_of(doc, tid)
        assert main["capture"]["method"] == "passive" and main["capture"]["pause_us"] == 0, main["capture"]
        assert doc["capture"]["fallback_stops"] == 0, doc["capture"]
        names = [f.get("function") for f in main["frames"]]
        assert "uv__fs_work" in names and names.index("uv__fs_work") < len(names) - 3, names
        assert "readConfigSync" in [f[0] for f in js_frames(main)], js_frames(main)
        wrapper = without_bpf_caps()
        if wrapper:
            r = subprocess.run([*wrapper, STACKCTL, "dump", "--json", str(h.pid)], capture_output=True)
            assert r.returncode in (0, 5) and json.loads(r.stdout)["capture"]["fallback_stops"] >= 1, r
    finally:
        os.close(writer)
