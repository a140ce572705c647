/* capture-sched.c: nice -20 for a capture, SCHED_FIFO for its stop windows (see capture-sched.h). */
#include <errno.h>
#include <sched.h>
#include <sys/resource.h>
#include <time.h>

#include "base/log.h"
#include "base/macro.h"
#include "capture/capture-sched.h"

#define CAPTURE_NICE -20
/* CPU a real-time window may use without blocking before the kernel ends the process (RLIMIT_RTTIME, in us): a
 * window stops at most PTRACE_BATCH_MAX threads and copies their stacks (at most 64 MiB each, 15 ms here), so 2 s
 * is a bug, not a capture. */
#define CAPTURE_RTTIME_USEC 2000000ULL

bool capture_sched_begin(CaptureSched *s) {
        struct rlimit rl;
        int want;

        *s = (CaptureSched) {};
        errno = 0;
        s->nice_before = getpriority(PRIO_PROCESS, 0);
        if (errno != 0)
                return false;
        if (s->nice_before <= CAPTURE_NICE)
                return false;
        if (setpriority(PRIO_PROCESS, 0, CAPTURE_NICE) < 0) {
                /* Without CAP_SYS_NICE, RLIMIT_NICE allows down to 20 - its value. */
                want = getrlimit(RLIMIT_NICE, &rl) == 0 && rl.rlim_cur <= 40 ? 20 - (int) rl.rlim_cur
                                                                             : s->nice_before;
                if (want >= s->nice_before || setpriority(PRIO_PROCESS, 0, want) < 0) {
                        log_debug("Capturing at nice %d: this process may not raise its priority.", s->nice_before);
                        return false;
                }
        }
        s->niced = true;
        return true;
}

void capture_sched_end(CaptureSched *s) {
        capture_sched_rt_end(s);
        if (s->niced && setpriority(PRIO_PROCESS, 0, s->nice_before) < 0)
                log_debug_errno(negative_errno(), "Failed to return to nice %d: %m", s->nice_before);
        s->niced = false;
}

bool capture_sched_rt_begin(CaptureSched *s) {
        struct sched_param p = { .sched_priority = sched_get_priority_min(SCHED_FIFO) };
        struct rlimit rl;

        if (s->rt)
                return true;
        if (getrlimit(RLIMIT_RTTIME, &rl) == 0 && (rl.rlim_max == RLIM_INFINITY || rl.rlim_max > CAPTURE_RTTIME_USEC)) {
                rl.rlim_cur = rl.rlim_max = CAPTURE_RTTIME_USEC;
                (void) setrlimit(RLIMIT_RTTIME, &rl);
        }
        if (sched_setscheduler(0, SCHED_FIFO | SCHED_RESET_ON_FORK, &p) < 0) {
                log_debug_errno(negative_errno(), "Stop windows without SCHED_FIFO: %m");
                return false;
        }
        s->rt = true;
        return true;
}

void capture_sched_rt_end(CaptureSched *s) {
        struct sched_param p = { .sched_priority = 0 };

        if (!s->rt)
                return;
        /* RLIMIT_RTTIME counts real-time CPU since the last sleep, and a sleep counts only while real-time: sleep
         * once now (no thread is stopped any more), so that the windows of a capture do not add up. 20 us: a
         * shorter nanosleep() may return without sleeping (see capture-ptrace.c). */
        (void) nanosleep(&(struct timespec) { .tv_nsec = 20000 }, NULL);
        if (sched_setscheduler(0, SCHED_OTHER, &p) < 0)
                log_debug_errno(negative_errno(), "Failed to leave SCHED_FIFO: %m");
        s->rt = false;
}
