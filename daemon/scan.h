/* scan.h: the poll: every thread's cheap /proc facts through kept descriptors, deep reads for suspects only,
 * classification, and mark-and-sweep of what vanished. */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/intmap.h"
#include "chain/wait-chain.h"
#include "config/config.h"
#include "proc/cgroup-freeze.h"
#include "proc/peers-tables.h"
#include "proc/task-iter.h"

/* ProcessEntry.runtimes: its maps were looked at. */
#define RUNTIMES_LOOKED (1U << 15)
#include "unwind/symbolize.h"
#include "classify.h"

/* A thread asleep between tries for a lock: it woke from its sleep within WAKE_USEC, and its process has a file open
 * that another owner holds a lock on, checked at most every RECHECK_USEC (one read of /proc/locks a scan, and the
 * process's fds only when another process holds a lock at all). */
#define SCAN_LOCK_RETRY_WAKE_USEC (3 * USEC_PER_SEC)
#define SCAN_LOCK_RECHECK_USEC USEC_PER_SEC
/* A Python process whose GIL could not be found (read mid-change, a reader that failed): looked for again after. */
#define SCAN_GIL_RETRY_USEC (10 * USEC_PER_SEC)
/* Such a thread is only classed lock-retry once a probe (lock-probe.h) saw a lock call of it fail; seen, the verdict
 * holds for RECONFIRM_USEC, then a new probe is asked for; not seen, no probe of it for NOT_SEEN_USEC. Threads asked
 * for in one scan: WANTED_MAX. */
#define SCAN_LOCK_RECONFIRM_USEC (60 * USEC_PER_SEC)
#define SCAN_LOCK_NOT_SEEN_USEC (60 * USEC_PER_SEC)
#define SCAN_LOCK_PROBE_WANTED_MAX 4U

typedef enum LockProbeVerdict {
        LOCK_PROBE_NONE,                /* no probe yet, or its verdict expired */
        LOCK_PROBE_RUNNING,
        LOCK_PROBE_RETRYING,            /* a lock call of it failed while it was traced */
        LOCK_PROBE_NOT_SEEN,            /* none did in the probe's window */
        LOCK_PROBE_FAILED,              /* it could not be traced (another tracer, gone) */
        _LOCK_PROBE_VERDICT_MAX,
        _LOCK_PROBE_VERDICT_INVALID = -EINVAL,
} LockProbeVerdict;

/* "none", "running", "retrying", "not-seen", "failed": the label of stackwatch_lock_probes_total. */
const char *lock_probe_verdict_to_string(LockProbeVerdict v);

/* Descriptors kept for things other than stat files (sockets, the archive, captures in flight). */
#define SCAN_FD_RESERVE 256U
/* How long a process's place in the cgroup hierarchies is taken as read: a process is seldom moved (pausing a
 * container freezes its cgroup, it does not move it). Its cgroups' freezers are read every scan. */
#define SCAN_CGROUP_REREAD_USEC (30 * USEC_PER_SEC)

typedef struct ThreadEntry ThreadEntry;

/* A wait on one fd: a syscall and the fd it waits on (a read of a pipe, say). */
typedef struct WaitPlace {
        int64_t nr;
        int fd;
} WaitPlace;

typedef struct ProcessEntry {
        pid_t pid;
        uint64_t starttime;             /* with pid, identifies the process across pid reuse */
        unsigned seen_gen;
        unsigned all_seen_gen;          /* the scan whose walk counted every thread of it with no record of its own
                                         * as still there (a TaskGroup): those are seen in it too */
        unsigned records_gen, n_records; /* whole records of its threads in that scan */
        unsigned want_tids_gen;         /* when its count disagreed: the next walk gives those threads' tids */
        ThreadEntry *threads;           /* its known threads, the leader (tid == pid) among them */
        unsigned n_threads;
        char comm[64];
        bool identity_loaded;           /* exe, unit, cgroup, uid: read once, when a rule first needs them */
        char *exe, *unit, *cgroup;
        uid_t uid;
        bool ours;                      /* stackwatchd itself or a child of it (a capture job, a probe, a hook):
                                         * never classed, so never a rule's, whatever it looks like mid-scan */
        uint64_t lock_checked_usec;     /* when its fds were last matched against /proc/locks; 0: never */
        uint64_t owed_walked_usec;      /* when its waits were last walked for their verdict (owed.h); 0: never */
        uint64_t moved_usec;            /* when a scan last saw a thread of it move (run, change its state or its
                                         * wait), come or go: what a verdict on its waits, or on a wait that leads to
                                         * it, was made before is out of date */
        uint64_t stuck_usec;            /* when a thread of it last came into or out of a stuck class (stopped,
                                         * frozen, zombie, blocked: by a scan or by a verdict of owed.h): a wait that
                                         * leads to it may be owed, or no longer */
        uint64_t waits_key;             /* where its parked threads wait, as owed.c keys it (one number), */
        unsigned waits_key_gen;         /* made in this scan (0: never) */
        uint16_t runtimes;              /* 0: not looked yet; else RUNTIMES_LOOKED and 1 << RuntimeKind for each
                                         * runtime whose interpreter its maps hold (a python3 executable, a
                                         * libpython3, a libruby): its lock waits are read from the interpreter */
        uint64_t gil_looked_usec;       /* when its GIL was looked for (found once, it stays where it is; not
                                         * found, it is looked for again after SCAN_GIL_RETRY_USEC); 0: never */
        uint64_t gil_start, gil_size;   /* where its GIL's state lies; size 0: not known */
        bool lock_suspect;              /* then: it has a file open that another owner holds a lock on */
        CgroupPlace place;              /* its cgroups, for their freezers */
        uint64_t place_usec;            /* when PLACE was read; 0: never */
        CgroupFrozen frozen;            /* as this scan read its cgroups: version 0 when no freezer holds it */
        bool was_frozen;                /* as the scan before read them */
} ProcessEntry;

struct ThreadEntry {
        pid_t pid, tid;
        ProcessEntry *process;
        ThreadEntry *next, *prev;       /* in process->threads */
        int stat_fd;                    /* kept open across polls; -EBADF when over the descriptor budget */
        int sched_fd;                   /* schedstat, kept likewise once it sleeps (after every stat fd) */
        unsigned seen_gen;
        char comm[16];                  /* a task's name (TASK_COMM_LEN): a longer one is a kernel worker's, which is
                                         * its own process's leader (ProcessEntry.comm has it whole) */
        ThreadSample sample;            /* the latest look */
        bool have_sample;
        bool settle;                    /* its sample moved at the latest look (or it polls for a lock): classed
                                         * again at the next even when nothing moved, as its class may follow from
                                         * time alone (parked once a look finds it where the last one did) */
        int counted_class;              /* the class it is counted under in ScanStats.by_class; -1: none */
        ThreadEntry *class_next, *class_prev; /* in Scanner.by_class, under COUNTED_CLASS */
        ClassState cls;
        char wchan[64];                 /* read for D-state threads */
        uint64_t woke_usec;             /* when it was last seen to have woken from a sleep it is in again; 0: not */
        char *walk_wchan;               /* its wait channel as a walk read it (WaitThreads.wchan()), until it moves;
                                         * NULL: not read */
        WaitPlace quiet_place;          /* the wait on one fd a walk last found nobody owes it (nr -1: none): parked
                                         * there again, it waits as it did, and needs no new walk (owed.c) */
        LockProbeVerdict lock_probe;    /* whether it polls for a lock, as a probe saw it */
        uint64_t lock_probe_usec;       /* when that verdict came */
        char *python_frame;             /* the innermost Python frame the daemon's latest capture of it caught
                                         * ("inner (app.py:12)", escaped); NULL when none did. Never read by the
                                         * scan: a capture sets it (scanner_set_python_frame()) */
};

typedef struct ScanStats {
        uint64_t scans;
        uint64_t last_scan_usec;        /* CLOCK_MONOTONIC when the last scan ended */
        uint64_t last_duration_usec;
        uint64_t last_cpu_usec;         /* the daemon's CPU time in it (CLOCK_THREAD_CPUTIME_ID): the scan's cost on a
                                         * busy machine, where its wall time is mostly waiting for a CPU */
        uint64_t cpu_usec;              /* in all scans since start */
        unsigned threads, processes;    /* watched: the daemon's own (ProcessEntry.ours) left out */
        unsigned ours;                  /* threads of the daemon and its children, scanned but not classed */
        unsigned by_class[_THREAD_CLASS_MAX];
        unsigned kept_fds, max_kept_fds;
        uint64_t deep_reads;
        uint64_t task_walks;            /* /proc/PID/task listings: only for new processes or changed thread counts */
        uint64_t records;               /* BPF whole records read, in all */
        uint64_t same_records;          /* BPF records of threads that had not moved (their tid alone), in all */
        uint64_t reclassed;             /* threads classed in all (the others had not moved: no work) */
} ScanStats;

/* Where a scan reads every thread's state from. */
typedef enum ScanSource {
        SCAN_SOURCE_PROC,               /* /proc/PID/task/TID/{stat,schedstat,syscall,wchan,io} */
        SCAN_SOURCE_BPF,                /* one pass of the BPF task iterator (proc/task-iter.h) */
        _SCAN_SOURCE_MAX,
        _SCAN_SOURCE_INVALID = -EINVAL,
} ScanSource;

/* "proc", "bpf": the label of stackwatch_scan_source. */
const char *scan_source_to_string(ScanSource s);

typedef struct Scanner {
        int proc_fd;
        IntMap threads;                 /* tid → ThreadEntry */
        IntMap processes;               /* pid → ProcessEntry */
        unsigned gen;
        size_t seen_threads, seen_processes; /* in this scan; the sweep has nothing to do when all were seen */
        long hz;
        pid_t self;                     /* the daemon's pid: it and its children are not watched (ProcessEntry.ours) */
        PeerResolver *locks;            /* this scan's /proc/locks, read on first need */
        pid_t lock_probe_wanted[SCAN_LOCK_PROBE_WANTED_MAX]; /* threads that need a lock probe, this scan */
        size_t n_lock_probe_wanted;
        uint64_t python_frames_changed; /* counts changes of ThreadEntry.python_frame between scans */
        ScanStats stats;
        ThreadEntry *by_class[_THREAD_CLASS_MAX]; /* the threads of each class (as counted): rules look at theirs */
        Symbolizer *runtime_sym;        /* where the runtimes (CPython) of processes live, by build-id, for the
                                         * walks that read their waits; made on first need */
        CgroupFreezers *freezers;       /* the cgroup hierarchies and this scan's answers; NULL when none */
        ScanSource source;
        TaskIter *iter;                 /* with SCAN_SOURCE_BPF */
        bool want_all;                  /* the next BPF pass writes every thread's whole record: the first, and
                                         * after a record of a thread the scanner does not know */
        pid_t *settling, *settling_next; /* the tids of threads with ThreadEntry.settle, for this scan and the next */
        size_t n_settling, n_settling_next, settling_allocated, settling_next_allocated;
        pid_t *wanting;                 /* processes whose tids the last walk was asked for */
        size_t n_wanting, wanting_allocated;
        uint64_t now_usec;              /* the time of the scan under way, or of the last one */
        WaitThreads wait_threads;       /* the walks' view of the threads: this scan's samples */
        FdTables *fd_tables;            /* every process's fds as the walks last read them, kept while it does not
                                         * run: a poll's walks read the fds of the processes that moved */
        FdTablesView fd_view;           /* which processes there are, and which moved: this scan's */
        char *source_why;               /* why the source is what it is, for the log and stackctl status */
} Scanner;

int scanner_new(Scanner **ret);
Scanner *scanner_free(Scanner *s);
DEFINE_TRIVIAL_CLEANUP_FUNC(Scanner *, scanner_free);

/* Choose where the scans read from, as scan.source WANT says: auto takes BPF when it loads, else /proc. 0 with
 * s->source and s->source_why set; -errno when WANT is bpf and the iterator cannot be loaded (s->source_why says why;
 * the scanner keeps its source). Switching from /proc closes the descriptors the /proc scan kept. */
int scanner_set_source(Scanner *s, ConfigScanSource want);
/* One pass over every process and thread; classification included. Vanished ones are swept. A BPF scan that fails
 * (its read refused) falls back to /proc for good, and returns 1 so the caller can say so. */
int scanner_scan(Scanner *s, uint64_t now_usec);
/* A lock probe of thread TID of process PID (started at STARTTIME) ended with verdict V at NOW. */
void scanner_lock_probe_done(Scanner *s, pid_t pid, pid_t tid, uint64_t starttime, LockProbeVerdict v, uint64_t now);
/* Whether a CPython runs in P (its maps, read once): its futex waits may be on the GIL or a Python lock. */
bool scanner_process_runs(Scanner *s, ProcessEntry *p, RuntimeKind k);
/* The symbolizer the walks find runtimes with (made on first call); NULL on OOM. */
Symbolizer *scanner_runtime_symbolizer(Scanner *s);

/* Keep FRAME (copied; NULL: none) as the innermost Python frame that the latest snapshot caught of thread TID of
 * process PID, until the thread exits; nothing when the scan knows no such thread. -ENOMEM. */
int scanner_set_python_frame(Scanner *s, pid_t pid, pid_t tid, const char *frame);
/* Forget the Python frames kept of every thread of process PID (started at STARTTIME; 0: whichever). */
void scanner_forget_python_frames(Scanner *s, pid_t pid, uint64_t starttime);
/* The threads as this scan saw them, for the wait-chain walks (wait_chain_build()): the samples hold every thread's
 * state and syscall; a wait channel is read, and kept until the thread moves, only when a walk follows its edges. */
const WaitThreads *scanner_wait_threads(Scanner *s);
/* A resolver for the walks of the poll at NOW into *RET: every process's fds from the tables the scanner keeps, read
 * again only for the processes that moved since they were read; a Python thread's lock waits from its interpreter,
 * for the processes that run one (scanner_process_python()). -ENOMEM. */
int scanner_resolver_new(Scanner *s, uint64_t now, PeerResolver **ret);
/* Count thread T under its class in s->stats.by_class and list it in s->by_class, where its class changed (a verdict
 * of owed.h sets it), and note when its process's threads came into or out of a stuck class (ProcessEntry.
 * stuck_usec). */
void scanner_count_class(Scanner *s, ThreadEntry *t);
/* Read exe, unit, cgroup and uid of a process once (rules that filter on them call this). */
int scanner_load_identity(Scanner *s, ProcessEntry *p);
