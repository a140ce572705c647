/* snapshot-text.h: eu-stack-shaped text and folded (flame graph) renderings of a snapshot. */
#pragma once

#define TEXT_GROUP_TID_RUNS_MAX 32

#include <stdbool.h>
#include <stdio.h>

#include "model/snapshot.h"

typedef struct TextOptions {
        bool kernel;            /* print kernel frames */
        bool modules;           /* print the module list (build-ids) at the end */
        bool locks;             /* print the lock table: each mutex waited for, its holder and its waiters */
        bool raw_names;         /* text: a frame's linkage name, as the binary has it, not the demangled one */
        bool no_group;          /* text: every thread on its own, not threads alike grouped (thread-groups.h) */
} TextOptions;

/* Every process-supplied string is escaped (control characters become \e, \n, \xNN). */
int snapshot_print_text(const Snapshot *s, const TextOptions *o, FILE *f);
/* One line per thread: "comm;outermost;…;innermost;kernel_outer_[k];…;kernel_inner_[k] 1". */
int snapshot_print_folded(const Snapshot *s, bool kernel, FILE *f);

/* The innermost MAX user frames of thread TID of S, one line each, "#0  read+0x12 (libc.so.6) at file.c:26"
 * (function and module escaped; kernel frames, "[k] schedule+0x1a", when the thread has no user frames): what an
 * alert or a journal record shows of a stack. *RET is NULL-terminated and NULL when TID has no frames. */
int snapshot_top_frames(const Snapshot *s, pid_t tid, size_t max, char ***ret);

/* The innermost runtime frame (Python, Java) of thread TID of S as "inner (app.py:12)" (escaped), *RET NULL when
 * it has none. */
int snapshot_top_runtime_frame(const Snapshot *s, pid_t tid, char **ret);

/* Thread TID of S as snapshot_print_text() prints it (its kernel and user stack), at most MAX bytes (cut with "…");
 * *RET is NULL when S has no thread TID. -ENOMEM. */
int snapshot_thread_text(const Snapshot *s, pid_t tid, const TextOptions *o, size_t max, char **ret);
