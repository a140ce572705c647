/* runtime-ops.h: what a language runtime's reader offers the capture, one table of functions per runtime, as the
 * unwinder backends have UnwindBackend. runtime/runtime.[ch] holds the table of them and drives it. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "model/snapshot.h"
#include "proc/peers-tables.h"
#include "unwind/symbolize.h"
#include "unwind/unwind.h"

/* What a runtime's reader is given of the capture it takes part in. */
typedef struct RuntimeCapture {
        pid_t pid;
        Snapshot *s;                    /* the snapshot being built: what a reader adds goes here */
        UnwindProcess *up;              /* its address space */
        Symbolizer *sym;
        const int *tids;                /* the threads the capture lists */
        size_t n_tids;
        unsigned max_frames;            /* frames per stack */
        uint64_t deadline_usec;         /* CLOCK_MONOTONIC: the end of the capture's budget */
        uint64_t time_budget_usec;      /* that budget, as the user set it (for the errors that name it) */
        uint64_t ask_usec;              /* how long a runtime that is asked (a JVM's thread dump) may take to answer */
        /* FRAMES[0..N) of the process symbolized into T's frames as the capture symbolizes (its module cache, its
         * budget): -ETIME once the budget is spent, -ENOMEM. */
        int (*symbolize)(void *userdata, const UnwindFrame *frames, size_t n, ThreadSnapshot *t);
        void *userdata;
} RuntimeCapture;

/* Whether process PID may run runtime K at all (its maps name the interpreter, say): a caller that knows tells a
 * reader of waits which processes are worth opening. */
typedef bool (*RuntimeMayRunFn)(void *userdata, RuntimeKind k, pid_t pid);

/* A runtime's reader. Every function may be NULL (the runtime has nothing to do at that step); those given a state
 * are called only when open() found the runtime. Each returns 0, or -errno: -ENOMEM fails the capture; a runtime that
 * cannot be read says why in the snapshot (snapshot_add_error()) and returns 0. */
typedef struct RuntimeOps {
        /* Find the runtime in the process (its symbols, its maps): *RET its state, NULL when the process runs none.
         * Before the threads are copied. */
        int (*open)(const RuntimeCapture *rc, void **ret);
        /* What the runtime keeps of thread TID, read in the same moment as its stack (the thread parked in the same
         * syscall before and after the copy, or held by ptrace): into *RAW, which thread_done() frees. Best effort:
         * only -ENOMEM fails. */
        int (*read_thread)(void *state, const RuntimeCapture *rc, pid_t tid, void **raw);
        void (*thread_done)(void *raw);
        /* Thread TID unwound into FRAMES[0..N) from its copy STACK, before their symbols: what the runtime reads off
         * the native frames (V8 hangs its JavaScript frames off their frame pointers), into *RAW (read_thread()'s, or
         * made here when NULL). Best effort: only -ENOMEM fails. */
        int (*unwound)(void *state, const RuntimeCapture *rc, pid_t tid, const UnwindFrame *frames, size_t n,
                       const UnwindStack *stack, void **raw);
        /* What belongs to the whole process, read without stopping it (Go's goroutines): after the first copies,
         * before the unwinding. */
        int (*read_process)(void *state, const RuntimeCapture *rc);
        /* Thread T unwound and symbolized: RAW (NULL when none was read) merged into its native stack where the
         * interpreter runs it, and what it waits on in the runtime's terms. */
        int (*merge_thread)(void *state, const RuntimeCapture *rc, void *raw, ThreadSnapshot *t);
        /* Every thread done: what the runtime builds of the whole (the goroutines; a JVM's thread dump, asked now,
         * merged into the threads). Called with STATE NULL too when open() is NULL. */
        int (*finish)(void *state, const RuntimeCapture *rc);
        void (*close)(void *state);
        /* For every thread of every process, the runtime read or not: cut T's native stack where this runtime's
         * stacks begin (Go's runtime.mstart): what an unwinder finds past it is no frame. *RET_CLEAN set when cut
         * there. */
        int (*trim_native)(ThreadSnapshot *t, bool *ret_clean);
        /* What its threads wait on, for the wait chain and the daemon's verdicts: give resolver R a reader of the
         * futex waits it explains (peer_resolver_set_runtime()), with SYM (borrowed), asking only of the processes
         * MAY_RUN (with USERDATA; NULL: any) allows. -ENOMEM. What a runtime's own thread dump says of its locks is in
         * the snapshot (ThreadRuntime.locks), which the chain reads without asking. */
        int (*waits_attach)(PeerResolver *r, Symbolizer *sym, RuntimeMayRunFn may_run, void *userdata);
} RuntimeOps;
