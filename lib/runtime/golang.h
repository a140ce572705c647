/* golang.h: a Go program's goroutines, read from outside the process without stopping it: the runtime's table of
 * goroutines (runtime.allgs), each one's state and wait, and each parked one's stack, copied and walked by its frame
 * pointers. The threads a goroutine runs on are captured as threads; a running goroutine's frames are its thread's. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "model/snapshot.h"
#include "runtime/runtime-ops.h"
#include "unwind/symbolize.h"
#include "unwind/unwind.h"

/* Goroutines read per process at most: the others are counted, not listed. */
#define GO_GOROUTINES_MAX 100000U
/* Frames per goroutine at most. */
#define GO_FRAMES_MAX 256U

typedef struct GoProcess GoProcess;

/* One goroutine as read: addresses only, decoded later (go_build()). */
typedef struct GoRawG {
        uint64_t addr;          /* the runtime.g */
        uint64_t goid;
        unsigned status;        /* GO_STATUS_*, without the scan bit */
        uint8_t waitreason;
        int64_t waitsince;      /* nanotime() when the runtime saw it blocked; 0 when it did not record it */
        uint64_t gopc, startpc;
        uint64_t parent_goid;   /* 1.21+ */
        uint64_t m, lockedm, waiting;
        uint64_t sp, pc, bp, lo, hi;
        uint64_t syscallsp, syscallpc;  /* in a syscall: where it entered it */
        bool by_spdelta;        /* walked from syscallsp/pc by the binary's frame sizes (pclntab), not its thread */
        pid_t tid;              /* the thread of its M (running, in a syscall) or of the M it is locked to */
        uint64_t *pcs;          /* its frames' pcs, innermost first (parked: walked from sched.bp) */
        size_t n_pcs;
        bool entry;             /* it never ran: pcs[0] is its function's entry (an activation, not a return) */
        bool truncated;         /* more frames than the walk takes */
        const char *error;      /* static: why its stack was not read (NULL when it was, or is its thread's) */
        const char *wait_kind;  /* static: "channel", "semaphore"; NULL when its wait's object is not known */
        uint64_t wait_addr;
} GoRawG;

typedef struct GoRawSet {
        GoRawG *gs;
        size_t n;
        uint64_t total;         /* allglen */
        bool truncated;         /* more than the budget */
        int64_t now;            /* CLOCK_MONOTONIC in ns when read (the runtime's nanotime()) */
} GoRawSet;

void go_raw_set_done(GoRawSet *rs);

/* Find the Go runtime in process PID's executable (its symbols, and the layout of runtime.g from its DWARF or from
 * the table for its version). 0 with *RET NULL when it is not a Go program; -EPROTONOSUPPORT with *RET_WHY (static)
 * for a Go program we cannot read (stripped of symbols, a release we have no layout for); -ENOMEM. */
int go_process_open(pid_t pid, UnwindProcess *up, Symbolizer *sym, GoProcess **ret, const char **ret_why);
GoProcess *go_process_free(GoProcess *p);
DEFINE_TRIVIAL_CLEANUP_FUNC(GoProcess *, go_process_free);

/* "go1.19.8" (runtime.buildVersion), "" when it could not be read. */
const char *go_process_version(const GoProcess *p);
/* "dwarf" or "table". */
const char *go_process_layout(const GoProcess *p);
/* The runtime's words for wait reason R ("chan receive"); NULL when it has none. */
const char *go_wait_reason(const GoProcess *p, uint8_t r);
/* Read every goroutine that is not dead (at most MAX_GS), each parked one's frames (at most MAX_FRAMES). -ENOMEM;
 * -EFAULT with *RET_WHY when the runtime's table cannot be read. */
int go_read_goroutines(GoProcess *p, unsigned max_gs, unsigned max_frames, GoRawSet *ret, const char **ret_why);

/* Is FUNCTION where a Go thread's or goroutine's stack begins (runtime.goexit, runtime.mstart, runtime.mcall …)?
 * Nothing beyond it is a frame of the same stack. */
bool go_stack_top_function(const char *function);

/* Symbolize FRAMES[0..N) of the process into T's frames (appended): the capture's symbolizer. -ETIME when the
 * capture's time is up (the goroutines left are listed without frames), -ENOMEM. */
typedef int (*GoSymbolizeFn)(void *userdata, const UnwindFrame *frames, size_t n, ThreadSnapshot *t);

/* Decode RAW into S->go (allocated here): goroutines by goid, each parked one's frames symbolized once per distinct
 * stack (FN), a running one's frames taken from its thread in S (captured and unwound before), the go statement
 * that created each, its wait reason, how long it has waited, and what it waits on. -ENOMEM. */
int go_build(GoProcess *p, GoRawSet *raw, Snapshot *s, GoSymbolizeFn fn, void *userdata);

/* Go's row of the runtime table (runtime/runtime.h). */
extern const RuntimeOps go_runtime_ops;
