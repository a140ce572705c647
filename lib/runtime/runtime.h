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
/* Among UP's modules named as runtime K's interpreter (RuntimeTraits.interpreter_modules), the one whose exported
 * symbols (found with SYM) hold the most of NAMES[0..N): *RET_MOD, and each name's address in RET_ADDRS[0..N) (0: not
 * there). Returns how many of them it holds: 0 when none does, or no module is named so (*RET_SEEN false then);
 * -ENOMEM. */
int runtime_find_exported(UnwindProcess *up, Symbolizer *sym, RuntimeKind k, const char *const *names, size_t n,
                          Dwfl_Module **ret_mod, uint64_t *ret_addrs, bool *ret_seen);
/* Every runtime's trim_native() on T. */
int runtime_trim_native(ThreadSnapshot *t, bool *ret_clean);
