"""Alert hooks run by the real stackwatchd for real firings: the environment a hook gets, its timeout, a missing
program, and a process name full of shell metacharacters that must reach the hook as plain data."""
import json
import os

from conftest import wait_until

POLL = 0.2


def config(hook_argv, actions="[snapshot, log, hook]", hooks_extra="", comm="br-hook"):
    argv = ", ".join(json.dumps(a) for a in hook_argv)
    return f"""
poll_interval: {int(POLL * 1000)}ms
archive:
  directory: "@ARCHIVE@"
hooks:
  timeout: 2s
{hooks_extra}
rules:
  - name: hooked
    class: blocked
    for: 1s
    comm: {json.dumps(comm)}
    cooldown: 1h
    actions: {actions}
    hook: [{argv}]
"""


def script(tmp_path, name, body):
    p = tmp_path / name
    p.write_text("#!/bin/sh\n" + body)
    p.chmod(0o755)
    return str(p)


def read_env(path):
    """The NUL-separated environment a hook dumped with `env -0`."""
    with open(path, "rb") as f:
        items = [kv for kv in f.read().split(b"\0") if kv]
    return dict(kv.decode(errors="surrogateescape").split("=", 1) for kv in items)


def test_hook_gets_the_event_in_its_environment(daemon, fixture, tmp_path):
    out = tmp_path / "env.out"
    hook = script(tmp_path, "dump-env", f'env -0 > "{out}.tmp" && mv "{out}.tmp" "{out}"\necho "hook saw $1"\n')
    d = daemon(config([hook, "first arg"]))
    fx = fixture("block-read", "--name", "br-hook").wait_wchan("pipe_read")
    wait_until(out.exists, timeout=15, what="the hook to run")
    env = read_env(out)
    snap = d.snapshots("--pid", str(fx.pid))
    assert len(snap) == 1
    sid = snap[0]["id"]
    assert env["STACKWATCH_RULE"] == "hooked"
    assert env["STACKWATCH_PID"] == str(fx.pid) and env["STACKWATCH_TID"] == str(fx.pid)
    assert env["STACKWATCH_COMM"] == "br-hook" and env["STACKWATCH_CLASS"] == "blocked"
    assert env["STACKWATCH_SNAPSHOT_ID"] == sid
    assert env["STACKWATCH_SNAPSHOT"] == os.path.join(d.archive, sid + ".json.zst")
    assert os.path.isfile(env["STACKWATCH_SNAPSHOT"])
    assert env["STACKWATCH_SUMMARY"].startswith(f"pid {fx.pid} (br-hook) thread {fx.pid} blocked for ")
    assert env["STACKWATCH_SUMMARY"].endswith(" in read")
    assert "STACKWATCH_ERROR" not in env
    assert int(env["STACKWATCH_TIMESTAMP"]) > 1_600_000_000_000_000
    ev = json.loads(env["STACKWATCH_EVENT"])
    assert ev["schema"] == "stackwatch.hook-event/1" and ev["rule"] == "hooked" and ev["pid"] == fx.pid
    assert ev["snapshot_id"] == sid and ev["snapshot"] == env["STACKWATCH_SNAPSHOT"] and ev["error"] is None
    assert ev["page_url"] is None  # no TCP listener: no page to link to
    # Only what stackwatch puts there: not the daemon's environment (NOTIFY_SOCKET, HOME, ...).
    assert set(env) <= {"PATH", "PWD", "STACKWATCH_RULE", "STACKWATCH_PID", "STACKWATCH_TID", "STACKWATCH_COMM",
                        "STACKWATCH_CLASS", "STACKWATCH_SNAPSHOT", "STACKWATCH_SNAPSHOT_ID", "STACKWATCH_SUMMARY",
                        "STACKWATCH_TIMESTAMP", "STACKWATCH_EVENT", "STACKWATCH_STATE", "STACKWATCH_SEVERITY",
                        "STACKWATCH_HOST", "STACKWATCH_EXE", "STACKWATCH_UNIT",
                        "STACKWATCH_DURATION_USEC", "STACKWATCH_SIGNATURE", "STACKWATCH_TITLE",
                        "STACKWATCH_PROBLEM_COUNT"}, sorted(env)
    # The problem it is: the snapshot's signature and title, the first firing of it.
    assert env["STACKWATCH_SIGNATURE"] == snap[0]["signature"] == ev["signature"] and ev["count"] == 1
    assert env["STACKWATCH_TITLE"] == snap[0]["title"] == "br-hook blocked in read ← block-read!br_level_20", env
    assert env["STACKWATCH_PROBLEM_COUNT"] == "1"
    # Who, where and what: the host, the binary, the command line, how long, and the top of the stack.
    assert env["STACKWATCH_STATE"] == "firing" and env["STACKWATCH_SEVERITY"] == "warning"
    assert env["STACKWATCH_HOST"] == os.uname().nodename and ev["host"] == os.uname().nodename
    assert env["STACKWATCH_EXE"].endswith("/tests/fixtures/bin/block-read") and ev["exe"] == env["STACKWATCH_EXE"]
    assert ev["cmdline"][0].endswith("block-read") and ev["cmdline"][1:] == ["--name", "br-hook"]
    assert 1_000_000 <= int(env["STACKWATCH_DURATION_USEC"]) < 30_000_000 and ev["repeat"] is False
    assert ev["since_usec"] < ev["timestamp_usec"] < ev["expires_usec"]
    assert ev["cgroup"] and ev["frames"][0].startswith("#0 ") and any("br_level_20" in f for f in ev["frames"])
    # argv from the config, stdout to the log, the exit status logged, the counters moved.
    wait_until(lambda: "hook saw first arg" in d.log_text() and "succeeded" in d.log_text(),
               what="the hook's output and exit in the log")
    metrics = d.get("/metrics")[2].decode()
    assert "stackwatch_hook_runs_total 1\n" in metrics and "stackwatch_hook_failures_total 0\n" in metrics


def test_hook_links_the_snapshot_page_with_a_tcp_listener(daemon, fixture, tmp_path):
    out = tmp_path / "env.out"
    hook = script(tmp_path, "dump-env", f'env -0 > "{out}.tmp" && mv "{out}.tmp" "{out}"\n')
    token = tmp_path / "token"
    token.write_text("s3cr3t\n")
    token.chmod(0o600)
    d = daemon(config([hook]) + f"http:\n  socket: \"@SOCKET@\"\n  listen: 127.0.0.1:0\n  token_file: {token}\n")
    host, port = d.tcp_address()
    fx = fixture("block-read", "--name", "br-hook").wait_wchan("pipe_read")
    wait_until(out.exists, timeout=15, what="the hook to run")
    env = read_env(out)
    sid = d.snapshots("--pid", str(fx.pid))[0]["id"]
    assert env["STACKWATCH_PAGE_URL"] == f"http://{host}:{port}/#/snapshots/{sid}"
    assert json.loads(env["STACKWATCH_EVENT"])["page_url"] == env["STACKWATCH_PAGE_URL"]


def test_hook_without_snapshot_says_why(daemon, fixture, tmp_path):
    out = tmp_path / "env.out"
    hook = script(tmp_path, "dump-env", f'env -0 > "{out}.tmp" && mv "{out}.tmp" "{out}"\n')
    d = daemon(config([hook], actions="[hook]"))
    fixture("block-read", "--name", "br-hook").wait_wchan("pipe_read")
    wait_until(out.exists, timeout=15, what="the hook to run")
    env = read_env(out)
    assert env["STACKWATCH_ERROR"] == "the rule takes no snapshot"
    assert "STACKWATCH_SNAPSHOT" not in env and "STACKWATCH_SNAPSHOT_ID" not in env
    assert d.snapshots() == []


def test_hanging_hook_is_killed_at_its_timeout(daemon, fixture, tmp_path):
    pidfile = tmp_path / "hook.pid"
    hook = script(tmp_path, "hang", f'echo $$ > "{pidfile}"\nsleep 1000 &\necho $! >> "{pidfile}"\nwait\n')
    d = daemon(config([hook], hooks_extra="  timeout: 500ms\n").replace("  timeout: 2s\n", ""))
    fixture("block-read", "--name", "br-hook").wait_wchan("pipe_read")
    wait_until(lambda: pidfile.exists() and len(pidfile.read_text().split()) == 2, timeout=15,
               what="the hook to start")
    pids = [int(p) for p in pidfile.read_text().split()]
    wait_until(lambda: "timed out" in d.log_text(), timeout=5, what="the timeout")
    # The hook and the child it started are both gone (the whole process group is killed).
    wait_until(lambda: not any(os.path.exists(f"/proc/{p}") for p in pids), timeout=5, what="the hook killed")
    metrics = d.get("/metrics")[2].decode()
    assert "stackwatch_hook_timeouts_total 1\n" in metrics and "stackwatch_hook_failures_total 1\n" in metrics
    d.wait_scans(2)
    assert d.proc.poll() is None


def test_missing_hook_program_is_logged_and_the_daemon_goes_on(daemon, fixture, tmp_path):
    d = daemon(config([str(tmp_path / "no-such-hook")]))
    fx = fixture("block-read", "--name", "br-hook").wait_wchan("pipe_read")
    wait_until(lambda: d.snapshots("--pid", str(fx.pid)), timeout=15, what="the snapshot")
    wait_until(lambda: "no-such-hook" in d.log_text(), timeout=5, what="the hook error in the log")
    line = next(ln for ln in d.log_text().splitlines() if "no-such-hook" in ln)
    assert "hooked" in line and ("No such file" in line or "ENOENT" in line), line
    d.wait_scans(2)
    assert d.get_json("/healthz")["status"] == "ok"


def test_shell_metacharacters_in_a_process_name_reach_the_hook_as_data(daemon, fixture, tmp_path):
    out = tmp_path / "args.out"
    # 15 bytes (TASK_COMM_LEN - 1): a command substitution that creates the canary if a shell ever evaluates it.
    name = "$(touch /tmp/p)"
    canary = "/tmp/p"
    if os.path.exists(canary):
        os.unlink(canary)
    hook = script(tmp_path, "record", f'printf "%s" "$STACKWATCH_COMM" > "{out}.tmp"\nmv "{out}.tmp" "{out}"\n')
    d = daemon(config([hook], comm="$(touch*"))
    fixture("block-read", "--name", name).wait_wchan("pipe_read")
    wait_until(out.exists, timeout=15, what="the hook to run")
    assert out.read_bytes() == name.encode()
    assert not os.path.exists(canary)
    assert d.proc.poll() is None


def test_a_lasting_firing_repeats_and_resolves(daemon, fixture, tmp_path):
    out = tmp_path / "events.out"
    hook = script(tmp_path, "record", f'printf "%s\\n" "$STACKWATCH_EVENT" >> "{out}"\n')
    d = daemon(config([hook], hooks_extra="  repeat_interval: 1s\n"))
    fx = fixture("block-read", "--name", "br-hook").wait_wchan("pipe_read")

    def events():
        return [json.loads(ln) for ln in out.read_text().splitlines()] if out.exists() else []
    evs = wait_until(lambda: (lambda e: e if len(e) >= 2 else None)(events()), timeout=20, interval=0.05,
                     what="the firing and a repeat")
    first, again = evs[0], evs[1]
    assert first["state"] == again["state"] == "firing" and not first["repeat"] and again["repeat"]
    # The repeat says how long it has lasted by now, with the same snapshot; and pushes the expiry further.
    assert again["duration_usec"] >= first["duration_usec"] + 900_000
    assert again["snapshot_id"] == first["snapshot_id"] and again["expires_usec"] > first["expires_usec"]
    m1 = float(first["summary"].split(" for ")[1].split(" s")[0])
    m2 = float(again["summary"].split(" for ")[1].split(" s")[0])
    assert m2 >= m1 + 0.9, (first["summary"], again["summary"])
    fx.kill()
    last = wait_until(lambda: (lambda e: e[-1] if e and e[-1]["state"] == "resolved" else None)(events()),
                      timeout=10, interval=0.05, what="the resolved event")
    assert last["summary"].startswith(f"pid {fx.pid} (br-hook) thread {fx.pid} no longer blocked, after ")
    assert last["expires_usec"] is None and last["timestamp_usec"] >= again["timestamp_usec"]
    metrics = d.get("/metrics")[2].decode()
    assert "stackwatch_alerts_resolved_total 1\n" in metrics and "stackwatch_alerts_active 0\n" in metrics


def test_a_hang_that_resumes_reopens_its_alert_inside_the_cooldown(daemon, fixture, tmp_path):
    """SIGSTOP resolves the alert (the thread is stopped, not blocked); after SIGCONT it is blocked again, and its
    alert opens again once the rule's for: has passed, though the rule's cooldown (1 h) holds back a new snapshot."""
    import signal
    out = tmp_path / "events.out"
    hook = script(tmp_path, "record", f'printf "%s\\n" "$STACKWATCH_EVENT" >> "{out}"\n')
    d = daemon(config([hook]))
    fx = fixture("block-read", "--name", "br-hook").wait_wchan("pipe_read")

    def events():
        return [json.loads(ln) for ln in out.read_text().splitlines()] if out.exists() else []

    def states():
        return [e["state"] for e in events()]
    wait_until(lambda: states() == ["firing"], timeout=20, interval=0.05, what="the firing")
    os.kill(fx.pid, signal.SIGSTOP)
    wait_until(lambda: states() == ["firing", "resolved"], timeout=10, interval=0.05, what="the resolved event")
    os.kill(fx.pid, signal.SIGCONT)
    wait_until(lambda: states() == ["firing", "resolved", "firing"], timeout=10, interval=0.05,
               what="the alert opened again")
    first, _, again = events()
    assert first["snapshot_id"] and again["snapshot_id"] is None
    assert "within the rule's cooldown" in again["error"]
    assert [s["pid"] for s in d.snapshots()] == [fx.pid]
    # And it stays one open alert while the hang lasts: no firing on every scan.
    d.wait_scans(10)
    assert states() == ["firing", "resolved", "firing"]
