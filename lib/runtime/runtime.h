/* runtime.h: the language runtimes a capture reads, behind one table (runtime-ops.h), driven in the capture's steps. */
#pragma once

#include "base/intmap.h"
#include "runtime/runtime-ops.h"

/* The runtimes' rows, by RuntimeKind. */
extern const RuntimeOps *const runtime_table[_RUNTIME_MAX];

/* The runtimes found in one process. */
typedef struct RuntimeSet {
        const RuntimeCapture *rc;
        void *state[_RUNTIME_MAX];      /* open()'s, NULL: not found, not asked for, or a runtime without open() */
        unsigned active;                /* 1 << RuntimeKind: found (or without open(), asked for), so read */
} RuntimeSet;

/* What the runtimes read of one thread in the moment of its copy. */
typedef struct RuntimeRaw {
        void *raw[_RUNTIME_MAX];
} RuntimeRaw;

/* Open every runtime not in SKIP in RC's process. -ENOMEM. */
int runtime_set_open(RuntimeSet *set, const RuntimeCapture *rc, unsigned skip);
/* Whether any runtime was found that reads a thread in the moment of its copy. */
bool runtime_set_reads_threads(const RuntimeSet *set);
int runtime_set_read_thread(RuntimeSet *set, pid_t tid, RuntimeRaw *raw);
void runtime_raw_done(RuntimeRaw *raw);
int runtime_set_unwound(RuntimeSet *set, pid_t tid, const UnwindFrame *frames, size_t n, const UnwindStack *stack,
                        RuntimeRaw *raw);
int runtime_set_read_process(RuntimeSet *set);
int runtime_set_merge_thread(RuntimeSet *set, RuntimeRaw *raw, ThreadSnapshot *t);
int runtime_set_finish(RuntimeSet *set);
void runtime_set_done(RuntimeSet *set);
/* Every runtime's waits_attach() but those in SKIP (1 << RuntimeKind) on R. MAY_RUN, where given, tells a runtime's
 * wait reader which processes are worth opening (runtime_mapped_may_run() for a caller without a scan's view).
 * -ENOMEM. */
int runtime_waits_attach(PeerResolver *r, Symbolizer *sym, unsigned skip, RuntimeMayRunFn may_run, void *userdata);

/* The runtimes whose interpreter process PID maps (runtime_of_interpreter_module() of each mapped file), as
 * 1 << RuntimeKind, from one read of its maps (at most 4 MiB); 0 when they cannot be read. */
unsigned runtime_kinds_mapped(pid_t pid);

/* runtime_kinds_mapped() per process, each read once: a RuntimeMayRunFn's state for one resolver's life. */
typedef struct RuntimeMapped {
        IntMap kinds;           /* pid -> (void *) (1 << _RUNTIME_MAX | runtime_kinds_mapped()) */
} RuntimeMapped;

/* A RuntimeMayRunFn over USERDATA, a RuntimeMapped: whether PID maps K's interpreter. Says yes on OOM (the
 * runtime's reader then looks itself). */
bool runtime_mapped_may_run(void *userdata, RuntimeKind k, pid_t pid);
void runtime_mapped_done(RuntimeMapped *m);
/* Every runtime's trim_native() on T. */
int runtime_trim_native(ThreadSnapshot *t, bool *ret_clean);
