"""The page at "/" in a real browser: Debian's chromium driven by playwright-core (tests/browser/run.js) against the
real stackwatchd with a TCP listener, a read token and a capture token, and a hung fixture with hostile names."""
import json
import os
import shutil
import subprocess
import time

import pytest

from conftest import BUILDDIR, FIXTURES, SRCDIR, http_get, wait_until

BROWSER_DIR = os.path.join(SRCDIR, "tests", "browser")
CHROMIUM = "/usr/bin/chromium"
HOSTILE_CMD = "<img src=x onerror=alert(1)>"
HOSTILE_COMM = "<b>x</b>"
FOR_S = 1
CONFIG = f"""
poll_interval: 200ms
archive:
  directory: "@ARCHIVE@"
  # Two snapshots of the one hang, for the page to compare.
  every_firing: true
rules:
  - name: web-hung
    class: blocked
    for: {FOR_S}s
    comm: "{HOSTILE_COMM}"
    cooldown: 1s
http:
  socket: "@SOCKET@"
  listen: 127.0.0.1:0
  token_file: @TOKEN@
  read_token_file: @READ_TOKEN@
"""


def browser_missing():
    if not os.access(CHROMIUM, os.X_OK):
        return "no /usr/bin/chromium (apt-get install chromium; bootstrap.sh does)"
    if not shutil.which("node"):
        return "no node"
    if not os.path.isdir(os.path.join(BROWSER_DIR, "node_modules", "playwright-core")):
        return "no playwright-core (npm ci --prefix tests/browser)"
    return None


@pytest.fixture
def web_daemon(daemon, tmp_path):
    token, read_token = tmp_path / "token", tmp_path / "read-token"
    token.write_text("capture-s3cret\n")
    read_token.write_text("read-s3cret\n")
    for f in (token, read_token):
        f.chmod(0o600)
    d = daemon(CONFIG.replace("@TOKEN@", str(token)).replace("@READ_TOKEN@", str(read_token)))
    return d


def test_static_shell_headers(web_daemon):
    """The shell is served without a token (it holds no data) with a strict CSP; the data still needs one."""
    addr = web_daemon.tcp_address()
    code, headers, body = http_get(addr, "/")
    h = {k.lower(): v for k, v in headers.items()}
    assert code == 200 and b"/ui/app.js" in body
    assert h["content-type"].startswith("text/html")
    assert "default-src 'none'" in h["content-security-policy"] and "frame-ancestors 'none'" in h[
        "content-security-policy"]
    assert h["x-content-type-options"] == "nosniff"
    for asset, ctype in (("app.js", "text/javascript"), ("app.css", "text/css")):
        code, headers, _ = http_get(addr, "/ui/" + asset)
        assert code == 200 and {k.lower(): v for k, v in headers.items()}["content-type"].startswith(ctype)
    assert http_get(addr, "/ui/nope.js")[0] == 401  # not an asset: an API path, which needs the token
    assert http_get(addr, "/processes")[0] == 401
    # The same page on the unix socket (no token there: its mode is the access control), and HEAD.
    assert web_daemon.get("/")[0] == 200 and web_daemon.get("/ui/app.css")[0] == 200
    code, _, body = http_get(addr, "/", method="HEAD")
    assert code == 200 and body == b""


def test_page_in_chromium(web_daemon, tmp_path):
    why = browser_missing()
    if why:
        pytest.skip(why)
    d = web_daemon
    host, port = d.tcp_address()
    # A copy of a hung fixture under a hostile file name (in its cmdline) and a hostile comm.
    exe = tmp_path / HOSTILE_CMD
    exe.symlink_to(os.path.join(FIXTURES, "block-read"))
    fx = subprocess.Popen([str(exe), "--name", HOSTILE_COMM], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          env=dict(os.environ, FIXTURE_LIFETIME="300"))
    try:
        assert fx.stdout.readline().strip() == b"READY"
        started, started_epoch_ms = time.monotonic(), time.time() * 1000
        # The rule fires, twice (cooldown 1s): the page opens the newest and compares it with the one before.
        wait_until(lambda: len(d.snapshots("--pid", str(fx.pid))) >= 2, timeout=FOR_S + 15, what="two snapshots")
        out = os.path.join(BUILDDIR, "tests", "browser", "out")  # test output: screenshots
        os.makedirs(out, exist_ok=True)
        cfg = dict(base=f"http://{host}:{port}", read_token="read-s3cret", capture_token="capture-s3cret",
                   pid=fx.pid, hostile_comm=HOSTILE_COMM, started_ms=started_epoch_ms, out=out, user_data_dir=str(tmp_path / "chromium"))
        r = subprocess.run(["node", os.path.join(BROWSER_DIR, "run.js"), json.dumps(cfg)], capture_output=True,
                           timeout=180, cwd=BROWSER_DIR)
        assert r.stdout, r.stderr.decode(errors="replace")
        res = json.loads(r.stdout.decode().strip().splitlines()[-1])
        assert "error" not in res, res["error"]
        s = res["steps"]
        # Loaded cleanly; the token left the address bar for sessionStorage.
        load = lambda lst: [e for e in lst if e["phase"] == "load"]  # noqa: E731
        assert load(res["console_errors"]) == [] and load(res["failed_requests"]) == [], res
        assert s["page"]["status"] == 200 and "token" not in s["now"]["url"], s
        assert s["now"]["token_in_storage"] == "read-s3cret"
        # The hung thread is in "Now" within a few seconds of its rule's for:, its name shown as text.
        assert time.monotonic() - started < 60
        # (seconds_since_hang: from the fixture's READY, its rule's for: included, to the row in the page.)
        assert s["now"]["seconds_since_hang"] < FOR_S + 10, s["now"]
        assert s["now"]["comm_text"] == HOSTILE_COMM and s["now"]["injected"] == 0 and s["now"]["refreshed"]
        assert "status ok" in s["now"]["health"], s["now"]
        # Its snapshot: what fired, the grouped stacks (the culprit's open), both pictures or their fallback.
        snap = s["snapshot"]
        assert s["snapshots"]["rows"] >= 1
        assert "web-hung" in snap["why"] and HOSTILE_CMD in snap["cmdline"] and snap["injected"] == 0, snap
        assert snap["groups"] >= 1 and snap["open_groups"] == 1  # the culprit's group, open
        assert snap["diff"].startswith("Against ") and "The same groups as the previous snapshot." in snap["diff"], snap
        snap_id = d.snapshots("--pid", str(fx.pid))[0]["id"]
        svg_code = http_get((host, port), f"/snapshots/{snap_id}?format=svg&picture=flame",
                            headers={"Authorization": "Bearer read-s3cret"})[0]
        for pic in ("chain", "flame"):
            if svg_code == 200:
                assert snap[pic]["svg"] == 1 and snap[pic]["scripts"] == 0, snap[pic]
            else:
                assert snap[pic]["unavailable"] == 1 and "picture unavailable" in snap[pic]["text"], snap[pic]
        # Capture now: refused, visibly, with the read token; done with the capture token.
        assert "may read, not capture" in s["capture_read"]["text"], s
        assert s["capture"]["text"].startswith("Captured 1 thread") and s["capture"]["groups"] >= 1, s
        assert "paste one in the token box" in s["no_token"]["text"], s
        assert res["dialogs"] == [], res["dialogs"]
        for name in ("now", "snapshots", "snapshot", "capture-refused", "capture", "no-token"):
            assert os.path.getsize(os.path.join(out, name + ".png")) > 1000
    finally:
        fx.kill()
        fx.wait()
