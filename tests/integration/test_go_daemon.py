"""The daemon and a hung Go program (issue 28): when a rule fires on a Go process, its snapshot carries every
goroutine, and the firing's journal record (a real journald) and hook event name the largest group of blocked
goroutines and where they are, in the program's own code. The rule matches this test's own process by comm only."""
import collections
import json
import shutil

from conftest import stackctl, wait_until
from test_go_goroutines import go_builds  # noqa: F401  (a fixture)
from test_journal import FIRED, journal, journald_daemon  # noqa: F401  (journald_daemon is a fixture)
from test_python_daemon import config, unique_comm

IDLE = 300


def recording_hook(tmp_path):
    """A hook that appends its STACKWATCH_EVENT (one JSON line) to a file."""
    out = tmp_path / "events"
    script = tmp_path / "record"
    script.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$STACKWATCH_EVENT\" >> '{out}'\n")
    script.chmod(0o755)
    return str(script), out


def test_a_go_firing_names_its_largest_group_of_goroutines(journald_daemon, fixture, go_builds, tmp_path):
    comm = unique_comm("god")
    hook, out = recording_hook(tmp_path)
    d, jdir = journald_daemon(config(f"""
  - name: go-idle
    class: waiting
    for: 1s
    comm: {json.dumps(comm)}
    cooldown: 1h
    actions: [snapshot, log, hook]
""", hook))
    exe = tmp_path / comm   # the comm is the file's name
    shutil.copy(go_builds.binary("dwarf"), exe)
    fx = fixture(str(exe), "-idle", str(IDLE), "-oracle", str(tmp_path / "oracle.txt"), ready=False)
    fx.wait_line_prefix(b"ready ", timeout=60)
    where = f"{IDLE} goroutines [chan receive] in main.idleWorker (main.go:"

    recs = wait_until(lambda: journal(jdir, f"MESSAGE_ID={FIRED}", f"STACKWATCH_PID={fx.pid}"), timeout=30,
                      interval=0.1, what="the firing's record in the journal")
    rec = recs[0]
    # The largest group: the idle workers, at their own frame (not the runtime's gopark), with its file and line.
    assert rec["STACKWATCH_GOROUTINES"].startswith(where), rec["STACKWATCH_GOROUTINES"]
    assert rec["STACKWATCH_GOROUTINES"].endswith(")"), rec
    first = rec["MESSAGE"].splitlines()[0]
    assert "; " + rec["STACKWATCH_GOROUTINES"] in first, first
    # The problem is where the goroutines are stuck, not where the thread that fired parks in the scheduler.
    assert " ← main.idleWorker" in rec["STACKWATCH_TITLE"] and rec["STACKWATCH_TITLE"].startswith(f"{comm} waiting"), rec

    # The hook's summary says it too.
    ev = wait_until(lambda: [json.loads(ln) for ln in out.read_text().splitlines()] if out.exists() else [],
                    timeout=10, what="the hook's event")[0]
    assert ev["summary"].endswith("; " + rec["STACKWATCH_GOROUTINES"]), ev["summary"]

    # The snapshot has every goroutine, the idle ones in one stack.
    snap = rec["STACKWATCH_SNAPSHOT_ID"]
    doc = d.show(snap)
    assert doc["go"]["version"].startswith("go1.") and doc["go"]["layout"] == "dwarf"
    assert doc["signature"] == rec["STACKWATCH_SIGNATURE"] and " goroutines: main.idleWorker" in doc["proto_signature"]
    assert "runtime." not in doc["proto_signature"], doc["proto_signature"]
    idle = [g for g in doc["goroutines"] if g.get("created_by", {}).get("function") == "main.main"
            and g.get("wait_reason") == "chan receive" and g.get("wait_on", {}).get("kind") == "channel"]
    by_stack = collections.Counter(g["stack"] for g in idle)
    assert max(by_stack.values()) == IDLE, by_stack
    assert len(doc["goroutine_stacks"]) < len(doc["goroutines"]) - IDLE + 2, "the idle goroutines share one stack"
    # Its text shows the group as Go users read it.
    r = stackctl("--archive", d.archive, "show", snap)
    assert f"\n{IDLE} goroutines [chan receive]: " in r.stdout.decode(), r.stdout.decode()[-3000:]

