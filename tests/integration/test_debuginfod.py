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


DAEMON_CONFIG = """archive:
  directory: @ARCHIVE@
symbols:
  cache_dir: {cache}
  debuginfod: "{debuginfod}"
rules: []
"""


def test_the_daemon_uses_its_configured_servers_and_cache(server, daemon, fixture, tmp_path):
    """symbols.debuginfod in the configuration, not the environment; symbols.cache_dir keeps what it fetched, so a
    later daemon resolves the same frames with no server at all, and spends less time symbolizing."""
    fx = fixture("block-read-stripped").wait_wchan("pipe_read")
    cache = tmp_path / "symbols"
    env = {"DEBUGINFOD_CACHE_PATH": str(tmp_path / "dbgd-cache"), "DEBUGINFOD_URLS": ""}

    d = daemon(DAEMON_CONFIG.format(cache="off", debuginfod="off"), env=dict(env, DEBUGINFOD_URLS=server.url))
    doc = d.get_json(f"/stacks/{fx.pid}")
    assert "br_level_20" not in str(doc)  # "off" wins over the environment
    d.stop()

    d = daemon(DAEMON_CONFIG.format(cache=cache, debuginfod=server.url), env=env)
    cold = d.get_json(f"/stacks/{fx.pid}")
    code, _, text = d.get(f"/stacks/{fx.pid}?format=text")
    assert code == 200 and b"br_level_20+0x" in text and b"block-read.c:" in text, text[-2000:]
    assert os.listdir(cache), "what debuginfod sent is in the cache"
    d.stop()

    d = daemon(DAEMON_CONFIG.format(cache=cache, debuginfod="off"), env=env)
    warm = d.get_json(f"/stacks/{fx.pid}")

    def frames(doc):
        return [(f.get("function"), f.get("file"), f.get("line")) for t in doc["threads"] for f in t["frames"]]
    assert frames(warm) == frames(cold)
    assert warm["capture"]["symbolize_us"] < cold["capture"]["symbolize_us"], (warm["capture"], cold["capture"])
