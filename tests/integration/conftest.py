"""Shared fixtures for the integration tests: real fixture processes, the real stackctl, deadlines not sleeps."""
import json
import platform
import re
import os
import select
import signal
import subprocess
import time

import pytest

BUILDDIR = os.environ.get("STACKWATCH_BUILDDIR") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SRCDIR = os.environ.get("STACKWATCH_SRCDIR") or BUILDDIR
STACKCTL = os.path.join(BUILDDIR, "client", "stackctl")
FIXTURES = os.path.join(BUILDDIR, "tests", "fixtures", "bin")
DEBUGDIR = os.path.join(BUILDDIR, "tests", "fixtures", "debug")
# No debuginfo cache unless a test asks for one (test_symcache.py): what one test found (a debuginfod answer, a
# --debuginfo-path) must not resolve another test's frames, and the suite must not fill the host's /var/cache.
os.environ["STACKWATCH_CACHE_DIR"] = "off"
# Deadlines are set for a native machine; an emulated one (tests/arm64/run: TCG, some 10-30 times slower) stretches
# every wait for a state or a line by this factor.
TIME_SCALE = float(os.environ.get("STACKWATCH_TIME_SCALE") or 1)

# The machine the tests run on; stackwatch captures processes of its own architecture. Where glibc's system calls
# differ, a test names the call by its x86-64 name through syscall_name(): aarch64 has only the generic table's
# calls, so glibc's poll() is ppoll, epoll_wait() is epoll_pwait, pause() is ppoll and vfork()/fork() are clone; its
# numbers differ too (read is 63, write 64). SYSCALL_INSN_LEN is the length of the system call instruction (x86-64's
# `syscall`, aarch64's `svc #0`), by which a passive capture's frame #0 may differ from a ptrace one's.
MACHINE = platform.machine()
_AARCH64_SYSCALLS = {"poll": "ppoll", "epoll_wait": "epoll_pwait", "pause": "ppoll", "vfork": "clone",
                     "fork": "clone"}
_SYSCALL_NUMBERS = {"x86_64": {"read": 0, "write": 1, "futex": 202}, "aarch64": {"read": 63, "write": 64, "futex": 98}}
SYSCALL_INSN_LEN = 4 if MACHINE == "aarch64" else 2


def syscall_name(name):
    """The name of the call glibc's NAME() issues on this machine."""
    return _AARCH64_SYSCALLS.get(name, name) if MACHINE == "aarch64" else name


def syscall_number(name):
    """NAME's number in /proc/PID/syscall on this machine (read, write and futex: the calls the tests wait for)."""
    return _SYSCALL_NUMBERS[MACHINE][name]


def wait_until(cond, timeout=5.0, interval=0.005, what="condition"):
    """Poll COND until it returns a true value or the deadline passes (then fail, naming WHAT)."""
    timeout *= TIME_SCALE
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def read_stat(pid, tid=None):
    """(comm, state) of a process or thread, parsed from the last ')' as proc(5) requires; None when gone."""
    path = f"/proc/{pid}/task/{tid}/stat" if tid else f"/proc/{pid}/stat"
    try:
        with open(path, "rb") as f:
            data = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    open_, close = data.index(b"("), data.rindex(b")")
    return data[open_ + 1:close], chr(data[close + 2])


def thread_states(pid):
    try:
        tids = sorted(int(t) for t in os.listdir(f"/proc/{pid}/task"))
    except (FileNotFoundError, ProcessLookupError):
        return {}
    out = {}
    for tid in tids:
        st = read_stat(pid, tid)
        if st:
            out[tid] = st[1]
    return out


def tracer_of(pid, tid):
    try:
        with open(f"/proc/{pid}/task/{tid}/status") as f:
            for line in f:
                if line.startswith("TracerPid:"):
                    return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError):
        return None
    return 0


def assert_threads_untouched(pid, name):
    """No thread of process PID (called NAME in messages) left stopped or traced."""
    states = thread_states(pid)
    assert states, f"no threads in /proc/{pid}/task"
    for tid, state in states.items():
        assert state not in ("t", "T"), f"{name} thread {tid} left stopped ({state})"
        tr = tracer_of(pid, tid)
        assert tr in (0, None), f"{name} thread {tid} left traced by {tr}"


def thread_names(pid):
    out = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except (FileNotFoundError, ProcessLookupError):
        return out
    for tid in tids:
        st = read_stat(pid, tid)
        if st:
            out[int(tid)] = st[0].decode(errors="replace")
    return out


def threads64_parked(fixture):
    """threads64 started, and its 64 workers (t00..t63) asleep in read(): {tid: name} of the workers."""
    fx = fixture("threads64")

    def workers():
        return {tid: n for tid, n in thread_names(fx.pid).items() if re.fullmatch(r"t\d\d", n)}
    wait_until(lambda: len(workers()) == 64, what="64 workers")
    for tid in workers():
        fx.wait_wchan("pipe_read", tid=tid)
    return fx, workers()


class Fixture:
    def __init__(self, name, args=(), env=None):
        self.name = name
        e = dict(os.environ, FIXTURE_LIFETIME="300")
        e.update(env or {})
        self.proc = subprocess.Popen([os.path.join(FIXTURES, name), *args], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=e)
        self.pid = self.proc.pid

    def _read_line(self, what, timeout):
        timeout *= TIME_SCALE
        deadline = time.monotonic() + timeout
        buf = b""
        while not buf.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.proc.stdout], [], [], left)[0]:
                raise AssertionError(f"{self.name}: no {what!r} line within {timeout}s")
            c = os.read(self.proc.stdout.fileno(), 1)
            if not c:
                raise AssertionError(f"{self.name} exited before {what!r}: {self.proc.stderr.read()!r}")
            buf += c
        return buf.strip()

    def wait_line(self, expect=b"READY", timeout=5.0):
        buf = self._read_line(expect, timeout)
        assert buf == expect, buf
        return self

    def wait_line_prefix(self, prefix, timeout=5.0):
        """Read one line that must start with PREFIX (e.g. peer-pair's "PIDS …"); returns it without the newline."""
        buf = self._read_line(prefix, timeout)
        assert buf.startswith(prefix), buf
        return buf

    def wait_state(self, states, tid=None, timeout=5.0):
        tid = tid or self.pid
        wait_until(lambda: (read_stat(self.pid, tid) or (None, None))[1] in states, timeout,
                   what=f"{self.name} thread {tid} in state {states}")
        return self

    def wait_wchan(self, needle, tid=None, timeout=5.0):
        tid = tid or self.pid

        def ok():
            try:
                with open(f"/proc/{self.pid}/task/{tid}/wchan") as f:
                    return needle in f.read()
            except (FileNotFoundError, ProcessLookupError):
                return False
        wait_until(ok, timeout, what=f"{self.name} thread {tid} wchan {needle}")
        return self

    def assert_untouched(self):
        """The target comes first: after any test it is running on, neither stopped nor traced."""
        if self.proc.poll() is not None:
            return
        assert_threads_untouched(self.pid, self.name)

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)
        for f in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            f.close()


@pytest.fixture
def fixture():
    """Start fixture programs; at teardown assert they were left untouched, then kill them."""
    started = []

    def start(name, *args, env=None, ready=True):
        fx = Fixture(name, args, env)
        started.append(fx)
        if ready:
            fx.wait_line()
        return fx
    yield start
    try:
        for fx in started:
            fx.assert_untouched()
    finally:
        for fx in started:
            fx.kill()


def stackctl(*args, timeout=30, check_rc=None):
    """Run the real stackctl; returns CompletedProcess (text). A signal-terminated run is always a failure."""
    r = subprocess.run([STACKCTL, *map(str, args)], capture_output=True, timeout=timeout)
    assert r.returncode >= 0, f"stackctl killed by signal {-r.returncode}: {r.stderr!r}"
    if check_rc is not None:
        assert r.returncode == check_rc, f"rc {r.returncode} != {check_rc}: {r.stderr.decode(errors='replace')}"
    return r


def dump_json(*args, check_rc=0, timeout=30):
    r = stackctl("dump", "--json", *args, check_rc=check_rc, timeout=timeout)
    docs = [json.loads(line) for line in r.stdout.decode().splitlines() if line.strip()]
    tally_fallback_stops(docs)
    return docs


# What the suite's dumps (auto method) cost their targets: the threads the ptrace fall-back stopped, those asleep
# apart (a thread on a CPU can only be had stopped; one asleep, only when the passive capture lacked something).
# Printed at the end of the run (pytest_terminal_summary), with the first tests that stopped a sleeping thread.
FALLBACK = {"threads": 0, "asleep": 0, "stopped": 0, "stopped_asleep": 0, "where": []}


def tally_fallback_stops(docs):
    for doc in docs:
        for d in [doc, *(doc.get("peers") or [])]:
            if d.get("capture", {}).get("method") != "auto":
                continue
            for t in d.get("threads") or []:
                asleep = t.get("state") not in ("R", None)
                stopped = (t.get("capture") or {}).get("method") == "ptrace"
                FALLBACK["threads"] += 1
                FALLBACK["asleep"] += asleep
                FALLBACK["stopped"] += stopped
                if stopped and asleep:
                    FALLBACK["stopped_asleep"] += 1
                    test = os.environ.get("PYTEST_CURRENT_TEST", "?").split(" ")[0]
                    if len(FALLBACK["where"]) < 10 and test not in FALLBACK["where"]:
                        FALLBACK["where"].append(test)


def pytest_terminal_summary(terminalreporter):
    f = FALLBACK
    terminalreporter.write_line(
        f"fallback stops: the dumps (auto method) had {f['threads']} threads, {f['asleep']} of them asleep; the "
        f"ptrace fall-back stopped {f['stopped']}, {f['stopped_asleep']} of them asleep")
    for test in f["where"]:
        terminalreporter.write_line(f"  a sleeping thread stopped in {test}")


def thread_by_comm(doc, comm):
    ts = [t for t in doc["threads"] if t["comm"] == comm]
    assert len(ts) == 1, f"{len(ts)} threads named {comm!r}"
    return ts[0]


def functions(thread):
    """Function names of a thread's user frames, innermost first (None for unknown)."""
    return [f["function"] for f in thread["frames"]]


def assert_chain(thread, chain):
    """CHAIN (innermost first) appears in the thread's frames as one contiguous run."""
    names = functions(thread)
    n = len(chain)
    for i in range(len(names) - n + 1):
        if names[i:i + n] == chain:
            return i
    raise AssertionError(f"chain {chain} not found contiguously in {names}")


def assert_proven_chain(thread, chain, innermost):
    """CHAIN is in the thread's frames right after the frames of the libc call it sleeps in (functions named with
    INNERMOST), and every frame up to the chain's end was unwound from what is known (registers, CFI), none guessed
    by a stack scan or a frame-pointer walk: a stale return address on the stack shown as a caller fails this, as
    does a caller lost from a register the capture lacks (aarch64's link register in a passive capture)."""
    i = assert_chain(thread, chain)
    names = functions(thread)
    assert i > 0 and all(n and innermost in n for n in names[:i]), names
    guessed = [(n, f.get("method")) for n, f in zip(names[:i + len(chain)], thread["frames"])
               if f.get("method") not in ("initial", "cfi")]
    assert not guessed, (guessed, thread["capture"])
    return i


STACKWATCHD = os.path.join(BUILDDIR, "daemon", "stackwatchd")
# scan.source for every daemon a test starts without one of its own; "" keeps the built-in default (auto).
SCAN_SOURCE = os.environ.get("STACKWATCH_SCAN_SOURCE", "")


def http_get(target, path, headers=None, timeout=30, method="GET"):
    """One HTTP request to the daemon: TARGET is a unix socket path or a (host, port) pair."""
    import http.client
    import socket

    class UnixConnection(http.client.HTTPConnection):
        def connect(self):
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.settimeout(timeout)
            self.sock.connect(target)

    if isinstance(target, str):
        conn = UnixConnection("localhost", timeout=timeout)
    else:
        conn = http.client.HTTPConnection(*target, timeout=timeout)
    try:
        conn.request(method, path, headers=headers or {})
        r = conn.getresponse()
        return r.status, dict(r.getheaders()), r.read()
    finally:
        conn.close()


class NotifyListener:
    """A NOTIFY_SOCKET for the daemon: collects every sd_notify datagram, in order."""

    def __init__(self, path):
        import socket
        import threading
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(path)
        self.sock.settimeout(0.2)
        self.messages = []
        self.lock = threading.Lock()
        self.stopped = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stopped:
            try:
                data = self.sock.recv(4096)
            except OSError:
                continue
            with self.lock:
                self.messages.append(data.decode(errors="replace"))

    def lines(self):
        with self.lock:
            return [ln for m in self.messages for ln in m.splitlines()]

    def wait_for(self, predicate, timeout=10, what="notify message"):
        return wait_until(lambda: any(predicate(ln) for ln in self.lines()), timeout, what=what)

    def count(self, line):
        return sum(1 for ln in self.lines() if ln == line)

    def close(self):
        self.stopped = True
        self.thread.join(timeout=2)
        self.sock.close()


class Daemon:
    instances = 0

    def __init__(self, tmp, config_text, env=None, args=(), wrapper=()):
        Daemon.instances += 1
        n = Daemon.instances
        self.tmp = tmp
        self.archive = os.path.join(tmp, "archive")
        self.socket = os.path.join(tmp, f"api-{n}.sock")
        self.config = os.path.join(tmp, "stackwatch.yaml")
        self.write_config(config_text)
        self.notify = NotifyListener(os.path.join(tmp, f"notify-{n}.sock"))
        self.log_path = os.path.join(tmp, f"daemon-{n}.log")
        self.log = open(self.log_path, "wb")
        e = dict(os.environ, NOTIFY_SOCKET=self.notify.path)
        e.pop("JOURNAL_STREAM", None)
        e.update(env or {})
        # --debug: the log then has a line per scan, which tests count instead of sleeping.
        # WRAPPER: a command that sets something up and then execs the daemon (its last arguments), e.g. a private
        # mount namespace with its own journald.
        argv = [*wrapper, STACKWATCHD, "--debug", "--config", self.config, *args]
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT, env=e)
        self.notify.wait_for(lambda ln: ln == "READY=1", timeout=15, what="READY=1")

    def write_config(self, text):
        # Every daemon gets its own API socket: the default one is the system's.
        if not re.search(r"^http:", text, re.M):
            text = text.rstrip("\n") + "\nhttp:\n  socket: @SOCKET@\n"
        # The whole suite runs with either scan source: STACKWATCH_SCAN_SOURCE=proc|bpf (.ci/run runs both).
        if SCAN_SOURCE and not re.search(r"^scan:", text, re.M):
            text = text.rstrip("\n") + f"\nscan:\n  source: {SCAN_SOURCE}\n"
        with open(self.config, "w") as f:
            f.write(text.replace("@ARCHIVE@", self.archive).replace("@SOCKET@", self.socket))

    def get(self, path, headers=None, timeout=30):
        """GET PATH over the daemon's unix socket; returns (status, headers, body bytes)."""
        return http_get(self.socket, path, headers=headers, timeout=timeout)

    def get_json(self, path, status=200, timeout=30):
        code, _, body = self.get(path, timeout=timeout)
        assert code == status, f"GET {path}: {code} {body[:500]!r}"
        return json.loads(body)

    def tcp_address(self):
        """(host, port) of the TCP listener, from the daemon's "Listening on http://…" line."""
        m = wait_until(lambda: re.search(r"^Listening on http://([0-9.]+):(\d+)", self.log_text(), re.M),
                       what="the TCP listener")
        return m.group(1), int(m.group(2))

    def log_text(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")

    def scans(self):
        return len(re.findall(r"^Scan \d+: ", self.log_text(), re.M))

    def wait_scans(self, n, timeout=30):
        """Wait until N more scans have been done (and their rules evaluated) from now."""
        want = self.scans() + n
        wait_until(lambda: self.scans() >= want, timeout=timeout, what=f"{n} more scans")

    def snapshots(self, *filters):
        r = stackctl("--archive", self.archive, "list", "--json", *filters)
        if r.returncode == 3:
            return []
        assert r.returncode == 0, r
        return json.loads(r.stdout)

    def show(self, snap_id):
        r = stackctl("--archive", self.archive, "show", "--json", snap_id, check_rc=0)
        return json.loads(r.stdout)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.notify.close()
        self.log.close()
        return self.proc.returncode


@pytest.fixture
def daemon(tmp_path):
    """Start the real stackwatchd on a temporary config and archive; stopped (and checked) at teardown."""
    started = []

    def start(config_text, **kw):
        d = Daemon(str(tmp_path), config_text, **kw)
        started.append(d)
        return d
    yield start
    for d in started:
        alive = d.proc.poll() is None
        rc = d.stop()
        if alive:
            assert rc == 0, f"stackwatchd exited {rc} on SIGTERM:\n{d.log_text()[-3000:]}"


def free_port():
    """A TCP port on loopback that nothing listens on now (the server started next binds it)."""
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_json(url, data=None, timeout=5):
    """GET (or POST DATA, a JSON value) URL; returns (status, parsed JSON or None)."""
    import urllib.error
    import urllib.request
    body = json.dumps(data).encode() if data is not None else None
    req = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"} if body else {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            raw = r.read()
            try:
                return r.status, json.loads(raw)
            except ValueError:
                return r.status, raw.decode(errors="replace")
    except urllib.error.HTTPError as e:
        return e.code, None
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return 0, None


class Server:
    """A real server from Debian (Alertmanager, Prometheus) on a loopback port, its output in a log file."""

    def __init__(self, argv, url, ready_path, log_path, what):
        self.url = url
        self.log_path = log_path
        self.log = open(log_path, "wb")
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT)
        try:
            wait_until(lambda: self.proc.poll() is not None or http_json(url + ready_path)[0] == 200, timeout=30,
                       interval=0.1, what=f"{what} ready")
            assert self.proc.poll() is None, f"{what} exited: {open(log_path, 'rb').read()[-2000:]!r}"
        except BaseException:
            self.stop()  # never leave a server behind a failed start
            raise

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


ALERTMANAGER = "/usr/bin/prometheus-alertmanager"


@pytest.fixture
def alertmanager(tmp_path):
    """A real Alertmanager on loopback, with no receivers (alerts are read back from its API), no clustering, its
    alerts grouped by signature."""
    if not os.access(ALERTMANAGER, os.X_OK):
        pytest.skip("prometheus-alertmanager is not installed (apt-get install prometheus-alertmanager)")
    port = free_port()
    cfg = tmp_path / "alertmanager.yml"
    # Routed by problem, as the README suggests: one problem's alerts from many hosts are one notification.
    cfg.write_text("route:\n  receiver: sink\n  group_by: [signature]\n  group_wait: 1s\n  group_interval: 1s\n"
                   "receivers:\n  - name: sink\n")
    s = Server([ALERTMANAGER, f"--config.file={cfg}", f"--storage.path={tmp_path}/am-data",
                f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address="],
               f"http://127.0.0.1:{port}", "/-/ready", str(tmp_path / "alertmanager.log"), "Alertmanager")
    yield s
    s.stop()


V2_ROOTS = ("/sys/fs/cgroup", "/sys/fs/cgroup/unified")


@pytest.fixture(params=[1, 2], ids=["v1", "v2"])
def freezer(request, tmp_path):
    """A fresh freezer cgroup: v1's freezer hierarchy (docker pause on cgroup v1) or a cgroup of the unified one
    (cgroup.freeze: docker pause on v2, systemctl freeze), where systemd mounts them. Yields (version, its directory,
    its path in the hierarchy, freeze()); thawed, emptied and removed after."""
    version = request.param
    if version == 1:
        root = "/sys/fs/cgroup/freezer"
        if not os.path.exists(os.path.join(root, "freezer.state")) and \
                not os.path.exists(os.path.join(root, "tasks")):
            pytest.skip("no cgroup v1 freezer hierarchy at /sys/fs/cgroup/freezer")
        state, frozen, thawed = "freezer.state", "FROZEN", "THAWED"
    else:
        root = next((r for r in V2_ROOTS if os.path.exists(os.path.join(r, "cgroup.subtree_control"))), None)
        if not root:
            pytest.skip("no cgroup v2 hierarchy at /sys/fs/cgroup or /sys/fs/cgroup/unified")
        state, frozen, thawed = "cgroup.freeze", "1", "0"
    name = f"stackwatch-test-{os.getpid()}-{os.path.basename(str(tmp_path))}"
    group = os.path.join(root, name)
    try:
        os.mkdir(group)
    except OSError as e:
        pytest.skip(f"cgroup v{version} hierarchy not writable here: {e}")

    def freeze():
        with open(os.path.join(group, state), "w") as f:
            f.write(frozen)
        if version == 1:
            wait_until(lambda: open(os.path.join(group, state)).read().strip() == "FROZEN", what="frozen")
        else:
            wait_until(lambda: "frozen 1" in open(os.path.join(group, "cgroup.events")).read(), what="frozen")
    try:
        yield version, group, "/" + name, freeze
    finally:
        with open(os.path.join(group, state), "w") as f:
            f.write(thawed)
        for pid in open(os.path.join(group, "cgroup.procs")).read().split():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass
        wait_until(lambda: not open(os.path.join(group, "cgroup.procs")).read().strip(), what="group empty")
        os.rmdir(group)
