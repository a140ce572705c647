"""The daemon's side of running a fleet (issue 26, "trust the alerts"): the TLS pair checked at --check-config, at
start and at reload, and a new certificate taken on SIGHUP; two tokens per scope while one is rotated; refused
requests logged (rate-limited, with the peer) and counted; the host on /metrics; live captures over HTTP with a
budget of their own; and the installed files naming the sysconfdir the build was configured with."""
import json
import os
import re
import signal
import socket
import ssl
import subprocess

import pytest

from conftest import BUILDDIR, STACKWATCHD, http_get, wait_until


# ---- TLS: the certificate and key, checked and reloaded ----

@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """Two self-signed certificates for 127.0.0.1 (a and b) with their keys, and a key of neither."""
    d = tmp_path_factory.mktemp("pki")

    def ossl(*args):
        subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    for name in ("a", "b"):
        ossl("req", "-x509", *ec, "-keyout", f"{name}.key", "-out", f"{name}.pem", "-days", "2",
             "-subj", f"/CN=stackwatch test {name}", "-addext", "subjectAltName=IP:127.0.0.1")
    ossl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-out", "other.key")
    (d / "capture.token").write_text("capture-secret\n")
    (d / "capture.token").chmod(0o600)
    return d


TLS_CONFIG = """
poll_interval: 200ms
archive:
  directory: "@ARCHIVE@"
http:
  socket: "@SOCKET@"
  listen: 127.0.0.1:0
  token_file: {pki}/capture.token
  tls_cert: {cert}
  tls_key: {key}
rules: []
"""


def check_config(tmp_path, text):
    cfg = tmp_path / "check.yaml"
    cfg.write_text(text)
    return subprocess.run([STACKWATCHD, "--check-config", "--config", str(cfg), "--rules-dir", "/nonexistent"],
                          capture_output=True, text=True, timeout=30)


def test_check_config_and_start_name_a_bad_tls_pair(tmp_path, pki):
    def conf(cert, key):
        return TLS_CONFIG.format(pki=pki, cert=cert, key=key).replace("@ARCHIVE@", str(tmp_path / "a")).replace(
            "@SOCKET@", str(tmp_path / "s.sock"))
    (tmp_path / "garbage.pem").write_text("not a certificate\n")
    cases = [
        (pki / "missing.pem", pki / "a.key",
         f"Failed to read the TLS certificate '{pki}/missing.pem': No such file or directory"),
        (pki / "a.pem", pki / "missing.key",
         f"Failed to read the TLS key '{pki}/missing.key': No such file or directory"),
        (tmp_path / "garbage.pem", pki / "a.key", f"The TLS certificate '{tmp_path}/garbage.pem' is not a PEM "
                                                  "certificate"),
        (pki / "a.pem", pki / "a.pem", f"The TLS key '{pki}/a.pem' is not a PEM private key"),
        (pki / "a.pem", pki / "b.key", f"The TLS key '{pki}/b.key' is not the key of the certificate '{pki}/a.pem'"),
        (pki / "a.pem", pki / "other.key",
         f"The TLS key '{pki}/other.key' is not the key of the certificate '{pki}/a.pem'"),
    ]
    for cert, key, error in cases:
        r = check_config(tmp_path, conf(cert, key))
        assert r.returncode == 1 and error in r.stderr and "configuration OK" not in r.stdout, (error, r)
    r = check_config(tmp_path, conf(pki / "a.pem", pki / "a.key"))
    assert r.returncode == 0 and "configuration OK" in r.stdout, r
    # At start: the same sentence, not only "Failed to start the HTTP server".
    cfg = tmp_path / "start.yaml"
    cfg.write_text(conf(pki / "a.pem", pki / "b.key"))
    r = subprocess.run([STACKWATCHD, "--config", str(cfg), "--rules-dir", "/nonexistent"], capture_output=True,
                       text=True, timeout=30)
    assert r.returncode != 0 and f"The TLS key '{pki}/b.key' is not the key of the certificate" in r.stderr, r.stderr


def served_certificate(address):
    """The certificate the server presents to a new connection, as PEM (not verified: we compare it)."""
    return ssl.get_server_certificate(address, timeout=10)


def same_cert(pem_a, pem_b):
    return ssl.PEM_cert_to_DER_cert(pem_a) == ssl.PEM_cert_to_DER_cert(pem_b)


def test_sighup_takes_a_new_certificate_and_refuses_a_broken_one(daemon, pki, tmp_path):
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert.write_bytes((pki / "a.pem").read_bytes())
    key.write_bytes((pki / "a.key").read_bytes())
    d = daemon(TLS_CONFIG.format(pki=pki, cert=cert, key=key))
    m = wait_until(lambda: re.search(r"^Listening on https://([0-9.]+):(\d+) \(TLS", d.log_text(), re.M),
                   what="the TLS listener")
    address = (m.group(1), int(m.group(2)))
    assert same_cert(served_certificate(address), (pki / "a.pem").read_text())

    # A connection made before the reload keeps working after it (it is answered by the server it came to).
    ctx = ssl.create_default_context(cafile=str(pki / "a.pem"))
    early = ctx.wrap_socket(socket.create_connection(address, timeout=10), server_hostname="127.0.0.1")

    # The renewed pair, in place, then SIGHUP: new connections get it.
    cert.write_bytes((pki / "b.pem").read_bytes())
    key.write_bytes((pki / "b.key").read_bytes())
    d.proc.send_signal(signal.SIGHUP)
    wait_until(lambda: "Configuration reloaded" in d.log_text(), what="the reload")
    assert "new TLS certificate in use for new connections" in d.log_text()
    assert same_cert(served_certificate(address), (pki / "b.pem").read_text())
    early.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer capture-secret\r\n"
                  b"Connection: close\r\n\r\n")
    reply = b""
    while chunk := early.recv(4096):
        reply += chunk
    early.close()
    assert reply.startswith(b"HTTP/1.1 200"), reply[:200]
    ctx_b = ssl.create_default_context(cafile=str(pki / "b.pem"))
    with ctx_b.wrap_socket(socket.create_connection(address, timeout=10), server_hostname="127.0.0.1") as s:
        s.sendall(b"GET /rules HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer capture-secret\r\n"
                  b"Connection: close\r\n\r\n")
        assert s.recv(4096).startswith(b"HTTP/1.1 200")

    # A key that does not match: the reload is refused as a broken configuration is, the certificate stays.
    key.write_bytes((pki / "a.key").read_bytes())
    d.proc.send_signal(signal.SIGHUP)
    wait_until(lambda: "Configuration reload failed" in d.log_text(), what="the refused reload")
    assert f"The TLS key '{key}' is not the key of the certificate '{cert}'" in d.log_text()
    health = d.get_json("/healthz")
    assert health["config"]["reload"] == "failed", health
    assert health["config"]["error"] == f"The TLS key '{key}' is not the key of the certificate '{cert}'", health
    assert "stackwatch_config_last_reload_successful 0\n" in d.get("/metrics")[2].decode()
    assert same_cert(served_certificate(address), (pki / "b.pem").read_text())


# ---- tokens: two per scope while one is rotated ----

TOKEN_CONFIG = """
poll_interval: 200ms
archive:
  directory: "@ARCHIVE@"
http:
  socket: "@SOCKET@"
  listen: 127.0.0.1:0
  token_file: {token}
  read_token_file: {read_token}
rules: []
"""


def status(addr, path, token=None):
    return http_get(addr, path, headers={"Authorization": f"Bearer {token}"} if token else {})[0]


def test_a_token_file_with_two_tokens_accepts_both_during_a_rotation(daemon, tmp_path):
    token, read_token = tmp_path / "token", tmp_path / "read-token"
    token.write_text("old-capture\nnew-capture\n")
    read_token.write_text("old-read\r\nnew-read\r\n")
    for f in (token, read_token):
        f.chmod(0o600)
    d = daemon(TOKEN_CONFIG.format(token=token, read_token=read_token))
    addr = d.tcp_address()
    assert f"Token file '{token}' holds 2 tokens: each is accepted" in d.log_text()
    for t in ("old-capture", "new-capture", "old-read", "new-read"):
        assert status(addr, "/rules", t) == 200, t
    assert status(addr, "/stacks/1", "new-read") == 403
    assert status(addr, "/rules", "other") == 401
    # Every client has the new ones: the old lines go, and a reload makes them refused.
    token.write_text("new-capture\n")
    read_token.write_text("new-read\n")
    d.proc.send_signal(signal.SIGHUP)
    wait_until(lambda: status(addr, "/rules", "old-capture") == 401, what="the old token refused")
    assert status(addr, "/rules", "old-read") == 401
    assert status(addr, "/rules", "new-capture") == 200 and status(addr, "/rules", "new-read") == 200


def test_a_token_file_with_three_tokens_is_refused(tmp_path):
    token = tmp_path / "token"
    token.write_text("one\ntwo\nthree\n")
    token.chmod(0o600)
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"archive:\n  directory: {tmp_path}/a\nhttp:\n  socket: {tmp_path}/s.sock\n"
                   f"  listen: 127.0.0.1:0\n  token_file: {token}\nrules: []\n")
    r = subprocess.run([STACKWATCHD, "--config", str(cfg), "--rules-dir", "/nonexistent"], capture_output=True,
                       text=True, timeout=30)
    assert r.returncode != 0 and f"Token file '{token}' is not usable: it holds more than 2 tokens" in r.stderr, r


# ---- refused requests: logged, rate-limited, counted ----

def metric(text, name):
    m = re.search(rf"^{re.escape(name)} (\S+)$", text, re.M)
    return float(m.group(1)) if m else None


def test_refused_requests_are_logged_with_the_peer_and_counted(daemon, tmp_path):
    token, read_token = tmp_path / "token", tmp_path / "read-token"
    token.write_text("capture-secret\n")
    read_token.write_text("read-secret\n")
    for f in (token, read_token):
        f.chmod(0o600)
    d = daemon(TOKEN_CONFIG.format(token=token, read_token=read_token))
    addr = d.tcp_address()
    for _ in range(3):
        assert status(addr, "/rules") == 401
    for _ in range(4):
        assert status(addr, "/processes", "guessed") == 401
    assert status(addr, "/stacks/1", "read-secret") == 403
    assert status(addr, "/rules", "read-secret") == 200 and status(addr, "/healthz") == 200

    metrics = d.get("/metrics")[2].decode()
    assert metric(metrics, 'stackwatch_http_auth_failures_total{reason="missing"}') == 3, metrics
    assert metric(metrics, 'stackwatch_http_auth_failures_total{reason="wrong"}') == 4
    assert metric(metrics, 'stackwatch_http_auth_failures_total{reason="scope"}') == 1

    # The first five are logged with who sent them; the other three are summed up at the interval's end.
    lines = re.findall(r"^Refused HTTP request from 127\.0\.0\.1 port \d+ for \"([^\"]*)\" on http://[0-9.:]+: "
                       r"(.*)$", d.log_text(), re.M)
    assert lines == [("/rules", "no bearer token (401)")] * 3 + [("/processes", "a wrong bearer token (401)")] * 2, \
        d.log_text()[-3000:]
    wait_until(lambda: "… 3 more refused HTTP request(s) suppressed in the last 10 s" in d.log_text(), timeout=20,
               what="the suppressed count")
    # A new interval logs again.
    assert status(addr, "/rules", "guessed-again") == 401
    wait_until(lambda: len(re.findall(r"^Refused HTTP request from", d.log_text(), re.M)) == 6,
               what="the next interval's line")


# ---- /metrics: the host ----

def test_metrics_name_the_host(daemon):
    d = daemon("archive:\n  directory: \"@ARCHIVE@\"\nrules: []\n")
    metrics = d.get("/metrics")[2].decode()
    m = re.search(r'^stackwatch_info\{host="([^"]*)",version="([^"]+)"\} 1$', metrics, re.M)
    assert m and m.group(1) == socket.gethostname(), metrics[:2000]
    assert f'stackwatch_build_info{{version="{m.group(2)}"}} 1' in metrics


# ---- live captures over HTTP: a budget of their own ----

BUDGET_CONFIG = """
poll_interval: 200ms
archive:
  directory: "@ARCHIVE@"
capture:
  max_per_minute: 1
http:
  socket: "@SOCKET@"
  max_captures_per_minute: 3
rules:
  - name: api-budget-rule
    class: blocked
    for: 1s
    comm: br-api-budget
    cooldown: 1h
"""


def test_api_captures_have_their_own_budget(daemon, fixture):
    d = daemon(BUDGET_CONFIG)
    fx = fixture("block-read", "--name", "br-api-budget").wait_wchan("pipe_read")
    # Three live captures, more than the rules' one a minute: the API's own budget.
    for _ in range(3):
        code, _, body = d.get(f"/stacks/{fx.pid}")
        assert code == 200, body[:300]
    code, headers, body = d.get(f"/stacks/{fx.pid}")
    assert code == 429 and 1 <= int(headers["Retry-After"]) <= 60, body
    assert json.loads(body)["error"] == ("the API's capture budget is spent (3 per minute, "
                                         "http.max_captures_per_minute)")
    # And the rule still has its snapshot: the API did not spend it.
    snaps = wait_until(lambda: d.snapshots("--pid", str(fx.pid)), timeout=15, what="the rule's snapshot")
    assert snaps[0]["rule"] == "api-budget-rule"
    assert d.get_json("/rules")["budget"] == {"max_per_minute": 1, "used": 1}


# ---- install: the sysconfdir the build was configured with ----

def test_reconfigured_sysconfdir_reaches_the_daemon(tmp_path):
    """The compiled-in default path follows the sysconfdir make is given, without a "make clean"."""
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES")}

    def build(sysconfdir):
        r = subprocess.run(["make", "-C", BUILDDIR, "daemon/stackwatchd", f"sysconfdir={sysconfdir}"],
                           capture_output=True, text=True, env=env, timeout=600)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
        return subprocess.run([STACKWATCHD, "--help"], capture_output=True, text=True).stdout
    try:
        assert "(default /opt/sw-other/stackwatch/stackwatch.yaml)" in build("/opt/sw-other")
    finally:
        # Back to the configured one, whatever happened.
        r = subprocess.run(["make", "-C", BUILDDIR, "daemon/stackwatchd"], capture_output=True, text=True, env=env,
                           timeout=600)
        assert r.returncode == 0, r.stderr[-2000:]
    assert "(default /opt/sw-other/" not in subprocess.run([STACKWATCHD, "--help"], capture_output=True,
                                                           text=True).stdout


def test_installed_config_names_the_configured_sysconfdir(tmp_path):
    dest = tmp_path / "dest"
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES")}
    r = subprocess.run(["make", "-C", BUILDDIR, "install-data-local", f"DESTDIR={dest}",
                        "sysconfdir=/opt/sw-fleet/etc"], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    text = (dest / "opt/sw-fleet/etc/stackwatch/stackwatch.yaml").read_text()
    assert text.startswith("# /opt/sw-fleet/etc/stackwatch/stackwatch.yaml: configuration of stackwatchd")
    assert "/opt/sw-fleet/etc/stackwatch/rules.d/*.yaml" in text and "/etc/stackwatch/" not in text.replace(
        "/opt/sw-fleet/etc/stackwatch/", "")
    # No example puts a bearer token on a command line, where every local user can read it.
    assert not re.search(r"^\s*#.*command:.*Bearer", text, re.M)
    assert "Bearer TOKEN\"]" not in text
