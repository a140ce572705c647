/* classify.c: the strace/top/stack triage as arithmetic over two samples. */
#include <string.h>

#include "base/macro.h"
#include "classify.h"

double classify_cpu_percent(const ThreadSample *prev, const ThreadSample *cur, long hz) {
        uint64_t dticks, dt;

        if (!prev || cur->when_usec <= prev->when_usec || hz <= 0)
                return 0;
        dticks = (cur->utime + cur->stime) - (prev->utime + prev->stime);
        dt = cur->when_usec - prev->when_usec;
        if ((int64_t) dticks < 0)
                return 0;
        return (double) dticks * 1e6 / (double) hz / (double) dt * 100.0;
}

static bool asleep(char state) {
        return state == 'S' || state == 'I' || state == 'P';
}

unsigned classify_wants(const ClassState *st, const ThreadSample *prev, const ThreadSample *cur, long hz) {
        double cpu = classify_cpu_percent(prev, cur, hz);
        unsigned w = 0;

        if (cur->state == 'D')
                w |= CLASSIFY_READ_WCHAN | CLASSIFY_READ_SYSCALL;
        if (cur->state == 'R' || cpu >= CLASSIFY_ON_CPU_PERCENT)
                w |= CLASSIFY_READ_IO;
        /* Only a sleeper that used no CPU since the last look can be parked; every one is looked at, whatever the
         * rules, so that a thread's class is the same on every daemon. A new one, and one that used a sliver of CPU
         * (it ran to get into its wait), are looked at too: a look that already saw it in its wait is where it parked
         * from, and the wait is judged a poll sooner. */
        if (asleep(cur->state) && (!prev || cpu < CLASSIFY_GIL_WAIT_CPU_PERCENT) && !cur->kthread)
                w |= CLASSIFY_READ_SYSCALL;
        /* Parked on the GIL, it wakes to ask for it every switch interval: a tick lands on it now and then, or a look
         * catches it runnable. Only its syscall tells whether it still waits there (classify_update). */
        if (st && st->parked && st->parked_gil && prev && cpu < CLASSIFY_GIL_WAIT_CPU_PERCENT && !cur->kthread &&
            (asleep(cur->state) || cur->state == 'R'))
                w |= CLASSIFY_READ_SYSCALL;
        /* Parked needs the run count, on a CPU the time spent waiting for one. */
        if (w & (CLASSIFY_READ_IO | CLASSIFY_READ_SYSCALL))
                w |= CLASSIFY_READ_SCHED;
        return w;
}

bool classify_may_wait_gil(const ClassState *st, const ThreadSample *prev, const ThreadSample *cur, long hz) {
        double cpu = classify_cpu_percent(prev, cur, hz);

        return prev && !(st && st->parked) && asleep(cur->state) && !cur->kthread && cpu > 0 &&
               cpu < CLASSIFY_GIL_WAIT_CPU_PERCENT;
}

/* The syscalls an idle program waits in, by number: a table made once from their names (the numbers differ by
 * architecture), since the daemon asks for every parked thread it judges. */
#define IDLE_NR_MAX 1024
static bool idle_nr[IDLE_NR_MAX];
static int64_t futex_nr = -1;

static void idle_nr_init(void) {
        static const char *const idle[] = {
                "nanosleep", "clock_nanosleep", "pause", "rt_sigsuspend", "rt_sigtimedwait", "wait4", "waitid",
                "epoll_wait", "epoll_pwait", "epoll_pwait2", "poll", "ppoll", "select", "pselect6", "accept",
                "accept4", "restart_syscall", "io_getevents", "io_uring_enter", "sigsuspend",
        };
        static bool done;

        if (done)
                return;
        for (int64_t nr = 0; nr < IDLE_NR_MAX; nr++) {
                const char *name = syscall_name(nr);

                if (!name)
                        continue;
                if (streq(name, "futex"))
                        futex_nr = nr;
                for (size_t i = 0; i < ELEMENTSOF(idle); i++)
                        if (streq(name, idle[i]))
                                idle_nr[nr] = true;
        }
        done = true;
}

bool classify_syscall_is_idle_wait(const ProcSyscall *sc) {
        if (sc->kind != PROC_SYSCALL_BLOCKED || sc->nr < 0 || sc->nr >= IDLE_NR_MAX)
                return false;
        idle_nr_init();
        /* Condition variables and semaphores wait with FUTEX_WAIT_BITSET; a contended lock with FUTEX_WAIT. */
        if (sc->nr == futex_nr)
                return (sc->args[1] & 0x7f) == 9 /* FUTEX_WAIT_BITSET */;
        return idle_nr[sc->nr];
}

bool classify_class_is_stuck(ThreadClass c) {
        return c == THREAD_CLASS_STOPPED || c == THREAD_CLASS_FROZEN || c == THREAD_CLASS_ZOMBIE ||
               c == THREAD_CLASS_BLOCKED;
}

static void set_class(ClassState *st, ThreadClass c, uint64_t since) {
        if (st->class != c) {
                st->class = c;
                st->since_usec = since;
        }
}

/* Percent of the interval the thread wanted a CPU: on one, or runnable and waiting for one (schedstat). A busy loop
 * on an overloaded machine gets a small share of a CPU (10 % behind 20 hogs on 2 cores) but never sleeps, and what
 * it got would call it "running"; without schedstat in both samples, what it got is all there is. */
static double demand_percent(const ThreadSample *prev, const ThreadSample *cur, double cpu) {
        uint64_t dt = cur->when_usec - prev->when_usec, want;

        if (!prev->have_sched || !cur->have_sched || dt == 0 || cur->run_ns < prev->run_ns ||
            cur->wait_ns < prev->wait_ns)
                return cpu;
        want = (cur->run_ns - prev->run_ns) + (cur->wait_ns - prev->wait_ns);
        return MAX(cpu, MIN((double) want / 1000.0 / (double) dt * 100.0, 100.0));
}

/* Fold this interval's user and system ticks and faults into the stretch's averages; the averaged system share. */
static double split_update(ClassState *st, const ThreadSample *prev, const ThreadSample *cur) {
        double du = cur->utime >= prev->utime ? (double) (cur->utime - prev->utime) : 0;
        double ds = cur->stime >= prev->stime ? (double) (cur->stime - prev->stime) : 0;
        double df = cur->faults >= prev->faults ? (double) (cur->faults - prev->faults) : 0;

        if (st->oncpu_intervals++ == 0) {
                st->avg_user_ticks = du;
                st->avg_system_ticks = ds;
                st->avg_faults = df;
        } else {
                st->avg_user_ticks += CLASSIFY_SPLIT_WEIGHT * (du - st->avg_user_ticks);
                st->avg_system_ticks += CLASSIFY_SPLIT_WEIGHT * (ds - st->avg_system_ticks);
                st->avg_faults += CLASSIFY_SPLIT_WEIGHT * (df - st->avg_faults);
        }
        return st->avg_user_ticks + st->avg_system_ticks > 0
                       ? st->avg_system_ticks / (st->avg_user_ticks + st->avg_system_ticks)
                       : 0;
}

/* On a CPU: busy loop, syscall spin, or work, judged from /proc/…/io and the user/system split. */
static ThreadClass on_cpu_class(ClassState *st, const ThreadSample *prev, const ThreadSample *cur, double cpu) {
        uint64_t dticks = (cur->utime + cur->stime) - (prev->utime + prev->stime);
        double dt = (double) (cur->when_usec - prev->when_usec) / 1e6;
        double sys_share = split_update(st, prev, cur);
        uint64_t dsys, dbytes;
        double demand, faults_per_sec;

        if (!cur->have_io || !prev->have_io)
                return THREAD_CLASS_RUNNING;
        dsys = (cur->syscr - prev->syscr) + (cur->syscw - prev->syscw);
        dbytes = (cur->rchar - prev->rchar) + (cur->wchar - prev->wchar);
        st->syscalls_per_sec = (double) dsys / dt;
        st->bytes_per_sec = (double) dbytes / dt;
        demand = demand_percent(prev, cur, cpu);
        if (demand >= CLASSIFY_BUSY_PERCENT && dsys == 0 && sys_share <= CLASSIFY_BUSY_MAX_SYSTEM_SHARE)
                return THREAD_CLASS_BUSY_LOOP;
        if ((st->syscalls_per_sec >= CLASSIFY_SPIN_MIN_SYSCALLS_PER_SEC && dbytes < dsys) ||
            (sys_share >= CLASSIFY_SPIN_MIN_SYSTEM_SHARE && st->bytes_per_sec < CLASSIFY_SPIN_BYTES_MAX_PER_SEC))
                return THREAD_CLASS_SYSCALL_SPIN;
        /* /proc/…/io counts only the read/write family: ~15,000 recvfrom() a second show as none. Kernel time that
         * is not page faults, with nothing read or written, in a thread that never let go of the CPU, is calls that
         * return at once. */
        faults_per_sec = dt > 0 ? st->avg_faults / dt : 0;
        if ((dticks >= CLASSIFY_QUIET_SPIN_MIN_TICKS || st->oncpu_intervals >= CLASSIFY_QUIET_SPIN_MIN_INTERVALS) &&
            demand >= CLASSIFY_BUSY_PERCENT && dbytes == 0 &&
            sys_share > CLASSIFY_BUSY_MAX_SYSTEM_SHARE && faults_per_sec < CLASSIFY_QUIET_SPIN_MAX_FAULTS_PER_SEC)
                return THREAD_CLASS_SYSCALL_SPIN;
        return THREAD_CLASS_RUNNING;
}

void classify_update(ClassState *st, const ThreadSample *prev, const ThreadSample *cur, long hz) {
        double cpu = classify_cpu_percent(prev, cur, hz);
        uint64_t start = prev ? prev->when_usec : cur->when_usec;
        unsigned oncpu_intervals = st->oncpu_intervals;

        /* Kept only while the thread stays on a CPU. */
        st->oncpu_intervals = 0;
        st->cpu_percent = cpu;
        st->syscalls_per_sec = st->bytes_per_sec = 0;
        if (!prev) {
                st->class = _THREAD_CLASS_INVALID;
                st->parked = false;
        }

        /* Frozen by a cgroup freezer (a paused container, suspend), in whatever state /proc shows: D on cgroup v1
         * since Linux 6.1, S on v2. On purpose, not hung: the kernel's hung-task detector skips it too. */
        if (cur->frozen && cur->state != 'Z' && cur->state != 'X') {
                st->parked = false;
                st->owed = false;
                set_class(st, THREAD_CLASS_FROZEN, cur->when_usec);
                return;
        }
        switch (cur->state) {
        case 'Z':
        case 'X':
                st->parked = false;
                set_class(st, THREAD_CLASS_ZOMBIE, start);
                return;
        case 'T':
        case 't':
                st->parked = false;
                set_class(st, THREAD_CLASS_STOPPED, start);
                return;
        case 'D':
                st->parked = false;
                st->owed = false;
                /* Uninterruptible: the kernel's hung-task case, counted from the first look in D. */
                set_class(st, THREAD_CLASS_BLOCKED, cur->when_usec);
                return;
        default:
                break;
        }

        /* Waiting for the GIL, it wakes every few ms to ask for it: a look may catch it between two waits, or
         * runnable behind a busy machine. With no more CPU than those wake-ups, it is still parked on the GIL. */
        if (prev && st->parked && st->parked_gil && cur->have_syscall && cur->syscall.kind == PROC_SYSCALL_RUNNING &&
            cpu < CLASSIFY_GIL_WAIT_CPU_PERCENT) {
                set_class(st, st->owed ? THREAD_CLASS_BLOCKED : THREAD_CLASS_WAITING, st->parked_since_usec);
                return;
        }

        /* On a CPU is what it did over the interval, not the state it was in at the moment of the look: a thread
         * that sleeps nearly all the time and was caught running (or runnable) is waiting, as its sleeps say. What
         * it wanted counts, not what it got: a busy loop behind CPU hogs gets little but waits for more. */
        if (prev && (cpu >= CLASSIFY_ON_CPU_PERCENT ||
                     (cur->state == 'R' && demand_percent(prev, cur, cpu) >= CLASSIFY_ON_CPU_PERCENT))) {
                st->parked = false;
                st->oncpu_intervals = oncpu_intervals;
                /* A busy interval started at the previous look; the class holds from there. */
                set_class(st, on_cpu_class(st, prev, cur, cpu), prev->when_usec);
                return;
        }
        if (cur->state == 'R' && !prev) {
                set_class(st, THREAD_CLASS_RUNNING, start);
                return;
        }

        /* A sleeping kernel thread waits for work (its /proc syscall file reads "0 0x0 …", not a real read()). */
        if (cur->kthread) {
                st->parked = false;
                set_class(st, THREAD_CLASS_WAITING, start);
                return;
        }

        /* Asleep between tries for a lock: it wakes every time, so it is never parked, yet it makes no progress. */
        if (cur->lock_retry) {
                st->parked = false;
                set_class(st, THREAD_CLASS_LOCK_RETRY, start);
                return;
        }

        /* Asleep. Parked when nothing about its wait changed since we first saw it there. */
        /* Without a previous look there is no CPU delta, so no evidence yet of "no progress". A thread waiting for
         * the GIL wakes to ask for it every few ms (a sliver of CPU, a new run count, a new futex value), yet as
         * long as it waits on the same GIL it has not run any Python: parked all the same. */
        if (prev && cur->have_syscall && cur->have_sched && cur->syscall.kind == PROC_SYSCALL_BLOCKED &&
            (cpu == 0 || (cur->gil_wait && cpu < CLASSIFY_GIL_WAIT_CPU_PERCENT))) {
                /* Its condition variable or its mutex: the same GIL. */
                bool same_gil = cur->gil_wait && st->parked && st->parked_gil;

                if (!same_gil &&
                    (!st->parked || !proc_syscall_same_place(&st->parked_place, &cur->syscall) ||
                     memcmp(st->parked_place.args, cur->syscall.args, sizeof cur->syscall.args) != 0 ||
                     st->parked_timeslices != cur->timeslices)) {
                        st->parked = true;
                        st->parked_gil = cur->gil_wait;
                        st->parked_place = cur->syscall;
                        st->parked_timeslices = cur->timeslices;
                        /* Parked from the look before when that one saw it in the same call and it has not run since:
                         * the wait is judged (owed.h) a poll sooner, as it should be. */
                        st->parked_since_usec = prev->have_syscall && prev->have_sched &&
                                                                prev->syscall.kind == PROC_SYSCALL_BLOCKED &&
                                                                prev->timeslices == cur->timeslices &&
                                                                proc_syscall_same_place(&prev->syscall, &cur->syscall) &&
                                                                memcmp(prev->syscall.args, cur->syscall.args,
                                                                       sizeof cur->syscall.args) == 0
                                                        ? prev->when_usec
                                                        : cur->when_usec;
                        st->owed = false;
                        st->owed_why = NULL;
                        /* A new place starts a new class period. */
                        st->class = _THREAD_CLASS_INVALID;
                }
                /* Blocked only when something owes the wait (owed.h); any other wait, idle or not, is waiting. */
                set_class(st, st->owed ? THREAD_CLASS_BLOCKED : THREAD_CLASS_WAITING, st->parked_since_usec);
                return;
        }
        st->parked = false;
        st->owed = false;
        st->owed_why = NULL;
        set_class(st, THREAD_CLASS_WAITING, start);
}

void classify_set_owed(ClassState *st, bool owed, const char *why) {
        if (!st->parked || st->class == THREAD_CLASS_LOCK_RETRY)
                return;
        st->owed = owed;
        st->owed_why = owed ? why : NULL;
        /* The wait was the same all along: blocked (or waiting again) from when it parked. */
        if (st->class == THREAD_CLASS_WAITING || st->class == THREAD_CLASS_BLOCKED) {
                st->class = owed ? THREAD_CLASS_BLOCKED : THREAD_CLASS_WAITING;
                st->since_usec = st->parked_since_usec;
        }
}
