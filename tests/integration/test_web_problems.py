"""What a user sees of real hangs on the page at "/": Debian's chromium walked through it by tests/browser/steps.js,
against the real stackwatchd (a TCP listener, a read token and a capture token) and real processes in real states
(a thread blocked in read(), a syscall spin, two python3 processes each reading the pipe only the other writes, a
python3 thread waiting for a threading.Lock), under hostile names: every name must show as text."""
import datetime
import json
import os
import re
import subprocess

import pytest

from conftest import BUILDDIR, SRCDIR, wait_until
from test_python_daemon import CULPRIT, culprit  # noqa: F401  (culprit: a fixture)
from test_web import browser_missing

BROWSER_DIR = os.path.join(SRCDIR, "tests", "browser")
READ, CAPTURE = "read-s3cret", "capture-s3cret"
# Process names as their processes set them (the kernel keeps 15 bytes): markup, which the page must show as text.
BLOCKED, SPIN, DEADLOCKED, LOCKED = "<b>x</b>", "<i>spin</i>", "<b>dl</b>", "<i>lk</i>"


def config(tmp_path, rules, extra=""):
    token, read_token = tmp_path / "token", tmp_path / "read-token"
    token.write_text(CAPTURE + "\n")
    read_token.write_text(READ + "\n")
    for f in (token, read_token):
        f.chmod(0o600)
    return f"""
poll_interval: 200ms
archive:
  directory: "@ARCHIVE@"
{extra}
rules:{rules or " []"}
http:
  socket: "@SOCKET@"
  listen: 127.0.0.1:0
  token_file: {token}
  read_token_file: {read_token}
"""


def rule(name, klass, comm, extra="", cooldown="1h"):
    return f"""
  - name: {name}
    class: {klass}
    for: 1s
    comm: {json.dumps(comm)}
    cooldown: {cooldown}
{extra}"""


def browse(d, tmp_path, steps):
    """Walk the page through STEPS (see steps.js); returns each step's result. Fails on a step that could not be
    done, on a script error or a dialog (an injected handler ran)."""
    why = browser_missing()
    if why:
        pytest.skip(why)
    host, port = d.tcp_address()
    out = os.path.join(BUILDDIR, "tests", "browser", "out")  # test output: screenshots
    os.makedirs(out, exist_ok=True)
    cfg = dict(base=f"http://{host}:{port}", out=out, user_data_dir=str(tmp_path / "chromium"), steps=steps)
    r = subprocess.run(["node", os.path.join(BROWSER_DIR, "steps.js"), json.dumps(cfg)], capture_output=True,
                       timeout=180, cwd=BROWSER_DIR)
    assert r.stdout, r.stderr.decode(errors="replace")
    res = json.loads(r.stdout.decode().strip().splitlines()[-1])
    (tmp_path / "browse.json").write_text(json.dumps(res, indent=1))  # all that was seen, for a failure's reader
    assert "error" not in res, res["error"]
    assert res["console_errors"] == [] and res["dialogs"] == [], res
    return res["steps"]


def texts(seen):
    return [e["text"] for e in seen]


def trigger_rows(seen):
    """What fired, as the page's table says it: {"Rule": "…", "Class": "…", …}."""
    return dict(r["cells"] for r in seen["trigger"])


TRIGGER = {"trigger": "#trigger-table tr", "raw": "#trigger-raw pre", "injected": "main img, main b"}


def hook_recording_page_url(tmp_path):
    out = tmp_path / "page-url"
    hook = tmp_path / "record-url"
    hook.write_text(f'#!/bin/sh\nprintf %s "$STACKWATCH_PAGE_URL" > "{out}.tmp" && mv "{out}.tmp" "{out}"\n')
    hook.chmod(0o755)
    return str(hook), out


def test_the_pictures_are_drawn_as_the_daemon_styles_them(daemon, fixture, tmp_path):
    """The pictures' own <style> is inline, which the page's CSP refuses (a console error each, and text drawn at the
    page's size, not the size the daemon measured the boxes and frames for): app.css has their rules."""
    d = daemon(config(tmp_path, rule("web-blocked", "blocked", BLOCKED)))
    fx = fixture("block-read", "--name", BLOCKED)
    sid = wait_until(lambda: d.snapshots("--pid", str(fx.pid)), timeout=20, what="a snapshot")[0]["id"]
    res = browse(d, tmp_path, [
        {"open": f"/#token={READ}&/snapshots/{sid}"}, {"wait": "#flame-picture svg g.frame"},
        {"wait": "#chain-picture svg text.title"},
        {"read": {"titles": ".picture svg text.title", "frames": "#flame-picture svg g.frame text",
                  "styles": ".picture svg style, .picture svg [style]"}}])
    seen = res[3]["read"]
    assert [t["style"]["font_size"] for t in seen["titles"]] == ["16px", "16px"], seen["titles"]
    assert seen["frames"] and {t["style"]["font_size"] for t in seen["frames"]} == {"11px"}
    assert seen["styles"] == []


def test_an_alert_link_with_the_token_added_opens_its_snapshot(daemon, fixture, tmp_path):
    """The link an alert carries (page-link.c: http://HOST:PORT/#/snapshots/ID), with "&token=…" added as the README
    says to, opens that snapshot, not "Now"; the other forms of a token in the address open their routes too."""
    hook, out = hook_recording_page_url(tmp_path)
    d = daemon(config(tmp_path, rule("web-link", "blocked", BLOCKED, f"    actions: [snapshot, hook]\n    hook: "
                                                                      f"[{json.dumps(hook)}]\n")))
    host, port = d.tcp_address()
    fx = fixture("block-read", "--name", BLOCKED)
    link = wait_until(lambda: out.exists() and out.read_text(), timeout=20, what="the hook's page link")
    sid = d.snapshots("--pid", str(fx.pid))[0]["id"]
    assert link == f"http://{host}:{port}/#/snapshots/{sid}"
    path = link[len(f"http://{host}:{port}"):]
    heading = {"h2": "main h2", "injected": "main img, main b"}
    forms = [path + "&token=" + READ, f"/#/snapshots/{sid}?token={READ}", f"/#token={READ}&/snapshots/{sid}"]
    steps = []
    for form in forms:
        steps += [{"open": form}, {"wait": "#why", "text": BLOCKED}, {"read": heading}]
    steps += [{"open": f"/#/snapshots?pid={fx.pid}&token={READ}"}, {"wait": "#snapshots-table a.snap"},
              {"read": {"ids": "#snapshots-table a.snap", "pid": "#filters input[name=pid]"}},
              {"open": f"/#token={READ}"}, {"wait": "#now-table tr.now-thread td.comm", "text": "^<b>x</b>$"},
              {"read": {"h2": "main h2"}}, {"shot": "link-now"}]
    res = browse(d, tmp_path, steps)
    for i, form in enumerate(forms):
        opened = res[3 * i + 2]
        assert texts(opened["read"]["h2"]) == [f"Snapshot {sid}"], (form, opened)
        assert opened["url"] == f"http://{host}:{port}/#/snapshots/{sid}", (form, opened["url"])
        assert opened["token"] == READ and opened["read"]["injected"] == [], opened
    listed = res[len(forms) * 3 + 2]
    assert listed["url"].endswith(f"/#/snapshots?pid={fx.pid}") and listed["token"] == READ
    assert texts(listed["read"]["ids"]) == [sid] and listed["read"]["pid"][0]["attrs"]["value"] == str(fx.pid)
    now = res[-2]
    assert now["url"].endswith("/#/") and texts(now["read"]["h2"]) == ["Now: threads in a problem class"]


def test_what_fired_is_a_table_with_the_raw_json_behind_a_toggle(daemon, fixture, tmp_path):
    d = daemon(config(tmp_path, rule("web-blocked", "blocked", BLOCKED) +
                      rule("web-spin", "syscall-spin", SPIN, "    probe: 50ms\n")))
    blocked = fixture("block-read", "--name", BLOCKED)
    spin = fixture("spin-eagain", "--name", SPIN)
    blocked_id = wait_until(lambda: d.snapshots("--pid", str(blocked.pid)), timeout=20, what="the blocked snapshot")[0]["id"]
    spin_id = wait_until(lambda: d.snapshots("--pid", str(spin.pid)), timeout=20, what="the spin's snapshot")[0]["id"]
    res = browse(d, tmp_path, [
        {"open": f"/#/snapshots/{blocked_id}&token={READ}"}, {"wait": "#trigger-table"}, {"read": TRIGGER},
        {"click": "#trigger-raw summary"}, {"read": {"raw": "#trigger-raw pre"}}, {"shot": "trigger-blocked"},
        {"go": f"/#/snapshots/{spin_id}"}, {"wait": "#trigger-table th", "text": "^Probe$"}, {"read": TRIGGER},
        {"shot": "trigger-spin"}])
    rows = trigger_rows(res[2]["read"])
    trig = d.show(blocked_id)["trigger"]
    assert rows["Rule"] == "web-blocked" and rows["Class"] == "blocked" and rows["State"] == "S", rows
    assert rows["Thread"] == f'{blocked.pid} "{BLOCKED}"' and rows["Syscall"] == "read", rows
    m = re.fullmatch(r"(\d+\.\d) s", rows["For"])
    assert m and float(m.group(1)) >= 1.0 and abs(float(m.group(1)) - trig["duration_us"] / 1e6) < 0.06, rows
    assert "Probe" not in rows  # not probed: no row that says nothing
    # The raw JSON is there, behind its toggle: hidden until asked for, then the trigger as the API has it.
    [raw] = res[2]["read"]["raw"]
    assert not raw["visible"] and json.loads(raw["text"]) == trig
    assert res[4]["read"]["raw"][0]["visible"]
    assert res[2]["read"]["injected"] == []
    spin_rows = trigger_rows(res[8]["read"])
    assert spin_rows["Rule"] == "web-spin" and spin_rows["Class"] == "syscall-spin", spin_rows
    # What the probe saw, as `stackctl show` words it: the call, its result, how often.
    assert re.fullmatch(r"read = -EAGAIN ×\d+ of \d+ syscalls in 50 ms", spin_rows["Probe"]), spin_rows
    assert re.fullmatch(r"\d+/s, 0 bytes/s", spin_rows["Syscall rate"]), spin_rows


def test_a_pipe_deadlock_is_a_cycle_and_shows_both_processes_stacks(daemon, culprit, tmp_path):  # noqa: F811
    d = daemon(config(tmp_path, rule("web-deadlock", "blocked", DEADLOCKED, "    deadlock: true\n")))
    c = culprit(DEADLOCKED, "deadlock")
    parent, child = c.tid("wait_for_child"), c.tid("wait_for_parent")
    snap = wait_until(lambda: d.snapshots(), timeout=30, interval=0.1, what="the deadlock's snapshot")[0]
    # Either process may fire first; the other is its peer.
    root, peer = (parent, child) if snap["pid"] == parent else (child, parent)
    fn = {parent: "wait_for_child", child: "wait_for_parent"}
    res = browse(d, tmp_path, [
        {"open": f"/#/snapshots/{snap['id']}&token={READ}"}, {"wait": "#chain-picture svg g.box"},
        {"wait": ".peer-groups details"},
        {"read": {"boxes": "#chain-picture svg g.box", "edges": "#chain-picture svg g.edge",
                  "process": "h4.process-head", "peer": "h4.peer-head", "groups": "#groups details",
                  "peer_groups": ".peer-groups details", "peer_stacks": ".peer-groups details pre",
                  "trigger": "#trigger-table tr", "injected": "main img, main b",
                  "banner": "#chain-picture svg text.deadlock", "names": "#chain-picture svg g.box text.name"}},
        {"shot": "pipe-deadlock"}])
    seen = res[3]["read"]
    # The wait chain: one box per process, and the two waits between them, both ways and both in red: a cycle.
    assert sorted((int(b["attrs"]["data-pid"]), int(b["attrs"]["data-tid"])) for b in seen["boxes"]) == \
        sorted([(parent, parent), (child, child)]), seen["boxes"]
    assert sorted((e["attrs"]["data-from"], e["attrs"]["data-to"]) for e in seen["edges"]) == \
        sorted([(f"{parent}/{parent}", f"{child}/{child}"), (f"{child}/{child}", f"{parent}/{parent}")])
    assert all("deadlock" in e["attrs"]["class"].split() for e in seen["edges"])
    # Drawn as the daemon styles it (its <style>, refused inline by the CSP, comes from app.css): the banner in
    # bold red, the boxes' names in bold 12 px Verdana, which the boxes are measured for.
    [banner] = seen["banner"]
    assert banner["text"].startswith("DEADLOCK: ") and banner["style"]["fill"] == "rgb(200, 0, 0)" and \
        banner["style"]["font_weight"] == "700", banner
    assert [n["style"]["font_size"] for n in seen["names"]] == ["12px", "12px"] and \
        all(n["text"] == f"{DEADLOCKED} ({n_pid})" for n, n_pid in
            zip(seen["names"], [int(b["attrs"]["data-pid"]) for b in seen["boxes"]])), seen["names"]
    # The stacks of both: the firing process's groups, then the peer's under a heading that names it.
    assert texts(seen["process"]) == [f"Process {root} ({DEADLOCKED})"]
    assert texts(seen["peer"]) == [f"Peer process {peer} ({DEADLOCKED})"]
    assert len(seen["groups"]) == 1 and fn[root] in seen["groups"][0]["text"]
    assert len(seen["peer_groups"]) == 1 and "open" in seen["peer_groups"][0]["attrs"], seen["peer_groups"]
    assert seen["peer_stacks"][0]["visible"]
    assert f"{fn[peer]} ({CULPRIT}:{c.where[fn[peer]][1]})" in seen["peer_stacks"][0]["text"], seen["peer_stacks"]
    # What fired names the Python line the thread waits at.
    assert trigger_rows(seen)["Where"] == c.frame(fn[root])
    assert seen["injected"] == []


def test_now_names_the_python_line_the_daemon_knows(daemon, culprit, tmp_path):  # noqa: F811
    """"Where" in Now is the thread's Python line wherever the daemon has one: from a rule's snapshot (two processes
    in a pipe deadlock), and from a capture made from the page (a thread waiting for a threading.Lock, which records
    no holder: no rule here fires for it)."""
    d = daemon(config(tmp_path, rule("web-deadlock", "blocked", DEADLOCKED, "    deadlock: true\n")))
    dl = culprit(DEADLOCKED, "deadlock")
    lk = culprit(LOCKED, "lock")
    waiter = lk.tid("wait_for_lock")
    wait_until(lambda: d.snapshots(), timeout=30, interval=0.1, what="the deadlock's snapshot")
    row = "#now-table tr.now-thread"
    res = browse(d, tmp_path, [
        {"open": f"/#token={CAPTURE}"}, {"wait": row + " td.comm", "text": "^<i>lk</i>$"},
        {"wait": row + " td.where", "text": re.escape(dl.frame("wait_for_parent"))},
        {"read": {"rows": row}}, {"shot": "now-before-capture"},
        {"go": f"/#/process/{lk.pid}"}, {"click": "#capture"}, {"wait": "#capture-ok"},
        {"read": {"capture": "#capture-result pre"}},
        {"go": "/#/"}, {"wait": row + " td.where", "text": re.escape(lk.frame("wait_for_lock"))},
        {"read": {"rows": row, "injected": "main img, main b"}}, {"shot": "now-after-capture"}])

    def wheres(seen):
        """{tid: what "Where" says} of Now's rows (Class, For, PID, TID, Process, Thread, Unit, Where)."""
        return {int(r["cells"][3]): r["cells"][7] for r in seen["rows"]}
    before, after = wheres(res[3]["read"]), wheres(res[11]["read"])
    # The deadlock's threads: the snapshot the rule took named their lines.
    for f in ("wait_for_child", "wait_for_parent"):
        assert before[dl.tid(f)] == after[dl.tid(f)] == dl.frame(f), (before, after)
    # The lock's waiter: its syscall until the daemon had captured it; its line once the page's capture did.
    assert before[waiter] == "futex()", before
    assert any(f"wait_for_lock ({CULPRIT}:{lk.where['wait_for_lock'][1]})" in p["text"] for p in res[8]["read"]["capture"])
    assert after[waiter] == lk.frame("wait_for_lock"), after
    assert res[11]["read"]["injected"] == []


def fmt_time(usec):
    """A time as the page shows it (fmtTime: UTC, to the second)."""
    return datetime.datetime.fromtimestamp(usec // 1_000_000, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def test_problems_lists_each_recurring_hang_once_newest_first(daemon, fixture, culprit, tmp_path):  # noqa: F811
    """#/problems: each problem (GET /problems) once, newest first, with its count, when it was first and last seen,
    where and in which processes, a count per day, and links to its first and latest snapshot and to the Snapshots
    view of it. Its titles hold the processes' names: markup, shown as text."""
    d = daemon(config(tmp_path, rule("web-blocked", "blocked", BLOCKED) +
                      rule("web-deadlock", "blocked", DEADLOCKED, "    deadlock: true\n", cooldown="2s")))
    # One hang that fires once and stays (open), then one that keeps firing (a count that grows) and ends.
    fx = fixture("block-read", "--name", BLOCKED)
    wait_until(lambda: d.snapshots("--pid", str(fx.pid)), timeout=20, what="the blocked read's snapshot")
    dl = culprit(DEADLOCKED, "deadlock")
    wait_until(lambda: [p for p in d.get_json("/problems")["problems"] if DEADLOCKED in p["title"] and p["count"] >= 3],
               timeout=40, interval=0.2, what="the deadlock fired three times")
    dl.stop()
    wait_until(lambda: not [p for p in d.get_json("/problems")["problems"] if p["open"] and DEADLOCKED in p["title"]],
               timeout=20, interval=0.2, what="the deadlock's problem closed")
    api = d.get_json("/problems")["problems"]
    assert len(api) == 2, api
    newest, oldest = sorted(api, key=lambda p: p["last_usec"], reverse=True)
    assert DEADLOCKED in newest["title"] and not newest["open"] and BLOCKED in oldest["title"] and oldest["open"]
    rows = "#problems-table tr.problem"
    res = browse(d, tmp_path, [
        {"open": f"/#/problems&token={READ}"}, {"wait": rows},
        {"read": {"rows": rows, "links": rows + " td.links a", "titles": rows + " span.title",
                  "injected": "main img, main b, main i"}}, {"shot": "problems"},
        {"click": rows + " a.latest"}, {"wait": "#why"}, {"read": {"h2": "main h2"}},
        {"go": "/#/problems"}, {"wait": rows}, {"click": rows + " a.all"}, {"wait": "#snapshots-table a.snap"},
        {"read": {"ids": "#snapshots-table a.snap", "problems": "#snapshots-table td.problem",
                  "filter": "#filters input[name=signature]", "injected": "main img, main b, main i"}},
        {"shot": "problem-snapshots"}])
    seen = res[2]["read"]
    assert res[2]["url"].endswith("/#/problems")
    assert texts(seen["titles"]) == [newest["title"], oldest["title"]] and seen["injected"] == []
    for row, p in zip(seen["rows"], (newest, oldest)):
        assert row["cells"][:7] == [
            p["title"] + (" open" if p["open"] else ""), str(p["count"]), fmt_time(p["first_usec"]),
            fmt_time(p["last_usec"]), ", ".join(p["hosts"]),
            ", ".join(f"{q['pid']} {q['comm']}" for q in p["processes"]),
            "".join(f"{day}: {n}" for day, n in sorted(p["days"].items()))], (row["cells"], p)
        assert p["hosts"] == [os.uname().nodename]
    assert newest["count"] >= 3 and oldest["count"] == 1
    assert sorted(q["pid"] for q in newest["processes"]) == sorted([dl.tid("wait_for_child"), dl.tid("wait_for_parent")])
    links = [(a["attrs"]["class"], a["attrs"]["href"], a["text"]) for a in seen["links"]]
    assert links == [link for p in (newest, oldest) for link in (
        ("first", f"#/snapshots/{p['first_id']}", "first"), ("latest", f"#/snapshots/{p['latest_id']}", "latest"),
        ("all", f"#/snapshots?signature={p['signature']}", f"all {p['snapshots']} snapshot(s)"))]
    # The newest problem's latest snapshot, and the Snapshots view of it: its snapshots only, named by its title.
    assert texts(res[6]["read"]["h2"]) == [f"Snapshot {newest['latest_id']}"]
    listed = res[11]["read"]
    assert res[11]["url"].endswith(f"/#/snapshots?signature={newest['signature']}")
    snaps = d.get_json(f"/snapshots?signature={newest['signature']}")["snapshots"]
    assert sorted(texts(listed["ids"])) == sorted(s["id"] for s in snaps) and len(snaps) == newest["snapshots"]
    assert texts(listed["problems"]) == [newest["title"]] * len(snaps)
    assert listed["filter"][0]["attrs"]["value"] == newest["signature"] and listed["injected"] == []
