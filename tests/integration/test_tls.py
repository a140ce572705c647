"""The TCP API over TLS (libmicrohttpd with GnuTLS) with two token scopes, against real clients: curl, stackctl
--host https:// --cacert, and Prometheus scraping over TLS with the read token. A read token reads everything and
captures nothing (403 on /stacks); no token is 401; plain TCP on a non-loopback address is refused."""
import json
import os
import re
import subprocess

import pytest

from conftest import STACKWATCHD, Server, free_port, http_json, stackctl, wait_until

PROMETHEUS = "/usr/bin/prometheus"


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """A CA and a server certificate for 127.0.0.1 signed by it (openssl, EC keys)."""
    d = tmp_path_factory.mktemp("pki")

    def ossl(*args):
        subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    ossl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=stackwatch test CA")
    ossl("req", *ec, "-keyout", "srv.key", "-out", "srv.csr", "-subj", "/CN=127.0.0.1")
    (d / "ext").write_text("subjectAltName=IP:127.0.0.1\n")
    ossl("x509", "-req", "-in", "srv.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-out", "srv.pem",
         "-days", "2", "-extfile", "ext")
    for name, token in (("capture.token", "capture-secret"), ("read.token", "read-secret")):
        (d / name).write_text(token + "\n")
        (d / name).chmod(0o600)
    return d


CONFIG = """
poll_interval: 200ms
archive:
  directory: "@ARCHIVE@"
http:
  socket: "@SOCKET@"
  listen: 127.0.0.1:0
  token_file: {pki}/capture.token
  read_token_file: {pki}/read.token
  tls_cert: {pki}/srv.pem
  tls_key: {pki}/srv.key
rules: []
"""


def https_address(d):
    m = wait_until(lambda: re.search(r"^Listening on https://([0-9.]+):(\d+) \(TLS", d.log_text(), re.M),
                   what="the TLS listener")
    return f"https://{m.group(1)}:{m.group(2)}"


def curl(url, token=None, cacert=None, extra=()):
    argv = ["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "20", *extra]
    if cacert:
        argv += ["--cacert", str(cacert)]
    if token:
        argv += ["-H", f"Authorization: Bearer {token}"]
    r = subprocess.run(argv + [url], capture_output=True, text=True, timeout=30)
    return r.returncode, r.stdout


def test_tls_and_token_scopes_with_curl_and_stackctl(daemon, fixture, pki):
    d = daemon(CONFIG.format(pki=pki))
    url = https_address(d)
    fx = fixture("block-read").wait_wchan("pipe_read")
    ca = pki / "ca.pem"
    # A real TLS client: the read token reads, captures nothing; the capture token does both; none is 401.
    assert curl(f"{url}/rules", "read-secret", ca) == (0, "200")
    assert curl(f"{url}/metrics", "read-secret", ca) == (0, "200")
    assert curl(f"{url}/stacks/{fx.pid}", "read-secret", ca) == (0, "403")
    assert curl(f"{url}/stacks/{fx.pid}", "capture-secret", ca) == (0, "200")
    assert curl(f"{url}/rules", None, ca) == (0, "401")
    assert curl(f"{url}/rules", "wrong", ca) == (0, "401")
    assert curl(f"{url}/healthz", None, ca) == (0, "200")
    # The certificate is checked: without the CA curl refuses (60); plain HTTP on the TLS port gets no answer.
    assert curl(f"{url}/healthz")[0] == 60
    assert curl(url.replace("https://", "http://") + "/healthz")[1] != "200"
    # stackctl over https with --cacert and either token.
    ro, rw = pki / "read.token", pki / "capture.token"
    r = stackctl("--host", url, "--cacert", ca, "--token-file", ro, "status", check_rc=0)
    assert f"PID: {d.proc.pid}," in r.stdout.decode()
    r = stackctl("--host", url, "--cacert", ca, "--token-file", ro, "dump", "--via-daemon", fx.pid, check_rc=4)
    assert "may read, not capture" in r.stderr.decode()
    r = stackctl("--host", url, "--cacert", ca, "--token-file", rw, "dump", "--via-daemon", fx.pid, check_rc=0)
    assert "br_level_20" in r.stdout.decode()
    # The system's CAs do not know ours.
    stackctl("--host", url, "--token-file", ro, "status", check_rc=1)


@pytest.mark.parametrize("http,error", [
    ("  listen: 0.0.0.0:0\n  token_file: {pki}/capture.token\n", "not a loopback address"),
    ("  listen: 127.0.0.1:0\n  token_file: {pki}/capture.token\n  tls_cert: {pki}/srv.pem\n", "go together"),
    ("  listen: 127.0.0.1:0\n", "needs \"token_file\""),
])
def test_unsafe_tcp_configurations_are_refused(tmp_path, pki, http, error):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("http:\n" + http.format(pki=pki))
    r = subprocess.run([STACKWATCHD, "--check-config", "--config", str(cfg)], capture_output=True, text=True)
    assert r.returncode == 1 and error in r.stderr, r.stderr
    # allow_plain is the explicit way out for the first.
    if "0.0.0.0" in http:
        cfg.write_text("http:\n" + http.format(pki=pki) + "  allow_plain: true\n")
        r = subprocess.run([STACKWATCHD, "--check-config", "--config", str(cfg)], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr


@pytest.mark.skipif(not os.access(PROMETHEUS, os.X_OK), reason="prometheus is not installed")
def test_prometheus_scrapes_over_tls_with_the_read_token(daemon, pki, tmp_path):
    d = daemon(CONFIG.format(pki=pki))
    url = https_address(d)
    target = url.replace("https://", "")
    (tmp_path / "prometheus.yml").write_text(f"""
global:
  scrape_interval: 1s
scrape_configs:
  - job_name: stackwatch
    scheme: https
    tls_config:
      ca_file: {pki}/ca.pem
    authorization:
      type: Bearer
      credentials_file: {pki}/read.token
    static_configs:
      - targets: ["{target}"]
""")
    port = free_port()
    prom = Server([PROMETHEUS, f"--config.file={tmp_path}/prometheus.yml", f"--storage.tsdb.path={tmp_path}/tsdb",
                   f"--web.listen-address=127.0.0.1:{port}"], f"http://127.0.0.1:{port}", "/-/ready",
                  str(tmp_path / "prometheus.log"), "Prometheus")
    try:
        def up():
            code, doc = http_json(f"{prom.url}/api/v1/query?query=stackwatch_scans_total")
            return code == 200 and doc["data"]["result"]
        res = wait_until(up, timeout=30, interval=0.2, what="stackwatch_scans_total scraped over TLS")
        assert res[0]["metric"]["job"] == "stackwatch" and float(res[0]["value"][1]) > 0
    finally:
        prom.stop()


def test_the_page_over_tls_and_the_alert_links_to_it_with_https(daemon, fixture, pki, tmp_path):
    """The page is served on the TLS listener, and a hook's link to the snapshot's page says https."""
    out = tmp_path / "page-url"
    hook = tmp_path / "hook"
    hook.write_text(f'#!/bin/sh\nprintf %s "$STACKWATCH_PAGE_URL" > "{out}.tmp" && mv "{out}.tmp" "{out}"\n')
    hook.chmod(0o755)
    rules = (f"rules:\n  - name: tls-hung\n    class: blocked\n    for: 1s\n    comm: br-tls\n    cooldown: 1h\n"
             f"    actions: [snapshot, log, hook]\n    hook: [{json.dumps(str(hook))}]\n")
    d = daemon(CONFIG.format(pki=pki).replace("rules: []\n", rules))
    url = https_address(d)
    assert curl(f"{url}/", None, pki / "ca.pem") == (0, "200")
    fx = fixture("block-read", "--name", "br-tls").wait_wchan("pipe_read")
    wait_until(out.exists, timeout=15, what="the hook to run")
    sid = d.snapshots("--pid", str(fx.pid))[0]["id"]
    assert out.read_text() == f"{url}/#/snapshots/{sid}"
