/* thread-class.h: what a thread is doing, as the strace/top/stack triage would say it. Classes are facts; whether
 * a fact is a problem is policy, and policy lives in the rules. */
#pragma once

#include <errno.h>

typedef enum ThreadClass {
        THREAD_CLASS_RUNNING,           /* on a CPU, doing work (syscalls move bytes, or light CPU) */
        THREAD_CLASS_WAITING,           /* asleep in a syscall that is a normal place to wait (epoll_wait, …) */
        THREAD_CLASS_BLOCKED,           /* D state the whole window, or parked in one syscall with no progress */
        THREAD_CLASS_BUSY_LOOP,         /* on a CPU in user mode, no syscalls, no context switches */
        THREAD_CLASS_SYSCALL_SPIN,      /* on a CPU, syscalls climbing while no bytes move */
        THREAD_CLASS_STOPPED,           /* T or t */
        THREAD_CLASS_ZOMBIE,            /* Z */
        THREAD_CLASS_FROZEN,            /* held by a cgroup freezer, v1 or v2 (docker pause, systemctl freeze) */
        THREAD_CLASS_LOCK_RETRY,        /* sleeps between tries for a file lock another process holds (polls for it
                                         * with F_SETLK or flock(LOCK_NB), as SQLite's busy handler does) */
        _THREAD_CLASS_MAX,
        _THREAD_CLASS_INVALID = -EINVAL,
} ThreadClass;

/* "running", "waiting", "blocked", "busy-loop", "syscall-spin", "stopped", "zombie", "frozen", "lock-retry". */
const char *thread_class_to_string(ThreadClass c);
ThreadClass thread_class_from_string(const char *s);
