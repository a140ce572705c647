/* python-offsets.c: CPython's layouts per version, written from its headers (each table cites them), and the
 * self-description 3.13 added (_Py_DebugOffsets). */
#include <errno.h>
#include <string.h>

#include "base/macro.h"
#include "capture/python-offsets.h"

/* What every version since 3.8 shares: PyObject_HEAD (ob_refcnt, ob_type), PyVarObject's ob_size, PyTypeObject's
 * tp_name after the PyVarObject head, PyBytesObject's ob_shash then ob_sval (Include/cpython/bytesobject.h), and
 * the unicode state bit field's `interned:2` before `kind:3` (Include/cpython/unicodeobject.h). */
#define PY_OBJECT_COMMON                                                                                        \
        .object_type = 8, .type_name = 24, .varobject_size = 16, .bytes_data = 32, .unicode_length = 16,        \
        .unicode_state = 32, .unicode_state_kind_shift = 2

/* Modules/_threadmodule.c from 3.8 to 3.12: lockobject { PyObject_HEAD; PyThread_type_lock lock_lock; … } and
 * rlockobject { PyObject_HEAD; PyThread_type_lock rlock_lock; unsigned long rlock_owner; unsigned long rlock_count;
 * … }. The file is not installed: test_python_offsets.py checks these in each live interpreter. */
#define PY_THREAD_LOCKS .lock_lock = 16, .rlock_lock = 16, .rlock_owner = 24, .rlock_count = 32

/* 3.8-3.10 have no _PyInterpreterFrame. */
#define PY_NO_IFRAME                                                                                            \
        .iframe_code = PY_OFF_NONE, .iframe_previous = PY_OFF_NONE, .iframe_instr = PY_OFF_NONE,                \
        .iframe_is_entry = PY_OFF_NONE, .iframe_owner = PY_OFF_NONE, .iframe_size = PY_OFF_NONE

/* 3.8 (checked against 3.8.18). Include/internal/pycore_pystate.h (_PyRuntimeState: interpreters.head, ceval.gil
 * after 3.8's runtime-wide pending calls, gilstate.tstate_current; PyInterpreterState, struct _is: next,
 * tstate_head), Include/internal/pycore_gil.h (_gil_runtime_state: interval, last_holder, locked),
 * Include/cpython/pystate.h (PyThreadState: prev, next, interp, frame, …, thread_id), Include/frameobject.h
 * (PyFrameObject: f_back, f_code, …, f_lasti), Include/code.h (PyCodeObject: co_firstlineno, co_filename, co_name,
 * co_lnotab), Include/cpython/unicodeobject.h (PyASCIIObject with wstr: 48, PyCompactUnicodeObject 72),
 * Modules/_threadmodule.c (lockobject, rlockobject: PY_THREAD_LOCKS). */
static const PyOffsets py38 = {
        .version = 0x03080000,
        .frames = PY_FRAMES_OBJECT,
        .lines = PY_LINES_LNOTAB,
        .runtime_interpreters_head = 32,
        .runtime_gil = 1152,
        .runtime_tstate_current = 1368,
        .interp_next = 0,
        .interp_threads_head = 8,
        .interp_gil = PY_OFF_NONE,
        .gil_last_holder = 8,
        .gil_locked = 16,
        .tstate_next = 8,
        .tstate_interp = 16,
        .tstate_frame = 24,
        .tstate_cframe = PY_OFF_NONE,
        .cframe_current_frame = PY_OFF_NONE,
        .tstate_thread_id = 176,
        .tstate_native_thread_id = PY_OFF_NONE,
        .frame_back = 24,
        .frame_code = 32,
        .frame_lasti = 104,
        PY_NO_IFRAME,
        .code_filename = 104,
        .code_name = 112,
        .code_qualname = PY_OFF_NONE,
        .code_firstlineno = 40,
        .code_linetable = 120,
        .code_adaptive = PY_OFF_NONE,
        PY_OBJECT_COMMON,
        .unicode_ascii_data = 48,
        .unicode_compact_data = 72,
        PY_THREAD_LOCKS,
};

/* 3.9 (checked against 3.9.18). Include/internal/pycore_runtime.h (_PyRuntimeState: interpreters.head, ceval.gil,
 * gilstate.tstate_current: the pending calls moved to the interpreter), Include/internal/pycore_interp.h
 * (PyInterpreterState: next, tstate_head), Include/internal/pycore_gil.h, Include/cpython/pystate.h (PyThreadState
 * as in 3.8), Include/cpython/frameobject.h (PyFrameObject as in 3.8), Include/cpython/code.h (PyCodeObject as in
 * 3.8), Include/cpython/unicodeobject.h (48, 72), Modules/_threadmodule.c (PY_THREAD_LOCKS). */
static const PyOffsets py39 = {
        .version = 0x03090000,
        .frames = PY_FRAMES_OBJECT,
        .lines = PY_LINES_LNOTAB,
        .runtime_interpreters_head = 32,
        .runtime_gil = 352,
        .runtime_tstate_current = 568,
        .interp_next = 0,
        .interp_threads_head = 8,
        .interp_gil = PY_OFF_NONE,
        .gil_last_holder = 8,
        .gil_locked = 16,
        .tstate_next = 8,
        .tstate_interp = 16,
        .tstate_frame = 24,
        .tstate_cframe = PY_OFF_NONE,
        .cframe_current_frame = PY_OFF_NONE,
        .tstate_thread_id = 176,
        .tstate_native_thread_id = PY_OFF_NONE,
        .frame_back = 24,
        .frame_code = 32,
        .frame_lasti = 104,
        PY_NO_IFRAME,
        .code_filename = 104,
        .code_name = 112,
        .code_qualname = PY_OFF_NONE,
        .code_firstlineno = 40,
        .code_linetable = 120,
        .code_adaptive = PY_OFF_NONE,
        PY_OBJECT_COMMON,
        .unicode_ascii_data = 48,
        .unicode_compact_data = 72,
        PY_THREAD_LOCKS,
};

/* 3.10 (checked against 3.10.13). Include/internal/pycore_runtime.h (_PyRuntimeState: interpreters.head, ceval.gil
 * without EXPERIMENTAL_ISOLATED_SUBINTERPRETERS, gilstate.tstate_current), Include/internal/pycore_interp.h
 * (PyInterpreterState: next, tstate_head), Include/internal/pycore_gil.h, Include/cpython/pystate.h (PyThreadState:
 * frame; its cframe has no frame yet), Include/cpython/frameobject.h (PyFrameObject: f_back, f_code, f_lasti, an int
 * now counting code units, before f_lineno), Include/cpython/code.h (PyCodeObject: co_linetable where co_lnotab
 * was), Include/cpython/unicodeobject.h (48, 72), Modules/_threadmodule.c (PY_THREAD_LOCKS). */
static const PyOffsets py310 = {
        .version = 0x030a0000,
        .frames = PY_FRAMES_OBJECT,
        .lines = PY_LINES_LINETABLE,
        .runtime_interpreters_head = 32,
        .runtime_gil = 352,
        .runtime_tstate_current = 568,
        .interp_next = 0,
        .interp_threads_head = 8,
        .interp_gil = PY_OFF_NONE,
        .gil_last_holder = 8,
        .gil_locked = 16,
        .tstate_next = 8,
        .tstate_interp = 16,
        .tstate_frame = 24,
        .tstate_cframe = PY_OFF_NONE,
        .cframe_current_frame = PY_OFF_NONE,
        .tstate_thread_id = 176,
        .tstate_native_thread_id = PY_OFF_NONE,
        .frame_back = 24,
        .frame_code = 32,
        .frame_lasti = 96,
        PY_NO_IFRAME,
        .code_filename = 104,
        .code_name = 112,
        .code_qualname = PY_OFF_NONE,
        .code_firstlineno = 40,
        .code_linetable = 120,
        .code_adaptive = PY_OFF_NONE,
        PY_OBJECT_COMMON,
        .unicode_ascii_data = 48,
        .unicode_compact_data = 72,
        PY_THREAD_LOCKS,
};

/* 3.11 (checked against 3.11.2 and 3.11.7). Include/internal/pycore_runtime.h (_PyRuntimeState: interpreters.head,
 * ceval.gil, gilstate.tstate_current), Include/internal/pycore_gil.h (_gil_runtime_state: interval, last_holder,
 * locked), Include/internal/pycore_interp.h (PyInterpreterState: next, …, threads.head), Include/cpython/pystate.h
 * (PyThreadState: prev, next, interp, …, cframe, …, thread_id, native_thread_id; _PyCFrame: use_tracing,
 * current_frame), Include/internal/pycore_frame.h (_PyInterpreterFrame: f_func, f_globals, f_builtins, f_locals,
 * f_code, frame_obj, previous, prev_instr, stacktop, is_entry, owner), Include/cpython/code.h (PyCodeObject),
 * Include/cpython/unicodeobject.h (sizeof PyASCIIObject 48, PyCompactUnicodeObject 72), Modules/_threadmodule.c
 * (lockobject, rlockobject: PY_THREAD_LOCKS). */
static const PyOffsets py311 = {
        .version = 0x030b0000,
        .frames = PY_FRAMES_INTERP,
        .lines = PY_LINES_LOCATIONS,
        .runtime_interpreters_head = 40,
        .runtime_gil = 360,
        .runtime_tstate_current = 576,
        .interp_next = 0,
        .interp_threads_head = 16,
        .interp_gil = PY_OFF_NONE,
        .gil_last_holder = 8,
        .gil_locked = 16,
        .tstate_next = 8,
        .tstate_interp = 16,
        .tstate_frame = PY_OFF_NONE,
        .tstate_cframe = 56,
        .cframe_current_frame = 8,
        .tstate_thread_id = 152,
        .tstate_native_thread_id = 160,
        .frame_back = PY_OFF_NONE,
        .frame_code = PY_OFF_NONE,
        .frame_lasti = PY_OFF_NONE,
        .iframe_code = 32,
        .iframe_previous = 48,
        .iframe_instr = 56,
        .iframe_is_entry = 68,
        .iframe_owner = 69,
        .iframe_size = 72,
        .code_filename = 112,
        .code_name = 120,
        .code_qualname = 128,
        .code_firstlineno = 72,
        .code_linetable = 136,
        .code_adaptive = 184,
        PY_OBJECT_COMMON,
        .unicode_ascii_data = 48,
        .unicode_compact_data = 72,
        PY_THREAD_LOCKS,
};

/* 3.12 (checked against 3.12.1). Include/internal/pycore_runtime.h (_PyRuntimeState: interpreters.head; no GIL and
 * no current thread state in it any more), Include/internal/pycore_interp.h (PyInterpreterState: ceval, next,
 * threads.head), Include/internal/pycore_ceval_state.h (struct _ceval_state: gil, a pointer to the
 * _gil_runtime_state the interpreter uses, its own _gil or the main interpreter's), Include/internal/pycore_gil.h
 * (_gil_runtime_state: interval, last_holder, locked), Include/cpython/pystate.h (PyThreadState: cframe, thread_id,
 * native_thread_id; _PyCFrame: current_frame first), Include/internal/pycore_frame.h (_PyInterpreterFrame: f_code,
 * previous, f_funcobj, f_globals, f_builtins, f_locals, frame_obj, prev_instr, stacktop, return_offset, owner, then
 * localsplus at 72; no is_entry: a C call's entry frame is a shim with owner FRAME_OWNED_BY_CSTACK),
 * Include/cpython/code.h (PyCodeObject), Include/cpython/unicodeobject.h (PyASCIIObject without wstr: 40,
 * PyCompactUnicodeObject 56), Modules/_threadmodule.c (PY_THREAD_LOCKS). */
static const PyOffsets py312 = {
        .version = 0x030c0000,
        .frames = PY_FRAMES_INTERP,
        .lines = PY_LINES_LOCATIONS,
        .runtime_interpreters_head = 40,
        .runtime_gil = PY_OFF_NONE,
        .runtime_tstate_current = PY_OFF_NONE,
        .interp_next = 0,
        .interp_threads_head = 72,
        .interp_gil = 384,
        .gil_last_holder = 8,
        .gil_locked = 16,
        .tstate_next = 8,
        .tstate_interp = 16,
        .tstate_frame = PY_OFF_NONE,
        .tstate_cframe = 56,
        .cframe_current_frame = 0,
        .tstate_thread_id = 136,
        .tstate_native_thread_id = 144,
        .frame_back = PY_OFF_NONE,
        .frame_code = PY_OFF_NONE,
        .frame_lasti = PY_OFF_NONE,
        .iframe_code = 0,
        .iframe_previous = 8,
        .iframe_instr = 56,
        .iframe_is_entry = PY_OFF_NONE,
        .iframe_owner = 70,
        .iframe_size = 72,
        .code_filename = 112,
        .code_name = 120,
        .code_qualname = 128,
        .code_firstlineno = 68,
        .code_linetable = 136,
        .code_adaptive = 192,
        PY_OBJECT_COMMON,
        .unicode_ascii_data = 40,
        .unicode_compact_data = 56,
        PY_THREAD_LOCKS,
};

static const PyOffsets *const tables[] = {
        &py38, &py39, &py310, &py311, &py312,
};

int py_offsets_for_version(uint32_t version, PyOffsets *ret) {
        for (size_t i = 0; i < ELEMENTSOF(tables); i++)
                if ((tables[i]->version >> 16) == (version >> 16)) {
                        *ret = *tables[i];
                        ret->version = version;
                        return 0;
                }
        return -EPROTONOSUPPORT;
}

int py_offsets_from_debug(const uint8_t *buf, size_t len, PyOffsets *ret) {
        if (len < 16 || memcmp(buf, "xdebugpy", 8) != 0)
                return -EBADMSG;
        (void) ret;
        return -EPROTONOSUPPORT;
}
