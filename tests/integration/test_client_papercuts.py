"""Small things stackctl said wrong: status called a daemon ok on its first line while it ran on a configuration
it had been told to drop; dump -n N called its own cut a partial dump; the man page and --help disagreed on -r and
show -1; the Alertmanager hook's instance label was not Prometheus's, so one hang was two alerts."""
import http.server
import json
import os
import re
import shutil
import signal
import subprocess
import threading

import pytest

from conftest import BUILDDIR, SRCDIR, stackctl, wait_until

TCP = """
poll_interval: 200ms
archive:
  directory: "@ARCHIVE@"
http:
  socket: "@SOCKET@"
  listen: 127.0.0.1:0
  token_file: {token}
rules: []
"""


def test_status_first_line_says_a_failed_reload_is_not_ok(daemon, tmp_path):
    token = tmp_path / "token"
    token.write_text("papercut-token\n")
    token.chmod(0o600)
    d = daemon(TCP.format(token=token))
    host = "%s:%d" % d.tcp_address()
    first = stackctl("--socket", d.socket, "status", check_rc=0).stdout.decode().splitlines()[0]
    assert re.fullmatch(r"stackwatchd \S+: ok", first), first
    d.write_config("rules:\n  - name: [broken\n")
    d.proc.send_signal(signal.SIGHUP)
    wait_until(lambda: "keeping the running configuration" in d.log_text(), what="the reload refusal")
    r = stackctl("--socket", d.socket, "status", check_rc=1)
    lines = r.stdout.decode().splitlines()
    assert re.fullmatch(r"stackwatchd \S+: degraded: the last reload failed", lines[0]), lines
    assert any("RELOAD FAILED" in ln for ln in lines[1:]), lines
    # Several hosts: the STATUS column says so too, and the exit status.
    r = stackctl("--host", host, "--host", host, "--token-file", token, "status", check_rc=1)
    rows = [ln.split() for ln in r.stdout.decode().splitlines()[1:]]
    assert [row[:2] for row in rows] == [[host, "degraded"]] * 2 and all("RELOAD" in row for row in rows), rows


def test_dump_n_is_a_cut_asked_for_not_a_partial_dump(fixture):
    fx = fixture("block-read").wait_wchan("pipe_read")
    # eu-stack -n 3 exits 0: the user asked for three frames and got them.
    out = stackctl("dump", "-n", "3", fx.pid, check_rc=0).stdout.decode()
    assert len(re.findall(r"^#\d+ ", out, re.M)) == 3, out
    assert stackctl("dump", "--json", "-1", "-n", "3", fx.pid, check_rc=0).returncode == 0
    # A budget is not a request: --max-frames still makes a partial dump (5), as documented.
    stackctl("dump", "--max-frames", "3", fx.pid, check_rc=5)
    # And -n N with a stack cut short by --stack-bytes where frames may be missing (a running thread: its stack past
    # the copy, read later, may have moved): partial.
    spin = fixture("busy-loop").wait_state("R")
    r = stackctl("dump", "--json", "-n", "200", "--stack-bytes", "64", spin.pid)
    assert r.returncode == 5, r


def man_text(page):
    """The man page as a reader sees it, its whitespace folded (groff justifies lines)."""
    if not shutil.which("groff"):
        pytest.skip("groff is not installed")
    r = subprocess.run(["groff", "-man", "-Tascii", "-P-cbou", "-rLL=300n", "-rHY=0", os.path.join(SRCDIR, "man", page)],
                       capture_output=True, text=True, check=True)
    return " ".join(r.stdout.split())


def test_man_page_and_help_agree_with_the_code_on_r_and_show_1(tmp_path):
    help_text = stackctl("--help", check_rc=0).stdout.decode()
    opt = {ln.split()[0]: " ".join(ln.split()) for ln in help_text.splitlines() if ln.startswith("  -")}
    man = man_text("stackctl.1")
    # -r: list newest first; dump takes it as eu-stack does (names not demangled); stackctl(1) said "not taken".
    assert "list, problems: newest first; dump: eu-stack's -r, names not demangled" in opt["-r"]
    assert "-r is taken (names not demangled, as --no-demangle)" in man
    assert not re.search(r"-r, -v, -d and -q are not taken", man)
    # show -1: taken, and show prints the latest match whether or not it is given; --help said "only the latest
    # match" for list and show alike, the man page only for list.
    assert "list, problems: only the latest match; show: taken, a no-op" in opt["-1"]
    assert "show -1 is taken, as coredumpctl(1) takes it, and changes nothing" in man
    arch = tmp_path / "archive"
    arch.mkdir()
    plain = stackctl("--archive", arch, "show", check_rc=3)
    assert stackctl("--archive", arch, "show", "-1", check_rc=3).stderr == plain.stderr


class AlertSink(http.server.BaseHTTPRequestHandler):
    """Alertmanager's POST /api/v2/alerts, recorded: the bodies the hook sent."""
    bodies = []

    def do_POST(self):
        AlertSink.bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def run_hook(*args, host="web-3"):
    server = http.server.HTTPServer(("127.0.0.1", 0), AlertSink)
    t = threading.Thread(target=server.handle_request, daemon=True)
    t.start()
    AlertSink.bodies = []
    ev = {"schema": "stackwatch.hook-event/1", "rule": "stuck", "pid": 42, "state": "firing", "host": host,
          "comm": "nginx", "unit": "nginx.service", "class": "blocked"}
    try:
        r = subprocess.run([os.path.join(BUILDDIR, "client", "alertmanager"), *args,
                            "http://127.0.0.1:%d" % server.server_address[1]],
                           env={"PATH": "/usr/bin:/bin", "STACKWATCH_EVENT": json.dumps(ev)},
                           capture_output=True, text=True, timeout=30)
        t.join(timeout=30)
    finally:
        server.server_close()
    return r, AlertSink.bodies


def test_alertmanager_hook_instance_is_the_scrape_targets(tmp_path):
    # Prometheus labels a host's series instance="web-3:9177" (its scrape target): --instance says so here too,
    # with %H the host name, so that its alert for the hang and the hook's group and inhibit each other; the host
    # name alone is the label "host".
    r, [[alert]] = run_hook("--instance", "%H:9177")
    assert r.returncode == 0, r.stderr
    assert alert["labels"]["instance"] == "web-3:9177" and alert["labels"]["host"] == "web-3", alert
    r, [[alert]] = run_hook("--instance", "%H.example.com:9177", host="db-1")
    assert alert["labels"]["instance"] == "db-1.example.com:9177" and alert["labels"]["host"] == "db-1"
    # Without it the hook cannot know the target: instance stays the host name, and host is there as well.
    r, [[alert]] = run_hook()
    assert alert["labels"]["instance"] == "web-3" and alert["labels"]["host"] == "web-3"
    # A template it cannot expand is a usage error (2), said before anything is sent.
    r = subprocess.run([os.path.join(BUILDDIR, "client", "alertmanager"), "--instance", "%h:9177", "http://x"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "--instance takes text with %H" in r.stderr
