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


# ---- /metrics: the host ----

def test_metrics_name_the_host(daemon):
    d = daemon("archive:\n  directory: \"@ARCHIVE@\"\nrules: []\n")
    metrics = d.get("/metrics")[2].decode()
    m = re.search(r'^stackwatch_info\{host="([^"]*)",version="([^"]+)"\} 1$', metrics, re.M)
    assert m and m.group(1) == socket.gethostname(), metrics[:2000]
    assert f'stackwatch_build_info{{version="{m.group(2)}"}} 1' in metrics
