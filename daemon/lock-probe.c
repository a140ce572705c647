/* lock-probe.c: one short-lived child per probe; its exit status is the verdict. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include "base/log.h"
#include "base/process-util.h"
#include "base/time-util.h"
#include "capture/syscall-probe.h"
#include "capture-job.h"
#include "lock-probe.h"

/* The child's exit status: seen failing, not seen, or the probe could not run. */
enum {
        PROBE_EXIT_RETRYING = 0,
        PROBE_EXIT_NOT_SEEN = 1,
        PROBE_EXIT_FAILED = 2,
};

typedef struct LockProbe {
        LockProbes *owner;
        pid_t pid, tid;
        uint64_t starttime;
        pid_t child;
        sd_event_source *child_source, *timeout_source;
} LockProbe;

struct LockProbes {
        sd_event *event;
        Scanner *scanner;
        Metrics *metrics;
        LockProbe *running[LOCK_PROBES_MAX];
};

int lock_probes_new(sd_event *e, Scanner *scanner, Metrics *metrics, LockProbes **ret) {
        LockProbes *lp = calloc(1, sizeof *lp);

        if (!lp)
                return -ENOMEM;
        lp->event = sd_event_ref(e);
        lp->scanner = scanner;
        lp->metrics = metrics;
        *ret = lp;
        return 0;
}

static void probe_free(LockProbe *p) {
        sd_event_source_disable_unref(p->child_source);
        sd_event_source_disable_unref(p->timeout_source);
        process_kill(p->child, true);
        for (size_t i = 0; i < LOCK_PROBES_MAX; i++)
                if (p->owner->running[i] == p)
                        p->owner->running[i] = NULL;
        free(p);
}

LockProbes *lock_probes_free(LockProbes *lp) {
        if (!lp)
                return NULL;
        for (size_t i = 0; i < LOCK_PROBES_MAX; i++)
                if (lp->running[i])
                        probe_free(lp->running[i]);
        sd_event_unref(lp->event);
        free(lp);
        return NULL;
}

static int on_probe_exit(sd_event_source *s, const siginfo_t *si, void *userdata) {
        LockProbe *p = userdata;
        LockProbeVerdict v = LOCK_PROBE_FAILED;

        p->child = 0;
        if (si->si_code == CLD_EXITED && si->si_status == PROBE_EXIT_RETRYING)
                v = LOCK_PROBE_RETRYING;
        else if (si->si_code == CLD_EXITED && si->si_status == PROBE_EXIT_NOT_SEEN)
                v = LOCK_PROBE_NOT_SEEN;
        log_debug("Lock probe of thread %d of %d: %s", (int) p->tid, (int) p->pid, lock_probe_verdict_to_string(v));
        p->owner->metrics->lock_probes[v]++;
        scanner_lock_probe_done(p->owner->scanner, p->pid, p->tid, p->starttime, v, now_usec(CLOCK_MONOTONIC));
        probe_free(p);
        return 0;
}

static int on_probe_timeout(sd_event_source *s, uint64_t usec, void *userdata) {
        LockProbe *p = userdata;

        log_warning("Lock probe of thread %d did not end in %llu ms; killing it", (int) p->tid,
                    (unsigned long long) (LOCK_PROBE_TIMEOUT_USEC / USEC_PER_MSEC));
        if (p->child > 0)
                (void) kill(p->child, SIGKILL); /* the child source reports it, as a failure */
        return 0;
}

static _Noreturn void probe_child(pid_t tid) {
        LockAttempt a;
        int r;

        r = lock_retry_probe(tid, LOCK_PROBE_WINDOW_USEC, &a);
        if (r < 0)
                log_debug_errno(r, "Could not trace thread %d for a lock it polls for: %m", (int) tid);
        _exit(r > 0 ? PROBE_EXIT_RETRYING : r == 0 ? PROBE_EXIT_NOT_SEEN : PROBE_EXIT_FAILED);
}

static int probe_start(LockProbes *lp, size_t slot, ThreadEntry *t) {
        LockProbe *p = calloc(1, sizeof *p);
        int r;

        if (!p)
                return -ENOMEM;
        *p = (LockProbe) { .owner = lp, .pid = t->pid, .tid = t->tid, .starttime = t->process->starttime };
        /* Dying with the daemon, the kernel detaches the thread it traces. */
        r = fork_child(&(ForkOptions) { .flags = FORK_CHILD_OF_DAEMON, .setup_failed_status = PROBE_EXIT_FAILED },
                       &p->child);
        if (r < 0) {
                free(p);
                return r;
        }
        if (r == 0) {
                pid_t tid = p->tid;

                free(p); /* the parent's bookkeeping, not ours */
                probe_child(tid);
        }
        lp->running[slot] = p;
        r = sd_event_add_child(lp->event, &p->child_source, p->child, WEXITED, on_probe_exit, p);
        if (r >= 0)
                r = sd_event_add_time_relative(lp->event, &p->timeout_source, CLOCK_MONOTONIC,
                                               LOCK_PROBE_TIMEOUT_USEC, 0, on_probe_timeout, p);
        if (r < 0) {
                probe_free(p);
                return r;
        }
        t->lock_probe = LOCK_PROBE_RUNNING;
        return 0;
}

void lock_probes_start_wanted(LockProbes *lp) {
        Scanner *s = lp->scanner;

        for (size_t i = 0; i < s->n_lock_probe_wanted; i++) {
                ThreadEntry *t = intmap_get(&s->threads, s->lock_probe_wanted[i]);
                size_t slot = 0;
                int r;

                while (slot < LOCK_PROBES_MAX && lp->running[slot])
                        slot++;
                if (slot == LOCK_PROBES_MAX)
                        break;
                if (!t || t->lock_probe == LOCK_PROBE_RUNNING)
                        continue;
                r = probe_start(lp, slot, t);
                if (r < 0)
                        log_warning_errno(r, "Could not start a lock probe of thread %d: %m", (int) t->tid);
        }
        s->n_lock_probe_wanted = 0;
}
