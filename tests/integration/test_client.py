"""stackctl against the real stackwatchd over HTTP: ps, rules, status and dump --via-daemon, their text and JSON,
the exit codes scripts rely on (3 nothing found, 4 permission or token, 6 no daemon), TCP with a token, and the
bash completion."""
import itertools
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile

import pytest

from conftest import SRCDIR, STACKCTL, assert_chain, dump_json, stackctl, wait_until

POLL = 0.2
# A blocked rule without a state filter that never fires in a test: sleepers get deep reads, so a thread parked
# in read() is classified "blocked", not "waiting". The second rule fires for fixtures named @COMM@ only: other
# block-read fixtures may be running on the machine (tests in parallel), so each test names its own.
RULES = f"""
poll_interval: {int(POLL * 1000)}ms
archive:
  directory: "@ARCHIVE@"
rules:
  - name: watch-sleepers
    class: blocked
    for: 1h
  - name: blocked-fixtures
    class: blocked
    for: 1s
    comm: "@COMM@"
    cooldown: 1h
"""
_names = itertools.count(1)


def unique_name():
    """A comm no other process has: at most 15 bytes, which the kernel keeps whole."""
    return f"sctl{os.getpid() % 100000}-{next(_names)}"


def rules(comm="nothing-matches"):
    return RULES.replace("@COMM@", comm)


BR_CHAIN = [f"br_level_{i:02d}" for i in range(20, 0, -1)]
CLASSES = ["running", "waiting", "blocked", "busy-loop", "syscall-spin", "stopped", "zombie", "frozen",
           "lock-retry"]
COMPLETION = os.path.join(SRCDIR, "client", "stackctl.bash-completion")
NO_DAEMON = re.compile(r"^stackwatchd is not running \(no daemon listening on (\S+)\)$", re.M)


def ctl(d, *args, check_rc=None, timeout=60):
    """stackctl on daemon D's socket; stdout and stderr as text."""
    r = stackctl("--socket", d.socket, *args, check_rc=check_rc, timeout=timeout)
    r.out, r.err = r.stdout.decode(), r.stderr.decode()
    return r


def ps_rows(out):
    """The rows of ps's table as dicts, keyed by the header's column names."""
    lines = out.splitlines()
    assert lines[0].split() == ["PID", "TID", "COMM", "CLASS", "STATE", "FOR", "CPU%", "SYSCALL/WCHAN"], lines[0]
    rows = []
    for ln in lines[1:]:
        if not ln.strip():
            break
        # A name may have spaces; every column after it has none.
        f = ln.split()
        if f[0] == "python:":
            # The line under a thread the daemon caught in Python code: where.
            rows[-1]["python"] = ln.split("python: ", 1)[1]
            continue
        rows.append(dict(pid=int(f[0]), tid=int(f[1]), comm=" ".join(f[2:-5]), cls=f[-5], state=f[-4], for_=f[-3],
                         cpu=f[-2], where=f[-1]))
    return rows


def row_of(d, pid, *args):
    r = ctl(d, "ps", *args)
    if r.returncode != 0:
        return None
    return next((row for row in ps_rows(r.out) if row["pid"] == pid), None)


# ---- ps ----

def test_ps_shows_a_blocked_reader_and_filters(daemon, fixture):
    d = daemon(rules())
    name = unique_name()
    fx = fixture("block-read", "--name", name).wait_wchan("pipe_read")
    row = wait_until(lambda: row_of(d, fx.pid), timeout=10, interval=0.05, what="the fixture in stackctl ps")
    assert row["tid"] == fx.pid and row["comm"] == name and row["cls"] == "blocked"
    assert row["state"] == "S" and row["where"].startswith("read")
    assert re.fullmatch(r"\d+(\.\d)?(us|ms|s)|\d+m(\d+s)?", row["for_"]) and row["cpu"] == "0.0"

    r = ctl(d, "ps", check_rc=0)
    default = ps_rows(r.out)
    assert {row["cls"] for row in default} <= {"blocked", "busy-loop", "syscall-spin", "stopped", "zombie"}
    m = re.search(r"^(\d+) of (\d+) threads shown \(scan (\d+), [0-9.]+(us|ms|s) ago\)\.$", r.out, re.M)
    assert m and int(m.group(1)) == len(default) and int(m.group(2)) >= len(default) and int(m.group(3)) >= 1
    # --all shows the healthy ones too, sorted by pid and tid.
    every = ps_rows(ctl(d, "ps", "--all", check_rc=0).out)
    assert len(every) > len(default) and any(row["cls"] == "waiting" for row in every)
    keys = [(row["pid"], row["tid"]) for row in every]
    assert keys == sorted(keys)

    # Filters become query parameters.
    only = ps_rows(ctl(d, "ps", "--class", "blocked", "--comm", name[:-1] + "*", check_rc=0).out)
    assert [row["pid"] for row in only] == [fx.pid]
    waiting = ps_rows(ctl(d, "ps", "--class", "waiting,running", check_rc=0).out)
    assert waiting and {row["cls"] for row in waiting} <= {"waiting", "running"}
    # Nothing found: exit 3 and a message, no table.
    r = ctl(d, "ps", "--class", "zombie", "--comm", name, check_rc=3)
    assert r.out == "" and "No threads match" in r.err
    r = ctl(d, "ps", "--all", "--unit", "no-such-unit-*.service", check_rc=3)
    assert r.out == ""
    # A class name the daemon does not know is a usage error, found before asking.
    r = ctl(d, "ps", "--class", "blocked,stuck", check_rc=2)
    assert "Unknown class 'stuck'" in r.err
    # Without the legend: rows only.
    r = ctl(d, "ps", "--no-legend", "--class", "blocked", "--comm", name, check_rc=0)
    assert len(r.out.splitlines()) == 1 and r.out.split()[0] == str(fx.pid)


def test_ps_json_is_the_daemons(daemon, fixture):
    d = daemon(rules())
    name = unique_name()
    fx = fixture("block-read", "--name", name).wait_wchan("pipe_read")
    wait_until(lambda: row_of(d, fx.pid), timeout=10, interval=0.05, what="the fixture in stackctl ps")
    doc = json.loads(ctl(d, "ps", "--json", "--comm", name, check_rc=0).out)
    assert set(doc) == {"scan", "threads"}
    assert {"scans", "last_scan_age_ms", "last_scan_duration_us", "poll_interval_ms", "threads",
            "processes"} <= set(doc["scan"])
    [t] = doc["threads"]
    assert t["pid"] == fx.pid and t["class"] == "blocked" and t["syscall"] == "read"
    # Empty is still JSON, and still exit 3.
    r = ctl(d, "ps", "--json", "--class", "zombie", "--comm", name, check_rc=3)
    assert json.loads(r.out)["threads"] == []


def test_ps_escapes_process_names(daemon, fixture):
    d = daemon(rules())
    fx = fixture("block-read", "--name", "\x1b[2Jevil\n").wait_wchan("pipe_read")
    row = wait_until(lambda: row_of(d, fx.pid, "--all"), timeout=10, interval=0.05, what="the fixture in ps")
    r = ctl(d, "ps", "--all", check_rc=0)
    assert "\x1b" not in r.out
    assert row["comm"] == "\\e[2Jevil\\n"


# ---- rules ----

def test_rules_and_the_fired_count(daemon, fixture):
    name = unique_name()
    d = daemon(rules(name))
    r = ctl(d, "rules", check_rc=0)
    lines = r.out.splitlines()
    assert lines[0].split() == ["RULE", "CLASSES", "FOR", "ACTIONS", "FIRED", "LAST"]
    assert lines[1].split() == ["watch-sleepers", "blocked", "1h", "snapshot,log", "0", "-"]
    assert lines[2].split() == ["blocked-fixtures", "blocked", "1s", "snapshot,log", "0", "-"]
    assert re.search(r"^2 rules\. Capture budget: 0 of 6 used in the last minute\.$", r.out, re.M)

    fx = fixture("block-read", "--name", name).wait_wchan("pipe_read")

    def fired():
        row = ctl(d, "rules", "--no-legend", check_rc=0).out.splitlines()[1].split()
        return row if row[4] == "1" else None
    row = wait_until(fired, timeout=15, interval=0.1, what="blocked-fixtures to fire")
    # LAST is the local time of the firing.
    assert re.fullmatch(r"\d{4}-\d\d-\d\d", row[5]) and re.fullmatch(r"\d\d:\d\d:\d\d", row[6])
    assert "Capture budget: 1 of 6" in ctl(d, "rules", check_rc=0).out
    doc = json.loads(ctl(d, "rules", "--json", check_rc=0).out)
    assert [x["name"] for x in doc["rules"]] == ["watch-sleepers", "blocked-fixtures"]
    assert doc["rules"][1]["fired"] == 1 and doc["rules"][1]["last_fired_usec"] > 0
    assert doc["budget"] == {"max_per_minute": 6, "used": 1}
    # The firing's capture finishes after the count moved.
    wait_until(lambda: d.snapshots("--pid", str(fx.pid)), timeout=15, what="the firing's snapshot")


def test_no_rules_is_exit_3(daemon):
    d = daemon("poll_interval: 200ms\narchive:\n  directory: \"@ARCHIVE@\"\nrules: []\n",
               args=("--rules-dir", "/nonexistent"))
    r = ctl(d, "rules", check_rc=3)
    assert r.out == "" and "no rules" in r.err


# ---- status ----

def test_status_fields(daemon):
    d = daemon(rules())
    d.wait_scans(2)
    r = ctl(d, "status", check_rc=0)
    fields = dict(re.findall(r"^\s*([A-Za-z ]+): (.*)$", r.out, re.M))
    assert re.match(r"stackwatchd \S+: ok$", r.out.splitlines()[0])
    assert re.fullmatch(rf"{d.proc.pid}, up \S+, API 1", fields["PID"])
    m = re.fullmatch(r"(\d+) threads in (\d+) processes", fields["Watching"])
    assert m and int(m.group(1)) >= int(m.group(2)) > 0
    counts = dict((name, int(n)) for n, name in re.findall(r"(\d+) ([a-z-]+)", fields["Classes"]))
    assert list(counts) == CLASSES and sum(counts.values()) == int(m.group(1))
    assert re.fullmatch(r"#\d+, \S+ ago, took \S+, \S+ of CPU \(every 200ms\)", fields["Last scan"])
    # Where every thread's state comes from, and why: the default (auto) says it.
    assert re.fullmatch(r"(BPF task iterator|/proc) \(.+\)", fields["Scan source"]), fields
    assert fields["Snapshots"] == "0 written, 0 capture failures, 0 captures running"
    assert fields["Archive"] == f"{d.archive}, 0 snapshots, 0 B"
    doc = json.loads(ctl(d, "status", "--json", check_rc=0).out)
    assert doc["status"] == "ok" and doc["pid"] == d.proc.pid and doc["archive"]["directory"] == d.archive


def test_a_daemon_that_does_not_answer_times_out(daemon):
    d = daemon(rules())
    d.proc.send_signal(signal.SIGSTOP)
    try:
        r = ctl(d, "--timeout", "1", "status", check_rc=1, timeout=30)
        assert f"stackwatchd on {d.socket} did not answer within 1.0 s" in r.err
    finally:
        d.proc.send_signal(signal.SIGCONT)
    ctl(d, "status", check_rc=0)


# ---- dump --via-daemon ----

def main_thread(doc):
    return next(t for t in doc["threads"] if t["tid"] == doc["process"]["pid"])


def test_dump_via_daemon_has_the_known_frames(daemon, fixture):
    d = daemon(rules())
    fx = fixture("block-read").wait_wchan("pipe_read")
    doc = json.loads(ctl(d, "dump", "--via-daemon", "--json", fx.pid, check_rc=0).out)
    assert doc["schema"] == "stackwatch.snapshot/1" and doc["process"]["pid"] == fx.pid
    t = main_thread(doc)
    assert t["capture"]["method"] == "passive" and t["syscall"]["name"] == "read"
    i = assert_chain(t, BR_CHAIN + ["main"])
    assert all(f["file"].endswith("block-read.c") and f["line"] > 0 for f in t["frames"][i:i + 20])
    # The same frames, with the same source lines, as a local dump finds.
    [local] = dump_json(fx.pid)
    lt = main_thread(local)
    j = assert_chain(lt, BR_CHAIN + ["main"])
    assert [f["line"] for f in t["frames"][i:i + 20]] == [f["line"] for f in lt["frames"][j:j + 20]]

    text = ctl(d, "dump", "--via-daemon", fx.pid, check_rc=0).out
    assert text.startswith(f"PID {fx.pid} - block-read")
    assert f"TID {fx.pid}:" in text and "br_level_20" in text and "block-read.c:" in text
    folded = ctl(d, "dump", "--via-daemon", "--folded", "--tid", fx.pid, fx.pid, check_rc=0).out.splitlines()
    assert len(folded) == 1 and folded[0].startswith("block-read;") and "br_level_01;br_level_02" in folded[0]
    assert d.snapshots() == []


def test_dump_via_daemon_errors(daemon):
    d = daemon(rules())
    r = ctl(d, "dump", "--via-daemon", 4194304, check_rc=3)
    assert r.out == "" and r.err.strip() == "stackwatchd: no process 4194304 (HTTP 404)"
    r = ctl(d, "dump", "--via-daemon", "--tid", 4194303, 1, check_rc=3)
    assert "has no thread 4194303 (HTTP 404)" in r.err
    # One pid, no --all, and no options that only a local capture uses.
    assert "one process" in ctl(d, "dump", "--via-daemon", 1, 2, check_rc=2).err
    ctl(d, "dump", "--via-daemon", "--all", check_rc=2)
    r = ctl(d, "dump", "--via-daemon", "--method", "ptrace", 1, check_rc=2)
    assert "--method applies to local dumps only" in r.err
    ctl(d, "dump", "--via-daemon", "abc", check_rc=2)


def test_dump_via_daemon_budget_spent(daemon, fixture):
    d = daemon(rules().replace("archive:", "http:\n  socket: @SOCKET@\n  max_captures_per_minute: 1\narchive:"))
    fx = fixture("block-read").wait_wchan("pipe_read")
    ctl(d, "dump", "--via-daemon", fx.pid, check_rc=0)
    r = ctl(d, "dump", "--via-daemon", fx.pid, check_rc=1)
    m = re.fullmatch(r"stackwatchd: the API's capture budget is spent \(1 per minute, http.max_captures_per_minute\) "
                     r"\(HTTP 429\); try again in (\d+) s\.\n", r.err)
    assert m and 1 <= int(m.group(1)) <= 60, r.err


# ---- no daemon, permissions ----

@pytest.mark.parametrize("verb", [("ps",), ("rules",), ("status",), ("dump", "--via-daemon", "1")])
def test_no_daemon_is_exit_6(tmp_path, verb):
    missing = str(tmp_path / "nothing-here.sock")
    r = stackctl("--socket", missing, *verb, check_rc=6)
    assert r.stdout == b"" and NO_DAEMON.fullmatch(r.stderr.decode().strip()).group(1) == missing
    # A socket file left behind by a daemon that is gone: nobody listens.
    stale = str(tmp_path / "stale.sock")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(stale)
    s.close()
    r = stackctl("--socket", stale, *verb, check_rc=6)
    assert NO_DAEMON.fullmatch(r.stderr.decode().strip()).group(1) == stale


def as_nobody(*args):
    if os.geteuid() != 0:
        pytest.skip("needs root to run stackctl as nobody")
    if not shutil.which("setpriv"):
        pytest.skip("needs setpriv (util-linux)")
    return subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", STACKCTL, *args],
                          capture_output=True, timeout=30)


@pytest.fixture
def public_tmp():
    """A directory anyone may enter (pytest's tmp_path is 0700)."""
    path = tempfile.mkdtemp(prefix="stackctl-test-")
    os.chmod(path, 0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_permission_denied_is_exit_4(daemon, public_tmp):
    # The socket in a directory only root may enter ...
    private = os.path.join(public_tmp, "private")
    os.mkdir(private, 0o700)
    daemon(rules() + f"http:\n  socket: {private}/api.sock\n")
    stackctl("--socket", f"{private}/api.sock", "status", check_rc=0)
    r = as_nobody("--socket", f"{private}/api.sock", "ps")
    assert r.returncode == 4 and r.stdout == b""
    assert r.stderr.decode().strip() == (f"Permission denied on {private}/api.sock: run as root or as a member of "
                                         "the socket's group")
    # ... and a socket only its owner may use (socket_mode 0600) in a directory anyone may enter.
    d2 = daemon(rules() + f"http:\n  socket: {public_tmp}/api.sock\n  socket_mode: 0600\n")
    r = as_nobody("--socket", f"{public_tmp}/api.sock", "status")
    assert r.returncode == 4 and b"Permission denied on" in r.stderr
    d2.stop()


# ---- TCP and the token ----

def test_tcp_with_the_token(daemon, tmp_path):
    token = tmp_path / "token"
    token.write_text("s3cr3t-token\n")
    token.chmod(0o600)
    wrong = tmp_path / "wrong"
    wrong.write_text("not-the-token\n")
    d = daemon(rules() + f"http:\n  socket: @SOCKET@\n  listen: 127.0.0.1:0\n  token_file: {token}\n")
    d.wait_scans(1)
    host, port = d.tcp_address()
    url = f"http://{host}:{port}"

    r = stackctl("--host", url, "--token-file", token, "status", check_rc=0)
    assert f"PID: {d.proc.pid}," in r.stdout.decode()
    # HOST:PORT alone means http, and a trailing slash does not matter.
    stackctl("--host", f"{host}:{port}", "--token-file", token, "rules", check_rc=0)
    doc = json.loads(stackctl("--host", url + "/", "--token-file", token, "ps", "--all", "--json", check_rc=0).stdout)
    assert doc["threads"]

    r = stackctl("--host", url, "--token-file", wrong, "ps", check_rc=4)
    assert r.stdout == b"" and f"The daemon refused the token in {wrong}" in r.stderr.decode()
    r = stackctl("--host", url, "rules", check_rc=4)
    assert "--token-file" in r.stderr.decode() and "HTTP 401" in r.stderr.decode()
    # /healthz answers without the token, with only whether the daemon is up: status says that much, and exits 4.
    r = stackctl("--host", url, "status", check_rc=4)
    assert r.stdout == b"stackwatchd: ok\n" and "bearer token (--token-file)" in r.stderr.decode()
    # A token file that cannot be used is stackctl's error, not the daemon's.
    empty = tmp_path / "empty"
    empty.write_text("\n")
    assert b"is empty" in stackctl("--host", url, "--token-file", empty, "ps", check_rc=1).stderr
    stackctl("--host", url, "--token-file", tmp_path / "missing", "ps", check_rc=1)

    # Nothing listening on the port: no daemon.
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    free = s.getsockname()[1]
    s.close()
    r = stackctl("--host", f"http://127.0.0.1:{free}", "status", check_rc=6)
    assert NO_DAEMON.fullmatch(r.stderr.decode().strip()).group(1) == f"http://127.0.0.1:{free}"
    stackctl("--host", "ftp://127.0.0.1:21", "status", check_rc=2)


def test_tcp_connect_timeout():
    """A listener whose accept queue is full drops the SYN: stackctl gives up connecting after 5 s."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    queued = []
    try:
        for _ in range(4):
            s = socket.socket()
            s.setblocking(False)
            try:
                s.connect(("127.0.0.1", port))
            except BlockingIOError:
                pass
            queued.append(s)
        r = stackctl("--host", f"127.0.0.1:{port}", "--timeout", "20", "status", check_rc=1, timeout=30)
        assert r.stderr.decode() == f"Could not connect to stackwatchd on http://127.0.0.1:{port} within 5 s.\n"
    finally:
        for s in queued:
            s.close()
        listener.close()


# ---- bash completion ----

def complete(*words):
    """What the completion offers for the command line WORDS (the last one being completed)."""
    script = (f"source {COMPLETION}\n"
              "COMP_WORDS=(\"$@\"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); COMPREPLY=()\n"
              "_stackctl\nprintf '%s\\n' \"${COMPREPLY[@]}\"\n")
    r = subprocess.run(["bash", "-c", script, "bash", *map(str, words)], capture_output=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return [w for w in r.stdout.decode().splitlines() if w]


def test_bash_completion_loads():
    r = subprocess.run(["bash", "-c", f"source {COMPLETION} && complete -p stackctl"], capture_output=True,
                       timeout=30)
    assert r.returncode == 0 and r.stdout.decode().strip() == "complete -F _stackctl stackctl", r


def test_bash_completion_offers_what_help_lists():
    help_text = stackctl("--help", check_rc=0).stdout.decode()
    commands = help_text.split("Commands:\n")[1].split("\n\n")[0]
    verbs = sorted(ln.split()[0] for ln in commands.splitlines())
    options = sorted(set(re.findall(r"^\s+(?:-\w\s+)?(--[a-z-]+)", help_text, re.M)))
    assert sorted(complete("stackctl", "")) == verbs
    assert sorted(complete("stackctl", "--")) == options
    assert complete("stackctl", "--json", "st") == ["status"]
    assert complete("stackctl", "ps", "--class", "bu") == ["busy-loop"]
    assert complete("stackctl", "ps", "--class", "blocked,sy") == ["blocked,syscall-spin"]
    assert complete("stackctl", "ps", "--class", "=", "z") == ["zombie"]
    assert sorted(complete("stackctl", "ps", "--class", "")) == sorted(CLASSES)
    assert complete("stackctl", "--method", "pa") == ["passive"]
    assert str(os.getpid()) in complete("stackctl", "dump", "")


def test_bash_completion_snapshot_ids(daemon, fixture):
    name = unique_name()
    d = daemon(rules(name))
    fx = fixture("block-read", "--name", name).wait_wchan("pipe_read")
    [snap] = wait_until(lambda: d.snapshots("--pid", str(fx.pid)), timeout=15, what="a snapshot")
    # show takes a problem's signature too (its latest snapshot); list and problems take one as a match.
    assert snap["signature"], snap
    assert complete(STACKCTL, "--archive", d.archive, "show", "") == ["latest", snap["id"], snap["signature"]]
    assert complete(STACKCTL, "--archive", d.archive, "show", snap["id"][:8]) == [snap["id"]]
    for verb in ("list", "problems"):
        assert complete(STACKCTL, "--archive", d.archive, verb, "") == [snap["signature"]]


# ---- start-up ----

def test_libcurl_is_loaded_only_to_talk_to_the_daemon(tmp_path):
    """Linked, libcurl's 28 dependencies doubled every stackctl's start-up; it is dlopen()ed by the HTTP verbs."""
    env = dict(os.environ, LD_DEBUG="files")
    local = subprocess.run([STACKCTL, "--version"], capture_output=True, env=env, timeout=30)
    assert local.returncode == 0 and b"libcurl" not in local.stderr
    remote = subprocess.run([STACKCTL, "--socket", str(tmp_path / "none.sock"), "status"], capture_output=True,
                            env=env, timeout=30)
    assert remote.returncode == 6 and b"libcurl.so.4" in remote.stderr
