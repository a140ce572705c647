/* syscall-probe.c: a bounded PTRACE_SYSCALL loop over one thread, counting (syscall, result) pairs. */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <time.h>

#include "capture-ptrace.h"
#include "log.h"
#include "macro.h"
#include "syscall-probe.h"
#include "time-util.h"

/* Distinct (syscall, result) pairs counted; a spinning thread has one or two. */
#define PROBE_PAIRS 16
/* Polls of waitpid() between two 20 us sleeps while the thread runs. */
#define PROBE_SPINS 50
#define PROBE_SLEEP_NSEC 20000
/* How long the thread gets to reach its final stop when the window ends while it runs. It stops within
 * microseconds when it has a CPU, but on a loaded machine it may wait milliseconds for one; the session's generic
 * cleanup gives up after 1 ms and leaves the thread traced until we exit, which a test caught. */
#define PROBE_FINAL_STOP_USEC (100 * USEC_PER_MSEC)

typedef struct ProbePair {
        int64_t nr, result;
        unsigned count;
} ProbePair;

static void count_pair(ProbePair *pairs, size_t *n, int64_t nr, int64_t result) {
        for (size_t i = 0; i < *n; i++)
                if (pairs[i].nr == nr && pairs[i].result == result) {
                        pairs[i].count++;
                        return;
                }
        if (*n < PROBE_PAIRS)
                pairs[(*n)++] = (ProbePair) { .nr = nr, .result = result, .count = 1 };
}

/* Wait for the next stop of S's thread until DEADLINE (CLOCK_MONOTONIC usec). 1 with *STATUS set, 0 when the
 * deadline passed first, -ESRCH when the thread is gone. */
static int wait_stop(PtraceSession *s, uint64_t deadline, int *status) {
        for (unsigned spins = 0;; spins++) {
                pid_t w = waitpid(s->tid, status, __WALL | WNOHANG);

                if (w == s->tid) {
                        if (WIFEXITED(*status) || WIFSIGNALED(*status)) {
                                s->seized = s->stopped = false;
                                return -ESRCH;
                        }
                        s->stopped = true;
                        return 1;
                }
                if (w < 0 && errno != EINTR) {
                        s->seized = s->stopped = false;
                        return -ESRCH;
                }
                if (now_usec(CLOCK_MONOTONIC) >= deadline)
                        return 0;
                if (spins >= PROBE_SPINS)
                        nanosleep(&(struct timespec) { .tv_nsec = PROBE_SLEEP_NSEC }, NULL);
        }
}

int syscall_probe(pid_t tid, uint64_t window_usec, SyscallProbe *ret) {
        _cleanup_ptrace_session_ PtraceSession s = PTRACE_SESSION_NULL;
        ProbePair pairs[PROBE_PAIRS];
        size_t n_pairs = 0;
        SyscallProbe p = { .nr = -1 };
        uint64_t start, deadline;
        int r, sig;

        r = ptrace_session_seize(&s, tid);
        if (r < 0)
                return r;
        r = ptrace_session_stop(&s, 100 * USEC_PER_MSEC);
        if (r < 0)
                return r;
        if (ptrace(PTRACE_SETOPTIONS, tid, NULL, (void *) PTRACE_O_TRACESYSGOOD) < 0)
                return negative_errno();
        sig = s.pending_signal;
        s.pending_signal = 0;
        start = now_usec(CLOCK_MONOTONIC);
        deadline = start + window_usec;

        while (now_usec(CLOCK_MONOTONIC) < deadline) {
                struct __ptrace_syscall_info info;
                int status;

                if (ptrace(PTRACE_SYSCALL, tid, NULL, (void *) (uintptr_t) sig) < 0) {
                        r = negative_errno();
                        break;
                }
                s.stopped = false;
                sig = 0;
                r = wait_stop(&s, deadline, &status);
                if (r <= 0)
                        break; /* gone, or still running at the deadline: the cleanup interrupts and detaches */
                if (!WIFSTOPPED(status))
                        continue;
                if (WSTOPSIG(status) != (SIGTRAP | 0x80)) {
                        if ((status >> 16) != 0)
                                break; /* a group-stop or another event: leave it to the detach */
                        sig = WSTOPSIG(status); /* a signal for the thread: pass it on */
                        continue;
                }
                /* Zeroed first: valgrind does not know this request writes INFO. */
                memset(&info, 0, sizeof info);
                if (ptrace(PTRACE_GET_SYSCALL_INFO, tid, (void *) sizeof info, &info) < 0) {
                        r = negative_errno();
                        break;
                }
                if (info.op == PTRACE_SYSCALL_INFO_EXIT) {
                        p.syscalls++;
                        count_pair(pairs, &n_pairs, p.nr, info.exit.rval);
                } else if (info.op == PTRACE_SYSCALL_INFO_ENTRY)
                        p.nr = (int64_t) info.entry.nr; /* the exit stop does not repeat it */
        }
        p.window_usec = now_usec(CLOCK_MONOTONIC) - start;
        if (s.stopped)
                s.pending_signal = sig;
        else if (s.seized && r != -ESRCH)
                (void) ptrace_session_stop(&s, PROBE_FINAL_STOP_USEC);
        if (r == -ESRCH)
                return r;

        p.nr = -1;
        for (size_t i = 0; i < n_pairs; i++)
                if (pairs[i].nr >= 0 && pairs[i].count > p.count) {
                        p.nr = pairs[i].nr;
                        p.result = pairs[i].result;
                        p.count = pairs[i].count;
                }
        *ret = p;
        return 0;
}
