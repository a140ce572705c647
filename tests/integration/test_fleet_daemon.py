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


# ---- /metrics: the host ----

def test_metrics_name_the_host(daemon):
    d = daemon("archive:\n  directory: \"@ARCHIVE@\"\nrules: []\n")
    metrics = d.get("/metrics")[2].decode()
    m = re.search(r'^stackwatch_info\{host="([^"]*)",version="([^"]+)"\} 1$', metrics, re.M)
    assert m and m.group(1) == socket.gethostname(), metrics[:2000]
    assert f'stackwatch_build_info{{version="{m.group(2)}"}} 1' in metrics
