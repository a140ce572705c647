/* scan.h: the poll: every thread's cheap /proc facts through kept descriptors, deep reads for suspects only,
 * classification, and mark-and-sweep of what vanished. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "classify.h"
#include "intmap.h"

/* Descriptors kept for things other than stat files (sockets, the archive, captures in flight). */
#define SCAN_FD_RESERVE 256U

typedef struct ThreadEntry ThreadEntry;

typedef struct ProcessEntry {
        pid_t pid;
        uint64_t starttime;             /* with pid, identifies the process across pid reuse */
        unsigned seen_gen;
        ThreadEntry *threads;           /* its known threads, the leader (tid == pid) among them */
        unsigned n_threads;
        char comm[64];
        bool identity_loaded;           /* exe, unit, cgroup, uid: read once, when a rule first needs them */
        char *exe, *unit, *cgroup;
        uid_t uid;
} ProcessEntry;

struct ThreadEntry {
        pid_t pid, tid;
        ProcessEntry *process;
        ThreadEntry *next, *prev;       /* in process->threads */
        int stat_fd;                    /* kept open across polls; -EBADF when over the descriptor budget */
        unsigned seen_gen;
        char comm[64];
        ThreadSample sample;            /* the latest look */
        bool have_sample;
        ClassState cls;
        char wchan[64];                 /* read for D-state threads */
};

typedef struct ScanStats {
        uint64_t scans;
        uint64_t last_scan_usec;        /* CLOCK_MONOTONIC when the last scan ended */
        uint64_t last_duration_usec;
        unsigned threads, processes;
        unsigned by_class[_THREAD_CLASS_MAX];
        unsigned kept_fds, max_kept_fds;
        uint64_t deep_reads;
        uint64_t task_walks;            /* /proc/PID/task listings: only for new processes or changed thread counts */
} ScanStats;

typedef struct Scanner {
        int proc_fd;
        IntMap threads;                 /* tid → ThreadEntry */
        IntMap processes;               /* pid → ProcessEntry */
        unsigned gen;
        size_t seen_threads, seen_processes; /* in this scan; the sweep has nothing to do when all were seen */
        long hz;
        bool deep_sleepers;             /* some rule cares about sleeping threads (see classify_wants) */
        ScanStats stats;
} Scanner;

int scanner_new(Scanner **ret);
Scanner *scanner_free(Scanner *s);
DEFINE_TRIVIAL_CLEANUP_FUNC(Scanner *, scanner_free);

/* One pass over every process and thread; classification included. Vanished ones are swept. */
int scanner_scan(Scanner *s, uint64_t now_usec);
/* Read exe, unit, cgroup and uid of a process once (rules that filter on them call this). */
int scanner_load_identity(Scanner *s, ProcessEntry *p);
