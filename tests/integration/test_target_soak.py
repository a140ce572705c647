"""Target safety, proven by a soak (issue 46, item 5): interpreters and runtimes dumped over and over at their most
fragile moments, and the same targets run as often with no dump at all, the control. A target killed by a signal it
did not ask for (SIGSEGV, SIGBUS, SIGABRT, SIGILL, SIGFPE, SIGTRAP, SIGSYS) has crashed; its core is kept in a
directory of its own (the kernel's core_pattern points there for the soak, then back) and the test prints where.

The targets, each of which ends by itself within a second or two:
- every CPython 3.8+ here, finalizing while daemon threads are parked and spinning (tests/fixtures/python/where.py
  churn, the case CI's ASan run once saw CPython 3.10 crash in);
- a Go program exiting while its goroutines are parked and spinning (tests/fixtures/go/hung, its lifetime over);
- a JVM exiting the same way (tests/fixtures/java/Hung.java, its lifetime over);
- Node.js exiting from a timer while a worker thread spins;
- a process forking and execing in a loop.

Minutes of it: set STACKWATCH_SOAK_SECONDS (e.g. 600); the time is shared between the dumped runs (two thirds) and
the control (one third). STACKWATCH_SOAK_TARGETS (a comma-separated list of name prefixes: "cpython 3.10,go")
keeps the soak to those targets."""
import contextlib
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pytest

from conftest import SRCDIR, STACKCTL

SOAK_SECONDS = int(os.environ.get("STACKWATCH_SOAK_SECONDS", "0") or 0)
SOAK_TARGETS = [t.strip() for t in os.environ.get("STACKWATCH_SOAK_TARGETS", "").split(",") if t.strip()]
CRASH_SIGNALS = {signal.SIGSEGV, signal.SIGBUS, signal.SIGABRT, signal.SIGILL, signal.SIGFPE, signal.SIGTRAP,
                 signal.SIGSYS}
WHERE = os.path.join(SRCDIR, "tests", "fixtures", "python", "where.py")
GO_SRC = os.path.join(SRCDIR, "tests", "fixtures", "go", "hung")
JAVA_SRC = os.path.join(SRCDIR, "tests", "fixtures", "java", "Hung.java")
# Node: a worker spins, the main thread waits in its event loop, a timer ends the process from JavaScript.
NODE_EXIT = """
const { Worker } = require('worker_threads');
new Worker('for (;;) {}', { eval: true });
setTimeout(() => process.exit(0), Number(process.argv[1]));
"""
# A process forking and execing /bin/true in a loop, then exiting.
FORK_EXEC = "for i in $(seq 1 200); do /bin/true; done"

pytestmark = pytest.mark.skipif(SOAK_SECONDS <= 0, reason="a soak of minutes: set STACKWATCH_SOAK_SECONDS "
                                                          "(e.g. 600) to run it")


def cpythons():
    """Every CPython 3.8+ here: the system one and each pyenv build."""
    found = ["/usr/bin/python3"] if os.path.exists("/usr/bin/python3") else []
    root = "/root/.pyenv/versions"
    for v in sorted(os.listdir(root)) if os.path.isdir(root) else []:
        parts = v.split(".")
        if len(parts) >= 2 and parts[0] == "3" and parts[1].isdigit() and int(parts[1]) >= 8:
            exe = os.path.join(root, v, "bin", f"python3.{parts[1]}")
            if os.path.exists(exe):
                found.append(exe)
    return found


@contextlib.contextmanager
def cores_kept_in(directory):
    """The kernel's core_pattern pointed at DIRECTORY for the block, and put back after; None when it cannot be
    changed here (no root, a read-only /proc/sys): crashes are still counted, their cores not kept."""
    path = "/proc/sys/kernel/core_pattern"
    try:
        with open(path) as f:
            old = f.read().rstrip("\n")
        with open(path, "w") as f:
            f.write(os.path.join(directory, "core.%e.%p"))
    except OSError:
        yield None
        return
    try:
        yield directory
    finally:
        with open(path, "w") as f:
            f.write(old)


def unlimited_core():
    resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))


class Targets:
    """How to start each target, built once (Go, Java) in TMP."""

    def __init__(self, tmp):
        self.tmp = tmp
        self.commands = {}
        for exe in cpythons():
            name = "cpython " + subprocess.run([exe, "-c", "import platform; print(platform.python_version())"],
                                               capture_output=True, text=True, timeout=30).stdout.strip()
            self.commands[name] = lambda ms, exe=exe: ([exe, WHERE, "churn", str(ms)], {}, 0)
        go = shutil.which("go")
        if go:
            env = dict(os.environ, HOME=tmp, GOCACHE=os.path.join(tmp, "gocache"), GOPATH=os.path.join(tmp, "gopath"),
                       GO111MODULE="off", GOFLAGS="")
            out = os.path.join(tmp, "hung-go")
            if subprocess.run([go, "build", "-o", out, "main.go"], cwd=GO_SRC, env=env, capture_output=True,
                              timeout=600).returncode == 0:
                oracle = os.path.join(tmp, "go-oracle")
                # Its lifetime over, it says so and exits with status 1.
                self.commands["go"] = lambda ms: ([out, "-idle", "50", "-spin", "1", "-oracle", oracle],
                                                  {"FIXTURE_LIFETIME": "1"}, 1)
        javac, java = shutil.which("javac"), shutil.which("java")
        if javac and java:
            classes = os.path.join(tmp, "classes")
            if subprocess.run([javac, "-d", classes, JAVA_SRC], capture_output=True, timeout=300).returncode == 0:
                self.commands["java"] = lambda ms: ([java, "-cp", classes, "-Xss512k", "Hung", "plain"],
                                                    {"FIXTURE_LIFETIME": "2"}, 1)
        node = shutil.which("node")
        if node:
            self.commands["node"] = lambda ms: ([node, "-e", NODE_EXIT, str(ms)], {}, 0)
        self.commands["fork-exec"] = lambda ms: (["/bin/sh", "-c", FORK_EXEC], {}, 0)


class Tally:
    def __init__(self):
        self.runs = self.dumps = 0
        self.crashes = []       # (signal name, core path or None)
        self.stuck = 0          # runs that did not end in time (killed by us)
        self.odd = []           # other exit statuses than the target's own

    def line(self):
        return (f"{self.runs} runs, {self.dumps} dumps, {len(self.crashes)} crashes"
                + (f", {self.stuck} not ended in 60 s" if self.stuck else "")
                + (f", exit statuses {sorted(set(self.odd))} not the target's own" if self.odd else ""))


def run_once(command, env, expected, dump, cores, tally):
    """Start the target, dump it in a loop (DUMP) until it is gone, and file how it ended into TALLY."""
    p = subprocess.Popen(command, env=dict(os.environ, **env), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, preexec_fn=unlimited_core, cwd=tempfile.gettempdir())
    deadline = time.monotonic() + 60
    while p.poll() is None and time.monotonic() < deadline:
        if dump:
            r = subprocess.run([STACKCTL, "dump", "--json", "--no-source", str(p.pid)], capture_output=True,
                               timeout=60)
            # A dump ends as a dump (0, 5: partial) or finds the process gone (3); never killed by a signal.
            assert r.returncode in (0, 3, 5), (command, r.returncode, r.stderr.decode(errors="replace")[-2000:])
            tally.dumps += 1
        else:
            time.sleep(0.005)
    if p.poll() is None:
        tally.stuck += 1
        p.kill()
    p.wait()
    tally.runs += 1
    if p.returncode < 0 and -p.returncode in CRASH_SIGNALS:
        core = None
        if cores:
            found = [f for f in os.listdir(cores) if f.endswith(f".{p.pid}")]
            core = os.path.join(cores, found[0]) if found else None
        tally.crashes.append((signal.Signals(-p.returncode).name, core))
    elif p.returncode != expected:
        tally.odd.append(p.returncode)


def test_targets_survive_dumps_at_their_most_fragile(tmp_path):
    targets = Targets(str(tmp_path))
    names = sorted(n for n in targets.commands if not SOAK_TARGETS or any(n.startswith(t) for t in SOAK_TARGETS))
    assert names, (sorted(targets.commands), SOAK_TARGETS)
    dumped = {n: Tally() for n in names}
    control = {n: Tally() for n in names}
    cores_dir = tmp_path / "cores"
    cores_dir.mkdir()
    with cores_kept_in(str(cores_dir)) as cores:
        # The soak sees a crash and keeps its core: a process that kills itself with SIGSEGV, dumped as the others.
        probe = Tally()
        run_once(["/usr/bin/python3", "-c", "import os, signal, time; time.sleep(0.2); os.kill(os.getpid(), 11)"],
                 {}, 0, True, cores, probe)
        assert [c[0] for c in probe.crashes] == ["SIGSEGV"], probe.line()
        assert not cores or probe.crashes[0][1], f"no core of the crash in {cores}"
        start = time.monotonic()
        i = 0
        while time.monotonic() - start < SOAK_SECONDS:
            name = names[i % len(names)]
            # The moment of the exit moves each round: 40 to 390 ms after the threads start.
            command, env, expected = targets.commands[name](40 + (i // len(names)) % 8 * 50)
            # Two runs dumped for one run left alone.
            dump = i // len(names) % 3 != 2
            run_once(command, env, expected, dump, cores, (dumped if dump else control)[name])
            i += 1
    elapsed = time.monotonic() - start
    print(f"\ntarget soak: {elapsed:.0f} s, cores {'kept in ' + str(cores_dir) if cores else 'not kept here'}")
    for n in names:
        print(f"  {n:16} dumped: {dumped[n].line()}; control (no dump): {control[n].line()}")
        for sig, core in dumped[n].crashes + control[n].crashes:
            print(f"    crash: {sig}, core {core or 'not kept'}")
    total = sum(t.dumps for t in dumped.values())
    print(f"  {total} dumps of {sum(t.runs for t in dumped.values())} dumped runs, "
          f"{sum(t.runs for t in control.values())} control runs")
    assert total > 0
    assert not any(t.stuck for t in dumped.values()), "a target kept from exiting"
    assert not any(t.crashes for t in dumped.values()), "a target crashed under dumps (its core is above)"
    assert not any(t.odd for t in dumped.values()), "a target ended otherwise than by itself under dumps"
    sys.stdout.flush()
