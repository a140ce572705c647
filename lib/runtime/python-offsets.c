/* python-offsets.c: CPython's layouts per version, written from its headers (each table cites them), and the
 * self-description 3.13 added (_Py_DebugOffsets). */
#include <errno.h>
#include <string.h>

#include "base/macro.h"
#include "runtime/python-offsets.h"

/* What every version since 3.8 shares: PyObject_HEAD (ob_refcnt, ob_type), PyVarObject's ob_size, PyTypeObject's
 * tp_name after the PyVarObject head, PyBytesObject's ob_shash then ob_sval (Include/cpython/bytesobject.h), and
 * the unicode state bit field's `interned:2` before `kind:3` (Include/cpython/unicodeobject.h). */
#define PY_OBJECT_COMMON                                                                                        \
        .object_type = 8, .type_name = 24, .varobject_size = 16, .bytes_data = 32, .unicode_length = 16,        \
        .unicode_state = 32, .unicode_state_kind_shift = 2

/* Modules/_threadmodule.c from 3.8 to 3.13: lockobject { PyObject_HEAD; PyThread_type_lock lock_lock; … } and
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
 * (PyFrameObject: f_back, f_code, …, f_lasti, f_localsplus), Include/code.h (PyCodeObject: co_firstlineno,
 * co_filename, co_name, co_lnotab), Include/cpython/unicodeobject.h (PyASCIIObject with wstr: 48,
 * PyCompactUnicodeObject 72), Modules/_threadmodule.c (lockobject, rlockobject: PY_THREAD_LOCKS). */
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
        .tstate_on_delete_data = 208,
        .frame_back = 24,
        .frame_code = 32,
        .frame_lasti = 104,
        .frame_localsplus = 360,
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
        .tstate_on_delete_data = 208,
        .frame_back = 24,
        .frame_code = 32,
        .frame_lasti = 104,
        .frame_localsplus = 360,
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
        .tstate_on_delete_data = 208,
        .frame_back = 24,
        .frame_code = 32,
        .frame_lasti = 96,
        .frame_localsplus = 352,
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
        .tstate_on_delete_data = 192,
        .frame_back = PY_OFF_NONE,
        .frame_code = PY_OFF_NONE,
        .frame_lasti = PY_OFF_NONE,
        .frame_localsplus = PY_OFF_NONE,
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
        .tstate_on_delete_data = 176,
        .frame_back = PY_OFF_NONE,
        .frame_code = PY_OFF_NONE,
        .frame_lasti = PY_OFF_NONE,
        .frame_localsplus = PY_OFF_NONE,
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

/* 3.13 (checked against 3.13.0), for a process whose _Py_DebugOffsets cannot be read, and for what that table
 * lacks (py_offsets_from_debug()). Include/internal/pycore_runtime.h (_PyRuntimeState: the 584-byte
 * _Py_DebugOffsets first, then interpreters.head), Include/internal/pycore_interp.h (PyInterpreterState: ceval
 * first, with its pending calls, then next, threads.head), Include/internal/pycore_ceval_state.h (ceval.gil),
 * Include/internal/pycore_gil.h (_gil_runtime_state: interval, last_holder, locked), Include/cpython/pystate.h
 * (PyThreadState: current_frame, there is no _PyCFrame any more; thread_id, native_thread_id),
 * Include/internal/pycore_frame.h (_PyInterpreterFrame: f_executable, previous, …, instr_ptr, stacktop,
 * return_offset, owner, localsplus at 72), Include/cpython/code.h (PyCodeObject), Include/cpython/unicodeobject.h
 * (40, 56), Modules/_threadmodule.c (lockobject and rlockobject as before: PY_THREAD_LOCKS; rlock_owner is a
 * PyThread_ident_t now, still 8 bytes; the lock objects hold PyMutexes only from 3.14 on). */
static const PyOffsets py313 = {
        .version = 0x030d0000,
        .frames = PY_FRAMES_INTERP,
        .lines = PY_LINES_LOCATIONS,
        .runtime_interpreters_head = 632,
        .runtime_gil = PY_OFF_NONE,
        .runtime_tstate_current = PY_OFF_NONE,
        .interp_next = 7264,
        .interp_threads_head = 7344,
        .interp_gil = 16,
        .gil_last_holder = 8,
        .gil_locked = 16,
        .tstate_next = 8,
        .tstate_interp = 16,
        .tstate_frame = 72,
        .tstate_cframe = PY_OFF_NONE,
        .cframe_current_frame = PY_OFF_NONE,
        .tstate_thread_id = 152,
        .tstate_native_thread_id = 160,
        .tstate_on_delete_data = PY_OFF_NONE,
        .frame_back = PY_OFF_NONE,
        .frame_code = PY_OFF_NONE,
        .frame_lasti = PY_OFF_NONE,
        .frame_localsplus = PY_OFF_NONE,
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
        .code_adaptive = 200,
        PY_OBJECT_COMMON,
        .unicode_ascii_data = 40,
        .unicode_compact_data = 56,
        PY_THREAD_LOCKS,
};

static const PyOffsets *const tables[] = {
        &py38, &py39, &py310, &py311, &py312, &py313,
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

/* _Py_DebugOffsets as 3.13.0's Include/internal/pycore_runtime.h lays it out: a cookie, then only uint64_t, so
 * there is no padding and the bytes read from the target are this struct as they are. Each group starts with the
 * size of the structure it describes. The table's own size is not in it: a later version that inserts a field
 * (3.14 puts interpreter_state.threads_main after threads_head, interpreter_frame.stackpointer after owner, and new
 * groups in between: Include/internal/pycore_debug_offsets.h) moves everything after it, so a layout is known per
 * minor version, never guessed from the bytes. */
typedef struct DebugOffsets313 {
        char cookie[8];
        uint64_t version;
        uint64_t free_threaded;
        struct {
                uint64_t size, finalizing, interpreters_head;
        } runtime_state;
        struct {
                uint64_t size, id, next, threads_head, gc, imports_modules, sysdict, builtins, ceval_gil,
                        gil_runtime_state, gil_runtime_state_enabled, gil_runtime_state_locked,
                        gil_runtime_state_holder;
        } interpreter_state;
        struct {
                uint64_t size, prev, next, interp, current_frame, thread_id, native_thread_id, datastack_chunk,
                        status;
        } thread_state;
        struct {
                uint64_t size, previous, executable, instr_ptr, localsplus, owner;
        } interpreter_frame;
        struct {
                uint64_t size, filename, name, qualname, linetable, firstlineno, argcount, localsplusnames,
                        localspluskinds, co_code_adaptive;
        } code_object;
        struct {
                uint64_t size, ob_type;
        } pyobject;
        struct {
                uint64_t size, tp_name, tp_repr, tp_flags;
        } type_object;
        struct {
                uint64_t size, ob_item, ob_size;
        } tuple_object, list_object;
        struct {
                uint64_t size, ma_keys, ma_values;
        } dict_object;
        struct {
                uint64_t size, ob_fval;
        } float_object;
        struct {
                uint64_t size, lv_tag, ob_digit;
        } long_object;
        struct {
                uint64_t size, ob_size, ob_sval;
        } bytes_object;
        struct {
                uint64_t size, state, length, asciiobject_size;
        } unicode_object;
        struct {
                uint64_t size, collecting;
        } gc;
} DebugOffsets313;

assert_cc(sizeof(DebugOffsets313) == 584);
assert_cc(PY_DEBUG_OFFSETS_BYTES >= sizeof(DebugOffsets313));

/* No CPython structure comes near this size (3.13's _PyRuntimeState, the largest, is 277 KiB). */
#define DEBUG_STRUCT_MAX (16U << 20)

/* OFFSET of a field of WIDTH bytes in a structure of SIZE bytes, as the table gives both, into RET: the field must
 * lie inside the structure, which keeps a table CPython did not write (or that was not read whole) from sending the
 * reader anywhere, and the offset within 32 bits. */
static int debug_field(uint64_t offset, uint64_t size, uint32_t width, uint32_t *ret) {
        if (size > DEBUG_STRUCT_MAX || offset > size || size - offset < width)
                return -EBADMSG;
        *ret = (uint32_t) offset;
        return 0;
}

#define DEBUG_FIELD(group, field, width, dest)                                                                  \
        { offsetof(DebugOffsets313, group.field), offsetof(DebugOffsets313, group.size), width,                 \
          offsetof(PyOffsets, dest) }

/* Which offset of the table fills which of ours, and how many bytes we read there. */
static const struct DebugField {
        size_t field;           /* in DebugOffsets313: the field's offset */
        size_t size;            /* in DebugOffsets313: the size of the structure it is in */
        uint32_t width;
        size_t dest;            /* in PyOffsets */
} debug_fields_313[] = {
        DEBUG_FIELD(runtime_state, interpreters_head, 8, runtime_interpreters_head),
        DEBUG_FIELD(interpreter_state, next, 8, interp_next),
        DEBUG_FIELD(interpreter_state, threads_head, 8, interp_threads_head),
        DEBUG_FIELD(interpreter_state, ceval_gil, 8, interp_gil),
        DEBUG_FIELD(thread_state, next, 8, tstate_next),
        DEBUG_FIELD(thread_state, interp, 8, tstate_interp),
        DEBUG_FIELD(thread_state, current_frame, 8, tstate_frame),
        DEBUG_FIELD(thread_state, thread_id, 8, tstate_thread_id),
        DEBUG_FIELD(thread_state, native_thread_id, 8, tstate_native_thread_id),
        DEBUG_FIELD(interpreter_frame, executable, 8, iframe_code),
        DEBUG_FIELD(interpreter_frame, previous, 8, iframe_previous),
        DEBUG_FIELD(interpreter_frame, instr_ptr, 8, iframe_instr),
        DEBUG_FIELD(interpreter_frame, owner, 1, iframe_owner),
        /* One read of a frame covers it up to its locals: every field above (checked below). */
        DEBUG_FIELD(interpreter_frame, localsplus, 0, iframe_size),
        DEBUG_FIELD(code_object, filename, 8, code_filename),
        DEBUG_FIELD(code_object, name, 8, code_name),
        DEBUG_FIELD(code_object, qualname, 8, code_qualname),
        DEBUG_FIELD(code_object, firstlineno, 4, code_firstlineno),
        DEBUG_FIELD(code_object, linetable, 8, code_linetable),
        DEBUG_FIELD(code_object, co_code_adaptive, 1, code_adaptive),
        DEBUG_FIELD(pyobject, ob_type, 8, object_type),
        DEBUG_FIELD(type_object, tp_name, 8, type_name),
        /* A bytes object's ob_size is its PyVarObject's. */
        DEBUG_FIELD(bytes_object, ob_size, 8, varobject_size),
        DEBUG_FIELD(bytes_object, ob_sval, 1, bytes_data),
        DEBUG_FIELD(unicode_object, length, 8, unicode_length),
        DEBUG_FIELD(unicode_object, state, 4, unicode_state),
        DEBUG_FIELD(unicode_object, asciiobject_size, 0, unicode_ascii_data),
};

static uint64_t debug_u64(const DebugOffsets313 *d, size_t at) {
        uint64_t v;

        memcpy(&v, (const uint8_t *) d + at, sizeof v);
        return v;
}

static int debug_fill_313(const DebugOffsets313 *d, PyOffsets *ret) {
        PyOffsets o;
        uint32_t gil, locked, holder;
        int r;

        /* What the table lacks is taken from our 3.13 table, which holds for the default build only: a table whose
         * object header or string header has another size describes another build (Py_TRACE_REFS), in which the
         * lock objects and the compact strings' data sit elsewhere too. */
        if (d->pyobject.size != 16 || d->unicode_object.asciiobject_size != py313.unicode_ascii_data)
                return -EPROTONOSUPPORT;

        o = py313;
        o.version = (uint32_t) d->version;
        for (size_t i = 0; i < ELEMENTSOF(debug_fields_313); i++) {
                const struct DebugField *f = &debug_fields_313[i];
                uint32_t v;

                r = debug_field(debug_u64(d, f->field), debug_u64(d, f->size), f->width, &v);
                if (r < 0)
                        return r;
                memcpy((uint8_t *) &o + f->dest, &v, sizeof v);
        }
        if (o.iframe_code + 8 > o.iframe_size || o.iframe_previous + 8 > o.iframe_size ||
            o.iframe_instr + 8 > o.iframe_size || o.iframe_owner + 1 > o.iframe_size)
                return -EBADMSG;

        /* The GIL's fields are given as offsets in the interpreter of its own _gil: what we want is their place in
         * any _gil_runtime_state, as in the one ceval.gil points to (the main interpreter's, for one sharing it). */
        r = debug_field(d->interpreter_state.gil_runtime_state, d->interpreter_state.size, 0, &gil);
        if (r < 0)
                return r;
        r = debug_field(d->interpreter_state.gil_runtime_state_locked, d->interpreter_state.size, 4, &locked);
        if (r < 0)
                return r;
        r = debug_field(d->interpreter_state.gil_runtime_state_holder, d->interpreter_state.size, 8, &holder);
        if (r < 0)
                return r;
        if (locked < gil || holder < gil)
                return -EBADMSG;
        o.gil_locked = locked - gil;
        o.gil_last_holder = holder - gil;

        *ret = o;
        return 0;
}

int py_offsets_from_debug(const uint8_t *buf, size_t len, PyOffsets *ret) {
        DebugOffsets313 d;
        unsigned major, minor;

        /* The header every version's table starts with: cookie, version, free_threaded. */
        if (len < offsetof(DebugOffsets313, runtime_state) || memcmp(buf, "xdebugpy", 8) != 0)
                return -EBADMSG;
        memcpy(&d, buf, offsetof(DebugOffsets313, runtime_state));
        if (d.version > UINT32_MAX)
                return -EBADMSG;
        major = (unsigned) (d.version >> 24) & 0xff;
        minor = (unsigned) (d.version >> 16) & 0xff;
        /* Only 3.13's layout is known. The table was reshaped during 3.13's betas and release candidates (the
         * free-threaded build's fields came in August 2024), so only final releases are trusted to have 3.13.0's
         * layout; 3.14 changed it (see DebugOffsets313). Adding a version means adding its layout here. */
        if (major != 3 || minor != 13 || (d.version & 0xf0) != 0xf0)
                return -EPROTONOSUPPORT;
        /* The free-threaded build has other object headers and frames: not a layout PyOffsets describes. */
        if (d.free_threaded > 1)
                return -EBADMSG;
        if (d.free_threaded)
                return -EPROTONOSUPPORT;
        if (len < sizeof d)
                return -EBADMSG;
        memcpy(&d, buf, sizeof d);
        return debug_fill_313(&d, ret);
}
