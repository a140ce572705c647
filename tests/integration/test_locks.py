"""Who holds the lock: a thread in futex() on a pthread mutex leads to the thread holding it, read passively from
the target's memory; the chain goes on from the holder (across processes), a cycle of mutexes is a DEADLOCK, and
a holder that exited is named as such."""
import contextlib
import os
import shutil
import subprocess

import pytest

from conftest import dump_json, stackctl, thread_names, wait_until


def names_to_tids(pid):
    return {name: tid for tid, name in thread_names(pid).items()}


FUTEX_NR = {"x86_64": 202, "aarch64": 98}.get(os.uname().machine)


def wchan(pid, tid):
    try:
        with open(f"/proc/{pid}/task/{tid}/wchan") as f:
            return f.read()
    except OSError:
        return ""


def in_futex(pid, tid):
    """Asleep in futex(), whatever the kernel function it sleeps in (a PI lock sleeps in the rt_mutex code)."""
    try:
        with open(f"/proc/{pid}/task/{tid}/syscall") as f:
            nr = f.read().split()[0]
    except (OSError, IndexError):
        return False
    return nr == str(FUTEX_NR) and wchan(pid, tid) not in ("", "0")


def start(fixture, *args, waiters):
    """A lock fixture, READY, with each thread of WAITERS asleep in the kernel's futex wait."""
    fx = fixture(*args)
    wait_until(lambda: all(n in names_to_tids(fx.pid) for n in waiters), what=f"threads {waiters}")
    tids = names_to_tids(fx.pid)
    for n in waiters:
        wait_until(lambda: in_futex(fx.pid, tids[n]), what=f"{n} in a futex wait")
    return fx, tids


@contextlib.contextmanager
def unlisted(argv, waiters):
    """A lock program that is not one of tests/fixtures/bin (a stripped copy, a g++ build): started, READY, each
    thread of WAITERS asleep in futex(); yields (pid, tids); killed and reaped on the way out."""
    proc = subprocess.Popen([str(a) for a in argv], stdout=subprocess.PIPE,
                            env=dict(os.environ, FIXTURE_LIFETIME="120"))
    try:
        assert proc.stdout.readline() == b"READY\n"
        wait_until(lambda: set(waiters) <= set(names_to_tids(proc.pid)), what=f"threads {waiters}")
        tids = names_to_tids(proc.pid)
        for n in waiters:
            wait_until(lambda: in_futex(proc.pid, tids[n]), what=f"{n} in a futex wait")
        yield proc.pid, tids
    finally:
        proc.kill()
        proc.wait()


def mutex_edges(doc):
    return {e["from"]["tid"]: e for e in doc["wait_chain"]["edges"] if e["kind"] == "mutex"}


def test_abba_deadlock_names_both_owners_and_the_cycle(fixture):
    fx, tids = start(fixture, "deadlock-abba", waiters=("abba-a", "abba-b"))
    a, b = tids["abba-a"], tids["abba-b"]
    [doc] = dump_json("--peers", "1", fx.pid)
    edges = mutex_edges(doc)
    assert edges[a]["to"] == {"pid": fx.pid, "tid": b, "comm": "deadlock-abba"}, edges
    # Each lock is named by the variable it is, where the binary's symbols cover it.
    assert edges[b]["to"]["tid"] == a
    assert {edges[a]["object"].split(" (")[0], edges[b]["object"].split(" (")[0]} == {"mutex g_m1", "mutex g_m2"}
    assert edges[a]["object"].endswith(") in deadlock-abba") and int(edges[a]["address"], 16) > 0
    # The main thread waits in pthread_join for one of the two: a join edge to that thread (its futex word is that
    # thread's TID), not a mutex.
    assert fx.pid not in edges
    [join] = [e for e in doc["wait_chain"]["edges"] if e["from"]["tid"] == fx.pid]
    assert join["kind"] == "join" and join["to"]["pid"] == fx.pid and join["to"]["tid"] in (a, b), join
    assert join["object"] == f"the exit of thread {join['to']['tid']}" and join["reason"] is None, join
    chain = doc["wait_chain"]
    assert chain["deadlock"] and chain["lock_cycle"]["pid"] == fx.pid
    assert sorted(chain["lock_cycle"]["threads"]) == sorted([a, b])
    text = stackctl("dump", "--peers", "1", fx.pid, check_rc=0).stdout.decode()
    assert f"thread {a} (abba-a) futex → mutex g_m" in text
    assert f"→ {fx.pid} (deadlock-abba) thread {b} (abba-b) in futex" in text
    assert f"DEADLOCK in {fx.pid} (deadlock-abba): thread " in text
    assert "each waits for a mutex the next one holds" in text
    assert f"{fx.pid} (deadlock-abba) futex → the exit of thread {join['to']['tid']} → {fx.pid} (deadlock-abba) " \
           f"thread {join['to']['tid']} (abba-" in text


def test_a_join_goes_on_through_the_joined_thread(fixture):
    """threads64's main thread joins t00, which reads a pipe: from the main thread alone (--tid), the chain names
    the thread it joins and goes on to what that thread waits for."""
    fx = fixture("threads64")
    t00 = names_to_tids(fx.pid)["t00"]
    wait_until(lambda: in_futex(fx.pid, fx.pid), what="the main thread in pthread_join")
    [doc] = dump_json("--peers", "1", "--tid", fx.pid, fx.pid)
    edges = doc["wait_chain"]["edges"]
    [join] = [e for e in edges if e["from"]["tid"] == fx.pid]
    assert join["kind"] == "join" and join["to"] == {"pid": fx.pid, "tid": t00, "comm": "threads64"}, join
    assert any(e["from"]["tid"] == t00 and e["syscall"] == "read" for e in edges), edges
    assert not doc["wait_chain"].get("lock_cycle"), doc["wait_chain"]


def test_a_join_of_a_thread_waiting_for_the_joiner_s_mutex_is_a_deadlock(fixture):
    """The main thread holds m1 and joins "waiter", which waits for m1: neither can go on. The join and the mutex
    make a cycle of two threads, a deadlock like an ABBA pair."""
    fx, tids = start(fixture, "lock-holder", "join", waiters=("waiter",))
    waiter = tids["waiter"]
    wait_until(lambda: in_futex(fx.pid, fx.pid), what="the main thread in pthread_join")
    [doc] = dump_json("--peers", "1", fx.pid)
    chain = doc["wait_chain"]
    kinds = {e["from"]["tid"]: (e["kind"], e["to"] and e["to"]["tid"]) for e in chain["edges"]}
    assert kinds == {fx.pid: ("join", waiter), waiter: ("mutex", fx.pid)}, chain["edges"]
    assert chain["lock_cycle"]["pid"] == fx.pid and sorted(chain["lock_cycle"]["threads"]) == sorted([fx.pid, waiter])
    text = stackctl("dump", "--peers", "1", fx.pid, check_rc=0).stdout.decode()
    assert f"DEADLOCK in {fx.pid} (lock-holder): thread " in text
    assert "each waits for the next one, to exit (join) or to unlock a mutex" in text


@pytest.mark.parametrize("mode,what", [("chain", "mutex"), ("pi", "PI mutex"), ("recursive", "mutex"),
                                       ("errorcheck", "mutex"), ("robust", "robust mutex")])
def test_a_lock_chain_leads_through_the_holders_to_another_process(fixture, mode, what):
    """waiter → m2 held by middle → m1 held by holder → holder reads a pipe only a child can write: from the
    waiter alone (--tid), the chain reaches the child, which is captured as a peer."""
    fx, tids = start(fixture, "lock-holder", mode, waiters=("middle", "waiter"))
    wait_until(lambda: "pipe" in wchan(fx.pid, tids["holder"]), what="holder in read()")
    [doc] = dump_json("--peers", "1", "--tid", tids["waiter"], fx.pid)
    edges = mutex_edges(doc)
    assert edges[tids["waiter"]]["to"]["tid"] == tids["middle"], edges
    assert edges[tids["middle"]]["to"]["tid"] == tids["holder"], edges
    assert edges[tids["waiter"]]["object"] == f"{what} m2 ({edges[tids['waiter']]['address']}) in lock-holder"
    assert edges[tids["middle"]]["object"].startswith(f"{what} m1 (0x")
    pipe = [e for e in doc["wait_chain"]["edges"] if e["from"]["tid"] == tids["holder"]]
    assert len(pipe) == 1 and pipe[0]["kind"] == "pipe", pipe
    writer = pipe[0]["to"]["pid"]
    assert writer and writer != fx.pid
    assert [p["process"]["pid"] for p in doc["peers"]] == [writer]
    assert doc["peers"][0]["process"]["comm"] == "silent-writer"
    # A chain, not a deadlock: the holder can still be woken by the writer.
    assert not doc["wait_chain"]["deadlock"] and doc["wait_chain"]["lock_cycle"] is None


def test_a_stripped_binary_still_names_the_holder(tmp_path):
    """Without symbols the lock has no name, only its address; its holder is read from the lock all the same."""
    binary = tmp_path / "lock-holder"
    shutil.copy(os.path.join(os.environ["STACKWATCH_BUILDDIR"], "tests/fixtures/bin/lock-holder"), binary)
    subprocess.run(["strip", "--strip-all", str(binary)], check=True)
    with unlisted([binary, "chain"], ("middle", "waiter")) as (pid, tids):
        [doc] = dump_json("--peers", "1", pid)
        edges = mutex_edges(doc)
        assert edges[tids["waiter"]]["to"]["tid"] == tids["middle"]
        assert edges[tids["waiter"]]["object"] == f"mutex {edges[tids['waiter']]['address']}"


def test_a_mutex_whose_holder_exited(fixture):
    fx, tids = start(fixture, "lock-holder", "orphan", waiters=("waiter",))
    [doc] = dump_json("--peers", "1", fx.pid)
    [edge] = mutex_edges(doc).values()
    assert edge["from"]["tid"] == tids["waiter"] and edge["to"] is None, edge
    owner = int(edge["reason"].split()[3].rstrip(","))
    assert edge["reason"] == f"held by TID {owner}, which exited"
    assert not os.path.exists(f"/proc/{fx.pid}/task/{owner}")


def test_a_thread_waiting_for_a_mutex_it_holds(fixture):
    fx, tids = start(fixture, "lock-holder", "self", waiters=("waiter",))
    [doc] = dump_json("--peers", "1", fx.pid)
    w = tids["waiter"]
    assert mutex_edges(doc)[w]["to"]["tid"] == w
    assert doc["wait_chain"]["lock_cycle"] == {"pid": fx.pid, "threads": [w]}
    text = stackctl("dump", "--peers", "1", fx.pid, check_rc=0).stdout.decode()
    assert f"DEADLOCK in {fx.pid} (lock-holder): thread {w} (waiter) → thread {w} (waiter) waits for a mutex it " \
           "holds itself" in text


DAEMON_RULES = """
poll_interval: 200ms
archive:
  directory: @ARCHIVE@
http:
  socket: @SOCKET@
capture:
  max_per_minute: 60
rules:
  - name: deadlocks
    class: [blocked, waiting]
    state: S
    for: 1s
    deadlock: true
    cooldown: 1h
"""


def test_deadlock_rule_fires_once_for_lock_cycles_and_orphaned_locks_not_for_a_chain(daemon, fixture):
    """An ABBA pair, a thread waiting for its own mutex, a mutex whose holder exited and a join of a thread that
    waits for the joiner's mutex each fire a deadlock rule once, with nobody else in the cycle; a lock chain that ends in a pipe (someone could still write) does not."""
    abba, _ = start(fixture, "deadlock-abba", waiters=("abba-a", "abba-b"))
    own, _ = start(fixture, "lock-holder", "self", waiters=("waiter",))
    orphan, _ = start(fixture, "lock-holder", "orphan", waiters=("waiter",))
    join, _ = start(fixture, "lock-holder", "join", waiters=("waiter",))
    chain, _ = start(fixture, "lock-holder", "chain", waiters=("middle", "waiter"))
    d = daemon(DAEMON_RULES)
    mine = (abba.pid, own.pid, orphan.pid, join.pid)
    wait_until(lambda: {s["pid"] for s in d.snapshots("--rule", "deadlocks")} >= set(mine), timeout=30,
               what="the deadlock rule firing for the four stuck processes")
    d.wait_scans(30, timeout=30)
    every = d.snapshots("--rule", "deadlocks")
    assert not [s for s in every if s["pid"] == chain.pid], every
    for pid in mine:
        assert len([s for s in every if s["pid"] == pid]) == 1, (pid, every)
    snap = next(s for s in every if s["pid"] == abba.pid)
    doc = d.show(snap["id"])
    assert doc["wait_chain"]["lock_cycle"]["pid"] == abba.pid
    assert sorted(doc["wait_chain"]["lock_cycle"]["threads"]) == sorted(names_to_tids(abba.pid)[n]
                                                                        for n in ("abba-a", "abba-b"))
    snap = next(s for s in every if s["pid"] == orphan.pid)
    assert any("which exited" in (e["reason"] or "") for e in d.show(snap["id"])["wait_chain"]["edges"])
    metrics = d.get("/metrics")[2].decode()
    found = int(float(next(ln.split()[1] for ln in metrics.splitlines()
                           if ln.startswith('stackwatch_lock_edges_total{owner="found"}'))))
    unknown = int(float(next(ln.split()[1] for ln in metrics.splitlines()
                             if ln.startswith('stackwatch_lock_edges_total{owner="unknown"}'))))
    assert found >= 3 and unknown >= 1, metrics


def test_locks_table_names_each_lock_its_holder_and_its_waiters(fixture):
    fx, tids = start(fixture, "deadlock-abba", waiters=("abba-a", "abba-b"))
    text = stackctl("dump", "--locks", fx.pid, check_rc=0).stdout.decode()
    a, b = tids["abba-a"], tids["abba-b"]
    assert "wait chain (0 hops" in text and "  locks (2 waited for):\n" in text
    assert f"mutex g_m1 (0x" in text
    lines = [ln for ln in text.splitlines() if ln.startswith("    mutex g_m")]
    assert len(lines) == 2
    for ln in lines:
        holder, waiter = (b, a) if f"held by {fx.pid} (deadlock-abba) thread {b}" in ln else (a, b)
        assert f"held by {fx.pid} (deadlock-abba) thread {holder} (" in ln
        assert ln.endswith(f"; waiting: {fx.pid} (deadlock-abba) thread {waiter} (abba-{'a' if waiter == a else 'b'})")
    orphan, _ = start(fixture, "lock-holder", "orphan", waiters=("waiter",))
    text = stackctl("dump", "--locks", orphan.pid, check_rc=0).stdout.decode()
    assert ": held by TID " in text and ", which exited; waiting: " in text
    # Not with --all: it follows the processes named.
    assert stackctl("dump", "--locks", "--all").returncode == 2


def test_a_busy_healthy_lock_is_no_deadlock(fixture):
    """8 threads taking one mutex in turn: whoever waits names a holder that is running or about to unlock; no
    cycle, ever."""
    fx = fixture("lock-holder", "busy")
    wait_until(lambda: len([n for n in thread_names(fx.pid).values() if n == "taker"]) == 8, what="8 takers")
    for _ in range(20):
        [doc] = dump_json("--locks", fx.pid)
        chain = doc["wait_chain"]
        assert not chain["deadlock"] and chain["lock_cycle"] is None, chain
        for e in chain["edges"]:
            assert e["kind"] == "mutex" and e["to"]["tid"] != e["from"]["tid"], e


def test_a_rwlock_held_for_writing_names_its_writer(fixture):
    fx, tids = start(fixture, "lock-holder", "rwlock", waiters=("reader", "writer"))
    [doc] = dump_json("--peers", "1", fx.pid)
    edges = mutex_edges(doc)
    for n in ("reader", "writer"):
        e = edges[tids[n]]
        assert e["to"]["tid"] == tids["holder"], e
        assert e["object"].startswith("rwlock rw (0x") and e["object"].endswith(") in lock-holder"), e
    # Both wait on the same lock, whichever of its futex words they sleep on.
    assert edges[tids["reader"]]["address"] == edges[tids["writer"]]["address"]


def test_a_condition_variable_has_no_owner_and_says_so(fixture):
    fx, tids = start(fixture, "lock-holder", "condvar", waiters=("sleeper",))
    [doc] = dump_json("--peers", "1", fx.pid)
    [e] = [e for e in doc["wait_chain"]["edges"] if e["from"]["tid"] == tids["sleeper"]]
    assert e["kind"] == "condvar" and e["to"] is None, e
    assert e["reason"] == "no owner: any thread may signal it"
    assert e["object"].startswith("condition variable cv+0x")
    assert not mutex_edges(doc) and not doc["wait_chain"]["deadlock"]


def test_a_process_shared_mutex_leads_to_the_other_process_and_closes_a_mixed_cycle(fixture):
    """A mutex in shared memory held by a child that reads a pipe only the parent can write: the mutex edge goes
    to the child's thread, the pipe edge back, and the two processes are a deadlock across both kinds of edge."""
    fx, tids = start(fixture, "lock-holder", "pshared", waiters=("waiter",))
    [doc] = dump_json("--peers", "1", fx.pid)
    e = mutex_edges(doc)[tids["waiter"]]
    child = e["to"]["pid"]
    assert child != fx.pid and e["to"]["tid"] == child, e
    assert thread_names(child)[child] == "pshared-holder"
    chain = doc["wait_chain"]
    back = [x for x in chain["edges"] if x["from"]["pid"] == child]
    assert [x["kind"] for x in back] == ["pipe"] and back[0]["to"]["pid"] == fx.pid, back
    assert chain["deadlock"] and sorted(chain["cycle"]) == sorted([fx.pid, child]), chain
    assert [p["process"]["pid"] for p in doc["peers"]] == [child]


def test_cxx_std_mutex_deadlock(tmp_path):
    """std::mutex and std::recursive_mutex are pthread mutexes: g++ -O2, the same owners and the same cycle."""
    if not shutil.which("g++"):
        pytest.skip("no g++")
    src = os.path.join(os.environ["STACKWATCH_SRCDIR"], "tests/fixtures/lock-cxx.cc")
    binary = tmp_path / "lock-cxx"
    subprocess.run(["g++", "-std=c++17", "-O2", "-g", "-pthread", "-o", str(binary), src], check=True)
    with unlisted([binary], ("cxx-a", "cxx-b")) as (pid, tids):
        [doc] = dump_json("--peers", "1", pid)
        edges = mutex_edges(doc)
        a, b = tids["cxx-a"], tids["cxx-b"]
        assert edges[a]["to"]["tid"] == b and edges[b]["to"]["tid"] == a, edges
        assert edges[a]["object"].startswith("mutex second_lock (0x") and edges[b]["object"].startswith(
            "mutex first_lock (0x"), edges
        assert sorted(doc["wait_chain"]["lock_cycle"]["threads"]) == sorted([a, b])


CONVOY_RULES = """
poll_interval: 200ms
archive:
  directory: @ARCHIVE@
http:
  socket: @SOCKET@
capture:
  max_per_minute: 60
rules:
  - name: convoy
    class: [blocked, waiting]
    for: 1s
    comm: lock-holder
    lock_holder: true
    cooldown: 1h
"""


def test_lock_holder_rule_snapshots_the_head_of_a_convoy_once(daemon, fixture):
    """waiter → middle → holder (in read()): the rule fires once, for holder, the thread the convoy waits behind,
    not for the threads queued on it; a thread waiting on a condition variable holds nothing and fires nothing."""
    fx, tids = start(fixture, "lock-holder", "chain", waiters=("middle", "waiter"))
    quiet, _ = start(fixture, "lock-holder", "condvar", waiters=("sleeper",))
    d = daemon(CONVOY_RULES)
    [snap] = wait_until(lambda: [s for s in d.snapshots("--rule", "convoy") if s["pid"] == fx.pid], timeout=30,
                        what="the convoy rule firing")
    d.wait_scans(25, timeout=30)
    every = d.snapshots("--rule", "convoy")
    assert [s["pid"] for s in every] == [fx.pid], every
    doc = d.show(snap["id"])
    assert doc["trigger"]["tid"] == tids["holder"], doc["trigger"]
    assert doc["wait_chain"]["tid"] == tids["holder"]
    rules = {r["name"]: r for r in d.get_json("/rules")["rules"]}
    assert rules["convoy"]["lock_holder"] is True and rules["convoy"]["fired"] == 1


def test_processes_names_the_holder_of_a_waited_mutex(daemon, fixture):
    fx, tids = start(fixture, "lock-holder", "chain", waiters=("middle", "waiter"))
    d = daemon(CONVOY_RULES.replace("comm: lock-holder\n    lock_holder: true", "comm: nothing-matches"))
    d.wait_scans(2)
    rows = {r["tid"]: r for r in d.get_json("/processes?all=1&comm=lock-holder")["threads"] if r["pid"] == fx.pid}
    assert rows[tids["waiter"]]["lock"]["owner"] == tids["middle"], rows[tids["waiter"]]
    assert rows[tids["middle"]]["lock"]["owner"] == tids["holder"]
    assert rows[tids["waiter"]]["lock"]["object"].startswith("mutex 0x")
    # The holder reads a pipe: no lock; the main thread sleeps in pause(): none either.
    assert "lock" not in rows[tids["holder"]] and "lock" not in rows[fx.pid]


def test_a_hundred_waiters_all_get_their_holder(fixture):
    """Waits in futex() cost one read of the lock each: they are not cut at the 64 threads a chain follows per
    process for other waits (the lock table would have named a third of them)."""
    fx = fixture("lock-holder", "many")
    wait_until(lambda: sum(in_futex(fx.pid, t) for t, n in thread_names(fx.pid).items() if n == "waiter") == 100,
               what="100 waiters in futex()")
    holder = names_to_tids(fx.pid)["holder"]
    [doc] = dump_json("--locks", fx.pid)
    edges = mutex_edges(doc)
    assert len(edges) == 100 and {e["to"]["tid"] for e in edges.values()} == {holder}
    assert not doc["wait_chain"]["truncated"]
