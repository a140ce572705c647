/* python-offsets.h: where CPython keeps what a reader from outside needs, per version: the runtime's interpreters,
 * their thread states, frames, code objects and strings, the GIL, and the lock objects of _thread. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* An offset this version does not have. */
#define PY_OFF_NONE UINT32_MAX

/* How a thread's frames are chained. */
typedef enum PyFrameLayout {
        PY_FRAMES_OBJECT,       /* 3.8-3.10: PyFrameObject, f_back; one _PyEval_EvalFrameDefault call each */
        PY_FRAMES_INTERP,       /* 3.11+: _PyInterpreterFrame, previous; one eval call runs several of them */
} PyFrameLayout;

/* How a code object maps an instruction to a line. */
typedef enum PyLineTable {
        PY_LINES_LNOTAB,        /* 3.8-3.9 co_lnotab: (byte offset delta, line delta) pairs */
        PY_LINES_LINETABLE,     /* 3.10 co_linetable: (byte range delta, line delta) pairs, -128 no line */
        PY_LINES_LOCATIONS,     /* 3.11+ co_linetable: the location table (Objects/locations.md) */
} PyLineTable;

/* Offsets in bytes from the start of each structure (x86-64, the default build, no free threading). */
typedef struct PyOffsets {
        uint32_t version;               /* PY_VERSION_HEX these were chosen for (0x030b02f0 …) */
        PyFrameLayout frames;
        PyLineTable lines;

        /* _PyRuntimeState */
        uint32_t runtime_interpreters_head;
        uint32_t runtime_gil;           /* the _gil_runtime_state inside the runtime (≤3.11), else NONE */
        uint32_t runtime_tstate_current; /* gilstate.tstate_current (≤3.11), else NONE */

        /* PyInterpreterState */
        uint32_t interp_next;
        uint32_t interp_threads_head;
        uint32_t interp_gil;            /* pointer to the interpreter's _gil_runtime_state (3.12+), else NONE */

        /* struct _gil_runtime_state */
        uint32_t gil_last_holder;       /* PyThreadState * */
        uint32_t gil_locked;            /* int */

        /* PyThreadState */
        uint32_t tstate_next;
        uint32_t tstate_interp;
        uint32_t tstate_frame;          /* PyFrameObject * (≤3.10) or _PyInterpreterFrame * (3.13+), else NONE */
        uint32_t tstate_cframe;         /* _PyCFrame * (3.11-3.12), else NONE */
        uint32_t cframe_current_frame;  /* in _PyCFrame */
        uint32_t tstate_thread_id;      /* unsigned long: the pthread_t (threading.get_ident()) */
        uint32_t tstate_native_thread_id; /* the TID (3.11+), else NONE: found through the pthread */
        uint32_t tstate_on_delete_data; /* void *: a weakref to the thread's tstate lock (_thread._set_sentinel(),
                                         * which Thread.join() waits on) in 3.8-3.12, else NONE */

        /* PyFrameObject (≤3.10) */
        uint32_t frame_back;
        uint32_t frame_code;
        uint32_t frame_lasti;           /* int: bytes (≤3.9) or code units (3.10) into co_code */
        uint32_t frame_localsplus;      /* PyObject *f_localsplus[]: the locals, then the value stack */

        /* _PyInterpreterFrame (3.11+) */
        uint32_t iframe_code;           /* f_code, f_executable (3.13) */
        uint32_t iframe_previous;
        uint32_t iframe_instr;          /* prev_instr (3.11-3.12: the instruction running), instr_ptr (3.13+) */
        uint32_t iframe_is_entry;       /* char (3.11), else NONE */
        uint32_t iframe_owner;          /* char */
        uint32_t iframe_size;           /* bytes to read of one frame */

        /* PyCodeObject */
        uint32_t code_filename;
        uint32_t code_name;
        uint32_t code_qualname;         /* 3.11+, else NONE (then the name) */
        uint32_t code_firstlineno;      /* int */
        uint32_t code_linetable;        /* bytes: co_lnotab (≤3.9) or co_linetable */
        uint32_t code_adaptive;         /* co_code_adaptive, inline (3.11+), else NONE */

        /* objects */
        uint32_t object_type;           /* ob_type */
        uint32_t type_name;             /* tp_name, a C string */
        uint32_t varobject_size;        /* ob_size */
        uint32_t bytes_data;            /* ob_sval */
        uint32_t unicode_length;
        uint32_t unicode_state;         /* the bit field: interned 2 bits (3.8-3.13), kind 3, compact 1, ascii 1 */
        uint32_t unicode_state_kind_shift;
        uint32_t unicode_ascii_data;    /* sizeof(PyASCIIObject) */
        uint32_t unicode_compact_data;  /* sizeof(PyCompactUnicodeObject) */

        /* Modules/_threadmodule.c */
        uint32_t lock_lock;             /* lockobject: PyThread_type_lock lock_lock (a sem_t * on Linux) */
        uint32_t rlock_lock;            /* rlockobject: PyThread_type_lock rlock_lock */
        uint32_t rlock_owner;           /* unsigned long: the owner's thread ident, 0 when free */
        uint32_t rlock_count;
} PyOffsets;

/* The offsets for VERSION (PY_VERSION_HEX) from the tables written from CPython's headers: 3.8 to 3.13 (only major
 * and minor count; RET's version is VERSION). -EPROTONOSUPPORT for other versions. 3.13 describes itself, and
 * py_offsets_from_debug() is the better source for it: its table here is for when that cannot be read. */
int py_offsets_for_version(uint32_t version, PyOffsets *ret);

/* The _Py_DebugOffsets table that starts _PyRuntime from 3.13 on, BUF[0..LEN) read from it: its cookie "xdebugpy",
 * the version it was written for, then the offsets, which fill RET (what the table lacks is taken from the closest
 * version we know). -EBADMSG when BUF is not such a table (a wrong cookie, too short, an offset outside the
 * structure the table sizes), -EPROTONOSUPPORT for a layout of the table we do not know: only 3.13's, in a final
 * release, for the default build (not free-threaded, a 16-byte PyObject); 3.14 reshaped the table. */
int py_offsets_from_debug(const uint8_t *buf, size_t len, PyOffsets *ret);
/* How many bytes of _PyRuntime py_offsets_from_debug() wants to see. */
#define PY_DEBUG_OFFSETS_BYTES 1024U
