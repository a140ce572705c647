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

/* 3.11 (checked against 3.11.2 and 3.11.7). Include/internal/pycore_runtime.h (_PyRuntimeState: interpreters.head,
 * ceval.gil, gilstate.tstate_current), Include/internal/pycore_gil.h (_gil_runtime_state: interval, last_holder,
 * locked), Include/internal/pycore_interp.h (PyInterpreterState: next, …, threads.head), Include/cpython/pystate.h
 * (PyThreadState: prev, next, interp, …, cframe, …, thread_id, native_thread_id; _PyCFrame: use_tracing,
 * current_frame), Include/internal/pycore_frame.h (_PyInterpreterFrame: f_func, f_globals, f_builtins, f_locals,
 * f_code, frame_obj, previous, prev_instr, stacktop, is_entry, owner), Include/cpython/code.h (PyCodeObject),
 * Include/cpython/unicodeobject.h (sizeof PyASCIIObject 48, PyCompactUnicodeObject 72), Modules/_threadmodule.c
 * (lockobject, rlockobject). */
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
        .lock_lock = 16,
        .rlock_lock = 16,
        .rlock_owner = 24,
        .rlock_count = 32,
};

static const PyOffsets *const tables[] = {
        &py311,
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
