"""SVG pictures drawn by stackctl and stackwatchd themselves (issue 30): the flame graph of the real threads64
fixture with the right thread counts, the wait chain of the real deadlock-abba drawn with its cycle in red, the
same over HTTP as image/svg+xml (live and archived, one picture alone), and a hostile comm escaped. Every picture
must be well-formed XML for xmllint."""
import json
import os
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET

import pytest

from conftest import stackctl, thread_names, threads64_parked, wait_until

SVG = "{http://www.w3.org/2000/svg}"
XMLLINT = shutil.which("xmllint") or "/usr/bin/xmllint"
RED = "rgb(200,0,0)"
HOSTILE = "<img src=x>&'\""   # 15 bytes: what a comm can hold
RULES = """
poll_interval: 200ms
archive:
  directory: "@ARCHIVE@"
rules:
  - name: svg-fixtures
    class: blocked
    for: 1s
    comm: br-svg
    cooldown: 1h
"""

pytestmark = pytest.mark.skipif(not os.access(XMLLINT, os.X_OK), reason="xmllint is missing (Debian: libxml2-utils)")


def well_formed(svg):
    """Check SVG (bytes) with xmllint, then parse it."""
    r = subprocess.run([XMLLINT, "--noout", "-"], input=svg, capture_output=True, timeout=30)
    assert r.returncode == 0, f"xmllint: {r.stderr.decode(errors='replace')[:2000]}"
    return ET.fromstring(svg)


def frames(root):
    """The flame graph's frames: (name, threads from data-n, the threads its title says)."""
    out = []
    for g in root.iter(f"{SVG}g"):
        if g.get("class") != "frame":
            continue
        title = g.find(f"{SVG}title").text
        m = re.search(r"\n(\d+) threads?, [0-9.]+%$", title)
        assert m, title
        out.append((g.get("data-name"), int(g.get("data-n")), int(m.group(1))))
    return out


def classed(root, tag, cls):
    return [g for g in root.iter(f"{SVG}{tag}") if cls in (g.get("class") or "").split()]


# The picture's own script run by Node against a stand-in for the few DOM calls it makes (no browser here): it must
# only read the frames' data attributes and attach listeners. Prints what a click and a search left behind.
DOM_STUB = r"""
const data = JSON.parse(require("fs").readFileSync(0, "utf8"));
class El {
        constructor(attrs) { this.a = Object.assign({}, attrs); this.style = {}; this.on = {}; this.kids = {}; this.textContent = ""; }
        getAttribute(k) { return k in this.a ? String(this.a[k]) : null; }
        setAttribute(k, v) { this.a[k] = String(v); }
        hasAttribute(k) { return k in this.a; }
        addEventListener(t, f) { this.on[t] = f; }
        querySelector(sel) { return this.kids[sel]; }
        querySelectorAll(sel) { return this.kids[sel]; }
}
const frames = data.frames.map(f => { const e = new El(f.g); e.kids.rect = new El(f.rect); e.kids.text = new El({}); return e; });
const root = new El(data.root); root.kids["g.frame"] = frames;
const ids = { "sw-flame": root, "sw-details": new El({}), "sw-reset": new El({}), "sw-matched": new El({}), "sw-search": new El({}) };
const document = { getElementById: id => ids[id] || null };
const window = { prompt: () => data.search };
new Function("document", "window", data.script)(document, window);
if (Object.keys(frames.find(e => e.a["data-name"] === data.click).a).some(k => k.startsWith("on")))
        throw new Error("an inline handler attribute");
frames.find(e => e.a["data-name"] === data.click).on.click();
ids["sw-search"].on.click();
console.log(JSON.stringify({
        frames: frames.map(e => ({ name: e.a["data-name"], x: +e.kids.rect.a.x, width: +e.kids.rect.a.width,
                                   hidden: e.style.display === "none", fill: e.kids.rect.a.fill, label: e.kids.text.textContent })),
        reset: ids["sw-reset"].style.display, matched: ids["sw-matched"].textContent }));
"""


def run_script(svg, root, click, search):
    """The picture's script under DOM_STUB; None without Node."""
    node = shutil.which("node")
    if not node:
        return None
    script = re.search(rb"<!\[CDATA\[(.*)\]\]>", svg, re.S).group(1).decode()
    flame = root.find(f".//{SVG}g[@id='sw-flame']")
    data = {"script": script, "click": click, "search": search, "root": dict(flame.attrib),
            "frames": [{"g": dict(g.attrib), "rect": dict(g.find(f"{SVG}rect").attrib)}
                       for g in classed(root, "g", "frame")]}
    r = subprocess.run([node, "-e", DOM_STUB], input=json.dumps(data).encode(), capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr.decode(errors="replace")[-3000:]
    return json.loads(r.stdout)


def test_threads64_flame_graph(fixture):
    fx, _ = threads64_parked(fixture)
    out = stackctl("dump", "--svg", fx.pid, check_rc=0).stdout
    root = well_formed(out)
    fs = frames(root)
    by_name = {}
    for name, n, titled in fs:
        assert n == titled, (name, n, titled)
        by_name.setdefault(name, []).append(n)
    # Identical prefixes merged from the outermost frame: the common part once with all 64, each bit of the thread's
    # index halving them, and the innermost t64_park once per thread.
    assert by_name["t64_start"] == [64]
    for k in range(1, 7):
        assert by_name[f"t64_common_{k:02d}"] == [64]
        assert by_name[f"t64_k{k}_a"] == [64 >> k] * (1 << (k - 1)), k
        assert by_name[f"t64_k{k}_b"] == [64 >> k] * (1 << (k - 1)), k
    assert by_name["t64_park"] == [1] * 64
    # The bottom bar: every thread in a class (64 workers and main asleep: waiting), the kernel frames above.
    bar = [(g.get("data-name"), int(g.get("data-n"))) for g in classed(root, "g", "frame") if g.get("data-d") == "0"]
    assert sum(n for _, n in bar) == 65 and dict(bar).get("waiting") == 65, bar
    assert any(g.get("data-kind") == "kernel" and "read" in g.get("data-name") for g in classed(root, "g", "frame"))
    # Zoom and search by listeners, not by attributes a strict page would refuse.
    assert out.count(b"<script") == 1 and b"addEventListener" in out and b"onclick" not in out
    # No chain was asked for: none drawn.
    assert root.find(f".//{SVG}g[@id='sw-chain']") is None
    # Click t64_k1_a: it and what is above it fill the width, its ancestors too (dimmed), its sibling is hidden;
    # "Search" for t64_k1_b paints it and counts its 32 of the 65 threads.
    res = run_script(out, root, "t64_k1_a", "t64_k1_b")
    if res is not None:
        got = {}
        for f in res["frames"]:
            got.setdefault(f["name"], []).append(f)
        assert [(f["x"], f["width"], f["hidden"]) for f in got["t64_k1_a"]] == [(10, 1180, False)]
        assert [(f["x"], f["width"], f["hidden"]) for f in got["t64_common_01"]] == [(10, 1180, False)]
        assert [f["hidden"] for f in got["t64_k2_a"]] == [False, True]
        assert [f["width"] for f in got["t64_k2_a"] if not f["hidden"]] == [590]
        assert got["t64_k1_b"][0]["hidden"] and got["t64_k1_b"][0]["fill"] == "rgb(230,0,230)"
        assert got["t64_k1_a"][0]["label"] == "t64_k1_a"
        assert res["reset"] == "" and res["matched"] == "Matched: 49.2%", res["matched"]
    fx.assert_untouched()


def test_deadlock_abba_chain_in_red(fixture):
    fx = fixture("deadlock-abba")

    def parked():
        tids = os.listdir(f"/proc/{fx.pid}/task")
        return len(tids) == 3 and all("futex" in open(f"/proc/{fx.pid}/task/{t}/wchan").read() for t in tids)
    wait_until(parked, what="3 threads in futex")
    names = {n: tid for tid, n in thread_names(fx.pid).items()}
    out = stackctl("dump", "--svg", "--locks", fx.pid, check_rc=0).stdout
    root = well_formed(out)
    chain = root.find(f".//{SVG}g[@id='sw-chain']")
    assert chain is not None
    red_boxes = {int(g.get("data-tid")) for g in classed(chain, "g", "culprit")}
    assert red_boxes == {names["abba-a"], names["abba-b"]}
    for g in classed(chain, "g", "culprit"):
        assert g.find(f"{SVG}rect").get("stroke") == RED
    cycle = classed(chain, "g", "deadlock")
    assert len(cycle) == 2 and all(g.get("data-kind") == "mutex" for g in cycle)
    assert all(g.find(f"{SVG}path").get("stroke") == RED for g in cycle)
    # One of the two waits goes back: an arc (a curve), not a straight arrow.
    assert sum(" C" in g.find(f"{SVG}path").get("d") for g in cycle) == 1
    assert b"DEADLOCK" in out
    # The flame graph below it: both threads in the deadlock are blocked, with the fixture's frames.
    fs = frames(root)
    assert ("ab_a_level_12", 1, 1) in fs and ("ab_b_level_12", 1, 1) in fs
    bar = {g.get("data-name"): int(g.get("data-n")) for g in classed(root, "g", "frame") if g.get("data-d") == "0"}
    assert bar.get("blocked") == 2, bar
    # Each picture alone.
    alone = well_formed(stackctl("dump", "--svg=chain", "--locks", fx.pid, check_rc=0).stdout)
    assert alone.find(f".//{SVG}g[@id='sw-chain']") is not None and alone.find(f".//{SVG}g[@id='sw-flame']") is None
    alone = well_formed(stackctl("dump", "--svg=flame", "--locks", fx.pid, check_rc=0).stdout)
    assert alone.find(f".//{SVG}g[@id='sw-chain']") is None and alone.find(f".//{SVG}g[@id='sw-flame']") is not None
    # Upside down: the classes' bar is the top row.
    ice = stackctl("dump", "--svg=flame", "--icicle", fx.pid, check_rc=0).stdout
    alone = well_formed(ice)
    ys = {g.get("data-d"): float(g.find(f"{SVG}rect").get("y")) for g in classed(alone, "g", "frame")}
    assert b"Icicle graph of deadlock-abba" in ice and ys["0"] == min(ys.values()) and ys["1"] > ys["0"]
    r = stackctl("dump", "--svg=tree", fx.pid, check_rc=2)
    assert b"expected all, flame or chain" in r.stderr
    r = stackctl("dump", "--svg", fx.pid, fx.pid, check_rc=2)
    assert b"one PID" in r.stderr
    fx.assert_untouched()


def test_http_svg_live_and_archived(daemon, fixture):
    d = daemon(RULES)
    evil = fixture("block-read", "--name", HOSTILE).wait_wchan("pipe_read")
    code, headers, body = d.get(f"/stacks/{evil.pid}?format=svg")
    assert code == 200 and headers["Content-Type"] == "image/svg+xml", (code, headers, body[:300])
    root = well_formed(body)
    # The comm is text, never markup: no element came of it, and its characters are references.
    assert b"<img" not in body and b"&lt;img src=x&gt;&amp;&#39;&quot;" in body
    assert not [e for e in root.iter() if e.tag.endswith("img")]
    assert any(g.get("data-name") == f"{HOSTILE} ({evil.pid})" for g in classed(root, "g", "frame"))
    assert any(n.startswith("br_level_") for n, _, _ in frames(root))
    # One picture alone, for a page that lays them out itself; a picture without SVG, or an unknown one, refused.
    code, headers, body = d.get(f"/stacks/{evil.pid}?format=svg&picture=flame")
    assert code == 200 and headers["Content-Type"] == "image/svg+xml"
    assert well_formed(body).find(f".//{SVG}g[@id='sw-chain']") is None
    code, _, body = d.get(f"/stacks/{evil.pid}?format=svg&picture=chain&peers=1")
    root = well_formed(body)
    assert code == 200 and root.find(f".//{SVG}g[@id='sw-flame']") is None
    assert root.find(f".//{SVG}g[@id='sw-chain']") is not None
    for q in ("format=json&picture=flame", "format=svg&picture=tree", "format=png"):
        code, _, body = d.get(f"/stacks/{evil.pid}?{q}")
        assert code == 400, (q, code, body)
    assert b"svg" in d.get(f"/stacks/{evil.pid}?format=png")[2]
    # stackctl asks the daemon the same, and prints the picture as it came.
    out = stackctl("--socket", d.socket, "dump", "--via-daemon", "--svg=flame", evil.pid, check_rc=0).stdout
    root = well_formed(out)
    assert root.find(f".//{SVG}g[@id='sw-flame']") is not None and b"<img" not in out
    # An archived snapshot: the rule's thread is blocked in the bottom bar, over HTTP and from stackctl show.
    fx = fixture("block-read", "--name", "br-svg").wait_wchan("pipe_read")
    listed = wait_until(lambda: d.get_json(f"/snapshots?pid={fx.pid}")["snapshots"], timeout=15,
                        what="a snapshot of br-svg")
    code, headers, body = d.get(f"/snapshots/{listed[0]['id']}?format=svg")
    assert code == 200 and headers["Content-Type"] == "image/svg+xml"
    root = well_formed(body)
    bar = {g.get("data-name"): int(g.get("data-n")) for g in classed(root, "g", "frame") if g.get("data-d") == "0"}
    assert bar.get("blocked") == 1, bar
    shown = stackctl("--archive", d.archive, "show", "--svg=flame", listed[0]["id"], check_rc=0).stdout
    assert well_formed(shown).find(f".//{SVG}g[@id='sw-flame']") is not None
