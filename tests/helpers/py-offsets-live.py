"""Check a table of python-offsets against the interpreter running this script, from the inside.

test_python_offsets.py runs it with each CPython on the machine (3.8 on: keep to their common syntax), the table that
tests/helpers/py-offsets-print printed for that version on stdin ("name value" lines, "none" for no such offset).
Through ctypes it reads its own interpreter's memory where the table says and compares with what Python knows:
the runtime's interpreter and this thread's state, the GIL this thread holds, the running frame and its code
object, strings, bytes, and the lock objects of _thread (whose layout no installed header gives). Prints one line
per check, "ok NAME"; a mismatch raises AssertionError (exit status 1).
"""
import _thread
import ctypes
import dis
import sys
import threading

T = {}
for line in sys.stdin:
    name, value = line.split()
    T[name] = None if value == "none" else (value if name in ("frames", "lines") else int(value))

api = ctypes.pythonapi


def ptr(addr):
    return ctypes.c_void_p.from_address(addr).value or 0


def u64(addr):
    return ctypes.c_uint64.from_address(addr).value


def i32(addr):
    return ctypes.c_int.from_address(addr).value


def u8(addr):
    return ctypes.c_uint8.from_address(addr).value


def ok(what):
    print("ok", what)


def check_runtime():
    runtime = ctypes.addressof(ctypes.c_char.in_dll(api, "_PyRuntime"))
    api.PyThreadState_Get.restype = ctypes.c_void_p
    tstate = api.PyThreadState_Get()
    try:
        interp_get = api.PyInterpreterState_Get
    except AttributeError:
        interp_get = api._PyInterpreterState_Get  # 3.8
    interp_get.restype = ctypes.c_void_p
    interp = interp_get()

    # The one interpreter heads the runtime's list and ends it.
    assert ptr(runtime + T["runtime_interpreters_head"]) == interp
    assert ptr(interp + T["interp_next"]) == 0
    ok("runtime_interpreters_head interp_next")

    # This thread's state is on the interpreter's list, and points back at it. A second thread, waiting, heads the
    # list (new ones go first), so that reaching this one takes tstate_next.
    release = threading.Event()
    other = threading.Thread(target=release.wait)
    other.start()
    try:
        t, seen = ptr(interp + T["interp_threads_head"]), 0
        while t and t != tstate and seen < 100:
            assert ptr(t + T["tstate_interp"]) == interp
            t, seen = ptr(t + T["tstate_next"]), seen + 1
        assert t == tstate and seen >= 1, "this thread's state is not on the list, after the other"
    finally:
        release.set()
        other.join()
    assert ptr(tstate + T["tstate_interp"]) == interp
    ok("interp_threads_head tstate_next tstate_interp")

    assert u64(tstate + T["tstate_thread_id"]) == threading.get_ident()
    ok("tstate_thread_id")
    if T["tstate_native_thread_id"] is not None:
        assert u64(tstate + T["tstate_native_thread_id"]) == threading.get_native_id()
        ok("tstate_native_thread_id")

    # This thread holds the GIL while it reads (ctypes.pythonapi does not release it).
    if T["runtime_gil"] is not None:
        gil = runtime + T["runtime_gil"]
        assert ptr(runtime + T["runtime_tstate_current"]) == tstate
        ok("runtime_tstate_current")
    else:
        assert T["runtime_tstate_current"] is None
        gil = ptr(interp + T["interp_gil"])
    assert i32(gil + T["gil_locked"]) == 1
    assert ptr(gil + T["gil_last_holder"]) == tstate
    ok("runtime_gil interp_gil gil_locked gil_last_holder")
    return tstate


def instruction_at(code, offset):
    """(name, argument) of the instruction at byte OFFSET of CODE, as dis shows it (not specialized)."""
    for ins in dis.get_instructions(code):
        if ins.offset == offset:
            return ins.opname, ins.argval
    return None


def check_frames(tstate):
    # The frame running is this function's only while no other Python function is called: the reads of the
    # current frame are ctypes calls written out, not ptr().
    frame = sys._getframe()
    code = frame.f_code
    caller = frame.f_back
    read = ctypes.c_void_p.from_address
    if T["frames"] == "object":
        f = read(tstate + T["tstate_frame"]).value
        lasti = ctypes.c_int.from_address(f + T["frame_lasti"]).value
        assert f == id(frame)
        assert ptr(f + T["frame_code"]) == id(code)
        assert ptr(f + T["frame_back"]) == id(caller)
        # The instruction running when f_lasti was read is the one that read it: the attribute "value" of the
        # c_int. Bytes up to 3.9, code units in 3.10.
        lasti *= 2 if T["lines"] == "linetable" else 1
        assert instruction_at(code, lasti) == ("LOAD_ATTR", "value"), instruction_at(code, lasti)
        ok("tstate_frame frame_code frame_back frame_lasti")
        # The locals come first in f_localsplus: this function has no arguments, and tstate is the caller's.
        marker = object()
        here = sys._getframe()
        assert code.co_varnames[:2] == ("tstate", "frame"), code.co_varnames
        assert ptr(id(here) + T["frame_localsplus"]) == id(tstate)
        assert ptr(id(here) + T["frame_localsplus"] + 8) == id(here)
        assert id(marker) in [ptr(id(here) + T["frame_localsplus"] + 8 * i) for i in range(len(code.co_varnames))]
        ok("frame_localsplus")
        return
    if T["tstate_cframe"] is not None:
        f = read(read(tstate + T["tstate_cframe"]).value + T["cframe_current_frame"]).value
    else:
        f = read(tstate + T["tstate_frame"]).value
    instr = read(f + T["iframe_instr"]).value
    assert ptr(f + T["iframe_code"]) == id(code)
    assert u8(f + T["iframe_owner"]) == 0  # FRAME_OWNED_BY_THREAD
    prev = ptr(f + T["iframe_previous"])
    assert ptr(prev + T["iframe_code"]) == id(caller.f_code)
    # The instruction running when prev_instr (3.11-3.12) or instr_ptr (3.13) was read is the one that read it, in
    # co_code_adaptive: the attribute "value" of the c_void_p.
    instr -= id(code) + T["code_adaptive"]
    assert instruction_at(code, instr) == ("LOAD_ATTR", "value"), (instr, instruction_at(code, instr))
    assert T["iframe_size"] >= T["iframe_owner"] + 1
    ok("tstate_cframe cframe_current_frame tstate_frame iframe_code iframe_owner iframe_previous iframe_instr")
    # The first frame of an evaluation: is_entry (3.11), or from 3.12 a shim frame the C stack owns (3) ends each.
    owners, entries, f = [], [], prev
    while f and len(owners) < 100:
        owners.append(u8(f + T["iframe_owner"]))
        if T["iframe_is_entry"] is not None:
            entries.append(u8(f + T["iframe_is_entry"]))
        f = ptr(f + T["iframe_previous"])
    if T["iframe_is_entry"] is not None:
        assert entries[-1] == 1 and set(entries) <= {0, 1}, entries
        ok("iframe_is_entry")
    else:
        assert owners[-1] == 3, owners
        ok("iframe_owner of the entry shim")


def never_called():
    return None


def check_code():
    code = check_code.__code__
    c = id(code)
    assert ptr(c + T["code_filename"]) == id(code.co_filename)
    assert ptr(c + T["code_name"]) == id(code.co_name)
    assert i32(c + T["code_firstlineno"]) == code.co_firstlineno
    table = code.co_lnotab if T["lines"] == "lnotab" else code.co_linetable
    assert ptr(c + T["code_linetable"]) == id(table)
    ok("code_filename code_name code_firstlineno code_linetable")
    if T["code_qualname"] is not None:
        assert ptr(c + T["code_qualname"]) == id(code.co_qualname)
        ok("code_qualname")
    if T["code_adaptive"] is not None:
        # Code that never ran is not specialized yet: its adaptive copy is co_code as it is.
        never = never_called.__code__
        assert ctypes.string_at(id(never) + T["code_adaptive"], len(never.co_code)) == never.co_code
        ok("code_adaptive")


def check_objects():
    s = "stack" + "watch" * (len(sys.argv) + 1)
    assert ctypes.string_at(ptr(ptr(id(s) + T["object_type"]) + T["type_name"])) == b"str"
    assert u64(id(s) + T["unicode_length"]) == len(s)
    state = u8(id(s) + T["unicode_state"]) >> T["unicode_state_kind_shift"]
    assert state & 7 == 1 and state & 8 and state & 16, state  # kind 1, compact, ascii
    assert ctypes.string_at(id(s) + T["unicode_ascii_data"], len(s)) == s.encode()
    w = "st\u00e4ck\u20ac" * (len(sys.argv) + 1)
    state = u8(id(w) + T["unicode_state"]) >> T["unicode_state_kind_shift"]
    assert state & 7 == 2 and state & 8 and not state & 16, state  # kind 2, compact, not ascii
    assert ctypes.string_at(id(w) + T["unicode_compact_data"], 2 * len(w)) == w.encode("utf-16-le")
    ok("object_type type_name unicode_length unicode_state unicode_ascii_data unicode_compact_data")
    b = b"stackwatch" * (len(sys.argv) + 1)
    assert u64(id(b) + T["varobject_size"]) == len(b)
    assert ctypes.string_at(id(b) + T["bytes_data"], len(b)) == b
    ok("varobject_size bytes_data")


def check_locks():
    if T["tstate_on_delete_data"] is not None:
        # The thread's tstate lock, which Thread.join() waits on, through the weakref the tstate keeps of it: a
        # PyWeakReference's wr_object follows its object head.
        ctypes.pythonapi.PyThreadState_Get.restype = ctypes.c_void_p
        wr = ptr(ctypes.pythonapi.PyThreadState_Get() + T["tstate_on_delete_data"])
        assert ptr(wr + 16) == id(threading.main_thread()._tstate_lock)
        ok("tstate_on_delete_data")
    # Each lock object's lock is a glibc semaphore (sem_t: its count in the first 32-bit word, the futex a waiter
    # sleeps on): 1 while free, 0 while held.
    lock = _thread.allocate_lock()
    sem = ptr(id(lock) + T["lock_lock"])
    assert sem and ctypes.c_uint32.from_address(sem).value == 1
    lock.acquire()
    assert ctypes.c_uint32.from_address(sem).value == 0
    lock.release()
    assert ctypes.c_uint32.from_address(sem).value == 1
    ok("lock_lock")
    r = _thread.RLock()
    sem = ptr(id(r) + T["rlock_lock"])
    assert sem and ctypes.c_uint32.from_address(sem).value == 1
    assert u64(id(r) + T["rlock_owner"]) == 0 and u64(id(r) + T["rlock_count"]) == 0
    r.acquire()
    r.acquire()
    assert u64(id(r) + T["rlock_owner"]) == threading.get_ident()
    assert u64(id(r) + T["rlock_count"]) == 2
    assert ctypes.c_uint32.from_address(sem).value == 0
    r.release()
    r.release()
    assert u64(id(r) + T["rlock_count"]) == 0
    ok("rlock_lock rlock_owner rlock_count")


def main():
    assert T["version"] >> 16 == sys.hexversion >> 16, (hex(T["version"]), hex(sys.hexversion))
    check_frames(check_runtime())
    check_code()
    check_objects()
    check_locks()


main()
