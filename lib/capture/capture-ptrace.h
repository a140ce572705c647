/* capture-ptrace.h: stop one thread for microseconds with PTRACE_SEIZE + PTRACE_INTERRUPT; detach guaranteed. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "unwind/unwind.h"

/* An attached thread. ptrace_session_done() (run by _cleanup_ptrace_session_) always detaches, so no return path
 * leaves a target stopped or traced. */
typedef struct PtraceSession {
        pid_t tid;
        bool seized;
        bool stopped;
        int pending_signal;     /* a signal-delivery-stop's signal, re-injected on detach */
} PtraceSession;

#define PTRACE_SESSION_NULL ((PtraceSession) { .tid = 0 })

/* PTRACE_SEIZE: attach without stopping. -EPERM when someone else traces it (or we may not), -ESRCH if gone. */
int ptrace_session_seize(PtraceSession *s, pid_t tid);
/* PTRACE_INTERRUPT, without waiting. */
int ptrace_session_interrupt(PtraceSession *s);
/* Whether the interrupted thread has stopped: 1 (stopped), 0 (not yet), -ESRCH (gone), -errno. */
int ptrace_session_poll(PtraceSession *s);
/* PTRACE_INTERRUPT and wait up to TIMEOUT_USEC for the stop. -ETIMEDOUT when the thread does not stop in time
 * (it went into uninterruptible sleep: it is released when it wakes or when this process exits). */
int ptrace_session_stop(PtraceSession *s, uint64_t timeout_usec);
/* Full general-purpose registers of a stopped thread. */
int ptrace_session_get_regs(PtraceSession *s, UnwindRegs *ret);
/* Detach (re-injecting a pending signal). */
int ptrace_session_detach(PtraceSession *s);
/* Detach; a thread that is not stopped gets one more short chance to stop first. -ETIMEDOUT when it did not
 * (uninterruptible sleep): it stays attached, and stops when it wakes, until it is detached or this process exits;
 * S then still says seized, for the caller to keep (ptrace_held_add()) or to forget. */
int ptrace_session_release(PtraceSession *s);
/* ptrace_session_release(), and a thread that would not stop is forgotten (left to the kernel). */
void ptrace_session_done(PtraceSession *s);
#define _cleanup_ptrace_session_ __attribute__((cleanup(ptrace_session_done)))

/* The threads a capture gave up waiting for: seized and interrupted, never stopped (uninterruptible sleep). Each
 * stops when it wakes, and then stays stopped until it is detached or this process exits: so they are kept here,
 * detached as soon as they are seen stopped, and while any is held the process keeps its raised priority
 * (capture-sched.h), so that even its death releases them at once. */
typedef struct PtraceHeld {
        PtraceSession *sessions;
        size_t n, n_allocated;
} PtraceHeld;

/* Keep S (seized, not stopped); S is reset. -ENOMEM: S is left as it was. */
int ptrace_held_add(PtraceHeld *h, PtraceSession *s);
/* Detach those that have stopped since (and forget those that are gone). Returns how many are still held. */
size_t ptrace_held_release(PtraceHeld *h);
/* A last ptrace_held_release(), then forget the rest (the kernel detaches them when this process exits). Returns
 * how many were forgotten. */
size_t ptrace_held_done(PtraceHeld *h);

/* The ptrace capture of threads (one or several) of one process: seize, stop, registers, a stack copy of at most
 * STACK_MAX bytes, detach. Several at once: all interrupted first, then each one read and released as soon as it
 * stops. On a loaded machine an interrupted thread stops only when it next gets a CPU (tens of ms behind 50 busy
 * threads on 2 cores): one at a time, those waits add up; in a batch they overlap, and each pause stays its own. */
#define PTRACE_BATCH_MAX 32
/* The stack buffers of a batch are allocated, and faulted in, before its threads are stopped: at most this much. */
#define PTRACE_BATCH_BYTES (16U * 1024 * 1024)
typedef struct PtraceBatchItem {
        pid_t tid;              /* in */
        int error;              /* 0, or -EPERM, -ESRCH (gone), -ETIMEDOUT (did not stop: uninterruptible sleep) */
        UnwindRegs regs;
        UnwindStack stack;      /* owned by the caller on success */
        bool truncated;
        double pause_us;        /* from when it was last seen running to the end of its detach */
        /* Called while the thread is stopped, after its registers and stack were copied (NULL: nothing more): what
         * else must be read of it at that moment (an interpreter's frames). Its time counts in the pause. */
        void (*while_stopped)(struct PtraceBatchItem *it, void *userdata);
        void *userdata;
} PtraceBatchItem;

/* How many threads one batch may hold when each copies up to STACK_MAX bytes: 1..PTRACE_BATCH_MAX. */
size_t capture_ptrace_batch_max(size_t stack_max);
/* Capture ITEMS[0..N), N <= capture_ptrace_batch_max(STACK_MAX). The threads still running are given up
 * (-ETIMEDOUT) once none of them stopped for TIMEOUT_USEC, or after CAP_USEC in all. Each item says how it went;
 * returns -EINVAL for too many, else 0. No thread is left stopped; one that never stopped stays attached, in HELD
 * (when not NULL, and memory allows) until it is seen stopped, else until it wakes or we exit. */
int capture_ptrace_batch(pid_t pid, const ProcMap *maps, size_t n_maps, size_t stack_max, uint64_t timeout_usec,
                         uint64_t cap_usec, PtraceBatchItem *items, size_t n, PtraceHeld *held);
