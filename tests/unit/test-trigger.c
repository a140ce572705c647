/* test-trigger.c: rules over synthetic classified threads: for:, states, cooldowns, the per-minute budget, stats. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "unit.h"

#include "../../daemon/trigger.h"
#include "base/macro.h"
#include "config/config.h"

#define SEC USEC_PER_SEC
#define T0 (1000 * SEC)

typedef struct Firings {
        unsigned busy;                  /* refuse this many more firings with -EBUSY: no capture slot */
        unsigned refused;
        unsigned n, captured;
        pid_t pid[32];
        char rule[32][32];
} Firings;

static int on_fire(const Rule *rule, ThreadEntry *t, unsigned peers, bool capture, void *userdata) {
        Firings *f = userdata;

        if (capture && f->busy > 0) {
                f->busy--;
                f->refused++;
                return -EBUSY;
        }

        ck_assert_uint_lt(f->n, ELEMENTSOF(f->pid));
        f->pid[f->n] = t->pid;
        snprintf(f->rule[f->n], sizeof f->rule[0], "%s", rule->name);
        f->n++;
        f->captured += capture;
        return 0;
}

/* A Scanner holding synthetic processes of one thread each, as a scan would have classified them. */
typedef struct World {
        Scanner s;
        ProcessEntry p[16];
        ThreadEntry t[16];
        unsigned n;
} World;

static ThreadEntry *world_add(World *w, pid_t pid, ThreadClass class, char state, uint64_t since) {
        ProcessEntry *p = &w->p[w->n];
        ThreadEntry *t = &w->t[w->n];

        ck_assert_uint_lt(w->n, ELEMENTSOF(w->p));
        *p = (ProcessEntry) { .pid = pid, .starttime = 100 + (uint64_t) pid, .threads = t, .n_threads = 1,
                              .identity_loaded = true };
        snprintf(p->comm, sizeof p->comm, "proc%d", (int) pid);
        *t = (ThreadEntry) { .pid = pid, .tid = pid, .process = p, .stat_fd = -EBADF, .have_sample = true,
                             .counted_class = -1 };
        memcpy(t->comm, p->comm, sizeof t->comm);
        t->sample.state = state;
        t->cls.class = class;
        t->cls.since_usec = since;
        ck_assert_int_eq(intmap_put(&w->s.processes, pid, p), 0);
        ck_assert_int_eq(intmap_put(&w->s.threads, pid, t), 0);
        scanner_count_class(&w->s, t); /* listed under its class, as a scan lists it */
        w->n++;
        return t;
}

static void world_done(World *w) {
        intmap_done(&w->s.threads);
        intmap_done(&w->s.processes);
}

static bool alert_is_open;

static bool on_alerting(const Rule *rule, const ProcessEntry *p, void *userdata) {
        return alert_is_open;
}

START_TEST(test_a_resumed_hang_reopens_its_alert_inside_the_cooldown) {
        _cleanup_(config_freep) Config *c = NULL;
        _cleanup_(trigger_done) Trigger t = {};
        World w = {};
        Firings f = {};
        ThreadEntry *th;

        ck_assert_int_eq(config_new_default(&c), 0);
        for (size_t i = 0; i < c->n_rules; i++)
                c->rules[i].actions |= RULE_ACTION_HOOK;
        th = world_add(&w, 4242, THREAD_CLASS_BUSY_LOOP, 'R', T0);
        alert_is_open = false;
        ck_assert_int_eq(trigger_evaluate(&t, c, &w.s, T0 + 60 * SEC, on_fire, on_alerting, &f), 0);
        ck_assert_uint_eq(f.n, 1);
        ck_assert_uint_eq(f.captured, 1);
        /* Its alert is open: the cooldown holds, nothing more. */
        alert_is_open = true;
        ck_assert_int_eq(trigger_evaluate(&t, c, &w.s, T0 + 61 * SEC, on_fire, on_alerting, &f), 0);
        ck_assert_uint_eq(f.n, 1);
        /* It stopped (the alert resolved), then looped again: once past the rule's for:, the alert opens again,
         * inside the cooldown, without a snapshot. */
        alert_is_open = false;
        th->cls.since_usec = T0 + 120 * SEC;
        ck_assert_int_eq(trigger_evaluate(&t, c, &w.s, T0 + 150 * SEC, on_fire, on_alerting, &f), 0);
        ck_assert_uint_eq(f.n, 1);
        ck_assert_int_eq(trigger_evaluate(&t, c, &w.s, T0 + 180 * SEC, on_fire, on_alerting, &f), 0);
        ck_assert_uint_eq(f.n, 2);
        ck_assert_uint_eq(f.captured, 1);
        ck_assert_uint_eq(trigger_rule_stats(&t, "busy-loop")->fired, 2);
        /* A rule without the hook action stays quiet for its whole cooldown, as before. */
        for (size_t i = 0; i < c->n_rules; i++)
                c->rules[i].actions &= ~(unsigned) RULE_ACTION_HOOK;
        th->cls.since_usec = T0 + 200 * SEC;
        ck_assert_int_eq(trigger_evaluate(&t, c, &w.s, T0 + 300 * SEC, on_fire, on_alerting, &f), 0);
        ck_assert_uint_eq(f.n, 2);
        world_done(&w);
}
END_TEST

START_TEST(test_for_duration_and_cooldown) {
        _cleanup_(config_freep) Config *c = NULL;
        _cleanup_(trigger_done) Trigger t = {};
        World w = {};
        Firings f = {};

        ck_assert_int_eq(config_new_default(&c), 0);
        /* A busy loop since T0: the built-in busy-loop rule wants 60 s of it. */
        world_add(&w, 4242, THREAD_CLASS_BUSY_LOOP, 'R', T0);
        ck_assert_int_eq(trigger_evaluate(&t, c, &w.s, T0 + 59 * SEC, on_fire, NULL, &f), 0);
        ck_assert_uint_eq(f.n, 0);
        ck_assert_ptr_null(trigger_rule_stats(&t, "busy-loop"));

        ck_assert_int_eq(trigger_evaluate(&t, c, &w.s, T0 + 60 * SEC, on_fire, NULL, &f), 0);
        ck_assert_uint_eq(f.n, 1);
        ck_assert_int_eq(f.pid[0], 4242);
        ck_assert_str_eq(f.rule[0], "busy-loop");
        ck_assert_uint_eq(f.captured, 1);
        ck_assert_uint_eq(trigger_rule_stats(&t, "busy-loop")->fired, 1);

        /* Still looping a poll later, and nine minutes later: the cooldown (10 min) keeps it to one firing. */
        ck_assert_int_eq(trigger_evaluate(&t, c, &w.s, T0 + 61 * SEC, on_fire, NULL, &f), 0);
        ck_assert_int_eq(trigger_evaluate(&t, c, &w.s, T0 + 9 * 60 * SEC, on_fire, NULL, &f), 0);
        ck_assert_uint_eq(f.n, 1);
        /* After the cooldown it fires again. */
        ck_assert_int_eq(trigger_evaluate(&t, c, &w.s, T0 + 60 * SEC + RULE_DEFAULT_COOLDOWN_USEC, on_fire, NULL, &f), 0);
        ck_assert_uint_eq(f.n, 2);
        ck_assert_uint_eq(trigger_rule_stats(&t, "busy-loop")->fired, 2);
        world_done(&w);
}
END_TEST

START_TEST(test_states_and_classes) {
        _cleanup_(config_freep) Config *c = NULL;
        _cleanup_(trigger_done) Trigger t = {};
        World w = {};
        Firings f = {};

        ck_assert_int_eq(config_new_default(&c), 0);
        /* hung-task is blocked *in D*; a thread blocked in S (a wait something owes) is the "blocked" rule's. */
        world_add(&w, 100, THREAD_CLASS_BLOCKED, 'S', T0);
        world_add(&w, 101, THREAD_CLASS_BLOCKED, 'D', T0);
        /* Waiting and running threads never match the built-in rules, however long. */
        world_add(&w, 102, THREAD_CLASS_WAITING, 'S', T0);
        world_add(&w, 103, THREAD_CLASS_RUNNING, 'R', T0);
        ck_assert_int_eq(trigger_evaluate(&t, c, &w.s, T0 + 119 * SEC, on_fire, NULL, &f), 0);
        ck_assert_uint_eq(f.n, 0);
        ck_assert_int_eq(trigger_evaluate(&t, c, &w.s, T0 + 3600 * SEC, on_fire, NULL, &f), 0);
        ck_assert_uint_eq(f.n, 2);
        for (unsigned i = 0; i < 2; i++)
                ck_assert_str_eq(f.rule[i], f.pid[i] == 100 ? "blocked" : "hung-task");
        ck_assert_int_eq(f.pid[0] + f.pid[1], 201);
        world_done(&w);
}
END_TEST

START_TEST(test_budget) {
        _cleanup_(config_freep) Config *c = NULL;
        _cleanup_(trigger_done) Trigger t = {};
        World w = {};
        Firings f = {};

        ck_assert_int_eq(config_new_default(&c), 0);
        c->max_per_minute = 3;
        for (pid_t pid = 200; pid < 205; pid++)
                world_add(&w, pid, THREAD_CLASS_SYSCALL_SPIN, 'R', T0);
        /* Five spinning processes, a budget of three: three snapshots; the other two wait for it, with no cooldown
         * and no firing counted. */
        ck_assert_int_eq(trigger_evaluate(&t, c, &w.s, T0 + 60 * SEC, on_fire, NULL, &f), 0);
        ck_assert_uint_eq(f.n, 3);
        ck_assert_uint_eq(f.captured, 3);
        ck_assert_uint_eq(t.budget_skipped, 2);
        ck_assert_uint_eq(trigger_budget_used(&t, T0 + 60 * SEC), 3);
        ck_assert_uint_eq(trigger_budget_wait_usec(&t, c, T0 + 70 * SEC), 50 * SEC);
        ck_assert(!trigger_budget_take(&t, c, T0 + 70 * SEC));
        /* A minute later the budget is back and the two that waited fire, once each. */
        ck_assert_int_eq(trigger_evaluate(&t, c, &w.s, T0 + 121 * SEC, on_fire, NULL, &f), 0);
        ck_assert_uint_eq(f.n, 5);
        ck_assert_uint_eq(trigger_rule_stats(&t, "syscall-spin")->fired, 5);
        for (unsigned i = 0; i < f.n; i++)
                for (unsigned k = i + 1; k < f.n; k++)
                        ck_assert_int_ne(f.pid[i], f.pid[k]);
        world_done(&w);
}
END_TEST

START_TEST(test_no_slot_defers) {
        _cleanup_(config_freep) Config *c = NULL;
        _cleanup_(trigger_done) Trigger t = {};
        World w = {};
        Firings f = { .busy = 2 };

        ck_assert_int_eq(config_new_default(&c), 0);
        world_add(&w, 300, THREAD_CLASS_BUSY_LOOP, 'R', T0);
        world_add(&w, 301, THREAD_CLASS_BUSY_LOOP, 'R', T0);
        /* Every capture slot busy: both firings are refused. They must not take budget, start a cooldown (which
         * would lose the snapshot for ten minutes) or count as fired. */
        ck_assert_int_eq(trigger_evaluate(&t, c, &w.s, T0 + 60 * SEC, on_fire, NULL, &f), 0);
        ck_assert_uint_eq(f.refused, 2);
        ck_assert_uint_eq(f.n, 0);
        ck_assert_uint_eq(t.deferred, 2);
        ck_assert_uint_eq(trigger_budget_used(&t, T0 + 60 * SEC), 0);
        ck_assert_ptr_null(trigger_rule_stats(&t, "busy-loop"));
        /* The next poll, with slots free again, fires both. */
        ck_assert_int_eq(trigger_evaluate(&t, c, &w.s, T0 + 61 * SEC, on_fire, NULL, &f), 0);
        ck_assert_uint_eq(f.n, 2);
        ck_assert_uint_eq(f.captured, 2);
        ck_assert_uint_eq(trigger_budget_used(&t, T0 + 61 * SEC), 2);
        ck_assert_uint_eq(trigger_rule_stats(&t, "busy-loop")->fired, 2);
        /* And then their cooldowns hold. */
        ck_assert_int_eq(trigger_evaluate(&t, c, &w.s, T0 + 62 * SEC, on_fire, NULL, &f), 0);
        ck_assert_uint_eq(f.n, 2);
        world_done(&w);
}
END_TEST

/* The Python frame a snapshot caught is kept per thread for /processes: only on the thread of the process it was
 * caught in, replaced by the next one, forgotten for the whole process when a later snapshot has none; and every
 * change is counted, so that a cached /processes body is built again. */
START_TEST(test_python_frames_kept_per_thread) {
        World w = {};
        ThreadEntry *a = world_add(&w, 4242, THREAD_CLASS_BUSY_LOOP, 'R', T0),
                    *b = world_add(&w, 4300, THREAD_CLASS_BLOCKED, 'S', T0);
        uint64_t changed = w.s.python_frames_changed;

        ck_assert_int_eq(scanner_set_python_frame(&w.s, 4242, 4242, "spin (app.py:3)"), 0);
        ck_assert_str_eq(a->python_frame, "spin (app.py:3)");
        ck_assert_uint_eq(w.s.python_frames_changed, changed + 1);
        /* Another process's thread by that TID, or one the scan does not know: nothing. */
        ck_assert_int_eq(scanner_set_python_frame(&w.s, 4300, 4242, "elsewhere (b.py:1)"), 0);
        ck_assert_int_eq(scanner_set_python_frame(&w.s, 5000, 5000, "gone (c.py:1)"), 0);
        ck_assert_str_eq(a->python_frame, "spin (app.py:3)");
        ck_assert_uint_eq(w.s.python_frames_changed, changed + 1);
        ck_assert_int_eq(scanner_set_python_frame(&w.s, 4242, 4242, "inner (app.py:12)"), 0);
        ck_assert_str_eq(a->python_frame, "inner (app.py:12)");
        ck_assert_int_eq(scanner_set_python_frame(&w.s, 4300, 4300, "wait (d.py:7)"), 0);
        /* A later snapshot of 4242: its process's frames go, if it is the same process; others' stay. */
        scanner_forget_python_frames(&w.s, 4242, 1);
        ck_assert_str_eq(a->python_frame, "inner (app.py:12)");
        scanner_forget_python_frames(&w.s, 4242, 100 + 4242);
        ck_assert_ptr_null(a->python_frame);
        ck_assert_str_eq(b->python_frame, "wait (d.py:7)");
        ck_assert_uint_eq(w.s.python_frames_changed, changed + 4);
        ck_assert_int_eq(scanner_set_python_frame(&w.s, 4300, 4300, NULL), 0);
        ck_assert_ptr_null(b->python_frame);
        world_done(&w);
}
END_TEST

UNIT_TEST_MAIN("trigger", test_for_duration_and_cooldown, test_a_resumed_hang_reopens_its_alert_inside_the_cooldown,
               test_states_and_classes, test_budget, test_no_slot_defers, test_python_frames_kept_per_thread)
