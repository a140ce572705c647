"""The daemon names the Python culprit (issue 27): a Python thread that busy-loops in pure Python, and two Python
processes in a pipe deadlock, fire rules whose journal record (a real journald), hook event, Alertmanager alert (a
real Alertmanager) and `stackctl ps` name the Python function, file and line each culprit thread runs; on the system
python3 and on each pyenv CPython 3.8-3.13 present. Every rule matches this test's own processes by comm only."""
import itertools
import json
import os
import subprocess

import pytest

from conftest import SRCDIR, stackctl, wait_until
from test_alertmanager import HOOK as ALERTMANAGER_HOOK, am_alerts
from test_client import ps_rows
from test_journal import FIRED, journal, journald_daemon  # noqa: F401  (journald_daemon is a fixture)
from test_python_frames import SYSTEM_PYTHON, pythons, version_of

CULPRIT = os.path.join(SRCDIR, "tests", "fixtures", "python", "culprit.py")
_names = itertools.count(1)


def unique_comm(prefix):
    """A comm no other process has (at most 15 bytes): other tests may run theirs at the same time."""
    return f"{prefix}{os.getpid() % 10000}-{next(_names)}"


class Culprit:
    """tests/fixtures/python/culprit.py under interpreter EXE: COMM, MODE (spin or deadlock)."""

    def __init__(self, exe, comm, mode):
        self.comm = comm
        self.p = subprocess.Popen([exe, CULPRIT, comm, mode], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  text=True)
        line = self.p.stdout.readline()
        assert line.startswith("READY "), line
        # {function: [tid, line]}: where each culprit thread's innermost Python frame is.
        self.where = json.loads(line[len("READY "):])
        self.pid = self.p.pid

    def frame(self, function):
        return f"{function} (culprit.py:{self.where[function][1]})"

    def tid(self, function):
        return self.where[function][0]

    def stop(self):
        if self.p.poll() is None:
            # Its child first (deadlock mode), while it is still the child's parent: a pid is killed only if it is.
            for tid, _ in self.where.values():
                try:
                    with open(f"/proc/{tid}/stat") as f:
                        ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                except (FileNotFoundError, ProcessLookupError):
                    continue
                if ppid == self.pid:
                    os.kill(tid, 9)
            self.p.kill()
        self.p.wait()


@pytest.fixture
def culprit():
    started = []

    def start(comm, mode, exe=SYSTEM_PYTHON):
        c = Culprit(exe, comm, mode)
        started.append(c)
        return c
    yield start
    for c in started:
        c.stop()


def recording_hook(tmp_path, then=()):
    """A hook that appends its STACKWATCH_EVENT and STACKWATCH_PYTHON_FRAME (one JSON line each) to a file, then
    execs THEN (the Alertmanager hook, say) in the same environment."""
    out = tmp_path / "events"
    script = tmp_path / "record"
    then_line = "exec " + " ".join(f"'{a}'" for a in then) + "\n" if then else ""
    script.write_text("#!/bin/sh\n"
                      f"printf '%s\\n' \"$STACKWATCH_EVENT\" >> '{out}'\n"
                      f"printf '{{\"env\": \"%s\"}}\\n' \"${{STACKWATCH_PYTHON_FRAME-unset}}\" >> '{out}'\n"
                      + then_line)
    script.chmod(0o755)
    return str(script), out


def events(out):
    """The hook's events, each with the STACKWATCH_PYTHON_FRAME it got as "env"."""
    if not out.exists():
        return []
    lines = [json.loads(ln) for ln in out.read_text().splitlines() if ln.strip()]
    return [dict(ev, env=env["env"]) for ev, env in zip(lines[::2], lines[1::2])]


def firings(out):
    """The events of new firings: on a loaded machine a busy thread may leave its class for a moment, and its alert
    resolve (and fire again, without a snapshot)."""
    return [ev for ev in events(out) if ev["state"] == "firing" and not ev["repeat"]]


def config(rules, hook):
    return f"""
poll_interval: 200ms
archive:
  directory: "@ARCHIVE@"
hooks:
  command: [{json.dumps(hook)}]
rules:
{rules}
"""


def spin_rule(comm):
    return f"""
  - name: py-spin
    class: busy-loop
    for: 1s
    comm: {json.dumps(comm)}
    cooldown: 1h
    actions: [snapshot, log, hook]
"""


def ps_row(socket, comm, pid, tid):
    r = stackctl("--socket", socket, "ps", "--comm", comm)
    if r.returncode != 0:
        return None
    return next((row for row in ps_rows(r.stdout.decode()) if row["pid"] == pid and row["tid"] == tid), None)


def test_a_busy_python_loop_is_named_in_journal_hook_alert_and_ps(journald_daemon, alertmanager, culprit,
                                                                   tmp_path):
    comm = unique_comm("pyd-spin")
    hook, out = recording_hook(tmp_path, then=(ALERTMANAGER_HOOK, alertmanager.url))
    d, jdir = journald_daemon(config(spin_rule(comm), hook))
    c = culprit(comm, "spin")
    tid, frame = c.tid("spin"), c.frame("spin")

    # The journal record: the function that loops, its file and line, in MESSAGE and as a field of its own.
    recs = wait_until(lambda: journal(jdir, f"MESSAGE_ID={FIRED}", f"STACKWATCH_PID={c.pid}"), timeout=30,
                      interval=0.1, what="the firing's record in the journal")
    assert len(recs) == 1, recs
    rec = recs[0]
    assert rec["STACKWATCH_TID"] == str(tid) and rec["STACKWATCH_CLASS"] == "busy-loop"
    assert rec["STACKWATCH_PYTHON_FRAME"] == frame, rec
    msg = rec["MESSAGE"]
    assert msg.startswith(f'Rule "py-spin" fired: pid {c.pid} ({comm}) thread {tid} busy-loop for '), msg
    assert msg.splitlines()[0].split("; snapshot ")[0].endswith(f" s in {frame}"), msg
    # The stack in the message shows it once and first: "#0  spin (culprit.py:N)".
    stack = msg.split(f"Stack of thread {tid}:\n", 1)[1].splitlines()
    assert stack[0] == f"#0  {frame}" and stack[1].startswith("#1  inner (culprit.py:"), stack

    # The hook: the frame in the event and in the environment; the summary says it too.
    ev = wait_until(lambda: firings(out), timeout=10, what="the hook's event")[0]
    assert ev["python_frame"] == frame and ev["env"] == frame and ev["python_cycle"] is None
    assert ev["summary"].endswith(f" in {frame}") and ev["tid"] == tid
    assert ev["frames"][0] == f"#0  {frame}"

    # Alertmanager: an annotation of its own, and the summary.
    [a] = wait_until(lambda: am_alerts(alertmanager, pid=str(c.pid)), timeout=20, interval=0.1,
                     what="the alert in Alertmanager")
    assert a["annotations"]["python_frame"] == frame
    assert a["annotations"]["summary"].endswith(f" in {frame}")
    assert "python_cycle" not in a["annotations"]
    assert a["annotations"]["stack"].splitlines()[0] == f"#0  {frame}"

    # stackctl ps: under the thread's row, from the snapshot the daemon kept; /processes has the key.
    row = wait_until(lambda: ps_row(d.socket, comm, c.pid, tid), timeout=10, interval=0.1, what="the spinner in ps")
    assert row["cls"] == "busy-loop" and row.get("python") == frame, row
    [t] = [t for t in d.get_json(f"/processes?comm={comm}")["threads"] if t["tid"] == tid]
    assert t["python_frame"] == frame
    # The main thread, waiting for stdin, was in that snapshot too: it is not unhealthy, but --all shows it.
    main = [t for t in d.get_json("/processes?all=1")["threads"] if t["tid"] == c.pid]
    assert main and main[0]["python_frame"].startswith("main (culprit.py:"), main

    # Gone with the process (its log is in the journal: no scan lines to count, so the scan's own count).
    c.stop()
    scans = d.get_json("/processes")["scan"]["scans"]
    wait_until(lambda: d.get_json("/processes")["scan"]["scans"] >= scans + 2, timeout=10, what="two more scans")
    assert not [t for t in d.get_json("/processes?all=1")["threads"] if t["pid"] == c.pid]


def test_a_python_pipe_deadlock_names_both_threads(daemon, culprit, tmp_path):
    comm = unique_comm("pyd-dl")
    hook, out = recording_hook(tmp_path)
    d = daemon(config(f"""
  - name: py-deadlock
    class: blocked
    for: 1s
    comm: {json.dumps(comm)}
    deadlock: true
    cooldown: 1h
    actions: [snapshot, log, hook]
""", hook))
    c = culprit(comm, "deadlock")
    ev = wait_until(lambda: firings(out), timeout=30, interval=0.1, what="the deadlock's hook")[0]
    # One firing for the cycle, from either process; the other names the rest of it.
    fired = {ev["tid"]: ev["python_frame"]}
    assert fired in ({c.tid("wait_for_child"): c.frame("wait_for_child")},
                     {c.tid("wait_for_parent"): c.frame("wait_for_parent")}), ev
    other = "wait_for_parent" if ev["tid"] == c.tid("wait_for_child") else "wait_for_child"
    assert ev["env"] == ev["python_frame"]
    cycle = {(e["pid"], e["tid"]): e["frame"] for e in ev["python_cycle"]}
    assert cycle == {(c.tid(f), c.tid(f)): c.frame(f) for f in ("wait_for_child", "wait_for_parent")}, ev
    assert ev["python_cycle"][0]["tid"] == ev["tid"], "the cycle in wait order, from the firing's thread"
    assert ev["summary"].endswith(f" in read, in {ev['python_frame']}; deadlock with pid {c.tid(other)} "
                                  f"thread {c.tid(other)} in {c.frame(other)}"), ev["summary"]
    # The record's MESSAGE (to stderr here: no journal) says the same.
    wait_until(lambda: f"fired: {ev['summary']}; snapshot " in d.log_text(), timeout=5, what="the firing's message")
    # ps names both: the peer was captured with the same snapshot.
    for f in ("wait_for_child", "wait_for_parent"):
        row = wait_until(lambda: ps_row(d.socket, comm, c.tid(f), c.tid(f)), timeout=10, interval=0.1,
                         what=f"{f} in ps")
        assert row["cls"] == "blocked" and row.get("python") == c.frame(f), row


@pytest.mark.parametrize("exe", pythons())
def test_every_cpython_names_the_loop(daemon, culprit, tmp_path, exe):
    """The busy loop's frame on each CPython here: the capture stops the running thread to read it, so the line is
    the loop's own."""
    comm = unique_comm("pyd-v")
    hook, out = recording_hook(tmp_path)
    d = daemon(config(spin_rule(comm), hook))
    c = culprit(comm, "spin", exe=exe)
    ev = wait_until(lambda: firings(out), timeout=30, interval=0.1, what=f"the hook on {version_of(exe)}")[0]
    assert ev["tid"] == c.tid("spin") and ev["python_frame"] == c.frame("spin"), (version_of(exe), ev)
    assert " busy-loop for " in ev["summary"] and ev["summary"].endswith(f" s in {c.frame('spin')}"), ev["summary"]


def test_the_gil_holder_heads_a_convoy(daemon, tmp_path):
    """A thread that keeps the GIL while blocked in a C call holds what every other thread waits for: the
    lock_holder rule fires once, for the holder, not for a thread waiting for the GIL."""
    comm = unique_comm("pyd-gil")
    hook, out = recording_hook(tmp_path)
    p = subprocess.Popen([SYSTEM_PYTHON, os.path.join(SRCDIR, "tests", "fixtures", "python", "gil_held.py"), comm],
                         stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline() == "ready\n"
        d = daemon(config(f"""
  - name: gil-holder
    class: [waiting, blocked]
    for: 1s
    comm: {json.dumps(comm)}
    lock_holder: true
    cooldown: 1h
    actions: [snapshot, log, hook]
""", hook))
        ev = wait_until(lambda: firings(out), timeout=30, interval=0.1, what="the GIL holder's firing")[0]
        assert ev["pid"] == p.pid and ev["tid"] == p.pid, ev
        assert ev["python_frame"].startswith("hold_gil_in_sleep (gil_held.py:"), ev
        d.wait_scans(15, timeout=30)
        assert len(firings(out)) == 1, firings(out)
        [snap] = [s for s in d.snapshots() if s["pid"] == p.pid]
        doc = d.show(snap["id"])
        assert doc["trigger"]["tid"] == p.pid, doc["trigger"]
    finally:
        p.kill()
        p.wait()
