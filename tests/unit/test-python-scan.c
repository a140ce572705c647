/* test-python-scan.c: _PyRuntime found by scanning a module's writable data. Fake runtimes, interpreters and thread
 * states (3.11's layout) live in this test's own .bss, and the scan runs on this very process: the one runtime that
 * holds together is found, and nothing is found where none does, or where two do. */
#include "unit.h"
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "base/macro.h"
#include "runtime/python-scan.h"
#include "unwind/unwind.h"

/* In this executable's writable segment, which the scan reads; zeroed at the start of each test. */
static uint64_t runtime_a[64], runtime_b[64], interp_a[64], interp_b[64], tstate_a[64], tstate_b[64];
static char cookie[64] __attribute__((aligned(8)));

static void reset(void) {
        uint64_t *all[] = { runtime_a, runtime_b, interp_a, interp_b, tstate_a, tstate_b };

        for (size_t i = 0; i < ELEMENTSOF(all); i++)
                memset(all[i], 0, sizeof runtime_a);
        memset(cookie, 0, sizeof cookie);
}

static PyOffsets o311(void) {
        PyOffsets o;

        ck_assert_int_eq(py_offsets_for_version(0x030b02f0, &o), 0);
        return o;
}

/* RUNTIME's interpreters.head is HEAD, .main MAIN, .next_id NEXT_ID. */
static void fake_runtime(uint64_t *runtime, uint64_t *head, uint64_t *main, int64_t next_id) {
        PyOffsets o = o311();

        runtime[o.runtime_interpreters_head / 8] = (uintptr_t) head;
        runtime[o.runtime_interpreters_head / 8 + 1] = (uintptr_t) main;
        runtime[o.runtime_interpreters_head / 8 + 2] = (uint64_t) next_id;
}

/* INTERP's threads.head is TSTATE, whose interp is BACK. */
static void fake_interp(uint64_t *interp, uint64_t *tstate, uint64_t *back) {
        PyOffsets o = o311();

        interp[o.interp_threads_head / 8] = (uintptr_t) tstate;
        tstate[o.tstate_interp / 8] = (uintptr_t) back;
}

/* The scan of this executable's data, with 3.11's layout (or none: WITH_LAYOUT false). */
static int scan(bool with_layout, uint64_t *ret) {
        _cleanup_(unwind_process_freep) UnwindProcess *up = NULL;
        PyOffsets o = o311();
        const ProcMap *maps;
        Dwfl_Module *self;
        size_t n_maps;

        ck_assert_int_eq(unwind_process_new(getpid(), NULL, &up), 0);
        /* By a function's address: the fake runtimes are in .bss, which past the file's last page is an
         * anonymous mapping (a large one under ASan) that no module's reported range covers. */
        self = dwfl_addrmodule(unwind_process_dwfl(up), (Dwarf_Addr) (uintptr_t) &scan);
        ck_assert_ptr_nonnull(self);
        maps = unwind_process_maps(up, &n_maps);
        return py_scan_runtime(getpid(), self, maps, n_maps, with_layout ? &o : NULL, ret);
}

START_TEST(test_found) {
        uint64_t r = 0;

        reset();
        fake_runtime(runtime_a, interp_a, interp_a, 1);
        fake_interp(interp_a, tstate_a, interp_a);
        ck_assert_int_eq(scan(true, &r), 0);
        ck_assert_uint_eq(r, (uintptr_t) runtime_a);

        /* A subinterpreter at the head, the main interpreter after it: both hold together. */
        fake_runtime(runtime_a, interp_b, interp_a, 2);
        fake_interp(interp_b, tstate_b, interp_b);
        r = 0;
        ck_assert_int_eq(scan(true, &r), 0);
        ck_assert_uint_eq(r, (uintptr_t) runtime_a);

        /* A cookie whose table does not parse marks nothing. */
        memcpy(cookie, "xdebugpy", 8);
        r = 0;
        ck_assert_int_eq(scan(true, &r), 0);
        ck_assert_uint_eq(r, (uintptr_t) runtime_a);
}
END_TEST

START_TEST(test_not_found) {
        uint64_t r = 0x5a;

        reset();
        /* Nothing at all, and no layout to look with. */
        ck_assert_int_eq(scan(true, &r), -ENOENT);
        fake_runtime(runtime_a, interp_a, interp_a, 1);
        fake_interp(interp_a, tstate_a, interp_a);
        ck_assert_int_eq(scan(false, &r), -ENOENT);

        /* A thread state that is another interpreter's. */
        fake_interp(interp_a, tstate_a, interp_b);
        ck_assert_int_eq(scan(true, &r), -ENOENT);

        /* No interpreter was ever counted: not a runtime (or not started). */
        fake_interp(interp_a, tstate_a, interp_a);
        fake_runtime(runtime_a, interp_a, interp_a, 0);
        ck_assert_int_eq(scan(true, &r), -ENOENT);

        /* A main interpreter that does not hold together. */
        fake_runtime(runtime_a, interp_a, interp_b, 2);
        fake_interp(interp_b, tstate_b, interp_a);
        ck_assert_int_eq(scan(true, &r), -ENOENT);

        /* Two runtimes that would do: which one is the process's cannot be told. */
        fake_runtime(runtime_a, interp_a, interp_a, 1);
        fake_runtime(runtime_b, interp_b, interp_b, 1);
        fake_interp(interp_b, tstate_b, interp_b);
        ck_assert_int_eq(scan(true, &r), -ENOENT);
        ck_assert_uint_eq(r, 0x5a);
}
END_TEST

/* The version string in .rodata: PY_VERSION alone or as the tail of a merged string, the Unicode database's 3.2.0
 * beside it, never a guess between two. */
START_TEST(test_version_strings) {
        static const struct {
                const char *data;
                size_t n;
                int r;
                uint32_t version;
        } cases[] = {
#define C(s, r, v) { s, sizeof s, r, v }
                C("\0%.80s (%.80s) %.80s\0" "3.9.18\0" "3.2.0\0", 0, 0x030912f0),                 /* Debian's way */
                C("\0/root/.pyenv/versions/3.10.13\0lib\0", 0, 0x030a0df0),  /* PY_VERSION merged into a tail */
                C("\0" "3.12.0rc3\0", 0, 0x030c00c3),
                C("\0" "3.13.0a1+\0", 0, 0x030d00a1),
                C("\0" "3.11.0b4\0", 0, 0x030b00b4),
                C("\0" "3.9.18\0" "3.9.0\0", 0, 0x03090000),     /* one minor, two micros: the minor */
                C("\0" "3.9.18\0" "3.10.1\0", -ENOTUNIQ, 0),     /* two minors: unknown */
                C("\0" "3.2.0\0python3.9\0", -ENOENT, 0),       /* neither is a version string */
                C("\0" "13.9.18\0" "v3.8.1.2\0" "3.8.\0" "3.8.1x\0", -ENOENT, 0),
                C("\0" "3.1234.1\0", -ENOENT, 0),
                C("3.8.1", -ENOENT, 0),                           /* cut: no NUL inside the data */
                C("", -ENOENT, 0),
#undef C
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                uint32_t v = 0;
                /* Without the literal's own NUL: the data ends where the section does. */
                size_t n = cases[i].n - 1;

                ck_assert_msg(py_version_from_strings((const uint8_t *) cases[i].data, n, &v) == cases[i].r,
                              "case %zu", i);
                if (cases[i].r == 0)
                        ck_assert_msg(v == cases[i].version, "case %zu: 0x%08x", i, v);
        }
}
END_TEST


UNIT_TEST_MAIN("python-scan", test_found, test_not_found, test_version_strings)
