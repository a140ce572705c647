/* capture-ptrace.c: the ptrace capture path for threads on a CPU: SEIZE, INTERRUPT, GETREGSET, copy, DETACH. */
#include <elf.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>

#include "base/alloc-util.h"
#include "base/log.h"
#include "base/macro.h"
#include "capture/capture-passive.h"
#include "capture/capture-ptrace.h"
#include "proc/proc-read.h"
#include "unwind/arch.h"

/* Poll this many times before sleeping between polls: a thread on another CPU stops within microseconds, and every
 * microsecond we take to notice is a microsecond the target stays stopped. Then sleep, rather than sched_yield():
 * when the target shares our CPU it can only reach its stop if we really give the CPU up (CFS ignores a yield
 * from a task with less runtime), which cost 230-290 us pauses here. Programs set a 1 us timer slack
 * (PR_SET_TIMERSLACK) so that these sleeps are short; but a 1-5 us nanosleep() often returns without scheduling
 * at all (its timer expires before the task sleeps: measured in this VM), which under SCHED_FIFO would keep a target
 * queued on our CPU from ever reaching its stop. 20 us always sleeps. */
#define STOP_SPINS 20
#define STOP_POLL_NSEC 20000

static uint64_t now_ns(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000000ULL + (uint64_t) ts.tv_nsec;
}

int ptrace_session_seize(PtraceSession *s, pid_t tid) {
        *s = PTRACE_SESSION_NULL;
        if (ptrace(PTRACE_SEIZE, tid, NULL, NULL) < 0)
                return negative_errno();
        s->tid = tid;
        s->seized = true;
        return 0;
}

int ptrace_session_interrupt(PtraceSession *s) {
        if (!s->seized)
                return -EINVAL;
        if (ptrace(PTRACE_INTERRUPT, s->tid, NULL, NULL) < 0)
                return negative_errno();
        return 0;
}

int ptrace_session_poll(PtraceSession *s) {
        int status;
        pid_t w;

        if (!s->seized)
                return -EINVAL;
        do
                w = waitpid(s->tid, &status, __WALL | WNOHANG);
        while (w < 0 && errno == EINTR);
        if (w == 0)
                return 0;
        if (w < 0) {
                /* ECHILD: the thread is gone, and with it our attachment. */
                if (errno == ECHILD) {
                        s->seized = false;
                        return -ESRCH;
                }
                return negative_errno();
        }
        if (WIFEXITED(status) || WIFSIGNALED(status)) {
                s->seized = false;
                return -ESRCH;
        }
        if (!WIFSTOPPED(status))
                return -EIO;
        s->stopped = true;
        /* An event stop (our interrupt, or a group-stop) carries no signal to give back, nor does a syscall-stop
         * (SIGTRAP | 0x80 under PTRACE_O_TRACESYSGOOD, the syscall probe's); a signal-delivery-stop does, and
         * swallowing it would change the target's behaviour. */
        if ((status >> 16) == 0 && WSTOPSIG(status) != (SIGTRAP | 0x80))
                s->pending_signal = WSTOPSIG(status);
        return 1;
}

int ptrace_session_stop(PtraceSession *s, uint64_t timeout_usec) {
        uint64_t deadline = now_ns() + timeout_usec * NSEC_PER_USEC;
        unsigned spins = 0;
        int r;

        r = ptrace_session_interrupt(s);
        if (r < 0)
                return r;
        while ((r = ptrace_session_poll(s)) == 0) {
                if (now_ns() >= deadline)
                        return -ETIMEDOUT;
                if (spins++ >= STOP_SPINS)
                        nanosleep(&(struct timespec) { .tv_nsec = STOP_POLL_NSEC }, NULL);
        }
        return r < 0 ? r : 0;
}

int ptrace_session_get_regs(PtraceSession *s, UnwindRegs *ret) {
        if (!s->stopped)
                return -EINVAL;
        return arch_regs_from_ptrace(s->tid, ret);
}

int ptrace_session_detach(PtraceSession *s) {
        int r = 0;

        if (!s->seized)
                return 0;
        if (ptrace(PTRACE_DETACH, s->tid, NULL, (void *) (uintptr_t) s->pending_signal) < 0 &&
            /* Never leave it stopped over a signal the kernel refuses: detach without it. */
            (errno != EIO || s->pending_signal == 0 || ptrace(PTRACE_DETACH, s->tid, NULL, NULL) < 0)) {
                r = negative_errno();
                log_debug_errno(r, "PTRACE_DETACH of %d failed: %m", (int) s->tid);
        }
        s->seized = s->stopped = false;
        return r;
}

int ptrace_session_release(PtraceSession *s) {
        int r;

        if (!s->seized)
                return 0;
        /* A seized thread that never stopped cannot be detached (the kernel wants a stopped tracee); give it one
         * more short chance. */
        if (!s->stopped) {
                r = ptrace_session_stop(s, 1000);
                if (r == -ESRCH)
                        return 0;
                if (r < 0) {
                        log_debug("Thread %d did not stop; it stays attached until it is seen stopped, or we exit",
                                  (int) s->tid);
                        return -ETIMEDOUT;
                }
        }
        (void) ptrace_session_detach(s);
        return 0;
}

void ptrace_session_done(PtraceSession *s) {
        /* Left to the kernel, which detaches when this process exits. */
        if (ptrace_session_release(s) < 0)
                s->seized = false;
}

int ptrace_held_add(PtraceHeld *h, PtraceSession *s) {
        if (!GREEDY_REALLOC(h->sessions, h->n_allocated, h->n + 1))
                return -ENOMEM;
        h->sessions[h->n++] = *s;
        *s = PTRACE_SESSION_NULL;
        return 0;
}

size_t ptrace_held_release(PtraceHeld *h) {
        size_t k = 0;

        for (size_t i = 0; i < h->n; i++) {
                PtraceSession *s = &h->sessions[i];

                /* Stopped (it woke and took our interrupt): released now. Gone: nothing to release. */
                if (ptrace_session_poll(s) != 0) {
                        (void) ptrace_session_detach(s);
                        continue;
                }
                h->sessions[k++] = *s;
        }
        h->n = k;
        return k;
}

size_t ptrace_held_done(PtraceHeld *h) {
        size_t n = ptrace_held_release(h);

        if (n > 0)
                log_debug("%zu threads did not stop; they stay attached until they wake or we exit", n);
        h->sessions = mfree(h->sessions);
        h->n = h->n_allocated = 0;
        return n;
}

/* A buffer for a stack copy taken while the thread is stopped, allocated and faulted in before it stops: the stop
 * window then allocates nothing and takes no page fault of ours. */
static uint8_t *stack_buffer_new(size_t max) {
        uint8_t *buf = malloc(max);

        if (buf)
                memset(buf, 0, max);
        return buf;
}

/* After the window: the copy keeps only what it holds (BUF, if the copy failed, is freed). */
static void stack_buffer_fit(UnwindStack *st, uint8_t *buf) {
        uint8_t *fit;

        if (st->data != buf || st->len == 0) {
                free(buf);
                *st = (UnwindStack) {};
                return;
        }
        fit = realloc(buf, st->len);
        if (fit)
                st->data = fit;
}

/* Whether TID is runnable, waiting for a CPU: interrupted, it stops as soon as it gets one. A thread that is not (in
 * uninterruptible sleep) stops only when it wakes. */
static bool thread_runnable(pid_t pid, pid_t tid) {
        _cleanup_close_ int fd = -EBADF;

        return proc_open_dir(pid, tid, &fd) >= 0 && capture_thread_state(fd) == 'R';
}

size_t capture_ptrace_batch_max(size_t stack_max) {
        size_t k = PTRACE_BATCH_BYTES / MAX(stack_max, (size_t) 1);

        return MAX(MIN(k, (size_t) PTRACE_BATCH_MAX), (size_t) 1);
}

/* A stopped thread of a batch: registers, stack copy into BUF, detach; T0 is when it was last seen not stopped. */
static void batch_take(PtraceSession *s, PtraceBatchItem *it, pid_t pid, const ProcMap *maps, size_t n_maps,
                       uint8_t *buf, size_t stack_max, uint64_t t0) {
        int r;

        r = ptrace_session_get_regs(s, &it->regs);
        if (r >= 0) {
                r = capture_read_stack(pid, maps, n_maps, it->regs.r[UNWIND_REG_SP], buf, stack_max, &it->stack,
                                       &it->truncated);
                if (r == -EFAULT)
                        r = 0;
        }
        if (r >= 0 && it->while_stopped)
                it->while_stopped(it, it->userdata);
        (void) ptrace_session_detach(s);
        it->pause_us = (double) (now_ns() - t0) / 1000.0;
        it->error = MIN(r, 0);
}

int capture_ptrace_batch(pid_t pid, const ProcMap *maps, size_t n_maps, size_t stack_max, uint64_t timeout_usec,
                         uint64_t cap_usec, PtraceBatchItem *items, size_t n, PtraceHeld *held) {
        PtraceSession s[PTRACE_BATCH_MAX];
        uint8_t *bufs[PTRACE_BATCH_MAX] = {};
        uint64_t seen[PTRACE_BATCH_MAX], deadline, cap;
        bool pending[PTRACE_BATCH_MAX] = {};
        size_t left = 0;
        unsigned spins = 0;

        if (n > capture_ptrace_batch_max(stack_max))
                return -EINVAL;
        for (size_t i = 0; i < n; i++) {
                s[i] = PTRACE_SESSION_NULL;
                bufs[i] = stack_buffer_new(stack_max);
        }
        /* All interrupted first: each stops when it next gets a CPU, and those waits overlap. */
        for (size_t i = 0; i < n; i++) {
                if (!bufs[i]) {
                        items[i].error = -ENOMEM;
                        continue;
                }
                items[i].error = ptrace_session_seize(&s[i], items[i].tid);
                if (items[i].error == 0)
                        items[i].error = ptrace_session_interrupt(&s[i]);
                seen[i] = now_ns();
                if (items[i].error == 0) {
                        pending[i] = true;
                        left++;
                }
        }
        deadline = now_ns() + timeout_usec * NSEC_PER_USEC;
        cap = now_ns() + MAX(cap_usec, timeout_usec) * NSEC_PER_USEC;
        while (left > 0) {
                bool took = false;

                for (size_t i = 0; i < n; i++) {
                        int r;

                        if (!pending[i])
                                continue;
                        r = ptrace_session_poll(&s[i]);
                        if (r == 0) {
                                seen[i] = now_ns();
                                continue;
                        }
                        pending[i] = false;
                        left--;
                        took = true;
                        if (r < 0)
                                items[i].error = r;
                        else
                                /* Read and released at once: its pause is its own, not the batch's. */
                                batch_take(&s[i], &items[i], pid, maps, n_maps, bufs[i], stack_max, seen[i]);
                }
                if (left == 0)
                        break;
                /* The timeout is for no progress: on a loaded machine the interrupted threads stop one by one as
                 * each gets a CPU, while one in uninterruptible sleep never does. So while one of them is still
                 * runnable, only waiting for a CPU, the wait goes on up to CAP (no thread of ours is stopped now:
                 * each is released as soon as it is seen stopped). */
                if (took)
                        deadline = MIN(now_ns() + timeout_usec * NSEC_PER_USEC, cap);
                if (now_ns() >= deadline && now_ns() < cap)
                        for (size_t i = 0; i < n; i++)
                                if (pending[i] && thread_runnable(pid, items[i].tid)) {
                                        deadline = MIN(now_ns() + timeout_usec * NSEC_PER_USEC, cap);
                                        break;
                                }
                if (now_ns() >= deadline) {
                        for (size_t i = 0; i < n; i++)
                                if (pending[i])
                                        items[i].error = -ETIMEDOUT;
                        break;
                }
                if (!took && spins++ >= STOP_SPINS)
                        nanosleep(&(struct timespec) { .tv_nsec = STOP_POLL_NSEC }, NULL);
        }
        /* Whatever is still attached (it never stopped: uninterruptible sleep) gets a last chance, then is kept
         * in HELD, to be released when it is seen stopped; else it is left to the kernel. */
        for (size_t i = 0; i < n; i++) {
                if (ptrace_session_release(&s[i]) < 0 && (!held || ptrace_held_add(held, &s[i]) < 0))
                        ptrace_session_done(&s[i]);
                stack_buffer_fit(&items[i].stack, bufs[i]);
        }
        return 0;
}
