/* classify.h: from two samples of a thread to its class and the evidence for it (pure functions, no I/O). */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "model/proc-parse.h"
#include "model/thread-class.h"

/* On-CPU thresholds, in percent of one core over the interval. */
#define CLASSIFY_ON_CPU_PERCENT 50.0
/* A thread waiting for the GIL wakes 200 times a second for a few µs: a tick lands on it now and then. */
#define CLASSIFY_GIL_WAIT_CPU_PERCENT 5.0
#define CLASSIFY_BUSY_PERCENT 80.0
/* Busy loop: at most this share of the CPU time in the kernel (page faults, timer ticks). */
#define CLASSIFY_BUSY_MAX_SYSTEM_SHARE 0.10
/* Syscall spin: at least this many read/write-family syscalls a second moving (almost) no bytes, or this share of
 * the CPU time in the kernel with fewer bytes a second than BYTES_MAX. */
#define CLASSIFY_SPIN_MIN_SYSCALLS_PER_SEC 100.0
#define CLASSIFY_SPIN_MIN_SYSTEM_SHARE 0.50
#define CLASSIFY_SPIN_BYTES_MAX_PER_SEC 4096.0
/* Syscall spin with no read/write-family calls to count (an interpreter's loop of non-blocking recv(), or select()
 * with a zero timeout, burns user time between the calls): wanting the CPU the whole interval, no bytes moved, more
 * than BUSY_MAX_SYSTEM_SHARE of the time in the kernel, and that time not page faults. Only judged over at least
 * MIN_TICKS clock ticks of CPU time, where the user/system split is more than noise. */
#define CLASSIFY_QUIET_SPIN_MIN_TICKS 10
#define CLASSIFY_QUIET_SPIN_MIN_INTERVALS 3
#define CLASSIFY_QUIET_SPIN_MAX_FAULTS_PER_SEC 1000.0
/* The weight of the newest interval in the averaged user/system split (~10 intervals of memory). */
#define CLASSIFY_SPLIT_WEIGHT 0.2

/* One look at a thread: the cheap stat fields always, the deep ones when they were read. */
typedef struct ThreadSample {
        uint64_t when_usec;             /* CLOCK_MONOTONIC */
        char state;
        bool kthread;                   /* PF_KTHREAD: no user space, so no syscall to be parked in */
        uint64_t utime, stime;          /* clock ticks */
        bool have_io;
        uint64_t syscr, syscw, rchar, wchar;
        bool have_syscall;
        ProcSyscall syscall;
        bool have_sched;
        uint64_t run_ns, wait_ns;       /* schedstat: time on a CPU, and runnable waiting for one */
        uint64_t timeslices;            /* schedstat field 3: how many times it ran */
        bool frozen;                    /* a cgroup freezer holds its process (the scanner reads its cgroups), or
                                         * D with the freezer's wchan (__refrigerator: kernels before 6.1) */
        bool lock_retry;                /* asleep between tries for a file lock another process holds (the scanner
                                         * judges it: it takes /proc/locks and the process's fds) */
        uint64_t faults;                /* minor and major page faults, from stat */
        bool gil_wait;                  /* in a futex wait inside its CPython's GIL state (the scanner knows where):
                                         * it wakes every switch interval (5 ms) to ask for the GIL, so its run count
                                         * moves, yet it makes no progress until the holder lets go */
} ThreadSample;

typedef struct ClassState {
        ThreadClass class;
        uint64_t since_usec;            /* when the current class started */
        double cpu_percent;
        double syscalls_per_sec;
        double bytes_per_sec;
        /* On a CPU: the user and system ticks and page faults of each interval, averaged (weight
         * CLASSIFY_SPLIT_WEIGHT for the newest) over the stretch it has been on one, and how many intervals that is.
         * A 200 ms interval holds 20 ticks at most, 2 on a loaded machine: too few for the split alone. */
        unsigned oncpu_intervals;
        double avg_user_ticks, avg_system_ticks, avg_faults;
        /* A sleeping thread is "parked" while its syscall, arguments, SP, PC and run count stay the same. */
        bool parked;
        /* Parked in a wait that something owes it (owed.h judges, from its wait edges): a mutex another thread holds,
         * a peer that is stopped, gone or blocked itself, a deadlock. Only then is a parked sleeper blocked; any
         * other parked wait (a terminal, an idle peer, a runtime's park) is waiting, however long. Cleared when it
         * moves from its place. */
        bool owed;
        const char *owed_why;           /* static: "deadlock", "mutex held by another thread", … */
        ProcSyscall parked_place;
        bool parked_gil;                /* the place is a wait for the GIL (ThreadSample.gil_wait) */
        uint64_t parked_timeslices;
        uint64_t parked_since_usec;
} ClassState;

enum {
        CLASSIFY_READ_IO = 1 << 0,      /* /proc/…/io */
        CLASSIFY_READ_SYSCALL = 1 << 1, /* /proc/…/syscall */
        CLASSIFY_READ_WCHAN = 1 << 2,   /* /proc/…/wchan */
        CLASSIFY_READ_SCHED = 1 << 3,   /* /proc/…/schedstat (with the two above it) */
};

/* Percent of one core used between two samples. */
double classify_cpu_percent(const ThreadSample *prev, const ThreadSample *cur, long hz);
/* Which deep files to read for a thread in state ST (NULL for a new one) whose cheap sample is CUR (PREV may be
 * NULL): quiet sleepers, and threads parked on the GIL, get their syscall and run count read, to tell a parked wait
 * from one that moves. */
unsigned classify_wants(const ClassState *st, const ThreadSample *prev, const ThreadSample *cur, long hz);
/* Whether a sleeper not parked yet, which classify_wants() left unread because it used a little CPU since the last
 * look, may be starting a wait for the GIL (its wake-ups every switch interval cost it a tick now and then, more
 * often on a busy machine): the scanner then reads its syscall if its process runs CPython. */
bool classify_may_wait_gil(const ClassState *st, const ThreadSample *prev, const ThreadSample *cur, long hz);
/* Update ST from PREV (NULL for a new thread) to CUR. */
void classify_update(ClassState *st, const ThreadSample *prev, const ThreadSample *cur, long hz);
/* A parked thread's wait turned out to be owed (WHY, static) or not: blocked from when it parked, or waiting. */
void classify_set_owed(ClassState *st, bool owed, const char *why);
/* Whether a syscall is a normal place for an idle program to wait (nanosleep, epoll_wait, accept, a condition
 * variable's FUTEX_WAIT_BITSET, …), as opposed to a read, a lock, a write that should come back. */
bool classify_syscall_is_idle_wait(const ProcSyscall *sc);
/* Whether a thread in class C is stuck for whoever waits on it: stopped, frozen, a zombie, or blocked. */
bool classify_class_is_stuck(ThreadClass c);
