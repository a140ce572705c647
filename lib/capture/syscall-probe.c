/* syscall-probe.c: a bounded PTRACE_SYSCALL loop over one thread, counting (syscall, result) pairs, or watching for
 * a lock call that fails. */
#include <asm/unistd.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>

#include "base/log.h"
#include "base/macro.h"
#include "base/time-util.h"
#include "capture/capture-ptrace.h"
#include "capture/capture-sched.h"
#include "capture/syscall-probe.h"
#include "proc/proc-read.h"

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

/* The probe's hold on its thread: the session, and the priority the probe runs at while it holds it. The probe keeps
 * the thread stopped at every syscall for its whole window, and if it is killed meanwhile (a capture child past its
 * timeout, a daemon's SIGKILL) the kernel releases the thread only once the probe's exit is done: at the caller's
 * priority, behind a CPU hog per core, that exit waited for a CPU while the thread waited for it (issue #34). So
 * nice -20 from before the seize to after the detach; not SCHED_FIFO, which over a window of up to a second of
 * polls would take a CPU from the very thread it watches. */
typedef struct ProbeHold {
        PtraceSession s;
        CaptureSched sched;
} ProbeHold;

/* Detach, then lower the priority. A thread that would not stop (uninterruptible sleep) stays attached until it
 * wakes or we exit: the priority then stays raised, so that our exit releases it at once. Run twice (at the
 * deadline, then by the cleanup), the second does nothing. */
static void probe_hold_done(ProbeHold *h) {
        if (ptrace_session_release(&h->s) < 0) {
                h->s.seized = false;
                h->sched = (CaptureSched) {};
                return;
        }
        capture_sched_end(&h->sched);
}

/* Called at each syscall entry and exit stop of the traced thread; true ends the trace there. */
typedef bool (*ProbeStep)(pid_t tid, const struct __ptrace_syscall_info *info, void *userdata);

/* Trace TID's syscalls until STEP says enough or WINDOW_USEC passed, then leave it as it was (the cleanup detaches).
 * *RET_WINDOW: how long it was traced. 0, or -errno (-ESRCH: the thread is gone). */
static int probe_run(pid_t tid, uint64_t window_usec, ProbeStep step, void *userdata, uint64_t *ret_window) {
        _cleanup_(probe_hold_done) ProbeHold h = { .s = PTRACE_SESSION_NULL };
        PtraceSession *s = &h.s;
        uint64_t start, deadline;
        bool done = false;
        int r, sig;

        (void) capture_sched_begin(&h.sched);
        r = ptrace_session_seize(s, tid);
        if (r < 0)
                return r;
        r = ptrace_session_stop(s, 100 * USEC_PER_MSEC);
        if (r < 0)
                return r;
        if (ptrace(PTRACE_SETOPTIONS, tid, NULL, (void *) PTRACE_O_TRACESYSGOOD) < 0)
                return negative_errno();
        sig = s->pending_signal;
        s->pending_signal = 0;
        start = now_usec(CLOCK_MONOTONIC);
        deadline = start + window_usec;

        while (!done && now_usec(CLOCK_MONOTONIC) < deadline) {
                struct __ptrace_syscall_info info;
                int status;

                if (ptrace(PTRACE_SYSCALL, tid, NULL, (void *) (uintptr_t) sig) < 0) {
                        r = negative_errno();
                        break;
                }
                s->stopped = false;
                sig = 0;
                r = wait_stop(s, deadline, &status);
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
                done = step(tid, &info, userdata);
        }
        *ret_window = now_usec(CLOCK_MONOTONIC) - start;
        if (s->stopped)
                s->pending_signal = sig;
        else if (s->seized && r != -ESRCH)
                (void) ptrace_session_stop(s, PROBE_FINAL_STOP_USEC);
        /* Released at the deadline, before anything else runs (the counting is done after). */
        probe_hold_done(&h);
        return r == -ESRCH ? r : 0;
}

typedef struct PairCount {
        ProbePair pairs[PROBE_PAIRS];
        size_t n_pairs;
        int64_t nr;             /* the call in progress: the exit stop does not repeat it */
        unsigned syscalls;
} PairCount;

static bool step_count(pid_t tid, const struct __ptrace_syscall_info *info, void *userdata) {
        PairCount *pc = userdata;

        if (info->op == PTRACE_SYSCALL_INFO_EXIT) {
                pc->syscalls++;
                count_pair(pc->pairs, &pc->n_pairs, pc->nr, info->exit.rval);
        } else if (info->op == PTRACE_SYSCALL_INFO_ENTRY)
                pc->nr = (int64_t) info->entry.nr;
        return false;
}

int syscall_probe(pid_t tid, uint64_t window_usec, SyscallProbe *ret) {
        PairCount pc = { .nr = -1 };
        SyscallProbe p = { .nr = -1 };
        int r;

        r = probe_run(tid, window_usec, step_count, &pc, &p.window_usec);
        if (r < 0)
                return r;
        p.syscalls = pc.syscalls;
        for (size_t i = 0; i < pc.n_pairs; i++)
                if (pc.pairs[i].nr >= 0 && pc.pairs[i].count > p.count) {
                        p.nr = pc.pairs[i].nr;
                        p.result = pc.pairs[i].result;
                        p.count = pc.pairs[i].count;
                }
        *ret = p;
        return 0;
}

typedef struct LockWatch {
        LockAttempt pending;    /* the lock call in progress (nr -1: none) */
        LockAttempt failed;     /* the first one that failed for a conflict */
} LockWatch;

/* At the entry of a lock call that does not wait, what it asks for: fcntl(F_SETLK/F_OFD_SETLK) with its struct
 * flock, read from the thread's memory, or flock(LOCK_NB). */
static void lock_call_enter(pid_t tid, const struct __ptrace_syscall_info *info, LockAttempt *ret) {
        const uint64_t *a = info->entry.args;
        struct flock fl;

        *ret = (LockAttempt) { .nr = -1 };
        if (a[0] > INT32_MAX)
                return;
        if (info->entry.nr == __NR_fcntl && (a[1] == F_SETLK || a[1] == F_OFD_SETLK)) {
                if (proc_mem_read(tid, a[2], &fl, sizeof fl) < 0 || fl.l_type == F_UNLCK)
                        return;
                *ret = (LockAttempt) { .nr = __NR_fcntl, .fd = (int) a[0], .cmd = (int) a[1],
                                       .write = fl.l_type == F_WRLCK, .whence = fl.l_whence, .start = fl.l_start,
                                       .len = fl.l_len };
        } else if (info->entry.nr == __NR_flock && (a[1] & LOCK_NB) && (a[1] & (LOCK_SH | LOCK_EX)))
                *ret = (LockAttempt) { .nr = __NR_flock, .fd = (int) a[0], .cmd = (int) a[1],
                                       .write = (a[1] & LOCK_EX) != 0 };
}

static bool step_lock(pid_t tid, const struct __ptrace_syscall_info *info, void *userdata) {
        LockWatch *lw = userdata;

        if (info->op == PTRACE_SYSCALL_INFO_ENTRY) {
                lock_call_enter(tid, info, &lw->pending);
                return false;
        }
        if (info->op != PTRACE_SYSCALL_INFO_EXIT || lw->pending.nr < 0)
                return false;
        /* EAGAIN or EACCES: somebody holds a conflicting lock (fcntl(2) allows either; flock says EWOULDBLOCK). */
        if (info->exit.rval == -EAGAIN || info->exit.rval == -EACCES) {
                lw->failed = lw->pending;
                lw->failed.result = info->exit.rval;
                return true;
        }
        lw->pending.nr = -1;
        return false;
}

int lock_retry_probe(pid_t tid, uint64_t window_usec, LockAttempt *ret) {
        LockWatch lw = { .pending.nr = -1, .failed.nr = -1 };
        uint64_t window;
        int r;

        r = probe_run(tid, window_usec, step_lock, &lw, &window);
        if (r < 0)
                return r;
        lw.failed.window_usec = window;
        *ret = lw.failed;
        return lw.failed.nr >= 0;
}
