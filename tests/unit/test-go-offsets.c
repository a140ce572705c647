/* test-go-offsets.c: the version strings Go binaries carry, which releases have a table, and each table's fields
 * inside their structures, apart, and read whole by g_size. (test_go_offsets.py checks the values themselves against
 * a binary's DWARF.) */
#include "unit.h"
#include <stddef.h>
#include <string.h>

#include "base/macro.h"
#include "runtime/go-offsets.h"

START_TEST(test_parse_version) {
        static const struct {
                const char *s;
                bool ok;
                unsigned major, minor;
        } cases[] = {
                { "go1.19.8", true, 1, 19 },
                { "go1.21rc2", true, 1, 21 },
                { "go1.22.0 X:nocoverageredesign", true, 1, 22 },
                { "devel go1.23-abcdef", true, 1, 23 },
                { "devel go1.23-3d33437c45 Tue Feb 6 20:49:01 2024 +0000", true, 1, 23 },
                { "go1.17", true, 1, 17 },
                { "go1.20beta1", true, 1, 20 },
                { "go1.9", true, 1, 9 },
                { "go1.25.3", true, 1, 25 },
                { "go1.21.0-bigcorp", true, 1, 21 },
                { "go2.0", true, 2, 0 },
                /* garbage, and what is almost a version */
                { "", false, 0, 0 },
                { "garbage", false, 0, 0 },
                { "go", false, 0, 0 },
                { "go1", false, 0, 0 },
                { "go1.", false, 0, 0 },
                { "go.19", false, 0, 0 },
                { "gox.y", false, 0, 0 },
                { "1.19.8", false, 0, 0 },
                { " go1.19.8", false, 0, 0 },
                { "go1.19.", false, 0, 0 },
                { "go1.19x", false, 0, 0 },
                { "go1.21rc", false, 0, 0 },
                { "go1.19.8.", false, 0, 0 },
                { "go1.-19", false, 0, 0 },
                { "devel +abcdef Tue Feb 6 2024", false, 0, 0 },
                { "devel", false, 0, 0 },
                { "go99999.1", false, 0, 0 },
                { "go1.123456789012345678901234567890", false, 0, 0 },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                unsigned major = 777, minor = 777;

                ck_assert_msg(go_parse_version(cases[i].s, &major, &minor) == cases[i].ok, "'%s'", cases[i].s);
                if (cases[i].ok) {
                        ck_assert_uint_eq(major, cases[i].major);
                        ck_assert_uint_eq(minor, cases[i].minor);
                } else {
                        /* The out-parameters are left as they were. */
                        ck_assert_uint_eq(major, 777);
                        ck_assert_uint_eq(minor, 777);
                }
        }
        ck_assert(!go_parse_version(NULL, &(unsigned){ 0 }, &(unsigned){ 0 }));
}
END_TEST

START_TEST(test_for_version) {
        /* What moved between releases: syscallbp before goid (1.23), the tracer's fields out of g and parentGoid in
         * (1.21), gobuf.ret out (1.25). */
        static const struct {
                unsigned minor;
                uint32_t goid, sched_bp, lockedm, waiting, parentgoid, procid, g_size;
        } cases[] = {
                { 17, 152, 104, 232, 328, GO_OFF_NONE, 72, 336 },
                { 18, 152, 104, 232, 328, GO_OFF_NONE, 72, 336 },
                { 19, 152, 104, 232, 328, GO_OFF_NONE, 72, 336 },
                { 20, 152, 104, 232, 328, GO_OFF_NONE, 72, 336 },
                { 21, 152, 104, 208, 312, 272, 72, 320 },
                { 22, 152, 104, 208, 312, 272, 72, 320 },
                { 23, 160, 104, 216, 320, 280, 72, 328 },
                { 24, 160, 104, 216, 320, 280, 72, 328 },
                { 25, 152, 96, 208, 312, 272, 64, 320 },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                const GoOffsets *o = go_offsets_for(1, cases[i].minor);

                ck_assert_ptr_nonnull(o);
                ck_assert_uint_eq(o->g_goid, cases[i].goid);
                ck_assert_uint_eq(o->g_sched_bp, cases[i].sched_bp);
                ck_assert_uint_eq(o->g_lockedm, cases[i].lockedm);
                ck_assert_uint_eq(o->g_waiting, cases[i].waiting);
                ck_assert_uint_eq(o->g_parentgoid, cases[i].parentgoid);
                ck_assert_uint_eq(o->m_procid, cases[i].procid);
                ck_assert_uint_eq(o->g_size, cases[i].g_size);
                ck_assert_uint_eq(o->semaroot_treap, 8);
        }
        /* Releases without a table. */
        ck_assert_ptr_null(go_offsets_for(1, 16));
        ck_assert_ptr_null(go_offsets_for(1, 26));
        ck_assert_ptr_null(go_offsets_for(1, 0));
        ck_assert_ptr_null(go_offsets_for(0, 19));
        ck_assert_ptr_null(go_offsets_for(2, 19));
}
END_TEST

START_TEST(test_tables_consistent) {
        for (unsigned minor = 17; minor <= 25; minor++) {
                const GoOffsets *o = go_offsets_for(1, minor);
                uint32_t end = 0;

                ck_assert_ptr_nonnull(o);
                /* The g fields a reader takes and their widths. */
                const struct {
                        uint32_t offset, width;
                } g[] = {
                        { o->g_stack_lo, 8 }, { o->g_stack_hi, 8 }, { o->g_m, 8 }, { o->g_sched_sp, 8 },
                        { o->g_sched_pc, 8 }, { o->g_sched_bp, 8 }, { o->g_syscallsp, 8 }, { o->g_syscallpc, 8 },
                        { o->g_atomicstatus, 4 }, { o->g_goid, 8 }, { o->g_waitsince, 8 }, { o->g_waitreason, 1 },
                        { o->g_lockedm, 8 }, { o->g_gopc, 8 }, { o->g_startpc, 8 }, { o->g_waiting, 8 },
                        { o->g_parentgoid, 8 },
                };
                const uint32_t sudog[] = {
                        o->sudog_g, o->sudog_next, o->sudog_prev, o->sudog_elem, o->sudog_waitlink, o->sudog_c,
                };

                for (size_t i = 0; i < ELEMENTSOF(g); i++) {
                        if (g[i].offset == GO_OFF_NONE) {
                                /* Only parentGoid may be missing, and only before 1.21. */
                                ck_assert_uint_eq(i, ELEMENTSOF(g) - 1);
                                ck_assert_uint_lt(minor, 21);
                                continue;
                        }
                        /* Aligned to its width, and apart from every other. */
                        ck_assert_uint_eq(g[i].offset % g[i].width, 0);
                        for (size_t j = 0; j < i; j++)
                                ck_assert_msg(g[j].offset == GO_OFF_NONE || g[i].offset >= g[j].offset + g[j].width ||
                                                      g[j].offset >= g[i].offset + g[i].width,
                                              "1.%u: g fields %zu and %zu overlap", minor, i, j);
                        end = MAX(end, g[i].offset + g[i].width);
                }
                if (minor >= 21)
                        ck_assert_uint_ne(o->g_parentgoid, GO_OFF_NONE);
                /* g_size reads every field, and no more than the last one needs. */
                ck_assert_uint_eq(o->g_size, DIV_ROUND_UP(end, 8) * 8);
                /* The scheduler's registers are in one gobuf: sp first, pc next. */
                ck_assert_uint_eq(o->g_sched_pc, o->g_sched_sp + 8);
                ck_assert_uint_gt(o->g_sched_bp, o->g_sched_pc);
                ck_assert_uint_lt(o->g_sched_bp, o->g_syscallsp);

                for (size_t i = 0; i < ELEMENTSOF(sudog); i++) {
                        ck_assert_uint_eq(sudog[i] % 8, 0);
                        ck_assert_uint_le(sudog[i] + 8, o->sudog_size);
                }
                ck_assert_uint_eq(o->sudog_g, 0);
                ck_assert_uint_eq(o->m_procid % 8, 0);
        }
}
END_TEST

UNIT_TEST_MAIN("go-offsets", test_parse_version, test_for_version, test_tables_consistent)
