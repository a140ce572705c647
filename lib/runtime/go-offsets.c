/* go-offsets.c: the Go runtime's layouts per release, walked by hand from its sources (each table cites them) with
 * the 64-bit alignment rules, and the parser of the version string a Go binary carries. */
#include <string.h>

#include "base/macro.h"
#include "runtime/go-offsets.h"

/* The rules of the walks below: pointers, uintptr (and guintptr, muintptr, puintptr), int64 and uint64 take 8 bytes
 * aligned to 8, uint32 4, uint16 2, bool, uint8, int8 and waitReason 1; a string 16, a slice 24; a struct is aligned
 * to its largest field and padded to a multiple of it. The atomic types of runtime/internal/atomic (1.19+; moved to
 * internal/runtime/atomic in 1.23) are their value: Uint32 4 bytes, Bool 1, Int64 and Uint64 8 (their align64
 * marker has no size). runtime.mutex is {lockRankStruct; key uintptr}: 8 bytes, since lockRankStruct is empty unless
 * GOEXPERIMENT=staticlockranking (lockrank_off.go). None of the fields read here is behind a build tag, and all of
 * them come before g.goroutineProfiled (1.19+, an atomic.Uint32) and the tracer's g.trace (1.21+). */

/* What 1.17 to 1.25 share.
 * runtime.g begins with stack (lo, hi: 16 bytes), stackguard0, stackguard1, _panic, _defer, m, then sched, a gobuf
 * that begins with sp, pc.
 * runtime.sudog: g 0, next 8, prev 16, elem 24 (unsafe.Pointer), acquiretime 32, releasetime 40, ticket 48 (uint32),
 * isSelect 52, success 53 (bool; 1.22 puts waiters, a uint16, at 54, in what was padding), parent 56, waitlink 64,
 * waittail 72, c 80: 88 bytes.
 * runtime.semaRoot: lock 0 (mutex, 8 bytes), treap 8, nwait 16. */
#define GO_COMMON                                                                                               \
        .g_stack_lo = 0, .g_stack_hi = 8, .g_m = 48, .g_sched_sp = 56, .g_sched_pc = 64, .sudog_size = 88,     \
        .sudog_g = 0, .sudog_next = 8, .sudog_prev = 16, .sudog_elem = 24, .sudog_waitlink = 64, .sudog_c = 80,  \
        .semaroot_treap = 8

/* 1.17 to 1.20. gobuf is sp, pc, g, ctxt, ret, lr, bp: 56 bytes, bp at 48, so in g: sched 56, syscallsp 112,
 * syscallpc 120, stktopsp 128, param 136, atomicstatus 144 (uint32; atomic.Uint32 in 1.20), stackLock 148, goid 152
 * (int64; uint64 in 1.20), schedlink 160, waitsince 168, waitreason 176, then 13 one-byte fields (preempt …
 * trackingSeq) to 189, runnableStamp 192 (trackingStamp in 1.20), runnableTime 200, sysexitticks 208, traceseq 216,
 * tracelastp 224, lockedm 232, sig 240, writebuf 248 (a slice), sigcode0 272, sigcode1 280, sigpc 288, gopc 296,
 * ancestors 304, startpc 312, racectx 320, waiting 328: 336 bytes read. runtime.m: g0 0, morebuf 8 (a gobuf),
 * divmod 64 (uint32; from 1.18.x and 1.19 a `_ uint32` follows, which on 64-bit only names the padding), procid 72. */
static const GoOffsets go117 = {
        GO_COMMON,
        .g_size = 336,
        .g_sched_bp = 104,
        .g_syscallsp = 112,
        .g_syscallpc = 120,
        .g_atomicstatus = 144,
        .g_goid = 152,
        .g_waitsince = 168,
        .g_waitreason = 176,
        .g_lockedm = 232,
        .g_gopc = 296,
        .g_startpc = 312,
        .g_waiting = 328,
        .g_parentgoid = GO_OFF_NONE,
        .m_procid = 72,
};

/* 1.21 and 1.22. The execution tracer's sysexitticks, traceseq and tracelastp left g (for g.trace, after waiting),
 * and parentGoid came before gopc. g as in 1.20 up to the one-byte fields (1.21: preempt … trackingSeq, 12 of them,
 * to 188; 1.22 adds inMarkAssist, coroexit and nocgocallback, to 191), then trackingStamp 192, runnableTime 200,
 * lockedm 208, sig 216, writebuf 224, sigcode0 248, sigcode1 256, sigpc 264, parentGoid 272, gopc 280, ancestors 288,
 * startpc 296, racectx 304, waiting 312: 320 bytes read. m as in 1.20: procid 72. */
static const GoOffsets go121 = {
        GO_COMMON,
        .g_size = 320,
        .g_sched_bp = 104,
        .g_syscallsp = 112,
        .g_syscallpc = 120,
        .g_atomicstatus = 144,
        .g_goid = 152,
        .g_waitsince = 168,
        .g_waitreason = 176,
        .g_lockedm = 208,
        .g_gopc = 280,
        .g_startpc = 296,
        .g_waiting = 312,
        .g_parentgoid = 272,
        .m_procid = 72,
};

/* 1.23 and 1.24. syscallbp (uintptr) came after syscallpc, so everything after it is 8 bytes further than in 1.22:
 * syscallsp 112, syscallpc 120, syscallbp 128, stktopsp 136, param 144, atomicstatus 152, stackLock 156, goid 160,
 * schedlink 168, waitsince 176, waitreason 184, the 15 one-byte fields to 199, trackingStamp 200, runnableTime 208,
 * lockedm 216, sig 224 (1.24 puts fipsIndicator, a uint8, at 224 and sig at 228), writebuf 232, sigcode0 256,
 * sigcode1 264, sigpc 272, parentGoid 280, gopc 288, ancestors 296, startpc 304, racectx 312, waiting 320: 328
 * bytes read. m as in 1.22: procid 72. */
static const GoOffsets go123 = {
        GO_COMMON,
        .g_size = 328,
        .g_sched_bp = 104,
        .g_syscallsp = 112,
        .g_syscallpc = 120,
        .g_atomicstatus = 152,
        .g_goid = 160,
        .g_waitsince = 176,
        .g_waitreason = 184,
        .g_lockedm = 216,
        .g_gopc = 288,
        .g_startpc = 304,
        .g_waiting = 320,
        .g_parentgoid = 280,
        .m_procid = 72,
};

/* 1.25. gobuf lost ret: sp, pc, g, ctxt, lr, bp, 48 bytes, bp at 40; in g that takes back the 8 bytes syscallbp
 * added: sched 56, syscallsp 104, syscallpc 112, syscallbp 120, stktopsp 128, param 136, atomicstatus 144,
 * stackLock 148, goid 152, schedlink 160, waitsince 168, waitreason 176, the 15 one-byte fields to 191,
 * trackingStamp 192, runnableTime 200, lockedm 208, fipsIndicator 216, syncSafePoint 217, runningCleanups 218
 * (atomic.Bool), sig 220, writebuf 224, sigcode0 248, sigcode1 256, sigpc 264, parentGoid 272, gopc 280,
 * ancestors 288, startpc 296, racectx 304, waiting 312: 320 bytes read. runtime.m lost the `_ uint32` after divmod
 * and morebuf is 48 bytes: g0 0, morebuf 8, divmod 56, procid 64. */
static const GoOffsets go125 = {
        GO_COMMON,
        .g_size = 320,
        .g_sched_bp = 96,
        .g_syscallsp = 104,
        .g_syscallpc = 112,
        .g_atomicstatus = 144,
        .g_goid = 152,
        .g_waitsince = 168,
        .g_waitreason = 176,
        .g_lockedm = 208,
        .g_gopc = 280,
        .g_startpc = 296,
        .g_waiting = 312,
        .g_parentgoid = 272,
        .m_procid = 64,
};

/* Each Go 1 minor release and the layout walked from its sources: src/runtime/runtime2.go (g, gobuf, stack, m,
 * sudog, mutex) and src/runtime/sema.go (semaRoot) at the release's tag, named with its commit in golang/go. The
 * last point release we could see of each minor was compared with the tag: where their structures differ, the
 * entry says how, and none of it moves a field we read. */
static const struct {
        unsigned minor;
        const GoOffsets *offsets;
} go_tables[] = {
        /* src/runtime/runtime2.go, sema.go, go1.17 (ec5170397c72); go1.17.13 the same */
        { 17, &go117 },
        /* src/runtime/runtime2.go, sema.go, go1.18 (4aa1efed4853); go1.18.10 adds m's `_ uint32` after divmod and
         * makes m.freeWait, after procid, an atomic.Uint32 */
        { 18, &go117 },
        /* src/runtime/runtime2.go, sema.go, go1.19 (43456202a1e5), and go1.19.8's DWARF (test_go_offsets.py);
         * go1.19.13 makes m.freeWait, after procid, an atomic.Uint32 */
        { 19, &go117 },
        /* src/runtime/runtime2.go, sema.go, go1.20 (de4748c47c67); go1.20.14 the same */
        { 20, &go117 },
        /* src/runtime/runtime2.go, sema.go, go1.21.0 (c19c4c566c63); go1.21.13 the same */
        { 21, &go121 },
        /* src/runtime/runtime2.go, sema.go, go1.22.0 (a10e42f219ab); go1.22.10 the same */
        { 22, &go121 },
        /* src/runtime/runtime2.go, sema.go, go1.23.0 (6885bad7dd86); go1.23.4 only adds a waitReason */
        { 23, &go123 },
        /* src/runtime/runtime2.go, sema.go, go1.24.0 (3901409b5d0f); go1.24.5 the same */
        { 24, &go123 },
        /* src/runtime/runtime2.go, sema.go, go1.25.0 (6e676ab2b809); go1.25.3 the same */
        { 25, &go125 },
};

const GoOffsets *go_offsets_for(unsigned major, unsigned minor) {
        if (major != 1)
                return NULL;
        for (size_t i = 0; i < ELEMENTSOF(go_tables); i++)
                if (go_tables[i].minor == minor)
                        return go_tables[i].offsets;
        return NULL;
}

/* A decimal number of 1 to 4 digits at *P, which is moved past it. */
static bool parse_small(const char **p, unsigned *ret) {
        unsigned v = 0;
        size_t n = 0;

        for (; **p >= '0' && **p <= '9'; (*p)++) {
                if (++n > 4)
                        return false;
                v = v * 10 + (unsigned) (**p - '0');
        }
        if (n == 0)
                return false;
        *ret = v;
        return true;
}

bool go_parse_version(const char *s, unsigned *ret_major, unsigned *ret_minor) {
        static const char *const suffixes[] = { ".", "rc", "beta" };
        unsigned major, minor, ignored;

        if (!s)
                return false;
        /* A toolchain built from a checkout says "devel go1.23-abcdef Tue Feb 6 …" (1.21+). */
        if (startswith(s, "devel "))
                s += strlen("devel ");
        if (!startswith(s, "go"))
                return false;
        s += strlen("go");
        if (!parse_small(&s, &major) || *s != '.')
                return false;
        s++;
        if (!parse_small(&s, &minor))
                return false;

        /* Then a patch release ".8" or a pre-release "rc2", "beta1" (none for x.y.0 before 1.21: "go1.20"). */
        for (size_t i = 0; i < ELEMENTSOF(suffixes); i++)
                if (startswith(s, suffixes[i])) {
                        s += strlen(suffixes[i]);
                        if (!parse_small(&s, &ignored))
                                return false;
                        break;
                }
        /* And the end, or what a build adds: " X:nocoverageredesign" (GOEXPERIMENT), a development build's
         * "-abcdef …", a distributor's "-suffix" or "+suffix". */
        if (*s != '\0' && *s != ' ' && *s != '-' && *s != '+')
                return false;

        *ret_major = major;
        *ret_minor = minor;
        return true;
}
