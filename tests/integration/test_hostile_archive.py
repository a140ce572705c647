"""A stored snapshot is untrusted input: a file in the archive with control characters in its class, state and
strings must come out escaped from stackctl list, show (text and folded) and show --json, and as valid JSON."""
import json
import os
import struct
import subprocess

from conftest import http_get, stackctl, wait_until

RULES = """
poll_interval: 200ms
archive:
  directory: "@ARCHIVE@"
rules:
  - name: busy-fixtures
    class: busy-loop
    for: 1s
    comm: [busy-loop]
    cooldown: 1h
"""
HEADER_MAGIC = 0x184D2A50
FORGED = "busy-loop\n2099-01-01 00:00:00   4242 forged\x1b[2J"


def rewrite(path, edit_doc, edit_header, edit_text=lambda t: t):
    """Decompress the snapshot file at PATH, let the callbacks change its document, its text and its header, write
    it back."""
    with open(path, "rb") as f:
        raw = f.read()
    magic, n = struct.unpack_from("<II", raw)
    assert magic == HEADER_MAGIC
    header = json.loads(raw[8:8 + n])
    doc = json.loads(subprocess.run(["zstd", "-dcq", path], check=True, capture_output=True).stdout)
    edit_doc(doc)
    edit_header(header)
    text = edit_text(json.dumps(doc).encode())
    tmp = path + ".plain"
    with open(tmp, "wb") as f:
        f.write(text)
    frame = subprocess.run(["zstd", "-q", "-c", "--content-size", tmp], check=True, capture_output=True).stdout
    os.unlink(tmp)
    header["size"] = len(text)
    h = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<II", HEADER_MAGIC, len(h)) + h + frame)


def no_raw_controls(text):
    return not any(ord(c) < 32 and c not in "\n\t" for c in text) and "\x7f" not in text


def test_forged_fields_are_escaped_everywhere(daemon, fixture):
    d = daemon(RULES)
    busy = fixture("busy-loop")
    wait_until(lambda: d.snapshots("--pid", str(busy.pid)), timeout=30, what="the busy loop's snapshot")
    snap = d.snapshots("--pid", str(busy.pid))[0]
    path = os.path.join(d.archive, snap["id"] + ".json.zst")

    def edit_doc(doc):
        doc["trigger"]["class"] = FORGED
        doc["trigger"]["state"] = "\n"
        doc["process"]["state"] = "\x1b"
        doc["threads"][0]["state"] = "\r"
        doc["threads"][0]["comm"] = "a\x1b]0;title\x07b"

    def edit_header(h):
        h["class"] = FORGED

    rewrite(path, edit_doc, edit_header)

    # list: one line per snapshot, the class escaped (a newline in it would forge a second line).
    out = stackctl("--archive", d.archive, "list").stdout.decode()
    lines = [ln for ln in out.splitlines() if snap["id"] in ln]
    assert len(lines) == 1, out
    assert "forged" in lines[0] and "\\n" in lines[0] and "\\e" in lines[0], lines[0]
    assert "2099-01-01" not in out.replace(lines[0], ""), out
    assert no_raw_controls(out)

    # show as text and folded: the class, the state letters and the comm escaped.
    for fmt in ([], ["--folded"]):
        text = stackctl("--archive", d.archive, "show", snap["id"], *fmt).stdout.decode()
        assert no_raw_controls(text), repr(text[:400])
    text = stackctl("--archive", d.archive, "show", snap["id"]).stdout.decode()
    assert "(state \\x0a," in text, text[:400]
    assert "\\x1b" in text.splitlines()[0], text.splitlines()[0]

    # show --json: valid JSON whose strings carry the control characters escaped, never raw.
    raw = stackctl("--archive", d.archive, "show", "--json", snap["id"]).stdout.decode()
    assert no_raw_controls(raw.rstrip("\n")), repr(raw[:400])
    doc = json.loads(raw)
    assert doc["trigger"]["class"] == FORGED
    assert doc["threads"][0]["comm"] == "a\x1b]0;title\x07b"


def test_decompression_bomb_fails_fast(tmp_path):
    """5 KB of zstd that expand to 60 MB of "{}," (20M objects, ~11 GB as a json-c tree): refused in a blink."""
    import resource

    archive = tmp_path / "archive"
    archive.mkdir()
    doc = b'{"schema":"stackwatch.snapshot/1","process":{"pid":1},"x":[' + b"{}," * 20_000_000 + b"{}]}"
    plain = tmp_path / "plain"
    plain.write_bytes(doc)
    frame = subprocess.run(["zstd", "-q", "-19", "-c", "--content-size", str(plain)], check=True,
                           capture_output=True).stdout
    plain.unlink()
    sid = "20260101T000000.000000Z-1"
    header = json.dumps({"schema": "stackwatch.archive/1", "id": sid, "timestamp_usec": 1767225600000000, "pid": 1,
                         "comm": "x", "rule": "r", "class": "blocked", "size": len(doc)}).encode()
    (archive / f"{sid}.json.zst").write_bytes(struct.pack("<II", HEADER_MAGIC, len(header)) + header + frame)
    assert len(frame) < 16 * 1024

    for fmt in ([], ["--json"], ["--folded"]):
        r = stackctl("--archive", archive, "show", *fmt, "latest", timeout=20)
        assert r.returncode == 1, r
        assert b"too many objects and arrays for its size" in r.stderr, r.stderr
    # Every stackctl this test process ran stayed far from the gigabytes the tree would take.
    assert resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss < 1024 * 1024, "KiB"


def test_served_json_is_rewritten_not_passed_through(daemon, fixture):
    """GET /snapshots/ID: a raw escape byte inside a stored string (which JSON forbids) comes out escaped."""
    d = daemon(RULES)
    busy = fixture("busy-loop")
    wait_until(lambda: d.snapshots("--pid", str(busy.pid)), timeout=30, what="the busy loop's snapshot")
    snap = d.snapshots("--pid", str(busy.pid))[0]
    path = os.path.join(d.archive, snap["id"] + ".json.zst")
    rewrite(path, lambda doc: doc["process"].__setitem__("comm", "RAW\\u001bHERE"), lambda h: None,
            lambda t: t.replace(b"RAW\\\\u001bHERE", b"RAW\x1bHERE"))
    assert b"RAW\x1bHERE" in subprocess.run(["zstd", "-dcq", path], check=True, capture_output=True).stdout

    code, headers, body = d.get(f"/snapshots/{snap['id']}")
    assert code == 200, body[:300]
    assert b"\x1b" not in body, body[:300]
    assert json.loads(body)["process"]["comm"] == "RAW\x1bHERE"


def big_snapshot(doc, threads=4000, frames=64):
    """DOC grown past the realistic worst case (2,000 threads of 64 frames): THREADS threads of FRAMES frames, each
    thread's at addresses of its own, so that no two are alike and text prints every one (not one group)."""
    t0 = doc["threads"][0]
    frame = (t0.get("frames") or [{"pc": "0x401000", "function": "spin", "module": 0}])[0]
    doc["threads"] = []
    for i in range(threads):
        t = dict(t0)
        t["tid"] = 100000 + i
        t["comm"] = f"worker-{i}"
        t["frames"] = [dict(frame, pc=hex(0x401000 + 16 * k + (i << 20)), function=f"worker_function_number_{k}")
                       for k in range(frames)]
        doc["threads"].append(t)


def test_rendering_a_huge_or_hostile_file_never_stalls_the_loop(daemon, fixture, tmp_path):
    """/snapshots/ID?format=text on a 4,000 × 64 snapshot, and on a 5 KB bomb: rendered off the event loop, so
    /healthz answers within a second and the scans go on meanwhile; the bomb is a clear 500."""
    import threading
    import time

    d = daemon(RULES.replace("cooldown: 1h", "cooldown: 1h\n    actions: [snapshot]"), env={"WATCHDOG_USEC": "400000"})
    busy = fixture("busy-loop")
    wait_until(lambda: d.snapshots("--pid", str(busy.pid)), timeout=30, what="the busy loop's snapshot")
    snap = d.snapshots("--pid", str(busy.pid))[0]
    path = os.path.join(d.archive, snap["id"] + ".json.zst")
    rewrite(path, big_snapshot, lambda h: None)

    result = {}

    def render():
        t = time.monotonic()
        result["reply"] = http_get(d.socket, f"/snapshots/{snap['id']}?format=text", timeout=120)
        result["seconds"] = time.monotonic() - t

    worker = threading.Thread(target=render)
    scans_before = d.get_json("/healthz")["scan"]["scans"]
    pings_before = d.notify.count("WATCHDOG=1")
    worker.start()
    worst = 0.0
    while worker.is_alive():
        t = time.monotonic()
        code, _, _ = d.get("/healthz", timeout=30)
        worst = max(worst, time.monotonic() - t)
        assert code == 200
        time.sleep(0.05)
    worker.join()
    code, _, body = result["reply"]
    assert code == 200, body[:300]
    assert body.count(b"worker_function_number_63") == 4000
    print(f"render {result['seconds']:.2f} s, {len(body)} bytes, worst healthz {worst:.3f} s")
    assert worst < 0.5, f"/healthz took {worst:.2f} s while a {result['seconds']:.2f} s render ran"
    assert d.get_json("/healthz")["scan"]["scans"] > scans_before
    # The loop pinged the watchdog all along: every 200 ms, so at least one per 400 ms of the render.
    assert d.notify.count("WATCHDOG=1") - pings_before >= int(result["seconds"] / 0.4), result

    # A decompression bomb in the archive: a 500 naming the reason, and the daemon goes on.
    doc = b'{"schema":"stackwatch.snapshot/1","process":{"pid":1},"x":[' + b"{}," * 20_000_000 + b"{}]}"
    plain = tmp_path / "plain"
    plain.write_bytes(doc)
    frame = subprocess.run(["zstd", "-q", "-19", "-c", "--content-size", str(plain)], check=True,
                           capture_output=True).stdout
    sid = "20260101T000000.000000Z-1"
    header = json.dumps({"schema": "stackwatch.archive/1", "id": sid, "timestamp_usec": 1767225600000000, "pid": 1,
                         "comm": "x", "rule": "r", "class": "blocked", "size": len(doc)}).encode()
    with open(os.path.join(d.archive, f"{sid}.json.zst"), "wb") as f:
        f.write(struct.pack("<II", HEADER_MAGIC, len(header)) + header + frame)
    for fmt in ("json", "text", "folded"):
        code, _, body = d.get(f"/snapshots/{sid}?format={fmt}", timeout=60)
        assert code == 500, body[:300]
        assert b"too many objects and arrays for its size" in body, body
    assert d.get_json("/healthz")["status"] == "ok"


def test_a_render_past_its_memory_budget_is_a_clear_500(daemon, tmp_path):
    """20 MB of empty objects, one per 20 bytes (json_parse_bounded() allows one per 16): json-c would build ~40 bytes
    of tree per byte, twice the render's budget. The render child fails, not the daemon, and the reply says why."""
    d = daemon(RULES)
    doc = b'{"schema":"stackwatch.snapshot/1","process":{"pid":1},"x":[' + b"{}                 ," * 1_000_000 + b"{}]}"
    plain = tmp_path / "plain"
    plain.write_bytes(doc)
    frame = subprocess.run(["zstd", "-q", "-19", "-c", "--content-size", str(plain)], check=True,
                           capture_output=True).stdout
    sid = "20260101T000000.000000Z-2"
    header = json.dumps({"schema": "stackwatch.archive/1", "id": sid, "timestamp_usec": 1767225600000000, "pid": 2,
                         "comm": "x", "rule": "r", "class": "blocked", "size": len(doc)}).encode()
    os.makedirs(d.archive, exist_ok=True)
    with open(os.path.join(d.archive, f"{sid}.json.zst"), "wb") as f:
        f.write(struct.pack("<II", HEADER_MAGIC, len(header)) + header + frame)
    code, _, body = d.get(f"/snapshots/{sid}?format=text", timeout=60)
    assert code == 500, body[:300]
    # The sanitizer's allocator dies on a refused mmap of its own ("ERROR: Failed to mmap") rather than return NULL:
    # there the render fails just as surely, with a less precise reason.
    sanitized = b"libasan" in subprocess.run(["ldd", d.proc.args[0]], capture_output=True).stdout
    assert b"needs more memory than its budget" in body or sanitized, body
    assert d.get_json("/healthz")["status"] == "ok"
