"""stackctl as sysadmins use it: an option meant for another verb is an error, coredumpctl's options and matches on
list and show, eu-stack's short options on dump, and a pager and colour on a terminal only."""
import json
import os
import pty
import re
import select
import subprocess
import time

import pytest

from conftest import STACKCTL, stackctl, wait_until

RULES = """
poll_interval: 200ms
archive:
  directory: "@ARCHIVE@"
rules:
  - name: cli-blocked
    class: blocked
    for: 500ms
    comm: "cli-*"
    peers: 0
"""


@pytest.mark.parametrize("args,verb,option", [
    (["list", "--comm", "x"], "list", "--comm"),
    (["list", "--peers", "1"], "list", "--peers"),
    (["ps", "--archive", "/tmp"], "ps", "--archive"),
    (["status", "--no-source"], "status", "--no-source"),
    (["rules", "--rule", "x"], "rules", "--rule"),
    (["show", "--class", "blocked"], "show", "--class"),
    (["dump", "--until", "1h", "1"], "dump", "--until"),
    (["status", "-1"], "status", "-1"),
])
def test_an_option_for_another_verb_is_a_usage_error(args, verb, option):
    r = stackctl(*args, check_rc=2)
    assert f"{option} does not apply to '{verb}'" in r.stderr.decode(), r.stderr


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    """An archive with one snapshot of each of two hung processes, taken by the real daemon (oldest first)."""
    from conftest import Daemon, Fixture
    tmp = str(tmp_path_factory.mktemp("cli"))
    d = Daemon(tmp, RULES)
    fxs = []
    try:
        for name in ("cli-alpha", "cli-beta"):
            fx = Fixture("block-read", ("--name", name))
            fxs.append(fx)
            fx.wait_line()
            wait_until(lambda: len(d.snapshots()) == len(fxs), timeout=20, what=f"the snapshot of {name}")
            time.sleep(0.01)  # distinct timestamps, in order
        snaps = d.snapshots()
        yield d.archive, fxs, snaps
    finally:
        d.stop()
        for fx in fxs:
            fx.kill()


def ids(out):
    return re.findall(r"\S+Z-\d+(?:-\d+)?$", out, re.M)


def test_list_matches_like_coredumpctl(archive):
    arch, (a, b), snaps = archive
    sid = {s["pid"]: s["id"] for s in snaps}
    base = ("--archive", arch, "list")
    out = lambda *m, rc=0: stackctl(*base, *m, check_rc=rc).stdout.decode()
    assert ids(out()) == [sid[a.pid], sid[b.pid]]
    assert ids(out("cli-alpha")) == [sid[a.pid]]                     # a bare COMM
    assert ids(out(str(b.pid))) == [sid[b.pid]]                      # a bare PID
    assert ids(out(f"PID={a.pid}")) == [sid[a.pid]]
    assert ids(out("COMM=cli-*")) == [sid[a.pid], sid[b.pid]]        # a glob
    assert ids(out("EXE=*/block-read")) == [sid[a.pid], sid[b.pid]]
    assert ids(out("COMM=cli-*", "RULE=cli-blocked", "CLASS=blocked", f"PID={b.pid}")) == [sid[b.pid]]
    out("/usr/bin/nothing-like-this", rc=3)                           # a path is an EXE
    assert "Invalid match 'FOO=1'" in stackctl(*base, "FOO=1", check_rc=2).stderr.decode()
    # -1, -n, -r, --until, --no-legend.
    assert ids(out("-1")) == [sid[b.pid]]
    assert ids(out("-r")) == [sid[b.pid], sid[a.pid]]
    assert ids(out("-n", "1", "-r")) == [sid[b.pid]]
    oldest = min(s["timestamp_usec"] for s in snaps) // 1_000_000
    newest = max(s["timestamp_usec"] for s in snaps) // 1_000_000
    assert ids(out("--until", f"@{oldest}", rc=3)) == []                 # before the oldest: none
    assert ids(out("--until", f"@{newest + 1}")) == [sid[a.pid], sid[b.pid]]
    assert ids(out("--since", f"@{newest + 1}", rc=3)) == []
    assert out("--no-legend").splitlines()[0].split()[-1] == sid[a.pid]
    assert out().splitlines()[0].split()[0] == "TIME"
    # JSON: short is one line, pretty is indented; both carry exe and unit; off is the text.
    short = out("--json")
    assert len(short.strip().splitlines()) == 1
    pretty = out("--json=pretty")
    assert len(pretty.splitlines()) > 10 and json.loads(pretty) == json.loads(short)
    assert json.loads(short)[0]["exe"].endswith("/block-read")
    assert ids(out("--json=off")) == [sid[a.pid], sid[b.pid]]
    assert "Invalid --json 'yaml'" in stackctl(*base, "--json=yaml", check_rc=2).stderr.decode()


def test_show_takes_matches_and_writes_to_a_file(archive, tmp_path):
    arch, (a, b), snaps = archive
    sid = {s["pid"]: s["id"] for s in snaps}
    text = stackctl("--archive", arch, "show", "cli-alpha", check_rc=0).stdout.decode()
    assert f"PID {a.pid} - cli-alpha" in text
    doc = json.loads(stackctl("--archive", arch, "show", "--json=pretty", f"PID={b.pid}", check_rc=0).stdout)
    assert doc["process"]["pid"] == b.pid
    stackctl("--archive", arch, "show", "COMM=nobody-has-this", check_rc=3)
    out = tmp_path / "snap.txt"
    r = stackctl("--archive", arch, "show", "-o", out, sid[a.pid], check_rc=0)
    assert r.stdout == b"" and f"PID {a.pid} - cli-alpha" in out.read_text()


def test_dump_takes_eu_stack_options(fixture):
    fx = fixture("block-read").wait_wchan("pipe_read")
    # -p PID, -1 (the main thread only), -n N frames, -s -i -m accepted (source, inlines, modules: shown anyway).
    # Frames cut by -n are the cut asked for: exit 0, as eu-stack's (test_client_papercuts.py).
    r = stackctl("dump", "-s", "-i", "-m", "-1", "-n", "3", "-p", fx.pid, check_rc=0).stdout.decode()
    assert len(re.findall(r"^TID ", r, re.M)) == 1
    assert len(re.findall(r"^#\d+ ", r, re.M)) == 3
    assert re.search(r"^#0 .* - /", r, re.M)                         # the module of each frame
    # -b: the modules and their build-ids, as --modules.
    assert re.search(r"^module 0x[0-9a-f]+-0x[0-9a-f]+ [0-9a-f]{40} .*/block-read$",
                     stackctl("dump", "-b", "-p", fx.pid, check_rc=0).stdout.decode(), re.M)
    # -m no longer takes a method: --method does.
    stackctl("dump", "--method", "passive", fx.pid, check_rc=0)
    assert "Invalid process id 'passive'" in stackctl("dump", "-m", "passive", fx.pid, check_rc=2).stderr.decode()


def run_on_a_terminal(args, env):
    """Run stackctl with stdout on a pseudo-terminal; returns what the terminal showed."""
    master, slave = pty.openpty()
    p = subprocess.Popen([STACKCTL, *args], stdin=subprocess.DEVNULL, stdout=slave, stderr=subprocess.PIPE,
                         env=env)
    os.close(slave)
    out = b""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if select.select([master], [], [], 0.1)[0]:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
        elif p.poll() is not None:
            break
    p.wait(timeout=10)
    os.close(master)
    return p.returncode, out.decode(errors="replace")


def test_pager_and_colour_on_a_terminal_only(archive):
    arch = archive[0]
    env = dict(os.environ, PAGER="echo PAGER-RAN; cat", TERM="xterm")
    env.pop("NO_COLOR", None)
    env.pop("STACKCTL_PAGER", None)
    rc, out = run_on_a_terminal(["--archive", arch, "list"], env)
    assert rc == 0 and "PAGER-RAN" in out and "\x1b[1mTIME" in out and "\x1b[0;1;31mblocked" in out, out
    rc, out = run_on_a_terminal(["--archive", arch, "list", "--no-pager"], env)
    assert rc == 0 and "PAGER-RAN" not in out and "\x1b[1mTIME" in out
    rc, out = run_on_a_terminal(["--archive", arch, "list"], dict(env, NO_COLOR="1"))
    assert rc == 0 and "\x1b[" not in out and "TIME" in out
    # JSON is for programs: no pager, no colour.
    rc, out = run_on_a_terminal(["--archive", arch, "list", "--json"], env)
    assert rc == 0 and "PAGER-RAN" not in out and "\x1b[" not in out
    # Piped: neither.
    r = subprocess.run([STACKCTL, "--archive", arch, "list"], capture_output=True, env=env)
    assert r.returncode == 0 and b"PAGER-RAN" not in r.stdout and b"\x1b[" not in r.stdout
