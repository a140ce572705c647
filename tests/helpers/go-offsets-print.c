/* go-offsets-print.c: a test helper that prints the GoOffsets go-offsets gives for one Go release, as "name value"
 * lines ("none" for GO_OFF_NONE), for test_go_offsets.py to compare with the DWARF of a binary that release built.
 *
 *   go-offsets-print VERSION    VERSION as runtime.buildVersion or `go version` gives it ("go1.19.8")
 *
 * Exits 0; 1 with the reason on stderr when there is no table for that release; 2 when VERSION does not parse or on
 * a usage error. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "base/macro.h"
#include "runtime/go-offsets.h"

#define FIELD(f) { #f, offsetof(GoOffsets, f) }

/* Every uint32_t of GoOffsets, in the header's order. */
static const struct {
        const char *name;
        size_t offset;
} fields[] = {
        FIELD(g_size), FIELD(g_stack_lo), FIELD(g_stack_hi), FIELD(g_m), FIELD(g_sched_sp), FIELD(g_sched_pc),
        FIELD(g_sched_bp), FIELD(g_syscallsp), FIELD(g_syscallpc), FIELD(g_atomicstatus), FIELD(g_goid),
        FIELD(g_waitsince), FIELD(g_waitreason), FIELD(g_lockedm), FIELD(g_gopc), FIELD(g_startpc), FIELD(g_waiting),
        FIELD(g_parentgoid),
        FIELD(m_procid),
        FIELD(sudog_size), FIELD(sudog_g), FIELD(sudog_next), FIELD(sudog_prev), FIELD(sudog_elem),
        FIELD(sudog_waitlink), FIELD(sudog_c),
        FIELD(semaroot_treap),
};

assert_cc(sizeof(GoOffsets) == ELEMENTSOF(fields) * sizeof(uint32_t));

int main(int argc, char *argv[]) {
        const GoOffsets *o;
        unsigned major, minor;

        if (argc != 2) {
                fprintf(stderr, "usage: go-offsets-print VERSION\n");
                return 2;
        }
        if (!go_parse_version(argv[1], &major, &minor)) {
                fprintf(stderr, "go-offsets-print: not a Go version: '%s'\n", argv[1]);
                return 2;
        }
        o = go_offsets_for(major, minor);
        if (!o) {
                fprintf(stderr, "go-offsets-print: no table for go%u.%u\n", major, minor);
                return 1;
        }
        for (size_t i = 0; i < ELEMENTSOF(fields); i++) {
                uint32_t v;

                memcpy(&v, (const uint8_t *) o + fields[i].offset, sizeof v);
                if (v == GO_OFF_NONE)
                        printf("%s none\n", fields[i].name);
                else
                        printf("%s %u\n", fields[i].name, (unsigned) v);
        }
        return 0;
}
