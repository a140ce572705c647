/* runtime.h: the language runtimes a capture reads, behind one table (runtime-ops.h), driven in the capture's steps. */
#pragma once

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
/* Every runtime's waits_attach() but those in SKIP (1 << RuntimeKind) on R. -ENOMEM. */
int runtime_waits_attach(PeerResolver *r, Symbolizer *sym, unsigned skip, RuntimeMayRunFn may_run, void *userdata);
/* Every runtime's trim_native() on T. */
int runtime_trim_native(ThreadSnapshot *t, bool *ret_clean);
