"""stackctl dump against real processes in real states: the frames a user must see, and nothing left stopped."""
import json
import os
import re
import shutil
import subprocess
import time

import pytest

from conftest import (DEBUGDIR, SRCDIR, STACKCTL, SYSCALL_INSN_LEN, TIME_SCALE, assert_chain, assert_proven_chain,
                      dump_json, functions, read_stat, stackctl, syscall_name, thread_by_comm, thread_names,
                      threads64_parked, wait_until)
from test_scan_source import bpf_reason, without_bpf_caps

BR_CHAIN = [f"br_level_{i:02d}" for i in range(20, 0, -1)] + ["main"]


def main_thread(doc):
    return next(t for t in doc["threads"] if t["tid"] == doc["process"]["pid"])


def test_blocked_read_passive_full_chain(fixture):
    fx = fixture("block-read").wait_wchan("pipe_read")
    [doc] = dump_json(fx.pid)
    t = main_thread(doc)
    assert t["state"] == "S"
    assert t["capture"]["method"] == "passive"
    assert t["capture"]["pause_us"] == 0
    assert t["syscall"]["state"] == "blocked" and t["syscall"]["name"] == "read"
    i = assert_chain(t, BR_CHAIN)
    # The libc read wrapper is the innermost real frame, right above the chain.
    assert any(n and "read" in n for n in functions(t)[:i])
    # Every fixture frame has its source line, and the lines are distinct.
    lines = []
    for f in t["frames"][i:i + 20]:
        assert f["file"].endswith("block-read.c") and f["line"] > 0, f
        lines.append(f["line"])
    assert len(set(lines)) == 20
    assert t["capture"]["unwind_end"] == "end of stack"
    kfuncs = [k["function"] for k in t["kernel_stack"]]
    assert any("pipe_read" in k for k in kfuncs) and "ksys_read" in kfuncs, kfuncs
    assert "pipe_read" in t["wchan"]
    mods = doc["modules"]
    fixture_mod = mods[t["frames"][i]["module"]]
    assert fixture_mod["path"].endswith("/block-read") and re.fullmatch(r"[0-9a-f]{40}", fixture_mod["build_id"])


def test_busy_loop_ptrace_short_pause(fixture):
    fx = fixture("busy-loop").wait_state("R")
    [doc] = dump_json(fx.pid)
    t = main_thread(doc)
    assert t["capture"]["method"] == "ptrace"
    # On a CPU, it could only be had stopped: the auto method's fall-back, counted.
    assert doc["capture"]["fallback_stops"] == sum(u["capture"]["method"] == "ptrace" for u in doc["threads"]) >= 1
    # A generous bound for a loaded CI machine; bench/dump reports the real numbers.
    assert 0 < t["capture"]["pause_us"] < 20000
    assert functions(t)[0] == "bl_level_16"
    assert_chain(t, [f"bl_level_{i:02d}" for i in range(16, 0, -1)] + ["main"])
    assert t["frames"][0]["activation"] is True


def test_spin_eagain(fixture):
    fx = fixture("spin-eagain").wait_state("R")
    [doc] = dump_json(fx.pid)
    t = main_thread(doc)
    assert t["capture"]["method"] in ("ptrace", "passive")
    assert_chain(t, [f"se_level_{i:02d}" for i in range(16, 0, -1)] + ["main"])


def test_deadlock_abba_both_threads(fixture):
    fx = fixture("deadlock-abba")
    names = wait_until(lambda: {n: tid for tid, n in thread_names(fx.pid).items()} if len(os.listdir(f"/proc/{fx.pid}/task")) == 3 else None,
                       what="three threads")
    for comm in ("abba-a", "abba-b"):
        fx.wait_wchan("futex", tid=names[comm])
    [doc] = dump_json(fx.pid)
    for comm, side in (("abba-a", "a"), ("abba-b", "b")):
        t = thread_by_comm(doc, comm)
        assert t["capture"]["method"] == "passive"
        assert t["syscall"]["name"] == "futex"
        # Chains stop at the fixture's own start routine: libc's start_thread has a name only with libc debuginfo.
        i = assert_chain(t, [f"ab_{side}_level_{k:02d}" for k in range(12, 0, -1)] + [f"abba_{side}_start"])
        assert any(n and "mutex_lock" in n for n in functions(t)[:i]), functions(t)
        assert any("futex" in k["function"] for k in t["kernel_stack"])


def test_dstate_vfork_parent_dumped_while_in_d(fixture):
    fx = fixture("dstate-vfork", "20").wait_state("D")
    start = time.monotonic()
    # Even when ptrace is asked for, a D-state thread is captured passively: ptrace would wait for it to wake.
    for method in ("auto", "ptrace"):
        [doc] = dump_json("--method", method, fx.pid, timeout=10)
        t = main_thread(doc)
        assert t["state"] == "D" and t["capture"]["method"] == "passive"
        assert t["syscall"]["name"] == syscall_name("vfork")
        # On aarch64 vfork's caller is only in the link register, which /proc does not give: proven, not guessed.
        assert_proven_chain(t, [f"dv_level_{i:02d}" for i in range(12, 0, -1)] + ["main"], "vfork")
        # x86-64's kernel has a vfork system call of its own; aarch64's glibc makes it a clone.
        assert any(syscall_name("vfork") in k["function"] for k in t["kernel_stack"]), t["kernel_stack"]
    elapsed = time.monotonic() - start
    assert elapsed < 1.0 * TIME_SCALE, f"two dumps of a D-state process took {elapsed:.3f}s"
    assert read_stat(fx.pid)[1] == "D", "the dump must return while the target is still in D state"


def t64_chain(i):
    ks = [f"t64_k{k}_{'b' if i >> (k - 1) & 1 else 'a'}" for k in range(6, 0, -1)]
    return ["t64_park", *ks] + [f"t64_common_{k:02d}" for k in range(6, 0, -1)] + ["t64_start"]


def test_two_thousand_threads_of_three_stacks_read_as_three_groups(fixture):
    """thread-crowd with 1,599 threads parked in read() and 400 asleep in sleep(), and its main thread in pause():
    the text prints three groups, the largest first, each stack once with its TIDs; the JSON lists the same
    groups; --no-group prints all 2,000 threads."""
    fx = fixture("thread-crowd", "--sleeping", "400", "1599", "0", ready=False).wait_line(timeout=60)
    # The default capture budget (10 s) is for a native machine; an emulated one (TIME_SCALE) gets it stretched.
    budget = ("--time-budget", str(round(10000 * TIME_SCALE)))
    text = stackctl("dump", "--no-kernel", *budget, fx.pid, check_rc=0, timeout=120 * TIME_SCALE).stdout.decode()
    heads = [ln for ln in text.splitlines() if ln.startswith("TID ") or " threads (TIDs " in ln]
    assert len(heads) == 3, heads
    assert heads[0].startswith('1599 threads (TIDs ') and '"thread-crowd" S (sleeping) in read [passive]' in heads[0]
    assert heads[1].startswith('400 threads (TIDs ') and " in clock_nanosleep " in heads[1] + " ", heads[1]
    assert heads[2].startswith(f"TID {fx.pid}: ") and f" in {syscall_name('pause')}(" in heads[2], heads[2]
    assert text.count("crowd_park+") == 1 and text.count("crowd_nap+") == 1, text[:3000]
    [doc] = dump_json("--no-kernel", *budget, fx.pid, timeout=120 * TIME_SCALE)
    groups = doc["thread_groups"]
    assert [g["count"] for g in groups] == [1599, 400, 1], [g["count"] for g in groups]
    assert sorted(t for g in groups for t in g["tids"]) == sorted(t["tid"] for t in doc["threads"])
    parked = {t["tid"] for t in doc["threads"] if "crowd_park" in functions(t)}
    assert set(groups[0]["tids"]) == parked
    flat = stackctl("dump", "--no-kernel", "--no-group", *budget, fx.pid, check_rc=0,
                    timeout=120 * TIME_SCALE).stdout.decode()
    assert sum(1 for ln in flat.splitlines() if ln.startswith("TID ")) == 2000
    assert " threads (TIDs " not in flat


def test_threads64_every_thread_its_own_chain(fixture):
    fx, _ = threads64_parked(fixture)
    [doc] = dump_json(fx.pid)
    assert len(doc["threads"]) == 65 and doc["capture"]["threads_total"] == 65
    for i in range(64):
        t = thread_by_comm(doc, f"t{i:02d}")
        assert t["capture"]["method"] == "passive" and t["capture"]["pause_us"] == 0
        assert_chain(t, t64_chain(i))
    assert doc["capture"]["max_pause_us"] == 0 and doc["capture"]["fallback_stops"] == 0


def all_threads_in(fx, wchan, n):
    def ok():
        tids = os.listdir(f"/proc/{fx.pid}/task")
        return len(tids) == n and all(wchan in open(f"/proc/{fx.pid}/task/{t}/wchan").read() for t in tids)
    wait_until(ok, what=f"{n} threads in {wchan}")


@pytest.mark.parametrize("name,setup", [
    ("block-read", lambda fx: fx.wait_wchan("pipe_read")),
    ("deadlock-abba", lambda fx: all_threads_in(fx, "futex", 3)),
    ("threads64", lambda fx: wait_until(lambda: all("pipe_read" in open(f"/proc/{fx.pid}/task/{t}/wchan").read()
                                                    for t in os.listdir(f"/proc/{fx.pid}/task") if int(t) != fx.pid),
                                        what="all workers in read")),
])
def test_passive_and_ptrace_give_the_same_frames(fixture, name, setup):
    fx = fixture(name)
    setup(fx)
    [passive] = dump_json("--method", "passive", fx.pid)
    [ptraced] = dump_json("--method", "ptrace", fx.pid)
    assert len(passive["threads"]) == len(ptraced["threads"])
    # Stops asked for are no fall-back.
    assert passive["capture"]["fallback_stops"] == ptraced["capture"]["fallback_stops"] == 0
    for tp, tq in zip(passive["threads"], ptraced["threads"]):
        assert tp["tid"] == tq["tid"]
        assert tp["capture"]["method"] == "passive" and tq["capture"]["method"] == "ptrace"
        assert functions(tp) == functions(tq), tp["tid"]
        # Return addresses agree exactly; frame #0 may differ by the syscall restart rewind: the length of the
        # system call instruction (2 bytes on x86-64, 4 on aarch64).
        assert [f["pc"] for f in tp["frames"][1:]] == [f["pc"] for f in tq["frames"][1:]]
        assert abs(int(tp["frames"][0]["pc"], 16) - int(tq["frames"][0]["pc"], 16)) in (0, SYSCALL_INSN_LEN)


def marker_line(source, marker):
    with open(os.path.join(SRCDIR, "tests", "fixtures", source)) as f:
        return next(i for i, ln in enumerate(f, 1) if marker in ln)


def test_inlined_frames_with_call_sites(fixture):
    fx = fixture("inline-read").wait_wchan("pipe_read")
    [doc] = dump_json(fx.pid)
    t = main_thread(doc)
    i = assert_chain(t, ["il_inline_b", "il_inline_a", "il_outer", "main"])
    b, a, outer, main = t["frames"][i:i + 4]
    assert b["inlined"] and a["inlined"] and not outer["inlined"] and not main["inlined"]
    # One pc for the whole inline group; each frame's line is where that function is: b at the read, a at its
    # call of b, il_outer at its call of a.
    assert b["pc"] == a["pc"] == outer["pc"]
    assert b["line"] == marker_line("inline-read.c", "IL_READ_LINE")
    assert a["line"] == marker_line("inline-read.c", "IL_CALL_B_LINE")
    assert outer["line"] == marker_line("inline-read.c", "IL_CALL_A_LINE")
    assert main["line"] == marker_line("inline-read.c", "IL_CALL_OUTER_LINE")
    text = stackctl("dump", "--no-kernel", fx.pid, check_rc=0).stdout.decode()
    assert re.search(r"^#\d+ +0x[0-9a-f]{16} il_inline_a - \S+/inline-read \(inlined\)$", text, re.M), text


def test_stripped_binary_debuginfo_by_build_id(fixture):
    fx = fixture("block-read-stripped").wait_wchan("pipe_read")
    [bare] = dump_json("--debuginfo-path", "/nonexistent", fx.pid)
    t = main_thread(bare)
    mod = next(m for m in bare["modules"] if m["path"].endswith("block-read-stripped"))
    ours = [f for f in t["frames"] if f["module"] is not None and bare["modules"][f["module"]] is mod]
    assert ours and all(f["function"] is None or f["function"] in ("_start", "main") for f in ours)
    [doc] = dump_json("--debuginfo-path", DEBUGDIR, fx.pid)
    t = main_thread(doc)
    i = assert_chain(t, BR_CHAIN)
    assert all(f["file"].endswith("block-read.c") and f["line"] > 0 for f in t["frames"][i:i + 20])
    mod = next(m for m in doc["modules"] if m["path"].endswith("block-read-stripped"))
    assert mod["debuginfo"] is True
    build_id = mod["build_id"]
    assert os.path.exists(os.path.join(DEBUGDIR, ".build-id", build_id[:2], build_id[2:] + ".debug"))


def mask(text, pid):
    text = re.sub(r"0x[0-9a-f]{16}", "0xADDR", text)
    text = re.sub(r"\(0x[0-9a-f]+, 0x[0-9a-f]+, 0x[0-9a-f]+", "(ARGS", text)
    text = re.sub(r"wchan \S+", "wchan WCHAN", text)
    text = re.sub(r"\+0x[0-9a-f]+ ", "+0xOFF ", text)  # offsets move with the compiler, as addresses do
    text = re.sub(r"(TID|PID) \d+", r"\1 N", text)
    text = re.sub(r"(\s)\S*/(block-read[^\s:]*)", r"\1\2", text)  # paths → basenames
    return text


def test_text_output_golden(fixture):
    """The eu-stack shape people already read: TID line, kernel frames, '#N  0x… fn+off - module', '    file:line'."""
    fx = fixture("block-read").wait_wchan("pipe_read")
    out = stackctl("dump", fx.pid, check_rc=0).stdout.decode()
    lines = out.splitlines()
    # Keep the header, the TID line and the fixture's own frames (libc frames vary with installed debuginfo).
    keep, take_source = [], False
    for ln in lines:
        if ln.startswith(("PID ", "TID ")):
            keep.append(ln)
            take_source = False
        elif ln.startswith("#"):
            take_source = ln.endswith("/block-read")
            if take_source:
                keep.append(ln)
        elif ln.startswith("    ") and take_source:
            keep.append(ln)
    got = mask("\n".join(keep) + "\n", fx.pid)
    golden = os.path.join(SRCDIR, "tests", "golden", "text", "block-read.txt")
    if os.environ.get("STACKWATCH_UPDATE_GOLDEN"):
        with open(golden, "w") as f:
            f.write(got)
    with open(golden) as f:
        assert got == f.read()
    assert any(ln.startswith("  [k] ") and "pipe_read" in ln for ln in lines)


def test_control_characters_escaped(fixture):
    evil = "\x1b[2J;a) b\n"
    fx = fixture("block-read", "--name", evil).wait_wchan("pipe_read")
    r = stackctl("dump", fx.pid, check_rc=0)
    assert b"\x1b" not in r.stdout
    assert b"\\e[2J;a) b\\n" in r.stdout
    folded = stackctl("dump", "--folded", fx.pid, check_rc=0).stdout
    assert b"\x1b" not in folded and folded.count(b"\n") == 1
    assert folded.startswith(b"\\e[2J:a)_b\\n;")
    [doc] = dump_json(fx.pid)
    assert doc["process"]["comm"] == evil  # JSON carries the exact bytes, json-c escapes them


def test_exit_codes():
    gone = subprocess.Popen(["true"])
    gone.wait()
    r = stackctl("dump", gone.pid)
    assert r.returncode == 3 and b"No such process" in r.stderr
    assert stackctl("dump", "abc").returncode == 2
    assert stackctl("dump", "-5").returncode == 2
    assert stackctl("dump").returncode == 2
    assert stackctl("dump", "--all", "1").returncode == 2
    assert stackctl("frobnicate").returncode == 2
    assert stackctl("dump", "--method", "gdb", "1").returncode == 2
    assert stackctl("dump", "--max-frames", "0", "1").returncode == 2
    assert stackctl("dump", "--tid", "1", os.getpid()).returncode == 3


def test_permission_denied_exit_code(fixture):
    fx = fixture("block-read").wait_wchan("pipe_read")
    r = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", STACKCTL, "dump", str(fx.pid)],
                       capture_output=True, timeout=30)
    assert r.returncode == 4, r
    assert b"Permission denied" in r.stderr


def test_tid_selects_one_thread(fixture):
    fx = fixture("deadlock-abba")
    wait_until(lambda: "abba-b" in thread_names(fx.pid).values(), what="abba-b")
    tid = next(t for t, n in thread_names(fx.pid).items() if n == "abba-b")
    fx.wait_wchan("futex", tid=tid)
    [doc] = dump_json("--tid", tid, fx.pid)
    assert [t["tid"] for t in doc["threads"]] == [tid]


def test_budgets_are_recorded(fixture):
    fx = fixture("block-read").wait_wchan("pipe_read")
    [doc] = dump_json("--max-frames", "5", fx.pid, check_rc=5)
    t = main_thread(doc)
    assert len(t["frames"]) == 5 and t["capture"]["truncated"] and "max frames" in t["capture"]["unwind_end"]
    assert doc["capture"]["truncated"]
    # A stack longer than its copy: a thread parked in the same place before, during and after its unwind, which
    # read on from the process to its outermost frame, lost nothing (Ruby keeps megabytes there); a running thread
    # stopped for its copy may have moved on since, and is partial.
    [doc] = dump_json("--stack-bytes", "256", fx.pid, check_rc=0)
    t = main_thread(doc)
    assert t["capture"]["stack_bytes"] == 256 and not t["capture"]["truncated"], t["capture"]
    assert [f["function"] for f in t["frames"]][-4:] == ["main", "__libc_start_call_main",
                                                        "__libc_start_main@@GLIBC_2.34", "_start"], t["frames"]
    spin = fixture("busy-loop").wait_state("R")
    [doc] = dump_json("--stack-bytes", "256", spin.pid, check_rc=5)
    t = main_thread(doc)
    assert t["capture"]["stack_bytes"] == 256 and t["capture"]["truncated"]
    text = stackctl("dump", "--max-frames", "5", fx.pid, check_rc=5).stdout.decode()
    assert "(truncated by a capture budget)" in text


def test_unwinders_agree(fixture):
    fx = fixture("block-read").wait_wchan("pipe_read")
    [dw] = dump_json("--unwinder", "libdw", fx.pid)
    r = stackctl("dump", "--json", "--unwinder", "libunwind", fx.pid)
    if r.returncode == 2 and b"built without" in r.stderr:
        pytest.skip("built without libunwind")
    import json
    lu = json.loads(r.stdout)
    assert functions(main_thread(lu)) == functions(main_thread(dw))
    [fp] = dump_json("--unwinder", "fp", fx.pid)
    frames = main_thread(fp)["frames"]
    assert frames[0]["method"] == "initial"
    # -fomit-frame-pointer and no RBP in a passive capture: everything past #0 is a marked guess.
    assert frames[1:] and all(f["method"] in ("fp", "scan") for f in frames[1:])


def test_traced_thread_stopped_by_another_tracer(fixture):
    fx = fixture("block-read").wait_wchan("pipe_read")
    holder = fixture("hold-trace", str(fx.pid), "--stop")
    fx.wait_state("t")
    [doc] = dump_json(fx.pid)
    t = main_thread(doc)
    assert t["tracer_pid"] == holder.pid
    assert t["capture"]["method"] == "passive"
    assert_chain(t, BR_CHAIN)
    assert f"traced by {holder.pid}" in stackctl("dump", fx.pid, check_rc=0).stdout.decode()
    holder.proc.stdin.close()
    assert holder.proc.wait(timeout=5) == 0
    fx.wait_state("S")


def test_running_thread_traced_by_another_tracer(fixture):
    fx = fixture("busy-loop").wait_state("R")
    holder = fixture("hold-trace", str(fx.pid))
    wait_until(lambda: open(f"/proc/{fx.pid}/status").read().count(f"TracerPid:\t{holder.pid}"), what="tracer")
    [doc] = dump_json(fx.pid, check_rc=5)
    t = main_thread(doc)
    assert t["capture"]["method"] == "none"
    assert f"already traced by pid {holder.pid}" in t["capture"]["error"]
    assert doc["capture"]["partial"]
    holder.proc.stdin.close()
    assert holder.proc.wait(timeout=5) == 0


def test_threads_vanishing_mid_capture(fixture):
    fx = fixture("thread-churn")
    for _ in range(15):
        r = stackctl("dump", "--json", fx.pid)
        assert r.returncode in (0, 5), r.stderr
        import json
        doc = json.loads(r.stdout)
        for t in doc["threads"]:
            assert t["frames"] or t["capture"]["error"] or t["state"] in ("Z", "X") or t["capture"]["method"] == "none"
    assert fx.proc.poll() is None


@pytest.mark.parametrize("after_ms", [1, 5, 20])
def test_process_exiting_mid_capture(fixture, after_ms):
    fx = fixture("thread-churn", "--exit-after", str(after_ms))
    codes = set()
    while fx.proc.poll() is None or not codes:
        r = stackctl("dump", "--json", fx.pid)
        assert r.returncode in (0, 3, 5), r
        codes.add(r.returncode)
        if r.returncode == 3:
            break
    wait_until(lambda: fx.proc.poll() is not None, what="thread-churn exit")
    assert fx.proc.returncode == 0


def test_dump_all_includes_fixture(fixture):
    fx = fixture("block-read").wait_wchan("pipe_read")
    r = stackctl("dump", "--json", "--all", "--no-source", timeout=120)
    # Some sandboxes refuse even root a process (PID 1 here): then the status says so, and the rest is dumped.
    assert r.returncode == 0 or (r.returncode == 4 and b"permission denied" in r.stderr), r.stderr[-500:]
    docs = [json.loads(line) for line in r.stdout.decode().splitlines() if line.strip()]
    by_pid = {d["process"]["pid"]: d for d in docs}
    assert fx.pid in by_pid and os.getpid() in by_pid
    assert_chain(main_thread(by_pid[fx.pid]), BR_CHAIN)
    kthreads = [d for d in docs if d["process"]["kernel_thread"]]
    assert kthreads and all(not t["frames"] for d in kthreads for t in d["threads"])


def test_dump_all_says_when_a_process_could_not_be_read(tmp_path):
    """As an unprivileged user, --all dumps what it may and exits 4 (permission denied), not 0."""
    nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    own = subprocess.Popen([*nobody, "sleep", "300"])
    try:
        wait_until(lambda: (read_stat(own.pid) or (None, None))[1] == "S", what="nobody's sleep asleep")
        r = subprocess.run([*nobody, STACKCTL, "dump", "--all", "--no-source"], capture_output=True, timeout=120)
        assert r.returncode == 4, (r.returncode, r.stderr[-500:])
        assert re.search(rb"\d+ process\(es\) could not be read \(permission denied\); \d+ dumped", r.stderr), r.stderr
        assert f"PID {own.pid} - sleep".encode() in r.stdout
    finally:
        own.kill()
        own.wait()


def test_symbolizer_cache_second_dump_cheaper(fixture):
    a = fixture("block-read").wait_wchan("pipe_read")
    b = fixture("block-read").wait_wchan("pipe_read")
    r = stackctl("--debug", "dump", "--no-kernel", a.pid, b.pid, check_rc=0)
    m = re.search(rb"symbolizer: (\d+) modules cached \((\d+) hits, (\d+) misses\), addresses: (\d+) hits, (\d+) misses", r.stderr)
    assert m, r.stderr
    cached, mod_hits, mod_misses, addr_hits, addr_misses = map(int, m.groups())
    # The second process reuses every module and every address resolved for the first.
    assert mod_hits >= mod_misses > 0
    assert addr_hits >= addr_misses > 0


def test_help_golden():
    r = stackctl("--help", check_rc=0)
    golden = os.path.join(SRCDIR, "tests", "golden", "stackctl-help.txt")
    if os.environ.get("STACKWATCH_UPDATE_GOLDEN"):
        with open(golden, "wb") as f:
            f.write(r.stdout)
    with open(golden, "rb") as f:
        assert r.stdout == f.read()


def test_vdso_frames_are_named(fixture):
    """A thread caught inside the vDSO (clock_gettime) gets named frames in the [vdso] module, unwound through it
    into the fixture's own chain. The innermost vDSO frame may be a helper the vDSO exports no symbol for (under
    kvm-clock, the static vread_pvclock(): shown as ??); the first named one is clock_gettime."""
    fx = fixture("pause-probe")
    spinner = wait_until(lambda: next((t for t, n in thread_names(fx.pid).items() if n == "spinner"), None),
                         what="spinner thread")
    fx.wait_state("R", tid=spinner)

    def caught_in_vdso():
        [doc] = dump_json("--tid", spinner, "--no-kernel", fx.pid)
        t = doc["threads"][0]
        assert_chain(t, [f"pp_level_{k:02d}" for k in range(12, 0, -1)] + ["pp_spinner_start"])
        in_vdso = []
        for f in t["frames"]:
            if f["module"] is None or doc["modules"][f["module"]]["path"] != "[vdso]":
                break
            in_vdso.append(f)
        return in_vdso
    in_vdso = wait_until(caught_in_vdso, timeout=10, interval=0, what="a capture inside the vDSO")
    named = [f["function"] for f in in_vdso if f["function"]]
    assert named and "clock_gettime" in named[0], in_vdso
    fx.proc.stdin.close()


def test_a_stop_the_default_method_falls_back_to_says_why(tmp_path):
    """A frame-pointer caller cannot be unwound from the syscall record alone (it needs rbp). With BPF, the capture
    reads every register the kernel saved for the sleeping thread and stops nothing, in the default method and in
    --method passive alike. Without it, the default method stops the thread once, and its line says so and why (a
    stop the user did not ask for); --method passive does not stop it."""
    if not shutil.which("gcc"):
        pytest.skip("no gcc to build the frame-pointer fixture (the arm64 VM has none)")
    binary = tmp_path / "fp-read"
    subprocess.run(["gcc", "-O2", "-g", "-fno-omit-frame-pointer", "-o", str(binary),
                    os.path.join(SRCDIR, "tests", "fixtures", "fp-read.c")], check=True)
    p = subprocess.Popen([str(binary)], stdout=subprocess.PIPE)
    try:
        assert p.stdout.readline() == b"READY\n"
        wait_until(lambda: "pipe_read" in open(f"/proc/{p.pid}/wchan").read(), what="fp-read in read()")
        if bpf_reason() is None:
            for method in ([], ["--method", "passive"]):
                [doc] = dump_json("--no-kernel", *method, p.pid)
                [t] = doc["threads"]
                assert t["capture"]["method"] == "passive" and t["capture"]["pause_us"] == 0, t["capture"]
                assert "stopped_because" not in t["capture"] and doc["capture"]["fallback_stops"] == 0, doc["capture"]
                assert functions(t)[:3] == ["read", "fp_wait", "main"], functions(t)
        # Without BPF: stopped, and said why (root as a container or a hardened unit often is, ptrace allowed).
        wrapper = without_bpf_caps() if bpf_reason() is None else []
        if wrapper is None:
            return
        r = subprocess.run([*wrapper, STACKCTL, "dump", "--json", "--no-kernel", str(p.pid)], capture_output=True,
                           check=True)
        [t] = json.loads(r.stdout)["threads"]
        assert t["capture"]["method"] == "ptrace", t["capture"]
        assert t["capture"]["stopped_because"].startswith("the passive unwind ended early ("), t["capture"]
        assert functions(t)[:3] == ["read", "fp_wait", "main"], functions(t)
        text = subprocess.run([*wrapper, STACKCTL, "dump", "--no-kernel", str(p.pid)], capture_output=True,
                              check=True).stdout.decode()
        assert re.search(r"\[ptrace, paused [0-9.]+ us: stopped because the passive unwind ended early \(", text), text
        r = subprocess.run([*wrapper, STACKCTL, "dump", "--json", "--no-kernel", "--method", "passive", str(p.pid)],
                           capture_output=True)
        [passive] = json.loads(r.stdout)["threads"]
        assert passive["capture"]["method"] == "passive"
        assert "stopped_because" not in passive["capture"]
    finally:
        p.kill()
        p.wait()


def test_the_daemons_captures_read_every_register_without_a_stop(daemon, tmp_path):
    """The daemon loads the BPF register reader once, before it forks its capture children: a snapshot of the
    frame-pointer fixture, blocked for good on a pipe only it holds, has its whole stack read passively, and the
    daemon's count of fall-back stops stays 0."""
    if not shutil.which("gcc"):
        pytest.skip("no gcc to build the frame-pointer fixture (the arm64 VM has none)")
    why = bpf_reason()
    if why:
        pytest.skip(why)
    binary = tmp_path / "fp-read"
    subprocess.run(["gcc", "-O2", "-g", "-fno-omit-frame-pointer", "-o", str(binary),
                    os.path.join(SRCDIR, "tests", "fixtures", "fp-read.c")], check=True)
    d = daemon("""
poll_interval: 200ms
archive:
  directory: "@ARCHIVE@"
rules:
  - name: fp-blocked
    class: blocked
    for: 1s
    comm: fp-read
    cooldown: 1h
    actions: [snapshot, log]
""")
    p = subprocess.Popen([str(binary)], stdout=subprocess.PIPE)
    try:
        assert p.stdout.readline() == b"READY\n"
        [snap] = wait_until(lambda: d.snapshots("--pid", str(p.pid)), timeout=30, interval=0.2,
                            what="the fixture's snapshot")
        doc = json.loads(stackctl("--archive", d.archive, "show", "--json", snap["id"], check_rc=0).stdout)
        [t] = doc["threads"]
        assert t["capture"]["method"] == "passive" and t["capture"]["pause_us"] == 0, t["capture"]
        assert functions(t)[:3] == ["read", "fp_wait", "main"], functions(t)
        assert doc["capture"]["fallback_stops"] == 0, doc["capture"]
        _, _, body = d.get("/metrics")
        assert "stackwatch_capture_fallback_stops_total 0\n" in body.decode()
    finally:
        p.kill()
        p.wait()
