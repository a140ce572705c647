#!/usr/bin/python3
"""Writes the stackwatch.snapshot/1 documents test-snapshot-svg.c draws (svg-*.json): made up, so that their
goldens name no machine's paths or addresses. Run from this directory when the documents need to change."""
import json

SYSCALLS = {"read": 0, "futex": 202, "wait4": 61, "epoll_wait": 232}


def frame(fn, pc, module=0, file=None, line=None, **kw):
    f = {"pc": hex(pc), "function": fn, "offset": 16, "module": module, "file": file, "line": line,
         "column": None, "inlined": False, "activation": False, "method": "cfi"}
    f.update(kw)
    return f


def runtime(kind, fn, file, line):
    return {"kind": kind, "function": fn, "file": file, "line": line}


def kstack(*names):
    return [{"function": n, "offset": 16 * (i + 1), "size": 256} for i, n in enumerate(names)]


def thread(tid, comm, state, frames, kernel=(), syscall=None):
    sc = {"state": "running"} if syscall is None else {
        "state": "blocked", "nr": SYSCALLS[syscall], "name": syscall, "args": ["0x3", "0x0", "0x0", "0x0", "0x0", "0x0"],
        "sp": "0x7ffc0000", "pc": "0x7f0000001000"}
    return {"tid": tid, "comm": comm, "state": state, "tracer_pid": 0, "utime": 0, "stime": 0,
            "voluntary_ctxt_switches": 1, "nonvoluntary_ctxt_switches": 0, "syscall": sc, "wchan": None,
            "capture": {"method": "passive", "pause_us": 0.0, "stack_bytes": 4096, "unwind_end": "end of stack",
                        "truncated": False, "error": None},
            "kernel_stack": kstack(*kernel), "frames": frames}


def snapshot(pid, comm, exe, threads, modules, trigger=None, wait_chain=None, peers=()):
    return {"schema": "stackwatch.snapshot/1", "timestamp_usec": 1764000000000000, "host": "testhost",
            "process": {"pid": pid, "ppid": 1, "uid": 0, "state": "S", "kernel_thread": False, "comm": comm,
                        "exe": exe, "cmdline": [exe], "cgroup": "/", "unit": None},
            "capture": {"method": "auto", "unwinder": "libdw", "duration_us": 1000, "max_pause_us": 0.0,
                        "symbolize_us": 100, "threads_total": len(threads), "truncated": False, "partial": False,
                        "errors": []},
            "threads": threads, "trigger": trigger, "modules": modules, "wait_chain": wait_chain,
            "peers": list(peers)}


def module(path, start):
    return {"path": path, "build_id": "00" * 20, "start": hex(start), "end": hex(start + 0x100000),
            "bias": hex(start), "debuginfo": True, "missing": False}


def trigger(tid, klass, rule="stuck"):
    return {"rule": rule, "class": klass, "tid": tid, "state": "D", "duration_us": 120000000, "cpu_percent": 0.0,
            "syscall": "read", "syscall_nr": 0, "wchan": "io_schedule", "syscalls_per_sec": 0.0,
            "bytes_per_sec": 0.0, "probe": None}


def edge(pid, tid, comm, syscall, kind, obj, to=None, reason=None, fd=None):
    return {"from": {"pid": pid, "tid": tid, "comm": comm}, "syscall": syscall, "kind": kind, "fd": fd,
            "inode": None, "object": obj, "address": None, "multiplexed": False, "to": to, "peer_fd": None,
            "reason": reason}


def write(name, doc):
    with open(name, "w") as f:
        json.dump(doc, f, indent=None if len(doc["threads"]) > 10 else 1, ensure_ascii=True)
        f.write("\n")


MODS = [module("/usr/bin/crowd", 0x400000), module("/usr/lib/x86_64-linux-gnu/libc.so.6", 0x7f0000000000)]
BASE = [frame("__clone3", 0x7f0000000100, 1, "clone3.S", 81), frame("start_thread", 0x7f0000000200, 1,
                                                                    "pthread_create.c", 442)]


def crowd():
    ts = []
    tid = 4101
    for i in range(24):
        ts.append(thread(tid, "pool", "S", list(reversed(BASE + [
            frame("worker", 0x401000, 0, "crowd.c", 40), frame("wait_job", 0x401100, 0, "crowd.c", 61),
            frame("pthread_cond_wait", 0x7f0000000300, 1, "pthread_cond_wait.c", 618)])),
            kernel=["futex_wait_queue", "futex_wait", "do_futex", "__x64_sys_futex"], syscall="futex"))
        tid += 1
    for i in range(12):
        ts.append(thread(tid, "io", "S", list(reversed(BASE + [
            frame("worker", 0x401000, 0, "crowd.c", 40), frame("handle", 0x401200, 0, "crowd.c", 80),
            frame("read", 0x7f0000000400, 1, "read.c", 26)])),
            kernel=["pipe_read", "vfs_read", "ksys_read"], syscall="read"))
        tid += 1
    for i in range(3):
        ts.append(thread(tid, "flush", "D", list(reversed(BASE + [
            frame("flusher", 0x401300, 0, "crowd.c", 99), frame("fsync", 0x7f0000000500, 1, "fsync.c", 27)])),
            kernel=["io_schedule", "folio_wait_bit", "file_write_and_wait_range", "ext4_sync_file"],
            syscall="read"))
        tid += 1
    ts.append(thread(tid, "spin", "R", list(reversed(BASE + [
        frame("worker", 0x401000, 0, "crowd.c", 40), frame("spin", 0x401400, 0, "crowd.c", 120)]))))
    return snapshot(4100, "crowd", "/usr/bin/crowd", ts, MODS, trigger=trigger(4137, "blocked"))


def deadlock():
    teller = lambda tid, comm, first: thread(tid, comm, "S", list(reversed(BASE + [
        frame("teller", 0x401000, 0, "bank.c", 30), frame("transfer_" + first, 0x401100, 0, "bank.c", 50),
        frame("pthread_mutex_lock", 0x7f0000000300, 1, "pthread_mutex_lock.c", 93)])),
        kernel=["futex_wait", "do_futex"], syscall="futex")
    main = thread(4200, "bank", "S", [frame("read", 0x7f0000000400, 1, "read.c", 26),
                                      frame("main", 0x401500, 0, "bank.c", 90)], syscall="read")
    logger = snapshot(4300, "logger", "/usr/bin/logger",
                      [thread(4300, "logger", "S", [frame("wait4", 0x7f0000000600, 1, "wait4.c", 30),
                                                    frame("main", 0x401000, 0, "logger.c", 12)], syscall="wait4")],
                      [module("/usr/bin/logger", 0x400000), MODS[1]])
    chain = {"tid": None, "depth": 2, "deadlock": True, "cycle": [],
             "lock_cycle": {"pid": 4200, "threads": [4201, 4202]}, "truncated": False, "errors": [],
             "resolve_us": 700, "edges": [
                 edge(4200, 4201, "teller-a", "futex", "mutex", "mutex accounts_b (0x404100) in bank",
                      to={"pid": 4200, "tid": 4202, "comm": "teller-b"}),
                 edge(4200, 4202, "teller-b", "futex", "mutex", "mutex accounts_a (0x404140) in bank",
                      to={"pid": 4200, "tid": 4201, "comm": "teller-a"}),
                 edge(4200, 4200, "bank", "read", "pipe", "pipe 881", to={"pid": 4300, "tid": 4300, "comm": "logger"},
                      fd=5),
                 edge(4300, 4300, "logger", "wait4", "child", "child 4301",
                      reason="the child exited before it was read"),
             ]}
    return snapshot(4200, "bank", "/usr/bin/bank", [main, teller(4201, "teller-a", "a_to_b"),
                                                   teller(4202, "teller-b", "b_to_a")],
                    MODS, wait_chain=chain, peers=[logger])


def pipe_deadlock():
    """Two processes, each reading the pipe only the other writes: a wait on a pipe names the process at its other
    end, not a thread."""
    def reader(pid, comm, fn):
        return thread(pid, comm, "S", [frame("read", 0x7f0000000400, 1, "read.c", 26),
                                       frame(fn, 0x401100, 0, "pipes.c", 40), frame("main", 0x401500, 0, "pipes.c", 90)],
                      kernel=["pipe_read", "vfs_read", "ksys_read"], syscall="read")
    mods = [module("/usr/bin/pipes", 0x400000), MODS[1]]
    child = snapshot(4701, "pipes", "/usr/bin/pipes", [reader(4701, "pipes", "wait_for_parent")], mods)
    chain = {"tid": 4700, "depth": 2, "deadlock": True, "cycle": [4700, 4701], "lock_cycle": None,
             "truncated": False, "errors": [], "resolve_us": 300, "edges": [
                 edge(4700, 4700, "pipes", "read", "pipe", "pipe 9001 (read end)",
                      to={"pid": 4701, "tid": None, "comm": "pipes"}, fd=5),
                 edge(4701, 4701, "pipes", "read", "pipe", "pipe 9000 (read end)",
                      to={"pid": 4700, "tid": None, "comm": "pipes"}, fd=3),
             ]}
    return snapshot(4700, "pipes", "/usr/bin/pipes", [reader(4700, "pipes", "wait_for_child")], mods,
                    trigger=trigger(4700, "blocked"), wait_chain=chain, peers=[child])


def runtimes():
    mods = MODS + [module("/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0", 0x7f1000000000),
                   module("/usr/lib/jvm/java-17-openjdk-amd64/lib/server/libjvm.so", 0x7f2000000000)]
    py = thread(4501, "python3", "S", [
        frame("pthread_cond_timedwait", 0x7f0000000300, 1, "pthread_cond_wait.c", 618),
        frame("take_gil", 0x7f1000000100, 2, "ceval_gil.c", 330),
        runtime("python", "Worker.inner", "/srv/app/app.py", 12),
        runtime("python", "Worker.run", "/srv/app/app.py", 30),
        frame("_PyEval_EvalFrameDefault", 0x7f1000000200, 2, "ceval.c", 5000, interpreter=True),
        frame("Py_RunMain", 0x7f1000000300, 2, "main.c", 680)] + list(reversed(BASE)), syscall="futex")
    go = thread(4502, "gosvc", "S", [
        frame("runtime.futex", 0x402000, 0, "/usr/lib/go/src/runtime/sys_linux_amd64.s", 557, kind="go"),
        frame("runtime.gopark", 0x402100, 0, "/usr/lib/go/src/runtime/proc.go", 363, kind="go"),
        frame("main.(*Server).serve", 0x402200, 0, "/src/svc/server.go", 88, kind="go"),
        frame("runtime.goexit", 0x402300, 0, "/usr/lib/go/src/runtime/asm_amd64.s", 1598, kind="go")],
        syscall="futex")
    java = thread(4503, "java", "S", [
        frame("__futex_abstimed_wait_common", 0x7f0000000700, 1, "futex-internal.c", 57),
        frame("ObjectMonitor::EnterI", 0x7f2000000100, 3, None, None),
        runtime("java", "Hung.takeAthenB", "Hung.java", 25),
        runtime("java", "Hung.run", "Hung.java", 40),
        frame("JavaCalls::call_helper", 0x7f2000000200, 3, None, None)] + list(reversed(BASE)), syscall="futex")
    return snapshot(4500, "polyglot", "/usr/bin/polyglot", [py, go, java], mods)


def hostile():
    evil = "<img src=x onerror=alert(1)>"
    ts = [thread(4601, "\"quoted\" & 'apos'", "S", list(reversed(BASE + [
              frame("<script>alert(1)</script>", 0x401000, 0, "a&b<c>.c", 7),
              frame("esc\u001b[2Jape\nnew\u00a0line\u202etxt.exe", 0x401100, 0, "]]>.c", 8),
              frame("bad\udcffutf8", 0x401200, 0, None, None)])),
              kernel=["<k>&"], syscall="read"),
          thread(4602, evil, "D", list(reversed(BASE)), syscall="read")]
    chain = {"tid": None, "depth": 1, "deadlock": False, "cycle": [], "lock_cycle": None, "truncated": False,
             "errors": ["<b>error</b>"], "resolve_us": 10, "edges": [
                 edge(4600, 4601, "\"quoted\"", "read", "unix-socket", "unix socket </text><script>x</script>",
                      to={"pid": 4600, "tid": 4602, "comm": evil}),
                 edge(4600, 4602, evil, "read", "tcp", "127.0.0.1:1 -> 127.0.0.1:2 & <more>",
                      reason="<reason> & \"quotes\" \u0007bell")]}
    return snapshot(4600, evil, "/tmp/" + evil, ts,
                    [module("/tmp/<evil>&\"mod\".so", 0x400000), MODS[1]], trigger=trigger(4602, "blocked", evil),
                    wait_chain=chain)


write("svg-crowd.json", crowd())
write("svg-deadlock.json", deadlock())
write("svg-pipe-deadlock.json", pipe_deadlock())
write("svg-runtimes.json", runtimes())
write("svg-hostile.json", hostile())
