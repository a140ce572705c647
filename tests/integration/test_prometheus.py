"""The shipped Prometheus rules and a real Prometheus (Debian's prometheus, loopback) scraping the real daemon over TCP
with the bearer token: the exposition passes promtool, the problem-thread gauge names the hung process, and the
shipped alerting rule reaches a real Alertmanager with that process in its labels."""
import os
import re
import shutil
import subprocess

import pytest

from conftest import SRCDIR, Server, free_port, http_json, wait_until

PROMETHEUS = "/usr/bin/prometheus"
PROMTOOL = "/usr/bin/promtool"
RULES = os.path.join(SRCDIR, "conf", "prometheus", "stackwatch-rules.yml")
EXAMPLE = os.path.join(SRCDIR, "conf", "prometheus", "prometheus.yml")

needs_prometheus = pytest.mark.skipif(not os.access(PROMETHEUS, os.X_OK) or not os.access(PROMTOOL, os.X_OK),
                                      reason="prometheus is not installed (apt-get install prometheus)")

DAEMON = """
poll_interval: 200ms
archive:
  directory: "@ARCHIVE@"
http:
  socket: "@SOCKET@"
  listen: 127.0.0.1:0
  token_file: {token}
rules:
  - name: pm-blocked
    class: blocked
    for: 1s
    comm: "pm-*"
"""


@needs_prometheus
def test_shipped_rules_and_example_config_are_valid(tmp_path):
    r = subprocess.run([PROMTOOL, "check", "rules", RULES], capture_output=True, text=True)
    assert r.returncode == 0 and "SUCCESS" in r.stdout, r.stdout + r.stderr
    # The rules' own unit tests, on synthetic series.
    r = subprocess.run([PROMTOOL, "test", "rules", os.path.join(SRCDIR, "tests", "prometheus",
                                                                 "stackwatch-rules.test.yml")],
                       capture_output=True, text=True)
    assert r.returncode == 0 and "SUCCESS" in r.stdout, r.stdout + r.stderr
    # The example configuration, with its paths pointed here.
    shutil.copy(RULES, tmp_path / "stackwatch-rules.yml")
    (tmp_path / "stackwatch.token").write_text("t\n")
    with open(EXAMPLE) as f:
        text = f.read().replace("/etc/prometheus/", f"{tmp_path}/")
    (tmp_path / "prometheus.yml").write_text(text)
    r = subprocess.run([PROMTOOL, "check", "config", str(tmp_path / "prometheus.yml")], capture_output=True, text=True)
    assert r.returncode == 0 and "SUCCESS" in r.stdout, r.stdout + r.stderr


@needs_prometheus
def test_prometheus_scrapes_the_daemon_and_the_shipped_rule_reaches_alertmanager(daemon, fixture, alertmanager,
                                                                                  tmp_path):
    token = tmp_path / "token"
    token.write_text("prom-secret\n")
    token.chmod(0o600)
    d = daemon(DAEMON.format(token=token))
    host, port = d.tcp_address()
    fx = fixture("block-read", "--name", "pm-stuck").wait_wchan("pipe_read")

    # The exposition, with the hung process in it, is what promtool accepts.
    metrics = wait_until(lambda: (lambda m: m if 'comm="pm-stuck"' in m else None)(d.get("/metrics")[2].decode()),
                         timeout=10, what="the problem-thread gauge")
    r = subprocess.run([PROMTOOL, "check", "metrics"], input=metrics, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert re.search(r'^stackwatch_problem_threads\{class="blocked",unit="[^"]*",comm="pm-stuck"\} 1$', metrics,
                     re.M), metrics
    for name in ("process_cpu_seconds_total", "process_resident_memory_bytes", "process_open_fds",
                 "process_start_time_seconds", "stackwatch_config_last_reload_successful 1",
                 "stackwatch_last_scan_timestamp_seconds"):
        assert re.search(rf"^{name}", metrics, re.M), name

    # The shipped rules, the blocked threshold lowered from 120 s to 1 s for the test.
    with open(RULES) as f:
        rules = f.read()
    assert 'stackwatch_problem_seconds{class="blocked"}) > 120' in rules
    (tmp_path / "rules.yml").write_text(rules.replace('{class="blocked"}) > 120', '{class="blocked"}) > 1'))
    (tmp_path / "prom.token").write_text("prom-secret\n")
    am = alertmanager.url.replace("http://", "")
    (tmp_path / "prometheus.yml").write_text(f"""
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: ["{tmp_path}/rules.yml"]
alerting:
  alertmanagers:
    - static_configs:
        - targets: ["{am}"]
scrape_configs:
  - job_name: stackwatch
    authorization:
      type: Bearer
      credentials_file: {tmp_path}/prom.token
    static_configs:
      - targets: ["{host}:{port}"]
""")
    pport = free_port()
    prom = Server([PROMETHEUS, f"--config.file={tmp_path}/prometheus.yml", f"--storage.tsdb.path={tmp_path}/tsdb",
                   f"--web.listen-address=127.0.0.1:{pport}"], f"http://127.0.0.1:{pport}", "/-/ready",
                  str(tmp_path / "prometheus.log"), "Prometheus")
    try:
        def query(q):
            code, doc = http_json(f"{prom.url}/api/v1/query?query={q}")
            return doc["data"]["result"] if code == 200 else []
        # Scraped with the token: the target is up and the gauge names the process.
        wait_until(lambda: any(r["value"][1] == "1" for r in query('up{job="stackwatch"}')), timeout=30,
                   interval=0.2, what="the target up")
        series = wait_until(lambda: query('stackwatch_problem_threads{comm="pm-stuck"}'), timeout=30, interval=0.2,
                            what="the problem gauge in Prometheus")
        assert series[0]["metric"]["class"] == "blocked"

        # The shipped rule fires, and Alertmanager has it, with the process in its labels.
        def am_alert():
            code, alerts = http_json(alertmanager.url + "/api/v2/alerts")
            return [a for a in alerts or [] if a["labels"].get("alertname") == "StackwatchThreadBlocked" and
                    a["labels"].get("comm") == "pm-stuck"] if code == 200 else []
        a = wait_until(am_alert, timeout=60, interval=0.3, what="StackwatchThreadBlocked in Alertmanager")[0]
        assert a["labels"]["severity"] == "critical"
        assert a["annotations"]["summary"].startswith("pm-stuck (")
    finally:
        prom.stop()
    assert fx.proc.poll() is None
