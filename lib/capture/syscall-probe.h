/* syscall-probe.h: name the syscall a spinning thread repeats, and its result, by tracing its syscalls for a
 * short bounded window (what a person does with "strace -p TID" for a second, but for milliseconds). */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct SyscallProbe {
        uint64_t window_usec;   /* how long the thread was traced */
        unsigned syscalls;      /* syscall exits seen in that time */
        int64_t nr;             /* the most frequent (syscall, result) pair; -1 when no syscall returned */
        int64_t result;         /* its return value: >= 0, or -errno */
        unsigned count;         /* how often it returned that */
} SyscallProbe;

/* Trace thread TID's syscalls for WINDOW_USEC (PTRACE_SEIZE, PTRACE_SYSCALL, PTRACE_GET_SYSCALL_INFO), then
 * detach; signals that arrive meanwhile are passed on. The thread pauses at every syscall entry and exit for that
 * window and no longer. -EPERM when someone else traces it, -ESRCH when it is gone, -ETIMEDOUT when it would not
 * stop at all (uninterruptible sleep). */
int syscall_probe(pid_t tid, uint64_t window_usec, SyscallProbe *ret);

/* A lock call that does not wait, and failed because another holder's lock conflicts: what a program that polls for
 * a lock (SQLite's busy handler: fcntl(F_SETLK), then a sleep, again) does each time it wakes. */
typedef struct LockAttempt {
        int64_t nr;             /* __NR_fcntl (F_SETLK, F_OFD_SETLK) or __NR_flock (LOCK_NB); -1: none seen */
        int fd;
        int cmd;                /* fcntl's command, or flock's operation */
        bool write;             /* an exclusive lock (F_WRLCK, LOCK_EX) was asked for */
        short whence;           /* fcntl: the byte range asked for, as its struct flock gave it */
        int64_t start, len;
        int64_t result;         /* -EAGAIN or -EACCES */
        uint64_t window_usec;   /* how long the thread was traced before that (or in all, when none failed) */
} LockAttempt;

/* Trace thread TID's syscalls until a non-blocking lock call (fcntl F_SETLK/F_OFD_SETLK, flock LOCK_NB) fails with
 * EAGAIN or EACCES, for WINDOW_USEC at most, then detach as syscall_probe() does. 1 with *RET set when one failed, 0
 * when none did in the window (RET->window_usec says how long), -errno as syscall_probe(). The thread is stopped at
 * each syscall entry and exit meanwhile: a thread sleeping between tries makes a few. */
int lock_retry_probe(pid_t tid, uint64_t window_usec, LockAttempt *ret);
