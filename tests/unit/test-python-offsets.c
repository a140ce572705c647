/* test-python-offsets.c: the tables per version, and 3.13's _Py_DebugOffsets as a live 3.13.0 has it, whole, cut
 * short, from other versions and builds, and with offsets that point outside their structures. */
#include "unit.h"
#include <errno.h>
#include <string.h>

#include "base/macro.h"
#include "runtime/python-offsets.h"

/* The first 584 bytes of _PyRuntime in CPython 3.13.0 (pyenv's build, x86-64), read with ctypes.string_at() and
 * printed as uint64_t, one group of the table per line, in Include/internal/pycore_runtime.h's order. */
static const uint64_t debug313[] = {
        /* cookie "xdebugpy", version 3.13.0 final, free_threaded */
        0x7970677562656478, 0x030d00f0, 0,
        /* runtime_state: size, finalizing, interpreters_head */
        283320, 608, 632,
        /* interpreter_state: size, id, next, threads_head, gc, imports_modules, sysdict, builtins, ceval_gil,
         * gil_runtime_state, gil_runtime_state_enabled, gil_runtime_state_locked, gil_runtime_state_holder */
        194968, 7272, 7264, 7344, 7400, 7656, 7640, 7648, 16, 7752, 0, 7768, 7760,
        /* thread_state: size, prev, next, interp, current_frame, thread_id, native_thread_id, datastack_chunk,
         * status */
        304, 0, 8, 16, 72, 152, 160, 232, 32,
        /* interpreter_frame: size, previous, executable, instr_ptr, localsplus, owner */
        80, 8, 0, 56, 72, 70,
        /* code_object: size, filename, name, qualname, linetable, firstlineno, argcount, localsplusnames,
         * localspluskinds, co_code_adaptive */
        208, 112, 120, 128, 136, 68, 52, 96, 104, 200,
        /* pyobject, type_object, tuple_object, list_object, dict_object, float_object, long_object, bytes_object,
         * unicode_object (size, state, length, asciiobject_size), gc */
        16, 8,
        416, 24, 88, 168,
        32, 24, 16,
        40, 24, 16,
        48, 32, 40,
        24, 16,
        32, 16, 24,
        40, 16, 32,
        64, 32, 16, 40,
        240, 200,
};

/* Indexes into debug313 of what the tests below change. */
enum {
        D_VERSION = 1,
        D_FREE_THREADED = 2,
        D_INTERP_GIL_RUNTIME_STATE = 15,
        D_INTERP_GIL_LOCKED = 17,
        D_TSTATE_SIZE = 19,
        D_TSTATE_CURRENT_FRAME = 23,
        D_IFRAME_LOCALSPLUS = 32,
        D_IFRAME_OWNER = 33,
        D_PYOBJECT_SIZE = 44,
};

assert_cc(sizeof debug313 == 584);

static uint8_t buf[PY_DEBUG_OFFSETS_BYTES];

/* BUF as read from a 3.13.0 process, with debug313[AT] set to VALUE (AT 0: nothing changed). */
static const uint8_t *debug_with(size_t at, uint64_t value) {
        memset(buf, 0xa5, sizeof buf);
        memcpy(buf, debug313, sizeof debug313);
        if (at > 0)
                memcpy(buf + at * 8, &value, 8);
        return buf;
}

static int from_debug_with(size_t at, uint64_t value) {
        PyOffsets o;

        return py_offsets_from_debug(debug_with(at, value), sizeof buf, &o);
}

START_TEST(test_for_version) {
        static const struct {
                uint32_t version;
                PyFrameLayout frames;
                PyLineTable lines;
                uint32_t tstate_frame, frame_lasti, iframe_owner;
        } cases[] = {
                { 0x030812f0, PY_FRAMES_OBJECT, PY_LINES_LNOTAB, 24, 104, PY_OFF_NONE },
                { 0x030912f0, PY_FRAMES_OBJECT, PY_LINES_LNOTAB, 24, 104, PY_OFF_NONE },
                { 0x030a0df0, PY_FRAMES_OBJECT, PY_LINES_LINETABLE, 24, 96, PY_OFF_NONE },
                { 0x030b07f0, PY_FRAMES_INTERP, PY_LINES_LOCATIONS, PY_OFF_NONE, PY_OFF_NONE, 69 },
                { 0x030c01f0, PY_FRAMES_INTERP, PY_LINES_LOCATIONS, PY_OFF_NONE, PY_OFF_NONE, 70 },
                { 0x030d00f0, PY_FRAMES_INTERP, PY_LINES_LOCATIONS, 72, PY_OFF_NONE, 70 },
        };
        PyOffsets o;

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                ck_assert_int_eq(py_offsets_for_version(cases[i].version, &o), 0);
                ck_assert_uint_eq(o.version, cases[i].version);
                ck_assert_int_eq(o.frames, cases[i].frames);
                ck_assert_int_eq(o.lines, cases[i].lines);
                ck_assert_uint_eq(o.tstate_frame, cases[i].tstate_frame);
                ck_assert_uint_eq(o.frame_lasti, cases[i].frame_lasti);
                ck_assert_uint_eq(o.iframe_owner, cases[i].iframe_owner);
        }
        /* Versions without a table, and RET left as it was. */
        memset(&o, 0x5a, sizeof o);
        ck_assert_int_eq(py_offsets_for_version(0x030712f0, &o), -EPROTONOSUPPORT);
        ck_assert_int_eq(py_offsets_for_version(0x030e00f0, &o), -EPROTONOSUPPORT);
        ck_assert_int_eq(py_offsets_for_version(0x020712f0, &o), -EPROTONOSUPPORT);
        ck_assert_uint_eq(o.version, 0x5a5a5a5a);
}
END_TEST

START_TEST(test_from_debug_313) {
        PyOffsets o, t;

        /* A live 3.13.0's table gives what our 3.13 table (written from its headers) says. */
        ck_assert_int_eq(py_offsets_from_debug(debug_with(0, 0), sizeof buf, &o), 0);
        ck_assert_int_eq(py_offsets_for_version(0x030d00f0, &t), 0);
        ck_assert_int_eq(memcmp(&o, &t, sizeof o), 0);
        ck_assert_uint_eq(o.version, 0x030d00f0);
        ck_assert_int_eq(o.frames, PY_FRAMES_INTERP);
        ck_assert_int_eq(o.lines, PY_LINES_LOCATIONS);
        ck_assert_uint_eq(o.tstate_frame, 72);
        ck_assert_uint_eq(o.tstate_cframe, PY_OFF_NONE);
        ck_assert_uint_eq(o.iframe_is_entry, PY_OFF_NONE);
        ck_assert_uint_eq(o.iframe_size, 72);
        /* The GIL's fields, from their offsets in the interpreter's own _gil to their place in the structure. */
        ck_assert_uint_eq(o.interp_gil, 16);
        ck_assert_uint_eq(o.gil_last_holder, 8);
        ck_assert_uint_eq(o.gil_locked, 16);

        /* What the table gives is taken from it, not from our table: a later 3.13 may move it. */
        ck_assert_int_eq(py_offsets_from_debug(debug_with(D_TSTATE_CURRENT_FRAME, 80), sizeof buf, &o), 0);
        ck_assert_uint_eq(o.tstate_frame, 80);
        ck_assert_int_eq(py_offsets_from_debug(debug_with(D_VERSION, 0x030d05f0), sizeof buf, &o), 0);
        ck_assert_uint_eq(o.version, 0x030d05f0);
        /* Exactly the table is enough. */
        ck_assert_int_eq(py_offsets_from_debug(debug_with(0, 0), sizeof debug313, &o), 0);
}
END_TEST

START_TEST(test_from_debug_refused) {
        PyOffsets o;

        /* Not such a table: another cookie, or too short for the header or for the table. */
        ck_assert_int_eq(py_offsets_from_debug(debug_with(0, 0), 0, &o), -EBADMSG);
        ck_assert_int_eq(py_offsets_from_debug(debug_with(0, 0), 23, &o), -EBADMSG);
        ck_assert_int_eq(py_offsets_from_debug(debug_with(0, 0), sizeof debug313 - 1, &o), -EBADMSG);
        debug_with(0, 0);
        memcpy(buf, "xdebugpz", 8);
        ck_assert_int_eq(py_offsets_from_debug(buf, sizeof buf, &o), -EBADMSG);

        /* Layouts we do not know: other versions (3.12 has no table, 3.14 reshaped it, 4.x), a 3.13 release
         * candidate, the free-threaded build, a build whose PyObject is not 16 bytes (Py_TRACE_REFS). */
        ck_assert_int_eq(from_debug_with(D_VERSION, 0x030c01f0), -EPROTONOSUPPORT);
        ck_assert_int_eq(from_debug_with(D_VERSION, 0x030e00f0), -EPROTONOSUPPORT);
        ck_assert_int_eq(from_debug_with(D_VERSION, 0x040d00f0), -EPROTONOSUPPORT);
        ck_assert_int_eq(from_debug_with(D_VERSION, 0x030d00c2), -EPROTONOSUPPORT);
        ck_assert_int_eq(from_debug_with(D_FREE_THREADED, 1), -EPROTONOSUPPORT);
        ck_assert_int_eq(from_debug_with(D_PYOBJECT_SIZE, 32), -EPROTONOSUPPORT);

        /* Values CPython does not write: a version past 32 bits, free_threaded neither 0 nor 1, an offset outside
         * the structure the table sizes, a structure of absurd size, the GIL's fields before the GIL, the owner
         * of a frame past the part we read. */
        ck_assert_int_eq(from_debug_with(D_VERSION, 0x1030d00f0), -EBADMSG);
        ck_assert_int_eq(from_debug_with(D_FREE_THREADED, 2), -EBADMSG);
        ck_assert_int_eq(from_debug_with(D_TSTATE_CURRENT_FRAME, 300), -EBADMSG);
        ck_assert_int_eq(from_debug_with(D_TSTATE_CURRENT_FRAME, UINT64_MAX), -EBADMSG);
        ck_assert_int_eq(from_debug_with(D_TSTATE_SIZE, UINT64_MAX), -EBADMSG);
        ck_assert_int_eq(from_debug_with(D_INTERP_GIL_RUNTIME_STATE, 7770), -EBADMSG);
        ck_assert_int_eq(from_debug_with(D_INTERP_GIL_LOCKED, 194966), -EBADMSG);
        ck_assert_int_eq(from_debug_with(D_IFRAME_OWNER, 72), -EBADMSG);
        ck_assert_int_eq(from_debug_with(D_IFRAME_LOCALSPLUS, 64), -EBADMSG);

        /* RET is left as it was on failure. */
        memset(&o, 0x5a, sizeof o);
        ck_assert_int_eq(py_offsets_from_debug(debug_with(D_IFRAME_OWNER, 72), sizeof buf, &o), -EBADMSG);
        ck_assert_uint_eq(o.version, 0x5a5a5a5a);
}
END_TEST

UNIT_TEST_MAIN("python-offsets", test_for_version, test_from_debug_313, test_from_debug_refused)
