"""Peers and wait chains against real processes: who a stuck thread waits on, through unix sockets, pipes, locks,
loopback TCP and children; cross-process deadlocks; the daemon's peers: and deadlock: rules; ?peers=N."""
import os
import signal
import subprocess
import sys

import pytest

from conftest import (FIXTURES, assert_chain, dump_json, functions, read_stat, stackctl, syscall_name, syscall_number,
                      thread_states, tracer_of, wait_until)

POLL = 0.2


def start_pair(fixture, mode, *args):
    """Start peer-pair MODE; returns (fixture, [pids]) once every process sits in its blocking call."""
    fx = fixture("peer-pair", mode, *map(str, args), ready=False)
    pids = [int(p) for p in fx.wait_line_prefix(b"PIDS ").split()[1:]]
    fx.wait_line()
    for pid in pids:
        wait_until(lambda: (read_stat(pid) or (None, None))[1] == "S", what=f"{mode}: pid {pid} asleep")
        wait_until(lambda: _in_syscall(pid), what=f"{mode}: pid {pid} in its call")
    return fx, pids


def _in_syscall(pid):
    try:
        with open(f"/proc/{pid}/syscall") as f:
            return f.read().split()[0] not in ("running", "-1")
    except (FileNotFoundError, ProcessLookupError):
        return False


def assert_untouched(*pids):
    for pid in pids:
        for tid, state in thread_states(pid).items():
            assert state not in ("t", "T"), f"pid {pid} thread {tid} left stopped"
            assert tracer_of(pid, tid) in (0, None), f"pid {pid} thread {tid} left traced"


def chain_of(pid, peers=1, *args):
    [doc] = dump_json("--peers", peers, "--no-source", "--no-kernel", *args, pid)
    return doc, doc["wait_chain"]


def edges_from(chain, pid):
    return [e for e in chain["edges"] if e["from"]["pid"] == pid]


def fd_target(pid, fd):
    return os.readlink(f"/proc/{pid}/fd/{fd}")


def test_unix_client_waits_on_a_stuck_server(fixture):
    fx, (client, server) = start_pair(fixture, "unix")
    doc, chain = chain_of(client)
    [e] = edges_from(chain, client)
    assert e["from"]["tid"] == client and e["syscall"] == "read" and e["kind"] == "unix-socket"
    # The edge names the client's own fd and that fd's socket; the peer's fd is the other end, in the server.
    assert fd_target(client, e["fd"]) == f"socket:[{e['inode']}]"
    assert e["to"]["pid"] == server and e["to"]["comm"] == "pp-server"
    assert fd_target(server, e["peer_fd"]).startswith("socket:[")
    assert not chain["deadlock"] and chain["cycle"] == [] and not chain["truncated"]
    # Both processes' stacks are in the snapshot: the client's read chain, the stuck server's.
    assert_chain(doc["threads"][0], ["pp_client_wait_reply", "pp_client_request", "main"])
    [peer] = doc["peers"]
    assert peer["process"]["pid"] == server
    assert_chain(peer["threads"][0], ["pp_stuck", "pp_server_handle", "pp_server_main"])
    assert_untouched(client, server)


def test_text_shows_the_chain_before_the_threads(fixture):
    fx, (client, server) = start_pair(fixture, "unix")
    out = stackctl("dump", "--peers", "1", "--no-source", "--no-kernel", client, check_rc=0).stdout.decode()
    chain_at, first_tid = out.index("wait chain"), out.index(f"TID {client}:")
    assert chain_at < first_tid
    line = next(ln for ln in out.splitlines() if "→" in ln)
    assert line.strip().startswith(f"{client} (pp-client) read fd ")
    assert line.endswith(f"→ {server} (pp-server)")
    assert f"peer 1 of 1, of PID {client}: PID {server} - pp-server" in out
    assert "pp_stuck" in out


def test_no_peers_without_the_option(fixture):
    fx, (client, _) = start_pair(fixture, "unix")
    [doc] = dump_json("--no-source", "--no-kernel", client)
    assert "wait_chain" not in doc and "peers" not in doc


def test_pipe_writer_waits_on_the_reader(fixture):
    fx, (writer, reader) = start_pair(fixture, "pipe-writer")
    _, chain = chain_of(writer)
    [e] = edges_from(chain, writer)
    assert e["syscall"] == "write" and e["kind"] == "pipe" and "write end" in e["object"]
    assert e["to"]["pid"] == reader


def test_pipe_reader_waits_on_every_writer(fixture):
    fx, (reader, w1, w2) = start_pair(fixture, "pipe-reader")
    doc, chain = chain_of(reader)
    es = edges_from(chain, reader)
    assert sorted(e["to"]["pid"] for e in es) == sorted([w1, w2])
    assert {e["kind"] for e in es} == {"pipe"} and all(e["syscall"] == "read" for e in es)
    assert sorted(p["process"]["pid"] for p in doc["peers"]) == sorted([w1, w2])


@pytest.mark.parametrize("mode,syscall,kind", [("flock", "flock", "flock"), ("fcntl", "fcntl", "posix-lock")])
def test_lock_waiter_waits_on_the_holder(fixture, tmp_path, mode, syscall, kind):
    path = tmp_path / "x.lock"
    fx, (waiter, holder) = start_pair(fixture, mode, path)
    _, chain = chain_of(waiter)
    [e] = edges_from(chain, waiter)
    assert e["syscall"] == syscall and e["kind"] == kind
    assert str(path) in e["object"] and e["inode"] == os.stat(path).st_ino
    assert e["to"]["pid"] == holder


@pytest.mark.parametrize("mode", ["tcp", "tcp-noaccept"])
def test_loopback_tcp_request_with_no_reply(fixture, mode):
    fx, (client, server) = start_pair(fixture, mode)
    doc, chain = chain_of(client)
    [e] = edges_from(chain, client)
    assert e["kind"] == "tcp" and e["syscall"] == "read" and "127.0.0.1:" in e["object"]
    assert e["to"]["pid"] == server
    if mode == "tcp-noaccept":
        assert "not accepted yet" in e["object"]  # found through the listener: the connection has no fd yet
    assert [p["process"]["pid"] for p in doc["peers"]] == [server]


def test_parent_waits_on_its_child(fixture):
    fx, (parent, child) = start_pair(fixture, "child")
    _, chain = chain_of(parent)
    [e] = edges_from(chain, parent)
    assert e["kind"] == "child" and e["syscall"] == "wait4" and e["to"]["pid"] == child


@pytest.mark.parametrize("mode,b_call", [("deadlock-unix", "read"), ("deadlock-lock", "flock"),
                                         ("deadlock-poll", "poll")])
def test_two_processes_waiting_on_each_other_are_a_deadlock(fixture, tmp_path, mode, b_call):
    args = (tmp_path / "d.lock",) if mode == "deadlock-lock" else ()
    fx, (a, b) = start_pair(fixture, mode, *args)
    doc, chain = chain_of(a)
    assert chain["deadlock"] is True
    assert chain["cycle"] == [a, b]
    [ea] = edges_from(chain, a)
    [eb] = edges_from(chain, b)
    assert ea["to"]["pid"] == b and eb["to"]["pid"] == a and eb["syscall"] == syscall_name(b_call)
    assert [p["process"]["pid"] for p in doc["peers"]] == [b]
    out = stackctl("dump", "--peers", "1", "--no-source", "--no-kernel", a, check_rc=0).stdout.decode()
    assert f"DEADLOCK: {a} (pp-a) → {b} (pp-b) → {a} (pp-a)" in out
    assert_untouched(a, b)


def test_an_idle_server_in_epoll_is_not_a_deadlock(fixture):
    """The server waits on its client *or* its listening socket: a new client could wake it."""
    fx, (client, server) = start_pair(fixture, "idle-server")
    _, chain = chain_of(client)
    assert [e["to"]["pid"] for e in edges_from(chain, client)] == [server]
    es = edges_from(chain, server)
    assert all(e["multiplexed"] and e["syscall"] == syscall_name("epoll_wait") for e in es)
    assert {(e["to"] or {}).get("pid") for e in es} == {client, None}
    listening = next(e for e in es if e["to"] is None)
    assert "listening unix socket" in listening["object"] and listening["reason"]
    assert chain["deadlock"] is False and chain["cycle"] == []


def test_depth_limits_the_chain_and_says_so(fixture):
    """sh waits on peer-pair's client (wait4), which waits on the server: three processes, two hops."""
    sh = subprocess.Popen(["/bin/sh", "-c", f"{FIXTURES}/peer-pair unix; true"], stdout=subprocess.PIPE,
                          env=dict(os.environ, FIXTURE_LIFETIME="120"))
    try:
        line = sh.stdout.readline()
        client, server = [int(p) for p in line.split()[1:]]
        assert sh.stdout.readline().strip() == b"READY"
        for pid in (client, server):
            wait_until(lambda: _in_syscall(pid), what=f"pid {pid} in its call")
        doc, chain = chain_of(sh.pid, 1)
        assert [p["process"]["pid"] for p in doc["peers"]] == [client]
        [to_server] = edges_from(chain, client)
        assert to_server["to"]["pid"] == server and to_server["reason"] == "not followed: beyond the depth of 1"
        doc, chain = chain_of(sh.pid, 2)
        assert [p["process"]["pid"] for p in doc["peers"]] == [client, server]
        assert edges_from(chain, client)[0]["reason"] is None
    finally:
        for p in (sh.pid,):
            os.kill(p, 9)
        sh.wait()
        subprocess.run(["pkill", "-9", "-P", str(sh.pid)], check=False)
        if "client" in locals():
            try:
                os.kill(client, 9)
            except ProcessLookupError:
                pass


def test_a_peer_we_may_not_read_gives_a_reason_not_a_crash(tmp_path):
    """The client runs as nobody; the server it waits on is root's. stackctl as nobody cannot see who holds the
    other end: the edge says so, and the dump still succeeds."""
    script = tmp_path / "pair.py"
    script.write_text(
        "import ctypes, os, socket, sys, time\n"
        "a, b = socket.socketpair()\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    b.close(); os.setgid(65534); os.setuid(65534)\n"
        "    ctypes.CDLL(None).prctl(4, 1, 0, 0, 0)  # PR_SET_DUMPABLE: setuid cleared it\n"
        "    a.recv(1)\n"
        "    os._exit(0)\n"
        "a.close(); print(pid, flush=True); time.sleep(120)\n")
    os.chmod(tmp_path, 0o755)
    p = subprocess.Popen(["/usr/bin/python3", str(script)], stdout=subprocess.PIPE)
    try:
        client = int(p.stdout.readline())
        wait_until(lambda: _in_syscall(client), what="the client in recv")
        r = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", STACKCTL_PATH(), "dump",
                            "--peers", "1", "--json", "--no-source", "--no-kernel", str(client)], capture_output=True,
                           timeout=30)
        assert r.returncode in (0, 5), r.stderr
        import json
        doc = json.loads(r.stdout.decode().splitlines()[0])
        [e] = doc["wait_chain"]["edges"]
        assert e["to"] is None and "may not" in e["reason"]
        assert doc["peers"] == []
    finally:
        p.kill()
        p.wait()


def STACKCTL_PATH():
    from conftest import STACKCTL
    return STACKCTL


def test_peers_via_http(daemon, fixture):
    d = daemon("poll_interval: 200ms\narchive:\n  directory: @ARCHIVE@\nhttp:\n  socket: @SOCKET@\n"
               "capture:\n  max_per_minute: 60\nrules: []\n")
    d.wait_scans(1)
    fx, (a, b) = start_pair(fixture, "deadlock-unix")
    doc = d.get_json(f"/stacks/{a}?peers=1")
    assert doc["wait_chain"]["deadlock"] and doc["wait_chain"]["cycle"] == [a, b]
    assert [p["process"]["pid"] for p in doc["peers"]] == [b]
    status, _, body = d.get(f"/stacks/{a}?peers=1&format=text")
    assert status == 200 and f"DEADLOCK: {a} (pp-a) → {b} (pp-b)" in body.decode()
    assert_untouched(a, b)


RULES = """
poll_interval: 200ms
archive:
  directory: @ARCHIVE@
http:
  socket: @SOCKET@
capture:
  max_per_minute: 60
rules:
  # A per-service rule: pp-client must not wait on its server long. Its server is stuck on a private futex, which
  # no walk can tell from an idle park, so the client's wait is "waiting", not owed ("blocked").
  - name: stuck-clients
    class: [blocked, waiting]
    for: 1s
    comm: pp-client
    peers: 1
    cooldown: 1h
  - name: deadlocks
    class: [blocked, waiting]
    state: S
    for: 1s
    deadlock: true
    cooldown: 1h
"""


def test_daemon_snapshot_holds_the_peer_and_the_edge(daemon, fixture):
    d = daemon(RULES)
    fx, (client, server) = start_pair(fixture, "unix")
    snaps = wait_until(lambda: d.snapshots("--pid", str(client)), timeout=15, what="a snapshot of the client")
    assert [s["rule"] for s in snaps] == ["stuck-clients"]
    doc = d.show(snaps[0]["id"])
    [e] = edges_from(doc["wait_chain"], client)
    assert e["to"]["pid"] == server and e["kind"] == "unix-socket"
    assert doc["wait_chain"]["tid"] == client
    assert_chain(doc["peers"][0]["threads"][0], ["pp_stuck", "pp_server_handle", "pp_server_main"])
    out = stackctl("--archive", d.archive, "show", snaps[0]["id"], check_rc=0).stdout.decode()
    assert f"→ {server} (pp-server)" in out


def test_deadlock_rule_fires_exactly_once_and_not_for_an_idle_server(daemon, fixture):
    d = daemon(RULES)
    fx_idle, (iclient, iserver) = start_pair(fixture, "idle-server")
    fx, (a, b) = start_pair(fixture, "deadlock-unix")
    snaps = wait_until(lambda: [s for s in d.snapshots("--rule", "deadlocks") if s["pid"] in (a, b)], timeout=20,
                       what="the deadlock rule firing")
    # Several more polls (and a recheck interval) later, still one snapshot for the two processes of the cycle.
    d.wait_scans(30, timeout=30)
    every = d.snapshots("--rule", "deadlocks")
    assert not [s for s in every if s["pid"] in (iclient, iserver)], every
    # Other deadlocks on the machine (another test's fixtures) may fire too: only this pair's count.
    snaps = [s for s in every if s["pid"] in (a, b)]
    assert len(snaps) == 1, snaps
    doc = d.show(snaps[0]["id"])
    chain = doc["wait_chain"]
    assert chain["deadlock"] and sorted(chain["cycle"]) == sorted([a, b])
    assert sorted([doc["process"]["pid"]] + [p["process"]["pid"] for p in doc["peers"]]) == sorted([a, b])
    assert doc["trigger"]["rule"] == "deadlocks"
    rules = {r["name"]: r for r in d.get_json("/rules")["rules"]}
    assert rules["deadlocks"]["deadlock"] is True and rules["deadlocks"]["fired"] == 1
    metrics = d.get("/metrics")[2].decode()
    walks = int(next(ln.split()[1] for ln in metrics.splitlines() if ln.startswith("stackwatch_deadlock_walks_total")))
    assert walks >= 1
    assert_untouched(a, b, iclient, iserver)


def test_fifo_reader_waits_on_the_writer(tmp_path):
    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.DEVNULL)
    writer = subprocess.Popen(["/bin/sh", "-c", f"exec 3>{fifo}; exec sleep 60"])
    try:
        # cat first blocks in open() until the writer opens the FIFO: wait for its read().
        wait_until(lambda: open(f"/proc/{reader.pid}/syscall").read().split()[0] == str(syscall_number("read")),
                   what="cat blocked in read on the FIFO")
        _, chain = chain_of(reader.pid)
        [e] = edges_from(chain, reader.pid)
        assert e["kind"] == "fifo" and e["syscall"] == "read" and str(fifo) in e["object"]
        assert e["to"]["pid"] == writer.pid
    finally:
        for p in (writer, reader):
            p.kill()
            p.wait()


def test_the_chain_is_the_same_whatever_method_captured_the_thread(fixture):
    """A client polling a unix socket (psql on its backend) had its edge with --method passive and lost it in one
    dump of two when a ptrace stop captured it: released, the thread is runnable until it is back in its poll
    (restart_syscall), and the chain read its wait in that moment. The chain takes a stopped thread's wait as the
    capture saw it before the stop: 20 dumps with each method give the same edges."""
    fx, (a, b) = start_pair(fixture, "deadlock-poll")
    seen = {}
    for method in ("passive", "ptrace", "auto"):
        for _ in range(20):
            doc, chain = chain_of(b, 1, "--method", method)
            edges = sorted((e["kind"], e["syscall"], e["to"]["pid"] if e["to"] else None) for e in edges_from(chain, b))
            seen.setdefault(method, set()).add(tuple(edges))
    assert seen["passive"] == {(("unix-socket", syscall_name("poll"), a),)}, seen
    assert seen["ptrace"] == seen["passive"] and seen["auto"] == seen["passive"], seen
    assert_untouched(a, b)


# A pty made with python3's pty module: the holder of its master side forks a child that runs PROGRAM with the
# slave side as its stdin and stdout; prints "HOLDER CHILD /dev/pts/N"; then, with "stop", stops itself (a terminal
# whose reader is stopped), else sleeps holding the master.
PTY_PAIR = r"""
import os, pty, signal, sys, time
master, slave = pty.openpty()
name = os.ttyname(slave)
child = os.fork()
if child == 0:
    os.close(master)
    os.dup2(slave, 0)
    os.dup2(slave, 1)
    os.execvp(sys.argv[2], sys.argv[2:])
os.close(slave)
print(os.getpid(), child, name, flush=True)
if sys.argv[1] == "stop":
    os.kill(os.getpid(), signal.SIGSTOP)
while True:
    time.sleep(3600)
"""


@pytest.fixture
def pty_pair():
    started = []

    def start(mode, *program):
        p = subprocess.Popen([sys.executable, "-c", PTY_PAIR, mode, *program], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, start_new_session=True)
        started.append(p)
        holder, child, tty = p.stdout.readline().decode().split()
        return int(holder), int(child), tty
    yield start
    for p in started:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()


def test_a_writer_on_a_terminal_whose_reader_is_stopped_leads_to_it(pty_pair):
    """`yes` writing to a pty whose master's holder is stopped: the buffer fills and yes blocks in write(). The
    chain goes from the writer through the terminal to the process holding its master side, and says it is
    stopped."""
    holder, child, tty = pty_pair("stop", "yes")
    wait_until(lambda: (read_stat(holder) or (None, None))[1] == "T", what="the master's holder stopped")
    wait_until(lambda: _in_syscall(child) and
               open(f"/proc/{child}/syscall").read().split()[0] == str(syscall_number("write")),
               what="yes blocked in write()")
    _, chain = chain_of(child)
    [e] = edges_from(chain, child)
    assert e["kind"] == "pty" and e["syscall"] == "write" and e["object"] == f"terminal {tty}", e
    assert e["to"]["pid"] == holder and e["peer_fd"] is not None, e
    assert e["reason"] == "the holder of its master side is stopped: nobody reads or writes it", e
    text = stackctl("dump", "--peers", "1", "--no-kernel", child, check_rc=0).stdout.decode()
    assert f"{child} (yes) write fd 1 → terminal {tty} → {holder} (python3): the holder of its master side is " \
           "stopped" in text, text


def test_a_reader_on_a_terminal_leads_to_the_master_s_holder(pty_pair):
    """`cat` reading its terminal waits on whoever holds the master side (a terminal emulator, sshd, script): the
    edge names it, with no excuse made up for it."""
    holder, child, tty = pty_pair("sleep", "cat")
    wait_until(lambda: _in_syscall(child) and
               open(f"/proc/{child}/syscall").read().split()[0] == str(syscall_number("read")),
               what="cat blocked in read()")
    _, chain = chain_of(child)
    [e] = edges_from(chain, child)
    assert e["kind"] == "pty" and e["syscall"] == "read" and e["to"]["pid"] == holder and e["reason"] is None, e
