"""Cases real programs get into, with the answer a person would give (issue 14): a poll() continued after a stop, what
our own ptrace fall-back leaves behind, a connection in a backlog, UDP, a frozen container, interpreter loops, a hung
FUSE daemon, a lock polled for, each with its control."""
import ctypes
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from conftest import FIXTURES, dump_json, stackctl, tracer_of, wait_until

# A client that waits in poll() for its server's reply over a unix socket, and a server that never answers. The
# server is the test's child; the client is the server's child, so both exit with it.
POLL_PAIR = r'''
import os, select, socket, sys
path = sys.argv[1]
srv = socket.socket(socket.AF_UNIX); srv.bind(path); srv.listen(1)
pid = os.fork()
if pid == 0:
    import ctypes
    ctypes.CDLL(None).prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL
    c = socket.socket(socket.AF_UNIX); c.connect(path)
    p = select.poll(); p.register(c, select.POLLIN)
    p.poll()
    os._exit(0)
conn, _ = srv.accept()
print(pid, flush=True)
sys.stdin.read()
'''


def syscall_nr(pid):
    with open(f"/proc/{pid}/syscall") as f:
        return f.read().split()[0]


@pytest.fixture
def poll_pair(tmp_path):
    p = subprocess.Popen([sys.executable, "-c", POLL_PAIR, str(tmp_path / "s.sock")], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE)
    try:
        client = int(p.stdout.readline())
        wait_until(lambda: syscall_nr(client) == "7", what="the client in poll()")
        yield client, p.pid
    finally:
        p.kill()
        p.wait()


def client_edge(client):
    [doc] = dump_json("--peers", "1", "--no-source", "--no-kernel", client)
    edges = [e for e in doc["wait_chain"]["edges"] if e["from"]["pid"] == client]
    return doc, edges


def stop_and_continue(pid):
    os.kill(pid, signal.SIGSTOP)
    wait_until(lambda: open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] == "T", what="stopped")
    os.kill(pid, signal.SIGCONT)
    # The kernel continues poll() through the restart block: /proc now says restart_syscall.
    wait_until(lambda: syscall_nr(pid) == "219", what="the client in restart_syscall")


def assert_waits_on_server(client, server, edges):
    assert len(edges) == 1, edges
    [e] = edges
    assert e["syscall"] == "poll" and e["kind"] == "unix-socket", e
    assert e["to"]["pid"] == server, e


def test_poll_continued_after_sigstop_keeps_its_chain(poll_pair):
    client, server = poll_pair
    _, before = client_edge(client)
    assert_waits_on_server(client, server, before)
    stop_and_continue(client)
    doc, after = client_edge(client)
    assert_waits_on_server(client, server, after)
    sc = doc["threads"][0]["syscall"]
    assert sc["name"] == "poll" and sc["restarted"] is True
    # The registers still hold poll's arguments: the same fds array and count as before.
    assert int(sc["args"][1], 16) == 1


def test_our_ptrace_fall_back_does_not_lose_the_chain(poll_pair):
    client, server = poll_pair
    # A ptrace capture interrupts poll(); the kernel continues it as restart_syscall.
    [doc] = dump_json("--method", "ptrace", "--peers", "1", "--no-source", "--no-kernel", client)
    assert_waits_on_server(client, server, [e for e in doc["wait_chain"]["edges"] if e["from"]["pid"] == client])
    wait_until(lambda: syscall_nr(client) == "219", what="the client in restart_syscall after our stop")
    # Every later look, passive, still has the edge.
    for _ in range(2):
        _, edges = client_edge(client)
        assert_waits_on_server(client, server, edges)


RULES = """
poll_interval: 200ms
archive:
  directory: @ARCHIVE@
rules:
  - name: stuck
    class: [blocked, stopped]
    for: 1s
    exe: "{exe}"
    cooldown: 1h
"""


def test_resumed_client_is_waiting_in_poll_not_flagged(daemon, poll_pair):
    client, server = poll_pair
    d = daemon(RULES.format(exe=os.path.realpath(sys.executable)))
    stop_and_continue(client)
    d.wait_scans(8)

    def thread():
        doc = d.get_json("/processes?all=1")
        return next((t for t in doc["threads"] if t["tid"] == client), None)
    t = wait_until(thread, what="the client in /processes")
    assert t["class"] == "waiting" and t["syscall"] == "poll", t
    assert not d.snapshots("--pid", str(client))


# A server that accepted one client and leaves the next in its listener's backlog, then sleeps on its stdin.
BACKLOG = r'''
import os, socket, sys, ctypes
path = sys.argv[1]
srv = socket.socket(socket.AF_UNIX); srv.bind(path); srv.listen(4)
kids = []
for _ in range(2):
    pid = os.fork()
    if pid == 0:
        ctypes.CDLL(None).prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL
        for s in [srv] + [v for k, v in list(globals().items()) if k == "conn"]:
            s.close()  # the client holds nothing of the server's
        c = socket.socket(socket.AF_UNIX); c.connect(path)
        c.recv(1)
        os._exit(0)
    kids.append(pid)
    if not kids[1:]:
        conn, _ = srv.accept()
print(*kids, flush=True)
sys.stdin.read()
'''


def test_unix_client_in_the_listener_backlog_waits_on_the_listener(tmp_path):
    p = subprocess.Popen([sys.executable, "-c", BACKLOG, str(tmp_path / "b.sock")], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE)
    try:
        accepted, waiting = map(int, p.stdout.readline().split())
        for pid in (accepted, waiting):
            wait_until(lambda: syscall_nr(pid) == "45", what=f"{pid} in recvfrom")
        # Connected, but never accepted: the edge goes to whoever holds the listener, which should accept.
        _, [e] = client_edge(waiting)
        assert e["kind"] == "unix-socket" and e["to"]["pid"] == p.pid, e
        assert "not accepted yet" in e["object"] and str(tmp_path / "b.sock") in e["object"], e
        # The control: the accepted client waits on the same process, through the accepted socket.
        _, [e] = client_edge(accepted)
        assert e["kind"] == "unix-socket" and e["to"]["pid"] == p.pid, e
        assert "not accepted yet" not in e["object"], e
    finally:
        p.kill()
        p.wait()


# A UDP server bound to a loopback port (not connected) that never answers, and a client connected to it waiting
# for the answer; a second client connected to a port nobody has bound.
UDP = r'''
import os, socket, sys, ctypes
srv = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); srv.bind(("127.0.0.1", 0))
free = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); free.bind(("127.0.0.1", 0))
nobody = free.getsockname(); free.close()
kids = []
for addr in (srv.getsockname(), nobody):
    pid = os.fork()
    if pid == 0:
        ctypes.CDLL(None).prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL
        srv.close()
        c = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); c.connect(addr)
        c.send(b"ping")
        while True:
            try:
                c.recv(1)
            except ConnectionRefusedError:  # the ICMP from a port nobody has bound
                pass
    kids.append(pid)
print(*kids, flush=True)
srv.recvfrom(16)
sys.stdin.read()
'''


def test_udp_client_waits_on_the_local_socket_bound_to_its_destination():
    p = subprocess.Popen([sys.executable, "-c", UDP], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        client, lonely = map(int, p.stdout.readline().split())
        for pid in (client, lonely, p.pid):
            wait_until(lambda: syscall_nr(pid) in ("0", "45"), what=f"{pid} asleep in its read")
        _, [e] = client_edge(client)
        assert e["kind"] == "udp" and e["to"]["pid"] == p.pid, e
        assert "the socket bound there" in e["object"], e
        # The control: nobody has bound the other client's destination, so its edge leads nowhere.
        _, [e] = client_edge(lonely)
        assert not e.get("to"), e
    finally:
        p.kill()
        p.wait()


FREEZE_RULES = """
poll_interval: 200ms
archive:
  directory: @ARCHIVE@
capture:
  max_per_minute: 60
rules:
  - name: hung
    class: blocked
    for: 1s
    comm: [block-read, dstate-vfork, sleep]
    cooldown: 1h
"""


def test_a_frozen_container_is_frozen_not_hung(daemon, fixture, freezer):
    """A process in a frozen cgroup is "frozen", whatever /proc shows: D with its own wait channel on v1 (since Linux
    6.1 a frozen task is TASK_FROZEN, no longer parked in __refrigerator), S on v2. Never a hang rule's, and the
    daemon, ps and a dump say which cgroup froze it."""
    version, group, path, freeze = freezer
    d = daemon(FREEZE_RULES)
    paused = fixture("block-read")
    # A plain sleep too: frozen in clock_nanosleep, v1 shows it D in hrtimer_nanosleep.
    sleeper = subprocess.Popen(["sleep", "600"])
    for pid in (paused.pid, sleeper.pid):
        with open(os.path.join(group, "cgroup.procs"), "w") as f:
            f.write(str(pid))
    freeze()
    assert read_state(paused.pid) == read_state(sleeper.pid) == ("D" if version == 1 else "S")
    # The control: a thread really stuck in D (vfork) next to it is blocked, and the rule fires on it.
    stuck = fixture("dstate-vfork", "30")
    wait_until(lambda: d.snapshots("--pid", str(stuck.pid)), timeout=30, what="the hung-task rule on dstate-vfork")

    def thread():
        doc = d.get_json("/processes?all=1")
        return next((t for t in doc["threads"] if t["tid"] == paused.pid), None)
    assert wait_until(lambda: (thread() or {}).get("class") == "frozen", what="the frozen thread in /processes")
    # Frozen for longer than the rule's for: 1s, and never a snapshot; the default list leaves it out.
    d.wait_scans(10)
    t = thread()
    assert t["class"] == "frozen" and t["frozen_by"] == {"cgroup": path, "version": version}, t
    assert [t["class"] for t in d.get_json("/processes?all=1")["threads"] if t["tid"] == sleeper.pid] == ["frozen"]
    assert not d.snapshots("--pid", str(paused.pid)) and not d.snapshots("--pid", str(sleeper.pid))
    assert paused.pid not in [t["tid"] for t in d.get_json("/processes")["threads"]]
    ps = stackctl("--socket", d.socket, "ps", "--class", "frozen", check_rc=0).stdout.decode()
    assert f"frozen by cgroup {path} (v{version})" in ps, ps
    # A dump of it returns at once, passive, and says why nothing in it moves.
    [doc] = dump_json("--no-kernel", paused.pid)
    assert doc["process"]["frozen"] == {"cgroup": path, "version": version}, doc["process"]
    text = stackctl("dump", "--no-kernel", paused.pid, check_rc=0).stdout.decode()
    assert text.splitlines()[0].endswith(f" frozen by cgroup {path} (v{version})"), text


def read_state(pid):
    return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]


INTERPRETERS = {
    # name: (argv, the class a person would give it)
    "py-recv": ([sys.executable, "-c", "import socket\na, b = socket.socketpair()\na.setblocking(False)\n"
                 "while True:\n    try:\n        a.recv(1)\n    except BlockingIOError:\n        pass"],
                "syscall-spin"),
    "perl-select": (["perl", "-e", "while (1) { select(undef, undef, undef, 0) }"], "syscall-spin"),
    "py-busy": ([sys.executable, "-c", "while True: pass"], "busy-loop"),
    "perl-busy": (["perl", "-e", "while (1) {}"], "busy-loop"),
    "bash-busy": (["bash", "-c", "while :; do :; done"], "busy-loop"),
    # The controls: they move data, so they are working, not stuck.
    "yes": (["sh", "-c", "exec yes > /dev/null"], "running"),
    "dd": (["sh", "-c", "exec dd if=/dev/zero of=/dev/null bs=1 2>/dev/null"], "running"),
}
PROBLEMS = ("busy-loop", "syscall-spin")


def test_interpreter_loops_classed_as_a_person_would_under_load(daemon):
    d = daemon("poll_interval: 200ms\narchive:\n  directory: @ARCHIVE@\nrules: []\n")
    hogs = [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(os.cpu_count() or 1)]
    procs = {name: subprocess.Popen(argv, stdout=subprocess.DEVNULL) for name, (argv, _) in INTERPRETERS.items()}
    try:
        held = {}

        def look():
            threads = {t["tid"]: t for t in d.get_json("/processes?all=1")["threads"]}
            for name, p in procs.items():
                t = threads.get(p.pid)
                want = INTERPRETERS[name][1]
                if t is None:
                    continue
                if want == "running":
                    # A control may flicker, but never holds a problem class as long as a rule's "for: 1s".
                    assert not (t["class"] in PROBLEMS and t["for_ms"] >= 1000), (name, t)
                elif t["class"] == want and t["for_ms"] >= 1000:
                    held[name] = t
            return all(n in held for n, (_, want) in INTERPRETERS.items() if want != "running")
        wait_until(look, timeout=30, interval=0.2, what=f"each loop in its class for 1 s (so far {held})")
        # The controls, looked at for a few more seconds.
        d.wait_scans(10)
        look()
    finally:
        for p in list(procs.values()) + hogs:
            p.kill()
            p.wait()


@pytest.fixture
def fuse_mount(tmp_path):
    """A mount point for the fuse-hang fixture, unmounted (lazily: its daemon may hang) at teardown."""
    if not os.path.exists("/dev/fuse"):
        pytest.skip("no /dev/fuse here")
    mnt = tmp_path / "fuse"
    mnt.mkdir()
    # Whether this machine lets us mount FUSE at all (a container may not): mount one and take it down at once.
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open("/dev/fuse", os.O_RDWR)
    try:
        if libc.mount(b"fxprobe", str(mnt).encode(), b"fuse.fxprobe", 0,
                      f"fd={fd},rootmode=40000,user_id=0,group_id=0".encode()) != 0:
            pytest.skip(f"cannot mount FUSE here: {os.strerror(ctypes.get_errno())}")
        libc.umount2(str(mnt).encode(), 2)  # MNT_DETACH
    finally:
        os.close(fd)
    yield str(mnt)
    subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def start_fuse(fixture, mnt, mode):
    fx = fixture("fuse-hang", mnt, mode, ready=False)
    daemon_pid, client = map(int, fx.wait_line_prefix(b"PIDS ").split()[1:])
    fx.wait_line()
    return fx, daemon_pid, client


def test_a_request_to_a_hung_fuse_daemon_leads_to_the_daemon(fixture, fuse_mount):
    fx, fuse_daemon, client = start_fuse(fixture, fuse_mount, "hung")
    wait_until(lambda: open(f"/proc/{client}/wchan").read() == "request_wait_answer", what="the client's request")
    _, [e] = client_edge(client)
    # The edge names the mount and goes to the process serving its connection (not just any /dev/fuse holder).
    assert e["kind"] == "fuse" and e["to"]["pid"] == fuse_daemon, e
    assert fuse_mount in e["object"] and "fuse.fxhang" in e["object"], e
    out = stackctl("dump", "--peers", "1", "--no-source", client, check_rc=0).stdout.decode()
    assert f"→ fuse.fxhang mount {fuse_mount} (connection " in out and f"→ {fuse_daemon} (fuse-hang)" in out, out


def test_a_request_to_a_stopped_fuse_daemon_is_blocked(daemon, fixture, fuse_mount):
    """A stat() held up by a FUSE daemon that sleeps may still be answered: waiting. Once the daemon is stopped
    (SIGSTOP, as a debugger or a job control stop leaves it), nothing answers: the client is blocked, and says
    why; SIGCONT makes it waiting again."""
    d = daemon("poll_interval: 200ms\narchive:\n  directory: @ARCHIVE@\nrules: []\n")
    fx, fuse_daemon, client = start_fuse(fixture, fuse_mount, "hung")
    wait_until(lambda: open(f"/proc/{client}/wchan").read() == "request_wait_answer", what="the client's request")

    def verdict():
        return [(t["class"], t.get("blocked_because")) for t in d.get_json("/processes?all=1")["threads"]
                if t["tid"] == client]
    # Parked 2 s and walked: its peer sleeps in pause(), it may answer.
    d.wait_scans(15)
    assert verdict() == [("waiting", None)], verdict()
    os.kill(fuse_daemon, signal.SIGSTOP)
    try:
        wait_until(lambda: verdict() == [("blocked", "its peer is stopped, frozen or blocked")], timeout=10,
                   interval=0.1, what="the client blocked on the stopped FUSE daemon")
    finally:
        os.kill(fuse_daemon, signal.SIGCONT)
    wait_until(lambda: verdict() == [("waiting", None)], timeout=10, interval=0.1,
               what="the client waiting again once its daemon runs")


def test_a_fifo_opened_with_nobody_at_the_other_end_is_named(tmp_path):
    """cat on a FIFO nobody writes to waits in open() (wait_for_partner), holding no fd yet: the edge names the
    FIFO and says that no process has it open for writing; a writer with no reader, the other way round. Relative
    paths are made absolute with the working directory."""
    os.mkfifo(tmp_path / "in")
    os.mkfifo(tmp_path / "out")
    reader = subprocess.Popen(["cat", "in"], cwd=tmp_path, stdout=subprocess.DEVNULL)
    writer = subprocess.Popen(["sh", "-c", f"echo hello > {tmp_path}/out"])
    try:
        for p in (reader, writer):
            wait_until(lambda: open(f"/proc/{p.pid}/wchan").read() == "wait_for_partner",
                       what=f"{p.args[0]} in the FIFO's open")
        _, [e] = client_edge(reader.pid)
        assert (e["kind"], e["syscall"], e["to"]) == ("fifo", "openat", None), e
        assert e["object"] == f"fifo {tmp_path}/in (read end)", e
        assert e["reason"] == "no process has it open for writing", e
        _, [e] = client_edge(writer.pid)
        assert e["object"] == f"fifo {tmp_path}/out (write end)", e
        assert e["reason"] == "no process has it open for reading", e
    finally:
        for p in (reader, writer):
            p.kill()
            p.wait()


def test_an_idle_fuse_mount_leads_nowhere(fixture, fuse_mount):
    fx, fuse_daemon, client = start_fuse(fixture, fuse_mount, "idle")
    wait_until(lambda: syscall_nr(client) in ("35", "230"), what="the idle client asleep")
    wait_until(lambda: syscall_nr(fuse_daemon) == "0", what="the FUSE daemon waiting for a request")
    # The client sleeps with its working directory in the mount: that is not a wait on the daemon.
    [doc] = dump_json("--peers", "1", "--no-source", "--no-kernel", client)
    assert not doc["wait_chain"]["edges"], doc["wait_chain"]
    # The daemon waits for requests on /dev/fuse: no edge to anyone.
    [doc] = dump_json("--peers", "1", "--no-source", "--no-kernel", fuse_daemon)
    assert all(not e.get("to") and e["kind"] != "fuse" for e in doc["wait_chain"]["edges"]), doc["wait_chain"]


def test_a_lock_wait_on_a_hung_fuse_mount_does_not_hang_the_dump(fixture, fuse_mount):
    # A dead sshfs with a flock() waiter on one of its files: a stat() of that file would now wait forever for
    # the daemon, and the dump used to stat it to compare against /proc/locks.
    fx = fixture("fuse-hang", fuse_mount, "flock", ready=False)
    fuse_daemon, holder, waiter = map(int, fx.wait_line_prefix(b"PIDS ").split()[1:])
    fx.wait_line()
    t0 = time.monotonic()
    [doc] = dump_json("--peers", "1", "--no-source", "--no-kernel", waiter, timeout=20)
    assert time.monotonic() - t0 < 10
    [e] = [e for e in doc["wait_chain"]["edges"] if e["from"]["pid"] == waiter]
    assert e["kind"] == "flock" and e["to"]["pid"] == holder, e
    assert e["object"] == f"flock {fuse_mount}/file", e


def exec_on_fuse(fixture, mnt, mode, program="block-read"):
    """A copy of PROGRAM run from the FUSE mount MNT; its pids (daemon, program, and the stuck client)."""
    fx = fixture("fuse-hang", mnt, mode, os.path.join(FIXTURES, program), ready=False)
    pids = list(map(int, fx.wait_line_prefix(b"PIDS ").split()[1:]))
    fx.wait_line()
    return pids


def frames_by_module(doc, path):
    mods = {i for i, m in enumerate(doc["modules"]) if m["path"] == path}
    return [f for t in doc["threads"] for f in t["frames"] if f["module"] in mods]


def test_a_program_on_a_hung_fuse_mount_is_dumped_without_asking_its_daemon(fixture, fuse_mount):
    # A service run from a dead sshfs (or an AppImage whose squashfuse hangs): any stat(), open() or page fault on its
    # file now waits for the daemon, and the dump used to stat the file to check it was the one mapped. It hung with
    # the program's own threads, in the FUSE request, until its timeout killed it.
    fuse_daemon, prog, stuck = exec_on_fuse(fixture, fuse_mount, "exec-hung")
    wait_until(lambda: open(f"/proc/{stuck}/wchan").read() == "request_wait_answer", what="a request nobody reads")
    path = f"{fuse_mount}/prog"
    t0 = time.monotonic()
    [doc] = dump_json("--no-kernel", prog, timeout=20)
    assert time.monotonic() - t0 < 5
    [mod] = [m for m in doc["modules"] if m["path"] == path]
    assert mod["missing"] and f"mount {fuse_mount}" in mod["missing_reason"], mod
    assert f"process {fuse_daemon}" in mod["missing_reason"] and "not waiting for requests" in mod["missing_reason"]
    # Its frames are ??, never a guess; libc's, on a healthy file system, keep their names.
    frames = frames_by_module(doc, path)
    assert frames and all(f["function"] is None for f in frames), frames
    assert doc["threads"][0]["frames"][0]["function"] == "read", doc["threads"][0]["frames"][0]
    out = stackctl("dump", "--no-kernel", "--no-source", prog, check_rc=0, timeout=20).stdout.decode()
    assert f"?? - {path} [" in out and f"not read: on fuse.fxhang mount {fuse_mount}, and its daemon" in out, out
    # The program and the stuck client are where they were, untraced.
    assert tracer_of(prog, prog) == 0 and open(f"/proc/{prog}/wchan").read() == "anon_pipe_read"
    assert open(f"/proc/{stuck}/wchan").read() == "request_wait_answer"


def test_a_deadlock_on_a_hung_fuse_mount_is_found_without_its_file(fixture, fuse_mount):
    # The wait chain names a mutex by the symbol at its address, from the module's file: for a program on a FUSE
    # mount whose daemon is stuck, that open() hung the dump too.
    _, prog, stuck = exec_on_fuse(fixture, fuse_mount, "exec-hung", "deadlock-abba")
    wait_until(lambda: open(f"/proc/{stuck}/wchan").read() == "request_wait_answer", what="a request nobody reads")
    t0 = time.monotonic()
    out = stackctl("dump", "--peers", "1", "--no-kernel", "--no-source", prog, check_rc=0, timeout=20).stdout.decode()
    assert time.monotonic() - t0 < 5
    assert f"DEADLOCK in {prog} (fh-prog)" in out and "each waits for a mutex the next one holds" in out, out


def test_a_program_on_a_live_fuse_mount_keeps_its_names(fixture, fuse_mount):
    # The control: the same program on a FUSE mount whose daemon answers (an AppImage) is read as any other file.
    fuse_daemon, prog = exec_on_fuse(fixture, fuse_mount, "exec")
    wait_until(lambda: syscall_nr(fuse_daemon) == "7", what="the FUSE daemon waiting for a request in poll()")
    [doc] = dump_json("--no-kernel", prog, timeout=20)
    [mod] = [m for m in doc["modules"] if m["path"] == f"{fuse_mount}/prog"]
    assert not mod["missing"] and "missing_reason" not in mod, mod
    names = [f["function"] for f in frames_by_module(doc, f"{fuse_mount}/prog")]
    assert "br_level_20" in names and "main" in names, names


def test_a_program_on_a_fuse_mount_whose_daemon_takes_requests_but_answers_none(fixture, fuse_mount):
    """A dead sshfs whose idle reader thread still waits in /dev/fuse: it passes the "does its daemon take
    requests" check, and the next look at a module on that mount (a stat, an open, a read) waited for it with the
    target. Modules on FUSE mounts are read by a child with a deadline: the dump returns within its budget, names the
    mount, and shows the program's frames as ??, never a guess."""
    fuse_daemon, prog = exec_on_fuse(fixture, fuse_mount, "exec")
    wait_until(lambda: syscall_nr(fuse_daemon) == "7", what="the FUSE daemon waiting for a request in poll()")
    os.kill(fuse_daemon, signal.SIGUSR2)
    wait_until(lambda: syscall_nr(fuse_daemon) == "0", what="the FUSE daemon reading requests it will not answer")
    path = f"{fuse_mount}/prog"
    t0 = time.monotonic()
    [doc] = dump_json("--no-kernel", "--time-budget", "3000", prog, timeout=30)
    assert time.monotonic() - t0 < 3 + 2, time.monotonic() - t0
    [mod] = [m for m in doc["modules"] if m["path"] == path]
    assert mod["missing"] and f"mount {fuse_mount}" in mod["missing_reason"], mod
    assert "took the request to read it but did not answer within" in mod["missing_reason"], mod
    frames = frames_by_module(doc, path)
    assert frames and all(f["function"] is None for f in frames), frames
    assert doc["threads"][0]["frames"][0]["function"] == "read", doc["threads"][0]["frames"][0]
    # The program is where it was, untraced; a second dump asks the mount once more and returns as fast.
    assert tracer_of(prog, prog) == 0 and open(f"/proc/{prog}/wchan").read() == "anon_pipe_read"
    t0 = time.monotonic()
    dump_json("--no-kernel", "--no-source", prog, timeout=30)
    assert time.monotonic() - t0 < 3 + 2


@pytest.mark.parametrize("sig,waits_in", [(signal.SIGUSR1, "34"), (signal.SIGUSR2, "0")], ids=["stopped", "mute"])
def test_a_snapshot_is_resymbolized_without_asking_a_fuse_daemon_that_hung_since(fixture, fuse_mount, daemon, sig,
                                                                                  waits_in):
    # Taken while the mount answered; shown again with --resymbolize after its daemon stopped answering (stopped
    # reading requests: pause(); or mute: it reads them and answers none): opening the module's file by its path to
    # resolve the pcs again waited for that daemon.
    fuse_daemon, prog = exec_on_fuse(fixture, fuse_mount, "exec")
    d = daemon('poll_interval: 200ms\narchive:\n  directory: "@ARCHIVE@"\nhttp:\n  socket: "@SOCKET@"\nrules:\n'
               '  - name: fuse-prog\n    class: blocked\n    for: 500ms\n    comm: fh-prog\n')
    sid = wait_until(lambda: d.snapshots("--pid", str(prog)), timeout=20, what="the snapshot")[0]["id"]
    before = stackctl("--archive", d.archive, "show", "--no-kernel", sid, check_rc=0).stdout.decode()
    assert "br_level_20+0x" in before and f" - {fuse_mount}/prog" in before, before
    os.kill(fuse_daemon, sig)
    wait_until(lambda: syscall_nr(fuse_daemon) == waits_in, what="the FUSE daemon no longer answering")
    t0 = time.monotonic()
    r = stackctl("--archive", d.archive, "show", "--no-kernel", "--resymbolize", sid, check_rc=0, timeout=20)
    assert time.monotonic() - t0 < 5
    # What cannot be opened now is not resolved again; the stored names stay as they were taken.
    assert r.stdout.decode() == before and "-> " not in r.stderr.decode(), r.stderr.decode()
    code, _, body = d.get(f"/snapshots/{sid}?format=text&resymbolize=1", timeout=20)
    assert code == 200 and b"br_level_20+0x" in body, body[:300]


# Real SQLite (Python's sqlite3 module, Debian's libsqlite3) under a name of its own: a holder that keeps a write
# transaction open; a client whose busy handler polls for the lock (fcntl(F_SETLK) fails with EAGAIN, it sleeps,
# again); and the control, a connection to the same database whose thread also sleeps and wakes ten times a second
# while the lock is held, but never asks for it.
SQLITE = r'''
import ctypes, sqlite3, sys, time
ctypes.CDLL(None).prctl(15, sys.argv[1].encode())  # PR_SET_NAME
c = sqlite3.connect(sys.argv[2], timeout=600, isolation_level=None)
if sys.argv[1] != "sql-client":
    c.execute("create table if not exists t(x)")
if sys.argv[1] == "sql-holder":
    c.execute("BEGIN EXCLUSIVE")
    print("ready", flush=True)
    sys.stdin.read()
elif sys.argv[1] == "sql-idle":
    print("ready", flush=True)
    while True:
        time.sleep(0.1)
else:
    print("ready", flush=True)
    c.execute("BEGIN IMMEDIATE")
'''
LOCK_RULES = """
poll_interval: 200ms
archive:
  directory: @ARCHIVE@
rules:
  - name: lock-pollers
    class: lock-retry
    for: 1s
    comm: "sql-*"
    peers: 1
    cooldown: 1h
"""


@pytest.fixture
def sqlite_procs(tmp_path):
    procs = {}

    def start(name):
        p = subprocess.Popen([sys.executable, "-c", SQLITE, name, str(tmp_path / "app.db")], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE)
        procs[name] = p
        assert p.stdout.readline() == b"ready\n"
        return p.pid
    try:
        yield start
    finally:
        for p in procs.values():
            p.kill()
            p.wait()


def retry_edges(doc, pid):
    return [e for e in doc["wait_chain"]["edges"] if e["from"]["pid"] == pid]


def test_a_client_polling_for_a_sqlite_lock_is_lock_retry_and_leads_to_the_holder(daemon, sqlite_procs, tmp_path):
    d = daemon(LOCK_RULES)
    idle = sqlite_procs("sql-idle")
    holder = sqlite_procs("sql-holder")
    client = sqlite_procs("sql-client")

    def cls(tid):
        doc = d.get_json("/processes?all=1")
        return next((t["class"] for t in doc["threads"] if t["tid"] == tid), None)
    # The class says it retries a lock; the snapshot's chain goes to the holder through the file it names.
    assert wait_until(lambda: cls(client) == "lock-retry", timeout=20, what="the client classed lock-retry")
    [snap] = wait_until(lambda: d.snapshots("--pid", str(client)), timeout=20, what="the client's snapshot")
    doc = d.show(snap["id"])
    assert doc["trigger"]["class"] == "lock-retry" and doc["trigger"]["rule"] == "lock-pollers"
    [e] = retry_edges(doc, client)
    assert (e["kind"], e["syscall"], e["to"]["pid"]) == ("posix-lock", "fcntl", holder), e
    assert e["object"].startswith(f"lock {tmp_path}/app.db, retried: F_SETLK "), e
    assert e["object"].endswith(" = -EAGAIN"), e
    # stackctl dump finds the same edge, with the process untouched.
    [live] = dump_json("--peers", "1", "--no-source", "--no-kernel", client)
    [e2] = retry_edges(live, client)
    assert (e2["kind"], e2["to"]["pid"]) == ("posix-lock", holder) and "retried: F_SETLK" in e2["object"], e2
    # The control sleeps and wakes with the same file open while the lock is held: it was looked at (the probe ran
    # long before the client fired), and is waiting, with no snapshot and no lock edge.
    d.wait_scans(5)
    metrics = d.get("/metrics")[2].decode()
    assert re.search(r'^stackwatch_lock_probes_total\{verdict="not-seen"\} [1-9]', metrics, re.M), metrics
    assert re.search(r'^stackwatch_lock_probes_total\{verdict="retrying"\} [1-9]', metrics, re.M), metrics
    assert cls(idle) == "waiting"
    assert not d.snapshots("--pid", str(idle))
    [ctl_doc] = dump_json("--peers", "1", "--no-source", "--no-kernel", idle)
    assert not [e for e in retry_edges(ctl_doc, idle) if "retried" in (e["object"] or "")], ctl_doc["wait_chain"]
    # Once the holder lets go, the client gets the lock, is no longer lock-retry, and ends its script.
    os.kill(holder, signal.SIGKILL)
    wait_until(lambda: cls(client) != "lock-retry", timeout=20, what="the client past the lock")
    wait_until(lambda: os.waitpid(client, os.WNOHANG)[0] == client, timeout=20, what="the client's exit")


# flock(LOCK_NB) in a loop, a sleep between tries: the same chain, through the flock family.
FLOCK_POLL = r'''
import fcntl, sys, time
f = open(sys.argv[1], "w")
print("ready", flush=True)
while True:
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        break
    except BlockingIOError:
        time.sleep(0.05)
'''


@pytest.fixture
def held_flock(tmp_path):
    """flock(1) holding TMP/job.lock, its command a sleep: (the path, flock's pid); both gone at the end."""
    path = tmp_path / "job.lock"
    holder = subprocess.Popen(["flock", str(path), "sleep", "600"])
    try:
        wait_until(lambda: children(holder.pid), what="flock(1) to take the lock and start its command")
        yield path, holder.pid
    finally:
        for c in children(holder.pid):
            os.kill(c, signal.SIGKILL)
        holder.kill()
        holder.wait()


@pytest.fixture
def python_procs():
    """start(PROGRAM, *ARGS, first_line): a python3 -c PROGRAM that has printed FIRST_LINE; all killed at the end."""
    procs = []

    def start(program, *args, first_line):
        p = subprocess.Popen([sys.executable, "-c", program, *map(str, args)], stdout=subprocess.PIPE)
        procs.append(p)
        assert p.stdout.readline() == first_line + b"\n"
        return p.pid
    try:
        yield start
    finally:
        for p in reversed(procs):
            p.kill()
            p.wait()


def test_a_flock_poller_leads_to_the_holder(held_flock, python_procs):
    path, holder = held_flock
    poller = python_procs(FLOCK_POLL, path, first_line=b"ready")
    [doc] = dump_json("--peers", "1", "--no-source", "--no-kernel", poller)
    [e] = retry_edges(doc, poller)
    assert (e["kind"], e["syscall"]) == ("flock", "flock"), e
    assert e["to"]["pid"] == holder, e
    assert e["object"] == f"flock {path}, retried: flock(LOCK_EX|LOCK_NB) = -EAGAIN", e


# A poller that works between tries (10 ms on a CPU, then a 5 ms sleep) is mostly caught on a CPU, where its syscall
# says only "running": the dump looks again until it sleeps, then watches it try.
BUSY_FLOCK_POLL = FLOCK_POLL.replace("        time.sleep(0.05)\n", """\
        end = time.monotonic() + 0.01
        while time.monotonic() < end:
            pass
        time.sleep(0.005)
""")


def test_a_flock_poller_caught_on_a_cpu_still_leads_to_the_holder(held_flock, python_procs):
    path, holder = held_flock
    poller = python_procs(BUSY_FLOCK_POLL, path, first_line=b"ready")
    caught = []
    # Every dump leads to the holder, asleep or on a CPU. Two thirds of its time on a CPU: dumps until one caught it
    # there (twelve at least), since dumps that all found it asleep would not have tested a thing.
    deadline = time.monotonic() + 30
    while len(caught) < 12 or ("R" not in caught and time.monotonic() < deadline):
        [doc] = dump_json("--peers", "1", "--no-source", "--no-kernel", poller)
        caught.append(doc["threads"][0]["state"])
        [e] = retry_edges(doc, poller)
        assert (e["kind"], e["to"]["pid"]) == ("flock", holder), e
    assert "R" in caught, caught


# Traces PID (PTRACE_SEIZE: it goes on running, as under strace between stops) until killed.
SEIZER = r'''
import ctypes, signal, sys
libc = ctypes.CDLL(None, use_errno=True)
if libc.ptrace(0x4206, int(sys.argv[1]), None, None) != 0:  # PTRACE_SEIZE
    sys.exit(ctypes.get_errno())
print("seized", flush=True)
signal.pause()
'''


def test_a_flock_poller_traced_by_another_says_why_it_was_not_watched(held_flock, python_procs):
    """A poller that a debugger (or another watcher's probe) traces cannot be watched for its lock: the dump says
    so in the chain's errors instead of leaving a chain without the holder unexplained."""
    path, _ = held_flock
    poller = python_procs(FLOCK_POLL, path, first_line=b"ready")
    python_procs(SEIZER, poller, first_line=b"seized")
    [doc] = dump_json("--peers", "1", "--no-source", "--no-kernel", poller)
    assert not retry_edges(doc, poller), doc["wait_chain"]
    assert f"thread {poller} of process {poller} may poll for a lock but was not watched: another process " \
           "traces it" in doc["wait_chain"]["errors"], doc["wait_chain"]


def children(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(c) for c in f.read().split()]
    except FileNotFoundError:
        return []
