/* test-classify.c: the classifier's decisions from pairs of samples, and the int map behind the thread table. */
#include <stdlib.h>
#include <string.h>

#include "unit.h"

#include "../../daemon/classify.h"
#include "base/intmap.h"
#include "base/macro.h"

#define HZ 100
#define SEC 1000000ULL

static ThreadSample sample(uint64_t t, char state, uint64_t ut, uint64_t st) {
        return (ThreadSample) { .when_usec = t, .state = state, .utime = ut, .stime = st };
}

static ThreadSample with_io(ThreadSample s, uint64_t syscr, uint64_t syscw, uint64_t rchar, uint64_t wchar) {
        s.have_io = true;
        s.syscr = syscr;
        s.syscw = syscw;
        s.rchar = rchar;
        s.wchar = wchar;
        return s;
}

static ThreadSample with_sched(ThreadSample s, uint64_t run_ms, uint64_t wait_ms) {
        s.have_sched = true;
        s.run_ns = run_ms * 1000000;
        s.wait_ns = wait_ms * 1000000;
        return s;
}

static ThreadSample with_syscall(ThreadSample s, const char *name, uint64_t a1, uint64_t timeslices) {
        s.have_syscall = s.have_sched = true;
        s.timeslices = timeslices;
        s.syscall = (ProcSyscall) { .kind = PROC_SYSCALL_BLOCKED, .sp = 0x7ffd1000, .pc = 0x7f001234 };
        for (int64_t nr = 0; nr < 500; nr++)
                if (syscall_name(nr) && strcmp(syscall_name(nr), name) == 0)
                        s.syscall.nr = nr;
        s.syscall.args[1] = a1;
        return s;
}

START_TEST(test_on_cpu_classes) {
        const struct {
                const char *what;
                ThreadSample prev, cur;
                ThreadClass expect;
        } cases[] = {
                /* 1 s, 100 ticks of user time, no syscalls: a busy loop. */
                { "busy loop", with_io(sample(0, 'R', 0, 0), 5, 5, 100, 100),
                  with_io(sample(SEC, 'R', 100, 0), 5, 5, 100, 100), THREAD_CLASS_BUSY_LOOP },
                /* 60% system time, 2M reads, no bytes: EAGAIN spin. */
                { "EAGAIN spin", with_io(sample(0, 'R', 0, 0), 0, 0, 0, 0),
                  with_io(sample(SEC, 'R', 40, 60), 2000000, 0, 0, 0), THREAD_CLASS_SYSCALL_SPIN },
                /* All in the kernel, no read/write at all (sched_yield or poll(0) loop). */
                { "kernel spin", with_io(sample(0, 'R', 0, 0), 0, 0, 0, 0),
                  with_io(sample(SEC, 'R', 20, 80), 0, 0, 0, 0), THREAD_CLASS_SYSCALL_SPIN },
                /* dd: many syscalls, many bytes: working. */
                { "real I/O", with_io(sample(0, 'R', 0, 0), 0, 0, 0, 0),
                  with_io(sample(SEC, 'R', 30, 70), 20000, 20000, 1310720000, 1310720000), THREAD_CLASS_RUNNING },
                /* 30% CPU: not on a CPU enough to judge: running. */
                { "light", with_io(sample(0, 'S', 0, 0), 0, 0, 0, 0),
                  with_io(sample(SEC, 'S', 30, 0), 0, 0, 0, 0), THREAD_CLASS_WAITING },
                { "busy but syscalls", with_io(sample(0, 'R', 0, 0), 0, 0, 0, 0),
                  with_io(sample(SEC, 'R', 95, 5), 50, 0, 50000, 0), THREAD_CLASS_RUNNING },
                /* An overloaded machine: 10 ticks on a CPU, 880 ms runnable waiting for one, no syscalls: the busy
                 * loop it is, though it got 10 % of a CPU. */
                { "busy loop, starved", with_sched(with_io(sample(0, 'R', 0, 0), 5, 5, 100, 100), 0, 0),
                  with_sched(with_io(sample(SEC, 'R', 10, 0), 5, 5, 100, 100), 100, 880), THREAD_CLASS_BUSY_LOOP },
                /* The same 10 % with the rest asleep (waiting only 20 ms for a CPU): not a busy loop, and not on a
                 * CPU either, though it was runnable at the moment of the look: it waits, as its sleeps say. */
                { "light, on schedstat", with_sched(with_io(sample(0, 'R', 0, 0), 5, 5, 100, 100), 0, 0),
                  with_sched(with_io(sample(SEC, 'R', 10, 0), 5, 5, 100, 100), 100, 20), THREAD_CLASS_WAITING },
                /* Asleep all the interval but for a wake-up that the look caught: waiting, not running. */
                { "caught awake", with_sched(with_io(sample(0, 'S', 0, 0), 5, 5, 100, 100), 0, 0),
                  with_sched(with_io(sample(SEC, 'R', 0, 0), 5, 5, 100, 100), 1, 0), THREAD_CLASS_WAITING },
                /* Working at 60 % of a CPU, runnable when looked at: on a CPU, doing real work. */
                { "working", with_sched(with_io(sample(0, 'R', 0, 0), 0, 0, 0, 0), 0, 0),
                  with_sched(with_io(sample(SEC, 'R', 50, 10), 20000, 20000, 1310720000, 1310720000), 600, 10),
                  THREAD_CLASS_RUNNING },
        };
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
                ClassState st = {};
                classify_update(&st, NULL, &cases[i].prev, HZ);
                classify_update(&st, &cases[i].prev, &cases[i].cur, HZ);
                ck_assert_msg(st.class == cases[i].expect, "%s: got %s", cases[i].what, thread_class_to_string(st.class));
        }
}
END_TEST

/* Feed SAMPLES 200 ms apart, each interval U user and S system ticks, F faults, no read/write calls and no bytes;
 * the class after the last. */
static ThreadClass quiet_loop(unsigned n, uint64_t u, uint64_t s, uint64_t f) {
        ClassState st = {};
        ThreadSample prev = with_io(sample(0, 'R', 0, 0), 3, 3, 30, 30);

        classify_update(&st, NULL, &prev, HZ);
        for (unsigned i = 1; i <= n; i++) {
                ThreadSample cur = with_io(sample(i * SEC / 5, 'R', prev.utime + u, prev.stime + s), 3, 3, 30, 30);
                cur.faults = prev.faults + f;
                classify_update(&st, &prev, &cur, HZ);
                prev = cur;
        }
        return st.class;
}

/* An interpreter's loop of recv() on an empty non-blocking socket: /proc/…/io counts none of its calls. */
START_TEST(test_quiet_spin) {
        /* Python's recv loop: 23 % system, 20 ticks an interval. */
        ck_assert_int_eq(quiet_loop(5, 15, 5, 0), THREAD_CLASS_SYSCALL_SPIN);
        /* Each interval alone is too noisy to say, on a loaded machine: 3 ticks, and now and then no system tick
         * at all. Averaged over the stretch, it is a spin. */
        {
                ClassState st = {};
                ThreadSample prev = with_io(sample(0, 'R', 0, 0), 3, 3, 30, 30);
                static const uint64_t sys[] = { 1, 1, 0, 1, 0, 1, 1, 0, 1, 1, 0, 1 };

                classify_update(&st, NULL, &prev, HZ);
                for (size_t i = 0; i < ELEMENTSOF(sys); i++) {
                        ThreadSample cur = with_sched(with_io(sample((i + 1) * SEC / 5, 'R', prev.utime + 3 - sys[i],
                                                                     prev.stime + sys[i]), 3, 3, 30, 30),
                                                      (i + 1) * 30, (i + 1) * 170);
                        classify_update(&st, &prev, &cur, HZ);
                        if (i >= 4)
                                ck_assert_msg(st.class == THREAD_CLASS_SYSCALL_SPIN, "interval %zu: %s", i,
                                              thread_class_to_string(st.class));
                        prev = cur;
                }
        }
        /* The same split from page faults (a loop touching new memory) is not calls returning at once. */
        ck_assert_int_ne(quiet_loop(5, 15, 5, 40000), THREAD_CLASS_SYSCALL_SPIN);
        /* No system time: the busy loop. */
        ck_assert_int_eq(quiet_loop(5, 20, 0, 0), THREAD_CLASS_BUSY_LOOP);
        /* One interval is not enough to tell from a tick of interrupt time. */
        ck_assert_int_ne(quiet_loop(1, 4, 1, 0), THREAD_CLASS_SYSCALL_SPIN);
}
END_TEST

START_TEST(test_class_duration_accumulates) {
        ClassState st = {};
        ThreadSample a = with_io(sample(0, 'R', 0, 0), 1, 1, 1, 1), b = a, c = a;

        b.when_usec = SEC;
        b.utime = 100;
        c.when_usec = 2 * SEC;
        c.utime = 200;
        classify_update(&st, NULL, &a, HZ);
        classify_update(&st, &a, &b, HZ);
        ck_assert_int_eq(st.class, THREAD_CLASS_BUSY_LOOP);
        ck_assert_uint_eq(st.since_usec, 0); /* the busy interval started at the first look */
        classify_update(&st, &b, &c, HZ);
        ck_assert_uint_eq(st.since_usec, 0);
        ck_assert_double_eq_tol(st.cpu_percent, 100.0, 0.01);
}
END_TEST

START_TEST(test_dstate_and_stopped) {
        ClassState st = {};
        ThreadSample a = sample(0, 'S', 0, 0), b = sample(SEC, 'D', 0, 0), c = sample(3 * SEC, 'D', 0, 0);

        classify_update(&st, NULL, &a, HZ);
        classify_update(&st, &a, &b, HZ);
        ck_assert_int_eq(st.class, THREAD_CLASS_BLOCKED);
        ck_assert_uint_eq(st.since_usec, SEC);
        classify_update(&st, &b, &c, HZ);
        ck_assert_uint_eq(st.since_usec, SEC);
        c.state = 't';
        classify_update(&st, &b, &c, HZ);
        ck_assert_int_eq(st.class, THREAD_CLASS_STOPPED);
        c.state = 'Z';
        classify_update(&st, &b, &c, HZ);
        ck_assert_int_eq(st.class, THREAD_CLASS_ZOMBIE);
        /* D in the freezer is frozen, not blocked; thawed and still D, blocked from then on. */
        c.state = 'D';
        c.frozen = true;
        classify_update(&st, &b, &c, HZ);
        ck_assert_int_eq(st.class, THREAD_CLASS_FROZEN);
        b.when_usec = 4 * SEC;
        b.frozen = false;
        classify_update(&st, &c, &b, HZ);
        ck_assert_int_eq(st.class, THREAD_CLASS_BLOCKED);
        ck_assert_uint_eq(st.since_usec, 4 * SEC);
        /* In a frozen cgroup v2, S: frozen too (the scanner sets frozen from the cgroup), then waiting once thawed. */
        c = sample(5 * SEC, 'S', 0, 0);
        c.frozen = true;
        classify_update(&st, &b, &c, HZ);
        ck_assert_int_eq(st.class, THREAD_CLASS_FROZEN);
        ck_assert_uint_eq(st.since_usec, 5 * SEC);
        b = sample(6 * SEC, 'S', 0, 0);
        classify_update(&st, &c, &b, HZ);
        ck_assert_int_ne(st.class, THREAD_CLASS_FROZEN);
}
END_TEST

START_TEST(test_lock_retry_holds_across_wakes) {
        ClassState st = {};
        ThreadSample a = with_syscall(sample(0, 'S', 5, 5), "clock_nanosleep", 0, 7);
        ThreadSample b = with_syscall(sample(SEC, 'S', 5, 5), "clock_nanosleep", 0, 17);
        ThreadSample c = with_syscall(sample(2 * SEC, 'S', 5, 5), "clock_nanosleep", 0, 27);
        ThreadSample d = with_syscall(sample(3 * SEC, 'S', 5, 5), "clock_nanosleep", 0, 37);

        /* A sleep it wakes from ten times a second is a wait, never parked (blocked): it moves. */
        classify_update(&st, NULL, &a, HZ);
        classify_update(&st, &a, &b, HZ);
        ck_assert_int_eq(st.class, THREAD_CLASS_WAITING);
        /* The scanner saw a lock call of it fail: lock-retry, from the look before, and it holds while it wakes. */
        c.lock_retry = d.lock_retry = true;
        classify_update(&st, &b, &c, HZ);
        ck_assert_int_eq(st.class, THREAD_CLASS_LOCK_RETRY);
        ck_assert_uint_eq(st.since_usec, SEC);
        classify_update(&st, &c, &d, HZ);
        ck_assert_int_eq(st.class, THREAD_CLASS_LOCK_RETRY);
        ck_assert_uint_eq(st.since_usec, SEC);
        ck_assert(!st.parked);
        /* It got the lock: a plain wait again, from then. */
        a = with_syscall(sample(4 * SEC, 'S', 5, 5), "clock_nanosleep", 0, 47);
        classify_update(&st, &d, &a, HZ);
        ck_assert_int_eq(st.class, THREAD_CLASS_WAITING);
        ck_assert_uint_eq(st.since_usec, 4 * SEC);
}
END_TEST

/* A thread waiting for the GIL wakes every 5 ms to ask for it: its run count and futex value move, and a look may
 * catch it between two waits, yet it stays parked on the GIL while it gets no more CPU than that; one that got the
 * GIL and ran is not. */
START_TEST(test_gil_wait_stays_parked) {
        ClassState st = {};
        ThreadSample s[6];

        for (unsigned i = 0; i < ELEMENTSOF(s); i++) {
                s[i] = with_syscall(sample(i * SEC, 'S', 5, 5), "futex", 0x89, 7 + 200 * i);
                s[i].syscall.args[0] = 0xa5b8f0;
                s[i].syscall.args[2] = i;       /* the condition variable's sequence moves */
                s[i].gil_wait = true;
        }
        s[3].syscall.kind = PROC_SYSCALL_RUNNING; /* caught between two waits */
        s[3].state = 'R';
        s[3].gil_wait = false;
        classify_update(&st, NULL, &s[0], HZ);
        for (unsigned i = 1; i < 5; i++) {
                classify_update(&st, &s[i - 1], &s[i], HZ);
                ck_assert_msg(st.parked, "look %u", i);
                ck_assert_int_eq(st.class, THREAD_CLASS_WAITING);
                ck_assert_uint_eq(st.since_usec, SEC);
        }
        classify_set_owed(&st, true, "the GIL, which another thread keeps");
        ck_assert_int_eq(st.class, THREAD_CLASS_BLOCKED);
        /* It got the GIL and ran Python: on a CPU, no longer parked. */
        s[5] = with_syscall(sample(5 * SEC, 'R', 60, 5), "futex", 0x89, 7 + 200 * 5);
        s[5].syscall.args[0] = 0xa5b8f0;
        s[5].gil_wait = true;
        classify_update(&st, &s[4], &s[5], HZ);
        ck_assert(!st.parked);
        ck_assert_int_ne(st.class, THREAD_CLASS_BLOCKED);

        /* The same wake-ups on a futex that is not the GIL's: never parked. */
        st = (ClassState) {};
        for (unsigned i = 0; i < 3; i++)
                s[i].gil_wait = false;
        classify_update(&st, NULL, &s[0], HZ);
        classify_update(&st, &s[0], &s[1], HZ);
        classify_update(&st, &s[1], &s[2], HZ);
        ck_assert_uint_eq(st.since_usec, 2 * SEC);
}
END_TEST

/* As the scan looks: the deep files only when the classifier asks for them (classify_wants), and, in a process
 * that runs CPython (PYTHON), for a sleeper that may be starting a wait for the GIL (classify_may_wait_gil). */
static void look_in(ClassState *st, const ThreadSample *prev, const ThreadSample *raw, bool python) {
        ThreadSample cur = *raw;
        unsigned w = classify_wants(prev ? st : NULL, prev, &cur, HZ);

        if (!(w & CLASSIFY_READ_SYSCALL) && python && classify_may_wait_gil(st, prev, &cur, HZ))
                w |= CLASSIFY_READ_SYSCALL | CLASSIFY_READ_SCHED;

        /* The scanner knows a GIL only in a process that runs CPython. */
        if (!(w & CLASSIFY_READ_SYSCALL) || !python) {
                cur.have_syscall = cur.have_syscall && (w & CLASSIFY_READ_SYSCALL);
                cur.gil_wait = false;
        }
        if (!(w & (CLASSIFY_READ_SYSCALL | CLASSIFY_READ_SCHED)))
                cur.have_sched = false;
        classify_update(st, prev, &cur, HZ);
}

static void look(ClassState *st, const ThreadSample *prev, const ThreadSample *raw) {
        look_in(st, prev, raw, true);
}

/* The GIL waiter of a hung process on a busy machine: now and then a clock tick lands on one of its wake-ups, or a
 * look catches it runnable. The scan must still read its syscall, or it leaves the GIL at every such look and the
 * hang is never called blocked (seen in CI: "waiting" for 40 s). */
START_TEST(test_gil_wait_with_ticks_is_looked_at) {
        static const struct { char state; uint64_t utime; } looks[] = {
                { 'S', 5 }, { 'S', 5 }, { 'S', 6 }, { 'R', 6 }, { 'S', 7 }, { 'R', 8 }, { 'S', 8 }, { 'S', 9 },
        };
        ClassState st = {};
        ThreadSample s[ELEMENTSOF(looks)];

        for (unsigned i = 0; i < ELEMENTSOF(looks); i++) {
                s[i] = with_syscall(sample(i * SEC, looks[i].state, looks[i].utime, 5), "futex", 0x89, 7 + 200 * i);
                s[i].syscall.args[0] = 0xa5b8f0;
                s[i].gil_wait = looks[i].state == 'S';
                if (looks[i].state == 'R')
                        s[i].syscall.kind = PROC_SYSCALL_RUNNING;
                look(&st, i ? &s[i - 1] : NULL, &s[i]);
                if (i == 0)
                        continue;
                ck_assert_msg(st.parked, "look %u", i);
                ck_assert_uint_eq(st.since_usec, SEC);
                classify_set_owed(&st, true, "the GIL, which another thread keeps");
                ck_assert_int_eq(st.class, THREAD_CLASS_BLOCKED);
        }
        /* A tick at every look from the first one on (a busy machine, seen in CI: "waiting" for 50 s): it is parked
         * on the GIL from the second look all the same, since a CPython's low-CPU sleeper has its syscall read. */
        st = (ClassState) {};
        for (unsigned i = 0; i < 4; i++) {
                s[i] = with_syscall(sample(i * SEC, 'S', 5 + i, 5), "futex", 0x89, 7 + 200 * i);
                s[i].syscall.args[0] = 0xa5b8f0;
                s[i].gil_wait = true;
                look(&st, i ? &s[i - 1] : NULL, &s[i]);
        }
        ck_assert(st.parked && st.parked_gil);
        ck_assert_uint_eq(st.since_usec, SEC);
        /* Outside a CPython its futex wait is no GIL's: it uses CPU at every look, so it never parks. */
        st = (ClassState) {};
        for (unsigned i = 0; i < 4; i++)
                look_in(&st, i ? &s[i - 1] : NULL, &s[i], false);
        ck_assert(!st.parked);
        /* A thread on some other futex with the same ticks is not looked at: it leaves its place. */
        st = (ClassState) {};
        for (unsigned i = 0; i < 3; i++) {
                s[i].gil_wait = false;
                look(&st, i ? &s[i - 1] : NULL, &s[i]);
        }
        ck_assert(!st.parked);
}
END_TEST

START_TEST(test_parked_sleepers) {
        ClassState st = {};
        ThreadSample a = with_syscall(sample(0, 'S', 5, 5), "read", 0, 7);
        ThreadSample b = with_syscall(sample(SEC, 'S', 5, 5), "read", 0, 7);
        ThreadSample c = with_syscall(sample(2 * SEC, 'S', 5, 5), "read", 0, 7);
        ThreadSample d = with_syscall(sample(3 * SEC, 'S', 5, 5), "read", 0, 8); /* it woke up once */

        /* Parked in read(): waiting, however long, until something is found to owe it (owed.h). */
        classify_update(&st, NULL, &a, HZ);
        classify_update(&st, &a, &b, HZ);
        ck_assert_int_eq(st.class, THREAD_CLASS_WAITING);
        ck_assert(st.parked);
        classify_update(&st, &b, &c, HZ);
        ck_assert_int_eq(st.class, THREAD_CLASS_WAITING);
        /* Owed: blocked from when it parked, and it stays so while it does not move. It parked by the first look:
         * that one saw it in the same read() with the run count it still has. */
        classify_set_owed(&st, true, "its peer is stopped, frozen or blocked");
        ck_assert_int_eq(st.class, THREAD_CLASS_BLOCKED);
        ck_assert_uint_eq(st.since_usec, 0);
        ck_assert_str_eq(st.owed_why, "its peer is stopped, frozen or blocked");
        classify_update(&st, &b, &c, HZ);
        ck_assert_int_eq(st.class, THREAD_CLASS_BLOCKED);
        ck_assert_uint_eq(st.since_usec, 0);
        /* It woke up once: a new parking, a new period, and nothing owes it until judged again. */
        classify_update(&st, &c, &d, HZ);
        ck_assert_int_eq(st.class, THREAD_CLASS_WAITING);
        ck_assert(!st.owed && !st.owed_why);
        ck_assert_uint_eq(st.since_usec, 3 * SEC);
        /* A look that saw it in the same call but with another run count (it ran in between) is no start. */
        ck_assert_uint_eq(st.parked_since_usec, 3 * SEC);
        /* Judged not owed after all (its peer was continued): waiting again, from when it parked. */
        classify_set_owed(&st, true, "a mutex another thread holds");
        classify_set_owed(&st, false, NULL);
        ck_assert_int_eq(st.class, THREAD_CLASS_WAITING);
        ck_assert_uint_eq(st.since_usec, 3 * SEC);

        /* Idle waits stay "waiting" however long they last. */
        st = (ClassState) {};
        a = with_syscall(sample(0, 'S', 0, 0), "epoll_wait", 0, 3);
        b = with_syscall(sample(SEC, 'S', 0, 0), "epoll_wait", 0, 3);
        classify_update(&st, NULL, &a, HZ);
        classify_update(&st, &a, &b, HZ);
        ck_assert_int_eq(st.class, THREAD_CLASS_WAITING);

        /* Without deep reads a sleeper is waiting. */
        st = (ClassState) {};
        a = sample(0, 'S', 0, 0);
        b = sample(SEC, 'S', 0, 0);
        classify_update(&st, NULL, &a, HZ);
        classify_update(&st, &a, &b, HZ);
        ck_assert_int_eq(st.class, THREAD_CLASS_WAITING);
}
END_TEST

START_TEST(test_idle_waits_and_wants) {
        ThreadSample lock = with_syscall(sample(0, 'S', 0, 0), "futex", 0x80 /* FUTEX_WAIT_PRIVATE */, 0);
        ThreadSample cond = with_syscall(sample(0, 'S', 0, 0), "futex", 0x89 /* FUTEX_WAIT_BITSET_PRIVATE */, 0);
        ThreadSample sleep = with_syscall(sample(0, 'S', 0, 0), "clock_nanosleep", 0, 0);
        ThreadSample p = sample(0, 'S', 1, 1), q = sample(SEC, 'S', 1, 1), r = sample(SEC, 'R', 90, 1);

        ck_assert(!classify_syscall_is_idle_wait(&lock.syscall));
        ck_assert(classify_syscall_is_idle_wait(&cond.syscall));
        ck_assert(classify_syscall_is_idle_wait(&sleep.syscall));
        /* Deep reads only for suspects: a quiet sleeper (whatever the rules) and threads on a CPU. */
        ck_assert_uint_eq(classify_wants(NULL, &p, &q, HZ), CLASSIFY_READ_SYSCALL | CLASSIFY_READ_SCHED);
        /* A new sleeper, and one that used a sliver of CPU getting into its wait: looked at, so that the next look
         * may find it parked from this one. One that used more is not. */
        ck_assert_uint_eq(classify_wants(NULL, NULL, &q, HZ), CLASSIFY_READ_SYSCALL | CLASSIFY_READ_SCHED);
        q.utime = 3; /* 2 ticks in 1 s: 2 % */
        ck_assert_uint_eq(classify_wants(NULL, &p, &q, HZ), CLASSIFY_READ_SYSCALL | CLASSIFY_READ_SCHED);
        q.utime = 11; /* 10 % */
        ck_assert_uint_eq(classify_wants(NULL, &p, &q, HZ), 0);
        q.utime = 1;
        /* On a CPU: the counters, and how long it waited for a CPU. */
        ck_assert_uint_eq(classify_wants(NULL, &p, &r, HZ), CLASSIFY_READ_IO | CLASSIFY_READ_SCHED);
        q.state = 'D';
        ck_assert_uint_eq(classify_wants(NULL, &p, &q, HZ),
                          CLASSIFY_READ_WCHAN | CLASSIFY_READ_SYSCALL | CLASSIFY_READ_SCHED);
}
END_TEST

START_TEST(test_intmap_against_reference) {
        enum { N = 20000 };
        IntMap m = INTMAP_NULL;
        static void *ref[N];

        srand(42);
        memset(ref, 0, sizeof ref);
        for (int round = 0; round < 200000; round++) {
                int key = 1 + rand() % (N - 1);
                switch (rand() % 3) {
                case 0:
                        ck_assert_int_eq(intmap_put(&m, key, (void *) (uintptr_t) (key * 3)), 0);
                        ref[key] = (void *) (uintptr_t) (key * 3);
                        break;
                case 1:
                        ck_assert_ptr_eq(intmap_remove(&m, key), ref[key]);
                        ref[key] = NULL;
                        break;
                default:
                        ck_assert_ptr_eq(intmap_get(&m, key), ref[key]);
                }
        }
        size_t used = 0;
        for (int k = 1; k < N; k++) {
                ck_assert_ptr_eq(intmap_get(&m, k), ref[k]);
                used += ref[k] != NULL;
        }
        ck_assert_uint_eq(m.used, used);
        ck_assert_int_eq(intmap_put(&m, 0, NULL), -EINVAL);
        intmap_done(&m);
}
END_TEST

/* Kernel threads asleep read "0 0x0 0x0 …" from /proc/…/syscall: that is not a read() parked for minutes, and
 * every kworker would be "blocked". Asleep they wait for work; in D they are blocked like anyone. */
START_TEST(test_kernel_threads_wait) {
        ThreadSample prev = with_syscall(sample(0, 'I', 5, 5), "read", 0, 7);
        ThreadSample cur = with_syscall(sample(3 * SEC, 'I', 5, 5), "read", 0, 7);
        ClassState st = {};

        prev.kthread = cur.kthread = true;
        ck_assert_uint_eq(classify_wants(NULL, &prev, &cur, HZ), 0);
        classify_update(&st, NULL, &prev, HZ);
        classify_update(&st, &prev, &cur, HZ);
        ck_assert_int_eq(st.class, THREAD_CLASS_WAITING);
        /* The same thread without the flag is a user thread parked in read(), which a walk may find owed. */
        prev.kthread = cur.kthread = false;
        st = (ClassState) {};
        classify_update(&st, NULL, &prev, HZ);
        classify_update(&st, &prev, &cur, HZ);
        ck_assert_int_eq(st.class, THREAD_CLASS_WAITING);
        ck_assert(st.parked);
        cur.kthread = true;
        cur.state = 'D';
        classify_update(&st, &prev, &cur, HZ);
        ck_assert_int_eq(st.class, THREAD_CLASS_BLOCKED);
}
END_TEST

UNIT_TEST_MAIN("classify", test_on_cpu_classes, test_quiet_spin, test_class_duration_accumulates,
               test_dstate_and_stopped, test_lock_retry_holds_across_wakes,
               test_parked_sleepers, test_gil_wait_stays_parked, test_gil_wait_with_ticks_is_looked_at, test_idle_waits_and_wants, test_kernel_threads_wait, test_intmap_against_reference)
