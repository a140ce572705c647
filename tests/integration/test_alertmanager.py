"""The shipped Alertmanager hook against a real Alertmanager (prometheus-alertmanager, loopback): a hung process
raises an alert with the labels and annotations an operator routes and reads, the alert is kept alive while the
hang lasts, and it resolves when the thread is healthy again or the process exits."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import BUILDDIR, wait_until

HOOK = os.path.join(BUILDDIR, "client", "alertmanager")

# Reads one byte from stdin (blocked in read(): class blocked), then sleeps (class waiting: no longer blocked).
# A real hang, as stackwatch classes it out of the box: one thread reading a pipe whose only writer is itself (a
# wait nothing else can end: "blocked"). SIGUSR1 is the way out: its handler writes the byte the read waits for.
HANG = """
import os, signal, sys, time
with open("/proc/self/comm", "w") as f:
    f.write(sys.argv[1])
r, w = os.pipe()
signal.signal(signal.SIGUSR1, lambda *_: os.write(w, b"x"))
print("READY", flush=True)
os.read(r, 1)
time.sleep(600)
"""


def config(am_url, repeat="1h", extra_rule=""):
    return f"""
poll_interval: 200ms
archive:
  directory: "@ARCHIVE@"
hooks:
  command: [{json.dumps(HOOK)}, {json.dumps(am_url)}, --label, "team=storage"]
  repeat_interval: {repeat}
rules:
  - name: stuck-read
    class: blocked
    for: 1s
    comm: "am-*"
    severity: critical
    actions: [snapshot, log, hook]
{extra_rule}
"""


class Hang:
    def __init__(self, comm):
        self.proc = subprocess.Popen([sys.executable, "-c", HANG, comm], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE)
        assert self.proc.stdout.readline().strip() == b"READY"
        self.pid = self.proc.pid

    def wake(self):
        os.kill(self.pid, signal.SIGUSR1)

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


@pytest.fixture
def hang():
    started = []

    def start(comm):
        h = Hang(comm)
        started.append(h)
        return h
    yield start
    for h in started:
        h.kill()


def am_alerts(am, **labels):
    """The active alerts in Alertmanager's API whose labels include LABELS."""
    from conftest import http_json
    code, alerts = http_json(am.url + "/api/v2/alerts")
    assert code == 200, code
    return [a for a in alerts if all(a["labels"].get(k) == v for k, v in labels.items())]


def test_alert_fires_with_the_stack_and_resolves_when_the_thread_recovers(daemon, alertmanager, hang, tmp_path):
    # A TCP listener: the alert links to the snapshot's page on it.
    token = tmp_path / "token"
    token.write_text("s3cr3t\n")
    token.chmod(0o600)
    d = daemon(config(alertmanager.url) + f"http:\n  socket: \"@SOCKET@\"\n  listen: 127.0.0.1:0\n  token_file: {token}\n")
    host, port = d.tcp_address()
    h = hang("am-recover")
    t0 = time.monotonic()
    alerts = wait_until(lambda: am_alerts(alertmanager, pid=str(h.pid)), timeout=20, interval=0.1,
                        what="the alert in Alertmanager")
    t_fired = time.monotonic() - t0
    assert len(alerts) == 1
    a = alerts[0]
    lab, ann = a["labels"], a["annotations"]
    assert lab["alertname"] == "StackwatchHang" and lab["rule"] == "stuck-read" and lab["class"] == "blocked"
    assert lab["comm"] == "am-recover" and lab["severity"] == "critical" and lab["team"] == "storage"
    assert lab["instance"] == os.uname().nodename and lab["host"] == os.uname().nodename
    assert a["status"]["state"] == "active"
    # The annotations say what hangs, where, and how to get the whole snapshot.
    snaps = d.snapshots("--pid", str(h.pid))
    assert len(snaps) == 1
    sid = snaps[0]["id"]
    assert ann["snapshot_id"] == sid and f"stackctl show {sid}" in ann["snapshot_fetch"]
    assert f"/snapshots/{sid}" in ann["snapshot_fetch"]
    assert ann["snapshot_page"] == f"http://{host}:{port}/#/snapshots/{sid}"
    assert ann["summary"].startswith(f"pid {h.pid} (am-recover) thread {h.pid} blocked for ")
    assert ann["exe"] == os.path.realpath(sys.executable)
    assert ann["cmdline"].startswith(sys.executable + " -c")
    frames = ann["stack"].splitlines()
    assert frames[0].startswith("#0 ") and any("read" in f for f in frames[:3]), frames
    assert "python" in ann["stack"].lower() or "libc" in ann["stack"], ann["stack"]
    # Firing with an end in the future (three repeat intervals), so that a dead daemon's alert expires.
    assert a["endsAt"] > a["startsAt"]

    # The thread gets its byte and goes to sleep: no longer blocked, the daemon runs the hook again as resolved, and
    # the alert leaves Alertmanager's active list.
    t1 = time.monotonic()
    h.wake()
    wait_until(lambda: not am_alerts(alertmanager, pid=str(h.pid)), timeout=20, interval=0.1,
               what="the alert to resolve")
    t_resolved = time.monotonic() - t1
    wait_until(lambda: "no longer blocked" in d.log_text(), timeout=5, what="the resolved hook's run in the log")
    print(f"\nalert raised {t_fired:.2f} s after the hang began (rule for: 1s), resolved {t_resolved:.2f} s "
          f"after the thread recovered")
    assert d.get_json("/healthz")["status"] == "ok"


def test_alert_resolves_when_the_process_exits_and_repeats_while_it_lasts(daemon, alertmanager, hang, tmp_path):
    d = daemon(config(alertmanager.url, repeat="1s"))
    h = hang("am-exits")
    first = wait_until(lambda: am_alerts(alertmanager, pid=str(h.pid)), timeout=20, interval=0.1,
                       what="the alert in Alertmanager")[0]
    # Sent again every repeat_interval, with a later end each time: a long hang stays active.
    wait_until(lambda: any(a["endsAt"] > first["endsAt"] for a in am_alerts(alertmanager, pid=str(h.pid))),
               timeout=10, interval=0.2, what="a repeat with a later endsAt")
    h.kill()
    wait_until(lambda: not am_alerts(alertmanager, pid=str(h.pid)), timeout=20, interval=0.1,
               what="the alert to resolve after the exit")
    assert d.proc.poll() is None


def test_hook_reports_a_refusal_and_usage_errors(tmp_path):
    ev = {"schema": "stackwatch.hook-event/1", "rule": "r", "pid": 1, "state": "firing"}
    env = dict(os.environ, STACKWATCH_EVENT=json.dumps(ev))
    r = subprocess.run([HOOK], env=env, capture_output=True, text=True)
    assert r.returncode == 2 and "usage" in r.stderr
    r = subprocess.run([HOOK, "ftp://x"], env=env, capture_output=True, text=True)
    assert r.returncode == 2 and "http" in r.stderr
    r = subprocess.run([HOOK, "http://127.0.0.1:1"], env={"PATH": "/usr/bin"}, capture_output=True, text=True)
    assert r.returncode == 2 and "STACKWATCH_EVENT" in r.stderr
    # Nobody listens: exit 1, the reason on stderr (which the daemon logs).
    r = subprocess.run([HOOK, "http://127.0.0.1:1"], env=env, capture_output=True, text=True, timeout=30)
    assert r.returncode == 1 and "POST http://127.0.0.1:1/api/v2/alerts" in r.stderr
