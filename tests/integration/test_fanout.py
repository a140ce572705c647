"""stackctl ps and status across a handful of daemons at once: one table with a HOST column, every daemon asked
concurrently within --timeout, and a host that refuses or never answers is a line of the table, not the end of the
command."""
import re
import socket
import time

from conftest import free_port, stackctl

RULES = """
poll_interval: 200ms
archive:
  directory: "@ARCHIVE@"
http:
  socket: "@SOCKET@"
  listen: 127.0.0.1:0
  token_file: {token}
rules: []
"""


def test_ps_and_status_across_hosts(daemon, fixture, tmp_path):
    token = tmp_path / "token"
    token.write_text("fleet-token\n")
    token.chmod(0o600)
    a = daemon(RULES.format(token=token))
    b = daemon(RULES.format(token=token))
    hosts = ["%s:%d" % d.tcp_address() for d in (a, b)]
    fx = fixture("block-read", "--name", "fan-hang").wait_wchan("pipe_read")
    a.wait_scans(3)
    b.wait_scans(3)
    # A host nobody listens on, and one that takes the connection and never answers.
    dead = f"127.0.0.1:{free_port()}"
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    hung = "127.0.0.1:%d" % silent.getsockname()[1]
    try:
        args = []
        for h in (*hosts, dead, hung):
            args += ["--host", h]
        t0 = time.monotonic()
        # Two hosts did not answer, for two reasons (none listening: 6; no answer in time: 1): exit 1.
        r = stackctl(*args, "--token-file", token, "--timeout", "2", "ps", "--all", "--comm", "fan-*",
                     check_rc=1)
        took = time.monotonic() - t0
        out = r.stdout.decode()
        lines = out.splitlines()
        assert lines[0].split()[:3] == ["HOST", "PID", "TID"], out
        # The hung fixture, seen by both daemons, once per host.
        rows = [ln.split() for ln in lines[1:] if ln.split()[1:2] == [str(fx.pid)]]
        assert sorted(r[0] for r in rows) == sorted(hosts), out
        assert all(r[3] == "fan-hang" and r[4] in ("blocked", "waiting") for r in rows), out
        # The two that did not answer are lines saying why; the whole command waited once, not per host.
        assert re.search(rf"^{re.escape(dead)}\s+.*(not running|refused|connect)", out, re.M | re.I), out
        assert re.search(rf"^{re.escape(hung)}\s+.*(did not answer|no answer) within", out, re.M), out
        assert "from 2 of 4 hosts" in out
        assert took < 2 + 2.5, took
        # status: a line per host; not all healthy, so exit 1.
        r = stackctl(*args, "--token-file", token, "--timeout", "2", "status", check_rc=1)
        out = r.stdout.decode()
        for h in hosts:
            assert re.search(rf"^{re.escape(h)}\s+ok\s+\d+", out, re.M), out
        assert re.search(rf"^{re.escape(hung)}\s+-\s+.*(did not answer|no answer) within", out, re.M), out
        # JSON: each host's document under its name, null for those that did not answer.
        import json
        doc = json.loads(stackctl(*args, "--token-file", token, "--timeout", "2", "ps", "--json",
                                  check_rc=1).stdout)
        assert set(doc) == {*hosts, dead, hung} and doc[dead] is None and doc[hosts[0]]["threads"] is not None
    finally:
        silent.close()
