"""Ruby's own frames, read from outside (issue 45), on Debian 12's Ruby 3.1: each checked against Ruby's own word.
tests/fixtures/ruby/hang.rb prints Thread#backtrace_locations of each thread once they all wait (two threads in
Mutex#lock, each owning the Mutex the other wants, a third in sleep), and the dump must list the same methods, paths
and lines; the Mutex ABBA is a DEADLOCK with both owners named, in a dump and for the daemon's deadlock rule; a
spinning method is named with its line; --no-ruby reads nothing of the VM."""
import json
import os
import select
import shutil
import subprocess

import pytest

from conftest import SRCDIR, dump_json, stackctl, wait_until
from test_python_daemon import config, firings, recording_hook, unique_comm

HANG = os.path.join(SRCDIR, "tests", "fixtures", "ruby", "hang.rb")
RUBY = shutil.which("ruby3.1") or shutil.which("ruby")

pytestmark = pytest.mark.skipif(RUBY is None, reason="no Ruby here (the suite installs Debian's ruby3.1)")


class Hang:
    """hang.rb MODE ARGS under RUBY (through a link named COMM, which the kernel takes as the process's name); its
    first line, Ruby's own word, read."""

    def __init__(self, mode, *args, comm=None, tmp_path=None):
        exe = RUBY
        if comm:
            exe = str(tmp_path / comm)
            os.symlink(RUBY, exe)
        self.p = subprocess.Popen([exe, HANG, mode, *map(str, args)], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, start_new_session=True)
        self.pid = self.p.pid
        ready, _, _ = select.select([self.p.stdout], [], [], 30)
        line = self.p.stdout.readline() if ready else b""
        assert line, f"hang.rb {mode} printed nothing: {self.p.stderr.read1(4096) if not ready else b''!r}"
        self.first = json.loads(line)

    def stop(self):
        if self.p.poll() is None:
            os.killpg(self.pid, 9)
        self.p.wait()


@pytest.fixture
def hang():
    started = []

    def start(mode, *args, **kw):
        h = Hang(mode, *args, **kw)
        started.append(h)
        return h
    yield start
    for h in started:
        h.stop()


def rule(name, comm, deadlock=False, actions="[snapshot, log, hook]"):
    """A rule on COMM's threads blocked for a second (in a deadlock, with DEADLOCK)."""
    return f"""
  - name: {name}
    class: blocked
    for: 1s
    comm: {json.dumps(comm)}
    {"deadlock: true" if deadlock else ""}
    cooldown: 1h
    actions: {actions}
"""


def thread_of(doc, tid):
    return next(t for t in doc["threads"] if t["tid"] == tid)


def ruby_frames(thread):
    return [(f["function"], f.get("file"), f.get("line")) for f in thread["frames"] if f.get("kind") == "ruby"]


def oracle(t):
    return [(f["label"], f["path"], f["line"]) for f in t["frames"]]


def test_every_thread_shows_the_frames_ruby_itself_printed(hang):
    """Each thread's Ruby frames, innermost first, equal Thread#backtrace_locations: the C methods (Mutex#lock,
    Kernel#sleep) by their names at their callers' lines, the methods, the blocks; none of them stopped."""
    h = hang("abba")
    [doc] = dump_json(h.pid)
    assert doc["ruby"]["version"] == h.first["ruby"] and not doc["ruby"].get("error"), doc["ruby"]
    assert len(h.first["threads"]) == 3
    for t in h.first["threads"]:
        ours = thread_of(doc, t["tid"])
        assert ruby_frames(ours) == oracle(t), (t["name"], ruby_frames(ours), oracle(t))
        assert ours["capture"]["method"] == "passive" and ours["capture"]["pause_us"] == 0, ours["capture"]
        # Merged where the VM runs them: above the native frames of the thread's start, below the C method's own.
        kinds = [f.get("kind") for f in ours["frames"]]
        first, last = kinds.index("ruby"), len(kinds) - 1 - kinds[::-1].index("ruby")
        assert 0 < first and last < len(kinds) - 1 and all(k == "ruby" for k in kinds[first:last + 1]), kinds
    # The main thread joins the sleeper, on the script's last line.
    main = ruby_frames(thread_of(doc, h.first["main"]))
    assert [f[0] for f in main] == ["join", "<main>"] and main[0][1:] == main[1][1:] and main[0][1] == HANG, main
    # The text prints them as Ruby does.
    text = stackctl("dump", h.pid, check_rc=0).stdout.decode()
    f = h.first["threads"][2]["frames"][1]
    assert f"{f['path']}:{f['line']}:in `{f['label']}'" in text, text


def test_a_mutex_abba_is_a_deadlock_with_both_owners(hang):
    h = hang("abba")
    ab, ba, napper = (t["tid"] for t in h.first["threads"])
    [doc] = dump_json("--peers", "1", h.pid)
    # Each locker waits for the Mutex the other owns, as Ruby records it.
    for waiter, owner in ((ab, ba), (ba, ab)):
        rt = thread_of(doc, waiter)["ruby"]
        assert rt["state"] == "sleep (forever)", rt
        [lk] = rt["locks"]
        assert lk["kind"] == "waiting to lock" and lk["class"] == "Thread::Mutex" and lk["owner"] == owner, rt
    assert doc["ruby"]["deadlocks"] == 1, doc["ruby"]
    chain = doc["wait_chain"]
    assert chain["deadlock"] and chain["lock_cycle"] == {"pid": h.pid, "threads": sorted([ab, ba])} or \
        (chain["lock_cycle"]["pid"] == h.pid and sorted(chain["lock_cycle"]["threads"]) == sorted([ab, ba])), chain
    edges = {e["from"]["tid"]: e for e in chain["edges"]}
    for waiter, owner in ((ab, ba), (ba, ab)):
        e = edges[waiter]
        assert e["kind"] == "mutex" and e["object"].startswith("Thread::Mutex 0x") and e["to"]["tid"] == owner, e
    # One edge a wait: the Mutex is not counted twice.
    assert sum(1 for e in chain["edges"] if e["from"]["tid"] in (ab, ba)) == 2, chain["edges"]
    # The main thread waits for the sleeper to end (Thread#join, as Ruby records it); the sleeper for nobody.
    assert thread_of(doc, h.first["main"])["ruby"]["waits"] == {"kind": "join", "owner": napper, "object": None}
    assert thread_of(doc, ab)["ruby"]["waits"]["kind"] == "rlock" and \
        thread_of(doc, ab)["ruby"]["waits"]["owner"] == ba
    assert edges[h.first["main"]]["kind"] == "join" and edges[h.first["main"]]["to"]["tid"] == napper, edges
    assert edges[napper]["to"] is None, edges[napper]
    text = stackctl("dump", "--peers", "1", h.pid, check_rc=0).stdout.decode()
    assert "each waits for a Thread::Mutex the next one holds" in text, text
    assert f"waiting to lock <{edges[ab]['object'].split()[1]}> (a Thread::Mutex) held by TID {ba}" in text, text
    assert "DEADLOCK: 1 cycle of Mutex owners" in text, text


def test_a_spinning_method_is_named_with_its_line(hang):
    h = hang("spin")
    tid = h.first["spinner"]
    want = (h.first["label"], h.first["path"], h.first["line"])

    # Stopped for its copy, a running Ruby thread's stack is longer than the copy (its VM stack lies on it), and the
    # dump is partial (exit 5): its outer native frames were read after it ran on.
    def spinning():
        [doc] = dump_json(h.pid, check_rc=None)
        t = thread_of(doc, tid)
        return t if ruby_frames(t)[:1] == [want] else None
    t = wait_until(spinning, timeout=30, interval=0.05, what="the spinner in spin_here")
    assert t["ruby"]["holds_global_lock"] and t["ruby"]["state"] == "run", t["ruby"]
    assert ruby_frames(t)[1][0] == "block in <main>", ruby_frames(t)


def test_no_ruby_reads_nothing_of_the_vm(hang):
    h = hang("abba")
    [doc] = dump_json(h.pid, "--no-ruby")
    assert "ruby" not in doc
    for t in doc["threads"]:
        assert "ruby" not in t and not ruby_frames(t), t


def test_the_daemon_fires_its_deadlock_rule_on_a_ruby_mutex_abba(daemon, hang, tmp_path):
    """The daemon sees the two lockers owe each other (each parked, one in ppoll and one in a condition variable, as
    Ruby parks them), fires the deadlock rule once, and its snapshot has both threads' Ruby frames."""
    comm = unique_comm("rb-dl")
    hook, out = recording_hook(tmp_path)
    d = daemon(config(rule("rb-deadlock", comm, deadlock=True), hook))
    h = hang("abba", comm=comm, tmp_path=tmp_path)
    lockers = {t["tid"]: t for t in h.first["threads"][:2]}
    ev = wait_until(lambda: firings(out), timeout=30, interval=0.1, what="the deadlock's hook")[0]
    assert ev["pid"] == h.pid and ev["tid"] in lockers, ev
    assert "deadlock with" in ev["summary"], ev["summary"]
    # The problem is the Ruby code's: the script and the method, not libruby's frames.
    assert ev["title"].startswith(f"{comm} blocked in ") and " ← hang.rb:" in ev["title"], ev["title"]
    snap = json.loads(stackctl("--socket", d.socket, "show", "--json", ev["snapshot_id"], check_rc=0).stdout)
    for tid, t in lockers.items():
        assert ruby_frames(thread_of(snap, tid)) == oracle(t), (ruby_frames(thread_of(snap, tid)), oracle(t))


def test_idle_ruby_threads_are_no_alarm(daemon, hang, tmp_path):
    """Threads parked in Queue#pop, a sleeper, and a main thread joining them wait: nobody owes them anything, and
    rules that fire on a blocked thread or a deadlock stay quiet while the daemon watches them."""
    comm = unique_comm("rb-idle")
    hook, out = recording_hook(tmp_path)
    d = daemon(config(rule("rb-blocked", comm, actions="[log, hook]") +
                      rule("rb-deadlock", comm, deadlock=True, actions="[log, hook]"), hook))
    h = hang("crowd", 4, 3, comm=comm, tmp_path=tmp_path)
    # Parked well past the rules' 1 s, judged at every poll (200 ms) of 4 s.
    d.wait_scans(20)
    assert firings(out) == [], firings(out)
    assert h.p.poll() is None


def libruby():
    """The libruby the machine's Ruby loads, from its maps' point of view: ldd's answer."""
    out = subprocess.run(["ldd", RUBY], capture_output=True, text=True).stdout
    return next((ln.split("=>")[1].split()[0] for ln in out.splitlines() if "libruby" in ln and "=>" in ln), None)


def file_offset(path, symbol):
    """The file offset of dynamic symbol SYMBOL of PATH (its address, through the section that holds it)."""
    addr = next(int(ln.split()[0], 16) for ln in subprocess.run(["nm", "-D", path], capture_output=True,
                                                                text=True).stdout.splitlines()
                if ln.split()[-1] == symbol)
    for ln in subprocess.run(["readelf", "-S", "-W", path], capture_output=True, text=True).stdout.splitlines():
        f = ln.replace("[ ", "[").split()
        if len(f) > 6 and f[0].startswith("[") and f[0] != "[Nr]":
            start, off, size = int(f[3], 16), int(f[4], 16), int(f[5], 16)
            if start and start <= addr < start + size:
                return addr - start + off
    raise AssertionError(f"no section holds {symbol}")


@pytest.mark.skipif(not shutil.which("nm") or not shutil.which("readelf"), reason="needs binutils")
def test_a_ruby_release_without_a_layout_is_named_with_native_frames(tmp_path):
    """A libruby whose ruby_version says 3.9.2 (a copy of the machine's, patched): the dump names the release and
    why its frames are not read, and has its native frames, as before the reader."""
    lib = libruby()
    if not lib:
        pytest.skip("the machine's Ruby has no libruby")
    data = bytearray(open(lib, "rb").read())
    off = file_offset(lib, "ruby_version")
    assert data[off:off + 4] == b"3.1." or data[off:off + 2] == b"3.", data[off:off + 8]
    data[off:off + 6] = b"3.9.2\0"
    (tmp_path / os.path.basename(lib)).write_bytes(bytes(data))
    # --disable-gems: RbConfig, which rubygems loads, checks its version against the executable's.
    p = subprocess.Popen([RUBY, "--disable-gems", "-e", "puts 1; $stdout.flush; sleep"], stdout=subprocess.PIPE,
                         env=dict(os.environ, LD_LIBRARY_PATH=str(tmp_path)), start_new_session=True)
    try:
        assert p.stdout.readline() == b"1\n"
        maps = open(f"/proc/{p.pid}/maps").read()
        assert str(tmp_path) in maps, "the patched libruby was not loaded"
        [doc] = dump_json(p.pid)
        assert doc["ruby"]["version"] == "3.9.2", doc["ruby"]
        assert "a Ruby release whose layout this reader does not know" in doc["ruby"]["error"], doc["ruby"]
        main = thread_of(doc, p.pid)
        assert not ruby_frames(main) and any(f.get("function") == "ruby_run_node" for f in main["frames"]), main
        text = stackctl("dump", p.pid, check_rc=0).stdout.decode()
        assert "ruby 3.9.2: no Ruby frames: a Ruby release whose layout" in text, text
    finally:
        os.killpg(p.pid, 9)
        p.wait()


def test_a_mutex_another_thread_holds_is_owed_in_rubys_words(daemon, hang, tmp_path):
    """A thread waiting for a Mutex whose owner sleeps is blocked (the owner may sleep as long as it likes: the wait
    ends only when it unlocks), and the daemon says why in Ruby's words; the owner itself only sleeps."""
    comm = unique_comm("rb-held")
    hook, out = recording_hook(tmp_path)
    d = daemon(config(rule("rb-blocked", comm, actions="[log, hook]"), hook))
    h = hang("held", comm=comm, tmp_path=tmp_path)
    holder, waiter = (t["tid"] for t in h.first["threads"])

    def verdicts():
        rows = {t["tid"]: t for t in d.get_json("/processes")["threads"] if t["pid"] == h.pid}
        return rows if rows.get(waiter, {}).get("blocked_because") else None
    rows = wait_until(verdicts, timeout=30, interval=0.1, what="the waiter's verdict")
    assert rows[waiter]["blocked_because"] == "a Ruby Mutex another thread holds", rows[waiter]
    assert not rows.get(holder, {}).get("blocked_because"), rows.get(holder)
    ev = wait_until(lambda: firings(out), timeout=30, interval=0.1, what="the blocked rule's hook")[0]
    assert ev["tid"] == waiter, ev
