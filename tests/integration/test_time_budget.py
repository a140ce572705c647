"""--time-budget is a wall-clock bound on the whole capture: a big process on a saturated CPU, and the peers of a
capture, stop at one deadline, what was reached is unwound, and the cut is recorded."""
import os
import time

from conftest import dump_json

# How far past its deadline a capture may end: one thread's step (a stop bounded by what is left, an unwind) on a
# starved CPU.
SLACK_US = 250_000


def crowd(fixture, *args):
    """thread-crowd, READY: every thread started (and with --peer, the child's too)."""
    fx = fixture("thread-crowd", *args, ready=False)
    if "--peer" in args:
        fx.wait_line_prefix(b"PIDS ", timeout=60)
    fx.wait_line(timeout=60)
    return fx


def parked_functions(doc):
    return sum(1 for t in doc["threads"] if any(f["function"] == "crowd_park" for f in t.get("frames") or []))


def test_a_big_process_on_a_saturated_cpu_stops_at_its_budget(fixture):
    """4,000 parked threads and twice as many busy threads as CPUs, and a budget of 8 times what one thread's
    capture costs (opening the modules for symbols included; at least 100 ms): too short to copy every thread
    (20 us to 2 ms a thread, by build and load). The capture ends within the budget (plus one step), says where it
    was cut, and the threads it did copy are unwound, not just listed."""
    busy = 2 * (os.cpu_count() or 2)
    fx = crowd(fixture, "4000", str(busy))
    [one] = dump_json("--no-kernel", "--no-source", "--tid", fx.pid, fx.pid)
    budget_ms = max(100, 8 * one["capture"]["duration_us"] // 1000)
    t0 = time.monotonic()
    [doc] = dump_json("--no-kernel", "--time-budget", budget_ms, fx.pid, check_rc=None, timeout=60)
    wall = time.monotonic() - t0
    cap = doc["capture"]
    assert cap["threads_total"] == 4001 + busy
    assert cap["duration_us"] <= budget_ms * 1000 + SLACK_US, (budget_ms, cap)
    # Part of the budget was kept for unwinding: the threads copied have their stacks.
    assert parked_functions(doc) >= 1, (budget_ms, cap)
    copied = [t for t in doc["threads"] if t["capture"]["method"] != "none"]
    unwound = [t for t in copied if t.get("frames")]
    assert len(unwound) >= len(copied) // 2, (len(unwound), len(copied), budget_ms, cap)
    cut = [e for e in cap["errors"] if e.startswith(f"time budget ({budget_ms} ms) spent")]
    if len(copied) < len(doc["threads"]):
        # Cut short: the snapshot says where, and every thread it did not reach says why.
        assert cap["truncated"] and cut, cap
        skipped = [t for t in doc["threads"] if t not in copied]
        assert all(t["capture"]["truncated"] and "time budget" in t["capture"]["error"] for t in skipped)
    # The dump as a whole (start-up and output included) stays near the budget, where the old bound let a
    # starved symbolizer run on for seconds.
    assert wall < budget_ms / 1000 + 3, wall


def test_peers_share_the_capture_s_deadline(fixture):
    """The peers of a capture get what is left of its budget, not a budget of their own. From one thread of a
    4,000-thread process (--tid, as the daemon does), building the chain reads every thread's wait (80 ms and
    more): it stops at the 50 ms deadline, still follows the thread it starts from (the point of the chain), and
    the process that thread waits on is named as not captured, never captured for another budget."""
    fx = crowd(fixture, "4000", "0", "--peer", "100")
    parked = max(int(t) for t in os.listdir(f"/proc/{fx.pid}/task"))
    budget_ms = 50
    [doc] = dump_json("--no-kernel", "--peers", "1", "--tid", parked, "--time-budget", budget_ms, fx.pid,
                      check_rc=5, timeout=60)
    start = doc["timestamp_usec"]
    chain = doc["wait_chain"]
    assert doc["capture"]["duration_us"] <= budget_ms * 1000 + SLACK_US
    assert chain["resolve_us"] <= budget_ms * 1000 + SLACK_US, chain["resolve_us"]
    assert chain["truncated"] and any(e.startswith("time budget spent: the waits of ") for e in chain["errors"])
    # A peer is captured only while the budget lasts, and stops at the same deadline; one reached too late is
    # named as not captured.
    deadline = start + budget_ms * 1000
    for p in doc.get("peers") or []:
        begun, ended = p["timestamp_usec"], p["timestamp_usec"] + p["capture"]["duration_us"]
        assert begun <= deadline, f"peer {p['process']['pid']} captured from {begun - start} us, past the deadline"
        assert ended <= deadline + SLACK_US, (ended - start, p["capture"])
    captured = {p["process"]["pid"] for p in doc.get("peers") or []}
    peer_pids = {e["to"]["pid"] for e in chain["edges"] if e.get("to") and e["to"]["pid"] not in (None, fx.pid)}
    assert len(peer_pids) == 1, chain
    for pid in peer_pids - captured:
        assert f"peer {pid} and later ones not captured: time budget spent" in chain["errors"], chain


def test_a_later_process_gets_file_and_line_after_a_cut_one(fixture, tmp_path):
    """File:line is skipped only for the capture whose budget ran short, and only for frames first looked up past
    three quarters of it: the next process of the same dump (the same binary, with a budget of its own) gets them
    again for the very frames the first one resolved without. Since captures go in rounds (the first copies for an
    eighth of the budget, then unwinds), the cut one usually has its lines too: the first thread is unwound early;
    only a module whose DWARF loads slower than most of the budget (ASan, a loaded machine) leaves some out."""
    big = crowd(fixture, "4000", "0")
    small = crowd(fixture, "10", "0")
    # A budget the small process's whole dump fits in four times over on this machine now (a loaded machine, or the
    # sanitizer build, is slower), and that the big one's cannot: 4,000 threads take a hundred times longer. Measured
    # with the symbols' cache warm, as the dump below finds them: without one, every dump inflates libc's debuginfo
    # (100 ms here), which made a budget the big process's dump fit in too (191 ms for its 4,001 threads).
    cache = ["--cache-dir", str(tmp_path / "cache")]
    dump_json("--no-kernel", *cache, small.pid, timeout=60)
    [alone] = dump_json("--no-kernel", *cache, small.pid, timeout=60)
    budget_ms = max(100, 4 * alone["capture"]["duration_us"] // 1000)
    cut, whole = dump_json("--no-kernel", *cache, "--time-budget", budget_ms, big.pid, small.pid, check_rc=5,
                           timeout=60)
    assert cut["capture"]["truncated"], cut["capture"]
    assert not any("without file:line" in e for e in whole["capture"]["errors"]), whole["capture"]

    def park_frame(doc):
        t = next(t for t in doc["threads"] if any(f["function"] == "crowd_park" for f in t.get("frames") or []))
        return next(f for f in t["frames"] if f["function"] == "crowd_park")
    before, after = park_frame(cut), park_frame(whole)
    assert before["offset"] == after["offset"]
    assert after["file"].endswith("thread-crowd.c") and after["line"] > 0, after
    if before["file"] is None:
        # First looked up past the cut one's source deadline, which says so: the later process resolved the same
        # frame again, in full (above).
        assert any("resolved without file:line" in e for e in cut["capture"]["errors"]), cut["capture"]
    else:
        assert (before["file"], before["line"]) == (after["file"], after["line"]), (before, after)
