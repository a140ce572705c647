/* thread-groups.h: the threads of a snapshot grouped by what they do, as panicparse and the Java thread-dump
 * analysers group them: the same state, the same frames (kernel and user; machine frames by address, runtime frames
 * by function, file and line) and the same wait (syscall, runtime lock and owner) make one group. A 2,000-thread
 * server whose workers all wait alike reads as a handful of groups. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "model/snapshot.h"

typedef struct ThreadGroup {
        size_t *threads;        /* indices into Snapshot.threads, in the snapshot's order */
        size_t n;
        bool problem;           /* one of them is in D state or in the wait chain's deadlock */
        bool culprit;           /* one of them is the thread the snapshot's rule fired on */
        bool stackless;         /* its threads have no frame, kernel or user (not read: a budget, or gone) */
} ThreadGroup;

/* The groups of S's threads, the most interesting first: those with a problem, then the culprit's, then the
 * largest of those with a stack, then those without; ties in the snapshot's order. -ENOMEM, or 0 (no threads: *RET NULL, *RET_N 0). */
int snapshot_group_threads(const Snapshot *s, ThreadGroup **ret, size_t *ret_n);
void thread_groups_free(ThreadGroup *g, size_t n);
/* Whether threads A and B of S would be one group. */
bool snapshot_threads_alike(const ThreadSnapshot *a, const ThreadSnapshot *b);
/* G's TIDs as ascending runs, "101-137, 140" with SEP ", " (text) or "101-137,140" with "," (a pprof label): at
 * most MAX_RUNS runs, then "SEP… (N more)". TIDs are numbers: nothing to escape. */
void thread_group_put_tids(const Snapshot *s, const ThreadGroup *g, const char *sep, size_t max_runs, FILE *f);
