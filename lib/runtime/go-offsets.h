/* go-offsets.h: where the Go runtime keeps what a goroutine reader needs (runtime.g, runtime.m, runtime.sudog,
 * the semaphore table), per Go release, for binaries without DWARF (-ldflags=-w). A binary with DWARF gives its
 * own layout (golang.c reads it); these tables are the fallback, and are checked against DWARF where we can build
 * one (tests). 64-bit targets (amd64, arm64) share them. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

/* An offset this release does not have. */
#define GO_OFF_NONE UINT32_MAX

/* Byte offsets from the start of each structure, on a 64-bit target, in a build without GOEXPERIMENT=
 * staticlockranking (which gives runtime.mutex, and so semaRoot.treap, a rank field). */
typedef struct GoOffsets {
        /* runtime.g */
        uint32_t g_size;                /* bytes read per g: covers every field below */
        uint32_t g_stack_lo, g_stack_hi;
        uint32_t g_m;                   /* *m */
        uint32_t g_sched_sp, g_sched_pc, g_sched_bp;    /* g.sched (a gobuf) + gobuf.sp/pc/bp */
        uint32_t g_syscallsp, g_syscallpc;
        uint32_t g_atomicstatus;        /* uint32 */
        uint32_t g_goid;                /* int64 (uint64 from 1.20) */
        uint32_t g_waitsince;           /* int64, nanotime() */
        uint32_t g_waitreason;          /* uint8 */
        uint32_t g_lockedm;             /* muintptr */
        uint32_t g_gopc;                /* pc of the go statement */
        uint32_t g_startpc;
        uint32_t g_waiting;             /* *sudog */
        uint32_t g_parentgoid;          /* uint64, 1.21+; GO_OFF_NONE before */
        /* runtime.m */
        uint32_t m_procid;              /* uint64: the thread's TID */
        /* runtime.sudog */
        uint32_t sudog_size;
        uint32_t sudog_g, sudog_next, sudog_prev, sudog_elem, sudog_waitlink, sudog_c;
        /* runtime.semaRoot (an element of runtime.semtable starts with one) */
        uint32_t semaroot_treap;        /* *sudog */
} GoOffsets;

/* The table for Go MAJOR.MINOR (1.17 to 1.25), NULL for a release we have none for. Point releases share their
 * minor's table: within one minor the fields above have not moved. */
const GoOffsets *go_offsets_for(unsigned major, unsigned minor);
/* "go1.19.8" (runtime.buildVersion) → 1, 19; also "go1.21rc2", "go1.22.0 X:nocoverageredesign" and a development
 * build's "devel go1.23-abcdef …". False when it does not parse (an old "devel +abcdef …" has no version). */
bool go_parse_version(const char *s, unsigned *ret_major, unsigned *ret_minor);
