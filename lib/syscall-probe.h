/* syscall-probe.h: name the syscall a spinning thread repeats, and its result, by tracing its syscalls for a
 * short bounded window (what a person does with "strace -p TID" for a second, but for milliseconds). */
#pragma once

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
