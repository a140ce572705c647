/* capture.h: capture_process(): every thread's kernel and user stack, passive where possible, into a Snapshot. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/time-util.h"
#include "model/snapshot.h"
#include "runtime/runtime.h"
#include "unwind/symbolize.h"
#include "unwind/unwind.h"

/* Budgets (each overrun is recorded in the snapshot, never silent). */
#define CAPTURE_FRAMES_DEFAULT 256U
#define CAPTURE_FRAMES_MAX 4096U
#define CAPTURE_STACK_BYTES_DEFAULT (256U * 1024)
#define CAPTURE_STACK_BYTES_MAX (64U * 1024 * 1024)
#define CAPTURE_THREADS_DEFAULT 4096U
#define CAPTURE_THREADS_MAX 65536U
#define CAPTURE_TIME_BUDGET_USEC_DEFAULT (10 * USEC_PER_SEC)
#define CAPTURE_STOP_TIMEOUT_USEC_DEFAULT (100 * USEC_PER_MSEC)
#define CAPTURE_KFRAMES_MAX 64U
#define CAPTURE_RUNTIME_ANSWER_USEC_DEFAULT (2 * USEC_PER_SEC)

typedef struct CaptureOptions {
        CaptureMethod method;
        UnwinderKind unwinder;
        bool kernel;                    /* read /proc/…/stack */
        unsigned max_frames;            /* user frames per thread */
        size_t stack_bytes;             /* stack bytes copied per thread */
        unsigned max_threads;           /* threads per process */
        uint64_t time_budget_usec;      /* for the whole process */
        uint64_t deadline_usec;         /* CLOCK_MONOTONIC: when the budget runs out, shared by a process and its
                                         * peers (0: time_budget_usec from the capture's start) */
        uint64_t stop_timeout_usec;     /* how long to wait for a ptrace stop */
        pid_t tid;                      /* only this thread; 0 for all */
        pid_t keep_tid;                 /* a thread that max_threads never leaves out (a rule's trigger thread) */
        const char *debuginfo_path;     /* libdwfl syntax; NULL for the default */
        unsigned skip_runtimes;         /* 1 << RuntimeKind of the language runtimes not read (runtime/runtime.h):
                                         * CPython's frames, Go's goroutines, a JVM's own thread dump (which costs it
                                         * a safepoint) are read by default */
        uint64_t runtime_answer_usec;   /* how long to wait for a runtime that is asked (the JVM), within the budget */
} CaptureOptions;

void capture_options_init(CaptureOptions *o);

/* Load the BPF reader of a sleeping thread's every register now, for the captures of this process and of the
 * children it forks after: a daemon calls it before it forks capture children, each of which would load it again
 * (17 ms). Captures load it themselves when a thread first needs it. 0, or -errno when it cannot be loaded here
 * (then such a thread is stopped with ptrace instead, in the auto method). */
int capture_regs_preload(void);
/* The fd that a child forked after capture_regs_preload() must keep open to read registers (its parent closes the
 * rest): -EBADF when none was loaded. */
int capture_regs_fd(void);

/* Capture process PID. Returns -ESRCH when the process does not exist (or is gone before anything was read),
 * -EACCES/-EPERM when nothing could be read; otherwise 0 with a snapshot that may be partial (see its errors).
 * SYM caches modules across calls and must outlive none of the returned data. */
int capture_process(pid_t pid, const CaptureOptions *o, Symbolizer *sym, Snapshot **ret);
