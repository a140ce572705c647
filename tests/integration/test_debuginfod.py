"""debuginfod on purpose, against a real debuginfod server (Debian's, on loopback) serving the stripped fixture's
split debuginfo: used with DEBUGINFOD_URLS or --debuginfod, not with --no-debuginfod; a server that is down costs
nothing, and one that never answers costs at most the capture's time budget, not DEBUGINFOD_TIMEOUT per module."""
import os
import shutil
import socket
import subprocess
import time

import pytest

from conftest import DEBUGDIR, STACKCTL, Server, free_port

DEBUGINFOD = "/usr/bin/debuginfod"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    if not os.access(DEBUGINFOD, os.X_OK):
        pytest.skip("debuginfod is not installed (apt-get install debuginfod)")
    d = tmp_path_factory.mktemp("debuginfod")
    port = free_port()
    s = Server([DEBUGINFOD, "-d", str(d / "db.sqlite"), "-p", str(port), "-F", DEBUGDIR],
               f"http://127.0.0.1:{port}", "/metrics", str(d / "debuginfod.log"), "debuginfod")
    # Ready once it has scanned the directory: it serves the fixture's debuginfo by build-id.
    build_id = next(os.path.join(r, f) for r, _, fs in os.walk(os.path.join(DEBUGDIR, ".build-id")) for f in fs)
    bid = build_id.split(".build-id/")[1].replace("/", "").replace(".debug", "")
    from conftest import wait_until, http_json
    wait_until(lambda: http_json(f"{s.url}/buildid/{bid}/debuginfo")[0] == 200, timeout=60, interval=0.2,
               what="debuginfod serving the fixture's debuginfo")
    yield s
    s.stop()


def dump(pid, env=None, *args):
    t0 = time.monotonic()
    r = subprocess.run([STACKCTL, "dump", "--no-kernel", *args,
                        str(pid)], capture_output=True, text=True, env=env, timeout=120)
    return r, time.monotonic() - t0


def test_debuginfod_serves_the_stripped_fixture(server, fixture, tmp_path):
    fx = fixture("block-read-stripped").wait_wchan("pipe_read")
    base = dict(os.environ, DEBUGINFOD_CACHE_PATH=str(tmp_path / "cache"))
    base.pop("DEBUGINFOD_URLS", None)
    r, _ = dump(fx.pid, base)
    assert "br_level_20" not in r.stdout                    # no server, no local debuginfo: unresolved
    r, _ = dump(fx.pid, dict(base, DEBUGINFOD_URLS=server.url))
    assert "br_level_20+0x" in r.stdout and "block-read.c:" in r.stdout, r.stdout[-2000:]
    r, _ = dump(fx.pid, base, "--debuginfod", server.url)
    assert "br_level_20+0x" in r.stdout
    shutil.rmtree(tmp_path / "cache")
    r, _ = dump(fx.pid, dict(base, DEBUGINFOD_URLS=server.url), "--no-debuginfod")
    assert "br_level_20" not in r.stdout


def test_a_dead_or_silent_server_does_not_hold_the_capture(fixture, tmp_path):
    fx = fixture("block-read-stripped").wait_wchan("pipe_read")
    env = dict(os.environ, DEBUGINFOD_CACHE_PATH=str(tmp_path / "cache"))
    # Down: refused at once.
    r, took = dump(fx.pid, dict(env, DEBUGINFOD_URLS=f"http://127.0.0.1:{free_port()}"))
    assert r.returncode in (0, 5) and "read+0x" in r.stdout and took < 3, took
    # Silent: takes the connection, never answers. libdw alone would wait DEBUGINFOD_TIMEOUT (90 s) per module.
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)
    try:
        url = "http://127.0.0.1:%d" % silent.getsockname()[1]
        r, took = dump(fx.pid, dict(env, DEBUGINFOD_URLS=url), "--time-budget", "2000")
        assert took < 6, took
        assert "debuginfod gave no answer within the time budget" in r.stdout, r.stdout[-2000:]
        assert "read+0x" in r.stdout  # the stacks themselves were taken first, and are all there
    finally:
        silent.close()
