/* trigger.c: rule evaluation, cooldowns and the capture budget (the policy half of the watchdog). */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/syscall.h>

#include "base/alloc-util.h"
#include "base/log.h"
#include "base/macro.h"
#include "base/time-util.h"
#include "chain/wait-chain.h"
#include "config/rules.h"
#include "trigger.h"

void trigger_done(Trigger *t) {
        for (size_t i = 0; i < t->n_cooldowns; i++)
                free(t->cooldowns[i].rule);
        free(t->cooldowns);
        capture_budget_done(&t->budget);
        for (size_t i = 0; i < t->n_stats; i++)
                free(t->stats[i].rule);
        free(t->stats);
        free(t->checks);
        *t = (Trigger) {};
}

static Cooldown *cooldown_find(Trigger *t, const char *rule, const ProcessEntry *p) {
        for (size_t i = 0; i < t->n_cooldowns; i++)
                if (t->cooldowns[i].pid == p->pid && t->cooldowns[i].starttime == p->starttime &&
                    streq(t->cooldowns[i].rule, rule))
                        return &t->cooldowns[i];
        return NULL;
}

static void cooldowns_expire(Trigger *t, uint64_t now) {
        size_t k = 0;

        for (size_t i = 0; i < t->n_cooldowns; i++) {
                if (t->cooldowns[i].until_usec <= now) {
                        free(t->cooldowns[i].rule);
                        continue;
                }
                t->cooldowns[k++] = t->cooldowns[i];
        }
        t->n_cooldowns = k;
}

static int cooldown_set(Trigger *t, const Rule *r, const ProcessEntry *p, uint64_t now) {
        Cooldown *c = cooldown_find(t, r->name, p);

        if (!c) {
                if (!GREEDY_REALLOC(t->cooldowns, t->n_cooldowns_allocated, t->n_cooldowns + 1))
                        return -ENOMEM;
                c = &t->cooldowns[t->n_cooldowns];
                *c = (Cooldown) { .rule = strdup(r->name), .pid = p->pid, .starttime = p->starttime };
                if (!c->rule)
                        return -ENOMEM;
                t->n_cooldowns++;
        }
        c->until_usec = now + MAX(r->cooldown_usec, 1ULL);
        return 0;
}

unsigned trigger_budget_used(Trigger *t, uint64_t now) {
        return capture_budget_used(&t->budget, now);
}

uint64_t trigger_budget_wait_usec(Trigger *t, const Config *c, uint64_t now) {
        return capture_budget_wait_usec(&t->budget, c->max_per_minute, now);
}

bool trigger_budget_take(Trigger *t, const Config *c, uint64_t now) {
        return capture_budget_take(&t->budget, c->max_per_minute, now);
}

const RuleStats *trigger_rule_stats(const Trigger *t, const char *rule) {
        for (size_t i = 0; i < t->n_stats; i++)
                if (streq(t->stats[i].rule, rule))
                        return &t->stats[i];
        return NULL;
}

static RuleStats *stats_for(Trigger *t, const char *rule) {
        RuleStats *n;

        for (size_t i = 0; i < t->n_stats; i++)
                if (streq(t->stats[i].rule, rule))
                        return &t->stats[i];
        if (!GREEDY_REALLOC(t->stats, t->n_stats_allocated, t->n_stats + 1))
                return NULL;
        n = &t->stats[t->n_stats];
        *n = (RuleStats) { .rule = strdup(rule) };
        if (!n->rule)
                return NULL;
        t->n_stats++;
        return n;
}

static DeadlockCheck *check_find(Trigger *t, pid_t pid, uint64_t starttime) {
        for (size_t i = 0; i < t->n_checks; i++)
                if (t->checks[i].pid == pid && t->checks[i].starttime == starttime)
                        return &t->checks[i];
        return NULL;
}

static DeadlockCheck *check_get(Trigger *t, pid_t pid, uint64_t starttime) {
        DeadlockCheck *c = check_find(t, pid, starttime);

        if (c)
                return c;
        if (!GREEDY_REALLOC(t->checks, t->n_checks_allocated, t->n_checks + 1))
                return NULL;
        c = &t->checks[t->n_checks++];
        *c = (DeadlockCheck) { .pid = pid, .starttime = starttime };
        return c;
}

/* Whether check C still holds at NOW: keyed, while none of the processes its walk read moved the waits the verdict
 * rests on (a process gone, or a new one under its pid, moved), up to the hold; else for the recheck interval. A
 * deadlock is then found at the poll its last wait forms, not up to a recheck interval later, and a pool parked for
 * good beside it is not walked again every few seconds. */
static bool check_holds(Trigger *t, Scanner *s, const DeadlockCheck *c, uint64_t now) {
        const ProcessEntry *p = intmap_get(&s->processes, c->pid);

        if (c->n_chain == 0 || !t->waits_key)
                return now - c->checked_usec < TRIGGER_DEADLOCK_RECHECK_USEC;
        if (now - c->checked_usec >= TRIGGER_DEADLOCK_HOLD_USEC || !p || p->starttime != c->starttime)
                return false;
        /* The walk's processes: for a process of a cycle, the walk another one of it made. */
        for (unsigned i = 0; i < c->n_chain; i++) {
                ProcessEntry *q = intmap_get(&s->processes, c->chain[i]);

                if (!q)
                        return false;
                if (q->moved_usec > c->checked_usec && t->waits_key(s, q) != c->keys[i])
                        return false;
        }
        return true;
}

static void checks_expire(Trigger *t, Scanner *s, uint64_t now) {
        size_t k = 0;

        for (size_t i = 0; i < t->n_checks; i++)
                if (check_holds(t, s, &t->checks[i], now))
                        t->checks[k++] = t->checks[i];
        t->n_checks = k;
}

/* The processes CHAIN's walk from P read (P, then PEERS), each with what a verdict rests on in it now, into RES;
 * none when there are more than it keeps. */
static void check_key(Trigger *t, Scanner *s, DeadlockCheck *res, pid_t pid, const pid_t *peers, size_t n_peers) {
        res->n_chain = 0;
        if (!t->waits_key || n_peers + 1 > ELEMENTSOF(res->chain))
                return;
        for (size_t i = 0; i <= n_peers; i++) {
                ProcessEntry *q = intmap_get(&s->processes, i == 0 ? pid : peers[i - 1]);

                if (!q)
                        return; /* gone meanwhile: no key, the recheck interval */
                res->chain[i] = q->pid;
                res->keys[i] = t->waits_key(s, q);
        }
        res->n_chain = (unsigned) n_peers + 1;
}

/* The heads of PID's lock convoys into CHECK: threads holding a mutex (or a Python RLock, or the GIL) another thread
 * waits for, themselves waiting on no mutex (a lock chain's last holder: in read(), on a CPU, anywhere but behind
 * another lock). */
static void note_convoy_heads(DeadlockCheck *check, const WaitChain *c, pid_t pid) {
        check->n_convoy_heads = 0;
        for (size_t i = 0; i < c->n_edges; i++) {
                const WaitEdge *e = &c->edges[i];
                bool known = false;

                if ((e->kind != WAIT_KIND_MUTEX && e->kind != WAIT_KIND_GIL) || e->pid != pid || e->peer_pid != pid ||
                    e->peer_tid <= 0 || e->peer_tid == e->tid || wait_chain_mutex_wait(c, pid, e->peer_tid))
                        continue;
                for (unsigned k = 0; k < check->n_convoy_heads && !known; k++)
                        known = check->convoy_heads[k] == e->peer_tid;
                if (!known && check->n_convoy_heads < TRIGGER_CONVOY_HEADS_MAX)
                        check->convoy_heads[check->n_convoy_heads++] = e->peer_tid;
        }
}

static bool heads_convoy(const DeadlockCheck *check, pid_t tid) {
        for (unsigned k = 0; check && k < check->n_convoy_heads; k++)
                if (check->convoy_heads[k] == tid)
                        return true;
        return false;
}

/* A thread of PID waiting on a mutex whose holder exited, 0 when none. */
static pid_t chain_orphaned_lock_waiter(const WaitChain *c, pid_t pid) {
        for (size_t i = 0; i < c->n_edges; i++)
                if (c->edges[i].pid == pid && c->edges[i].kind == WAIT_KIND_MUTEX && c->edges[i].owner_exited)
                        return c->edges[i].tid;
        return 0;
}

/* Whether P is in a deadlock: from a walk whose check still holds (check_holds(), by P or by a process of the same
 * cycle), or from a new walk while this poll has walks left. *RET_CHECK is the record, for the cycle. */
static bool trigger_deadlock(Trigger *t, Scanner *s, PeerResolver **resolver, unsigned *walks, const ProcessEntry *p,
                             uint64_t now, const DeadlockCheck **ret_check) {
        _cleanup_(wait_chain_freep) WaitChain *chain = NULL;
        _cleanup_free_ pid_t *peers = NULL;
        DeadlockCheck *c = check_find(t, p->pid, p->starttime), res;
        size_t n_peers;
        uint64_t t0;
        int r;

        if (c) { /* the checks that no longer hold went at the start of the evaluation */
                *ret_check = c;
                return c->deadlock;
        }
        if (*walks >= TRIGGER_DEADLOCK_WALKS_PER_POLL)
                return false; /* next poll */
        if (!*resolver && scanner_resolver_new(s, now, resolver) < 0)
                return false;
        (*walks)++;
        t0 = now_usec(CLOCK_MONOTONIC);
        r = wait_chain_build(*resolver, scanner_wait_threads(s), p->pid, 0, TRIGGER_DEADLOCK_DEPTH, &chain, &peers,
                             &n_peers);
        t->deadlock_walks++;
        t->deadlock_walk_usec += now_usec(CLOCK_MONOTONIC) - t0;
        if (r < 0) {
                log_debug_errno(r, "Wait-chain walk from pid %d failed: %m", (int) p->pid);
                return false;
        }
        /* Only a process on the cycle is "in a deadlock" for a rule. One that merely waits on it (the shell that
         * started it, blocked in wait4()) is stuck too, but the firing belongs to the cycle, once: otherwise every
         * ancestor of a deadlocked pair fired on its own (seen here: four shells and a terminal). */
        res = (DeadlockCheck) { .checked_usec = now };
        for (size_t i = 0; chain->deadlock && chain->n_cycle <= TRIGGER_DEADLOCK_CYCLE_MAX && i < chain->n_cycle; i++)
                if (chain->cycle[i] == p->pid)
                        res.deadlock = true;
        /* Inside P: threads waiting on each other's mutexes, or on a mutex whose holder exited. Neither needs
         * another process, and P alone gets the firing. */
        if (!res.deadlock) {
                res.lock_tid = chain->lock_pid == p->pid ? chain->lock_cycle[0]
                                                         : chain_orphaned_lock_waiter(chain, p->pid);
                res.deadlock = res.lock_tid > 0;
        }
        for (size_t i = 0; i < chain->n_edges; i++)
                if (chain->edges[i].kind == WAIT_KIND_MUTEX) {
                        if (chain->edges[i].peer_tid > 0)
                                t->lock_edges_found++;
                        else
                                t->lock_edges_unknown++;
                }
        if (res.deadlock && res.lock_tid == 0 && chain->n_cycle > 0) {
                memcpy(res.cycle, chain->cycle, chain->n_cycle * sizeof *res.cycle);
                res.n_cycle = (unsigned) chain->n_cycle;
        }
        check_key(t, s, &res, p->pid, peers, n_peers);
        log_debug("Deadlock walk from pid %d (%s): %s, %zu other processes, %llu us", (int) p->pid, p->comm,
                  res.deadlock ? "a deadlock" : "no deadlock", n_peers,
                  (unsigned long long) (now_usec(CLOCK_MONOTONIC) - t0));
        /* Recorded for P, and for the other members of the cycle, who learn the same from this walk. */
        for (size_t i = 0; i < MAX(res.n_cycle, 1U); i++) {
                const ProcessEntry *q = res.n_cycle > 0 ? intmap_get(&s->processes, res.cycle[i]) : p;
                DeadlockCheck *qc = q ? check_get(t, q->pid, q->starttime) : NULL;

                if (!qc)
                        continue;
                *qc = res;
                qc->pid = q->pid;
                qc->starttime = q->starttime;
        }
        c = check_find(t, p->pid, p->starttime);
        if (!c)
                return false;
        note_convoy_heads(c, chain, p->pid);
        *ret_check = c;
        return c->deadlock;
}

static bool rule_needs_identity(const Rule *r) {
        return r->exe || r->unit || r->cgroup || r->has_user;
}

/* Whether an alert of rule R is open on P or, for a deadlock, on any process of its cycle. */
static bool alert_open(const Rule *r, const ProcessEntry *p, const DeadlockCheck *dl, Scanner *s,
                       TriggerAlerting alerting, void *userdata) {
        if (alerting(r, p, userdata))
                return true;
        for (unsigned k = 0; dl && k < dl->n_cycle; k++) {
                const ProcessEntry *q = intmap_get(&s->processes, dl->cycle[k]);
                if (q && q != p && alerting(r, q, userdata))
                        return true;
        }
        return false;
}

/* What rule matching sees of thread TH of P. The deadlock and lock-holder conditions are taken as met: the walks
 * that decide them cost far more, and come after (rule_walks_agree()). */
static ThreadFacts thread_facts(const Rule *r, const ThreadEntry *th, const ProcessEntry *p, uint64_t now) {
        return (ThreadFacts) {
                .class = th->cls.class,
                .class_usec = now - th->cls.since_usec,
                .state = th->sample.state,
                .comm = p->comm,
                .exe = p->exe,
                .unit = p->unit,
                .cgroup = p->cgroup,
                .wchan = th->wchan[0] ? th->wchan : NULL,
                .uid = p->uid,
                .syscall_nr = th->sample.have_syscall && th->sample.syscall.kind == PROC_SYSCALL_BLOCKED
                                      ? th->sample.syscall.nr
                                      : -1,
                .cpu_percent = th->cls.cpu_percent,
                .deadlock = r->deadlock,
                .lock_holder = r->lock_holder,
        };
}

typedef enum WalkVerdict {
        WALK_NO,        /* not from this thread */
        WALK_NO_PROCESS, /* not from any thread of the process, this poll */
        WALK_YES,
} WalkVerdict;

/* Rule R's deadlock and lock-holder conditions on thread TH of P, by the poll's walks (RESOLVER, WALKS). A
 * deadlock found sets *RET_DL and raises *PEERS to its cycle. */
static WalkVerdict rule_walks_agree(Trigger *t, Scanner *s, PeerResolver **resolver, unsigned *walks, const Rule *r,
                                    const ThreadEntry *th, ProcessEntry *p, uint64_t now, const DeadlockCheck **ret_dl,
                                    unsigned *peers) {
        if (r->deadlock) {
                const DeadlockCheck *dl = NULL;

                /* A thread in nanosleep() waits on nothing we can follow: no walk. One in futex() may wait on a
                 * mutex, whose holder the walk names. */
                if (!th->sample.have_syscall || th->sample.syscall.kind != PROC_SYSCALL_BLOCKED ||
                    !(peers_syscall_follows(th->sample.syscall.nr) || th->sample.syscall.nr == __NR_futex))
                        return WALK_NO;
                if (!trigger_deadlock(t, s, resolver, walks, p, now, &dl))
                        /* Decided for P this poll, unless the walk is only put off to the next. */
                        return check_find(t, p->pid, p->starttime) ? WALK_NO_PROCESS : WALK_NO;
                /* A deadlock inside the process fires from a thread in it, whose chain shows it. */
                if (dl->lock_tid > 0 && dl->lock_tid != th->tid)
                        return WALK_NO;
                *peers = MAX(*peers, dl->n_cycle);
                *ret_dl = dl;
        }
        if (r->lock_holder) {
                /* The same walk, from any thread: the head of a convoy may wait anywhere. */
                const DeadlockCheck *hc = NULL;

                (void) trigger_deadlock(t, s, resolver, walks, p, now, &hc);
                if (!heads_convoy(hc, th->tid))
                        return WALK_NO;
        }
        return WALK_YES;
}

/* Whether rule R may fire on P now as far as the capture budget goes, and *RET_CAPTURE whether it snapshots. A rule
 * that wants a snapshot the budget cannot pay for waits (no cooldown: it fires once the budget frees up). */
static bool budget_allows(Trigger *t, const Config *c, const Rule *r, const ProcessEntry *p, bool cooled, uint64_t now,
                          bool *ret_capture) {
        bool wants = !cooled && (r->actions & RULE_ACTION_SNAPSHOT);

        *ret_capture = wants && trigger_budget_take(t, c, now);
        if (!wants || *ret_capture)
                return true;
        t->budget_skipped++;
        if (now - t->budget_logged_usec >= TRIGGER_BUDGET_WINDOW_USEC) {
                t->budget_logged_usec = now;
                log_warning("Capture budget (%u per minute) spent; rule \"%s\" on pid %d waits for it",
                            c->max_per_minute, r->name, (int) p->pid);
        }
        return false;
}

/* Rule R fired on P: its cooldown (and, for a deadlock DL, on every process of the cycle: one deadlock, one firing)
 * and its statistics. */
static int fired_record(Trigger *t, Scanner *s, const Rule *r, const ProcessEntry *p, const DeadlockCheck *dl,
                        bool cooled, uint64_t now) {
        RuleStats *st;

        if (!cooled && cooldown_set(t, r, p, now) < 0)
                return log_oom();
        for (unsigned k = 0; !cooled && dl && k < dl->n_cycle; k++) {
                ProcessEntry *q = intmap_get(&s->processes, dl->cycle[k]);
                if (q && q != p && cooldown_set(t, r, q, now) < 0)
                        return log_oom();
        }
        st = stats_for(t, r->name);
        if (st) {
                struct timespec ts;
                clock_gettime(CLOCK_REALTIME, &ts);
                st->fired++;
                st->last_fired_usec = (uint64_t) ts.tv_sec * USEC_PER_SEC + (uint64_t) ts.tv_nsec / 1000;
        }
        return 0;
}

/* Every rule on thread TH of this poll: fire those that match, outside their cooldown. RESOLVER and WALKS are the
 * poll's, for the deadlock walks; QUIET[k] is the process rule k was last found not to fire on this poll for what
 * holds of the whole process (its cooldown, no deadlock): its other threads are not looked at again for it (10,000
 * threads of one process blocked on its own pipe, each asked about every rule on every poll, were 17% of the
 * daemon's CPU). */
static int thread_evaluate(Trigger *t, const Config *c, Scanner *s, ThreadEntry *th, uint64_t now,
                           PeerResolver **resolver, unsigned *walks, const ProcessEntry **quiet, TriggerFire fire,
                           TriggerAlerting alerting, void *userdata) {
        for (size_t k = 0; k < c->n_rules; k++) {
                const Rule *r = &c->rules[k];
                ProcessEntry *p = th->process;
                const DeadlockCheck *dl = NULL;
                unsigned peers = r->peers;
                bool capture, cooled;
                ThreadFacts f;
                int r2;

                if (quiet[k] == p || !(r->classes & (1U << th->cls.class)) ||
                    now - th->cls.since_usec < r->for_usec)
                        continue;
                /* Inside the cooldown only to re-open an alert that resolved while the hang went on. */
                cooled = cooldown_find(t, r->name, p);
                if (cooled && (!alerting || !(r->actions & RULE_ACTION_HOOK) || alerting(r, p, userdata))) {
                        quiet[k] = p;
                        continue;
                }
                if (rule_needs_identity(r))
                        (void) scanner_load_identity(s, p);
                f = thread_facts(r, th, p, now);
                if (!rule_matches(r, &f))
                        continue;
                switch (rule_walks_agree(t, s, resolver, walks, r, th, p, now, &dl, &peers)) {
                case WALK_NO_PROCESS:
                        quiet[k] = p;
                        continue;
                case WALK_NO:
                        continue;
                case WALK_YES:
                        break;
                }
                /* One deadlock, one alert: re-opened from one process of the cycle only. */
                if (cooled && dl && alert_open(r, p, dl, s, alerting, userdata))
                        continue;
                if (!budget_allows(t, c, r, p, cooled, now, &capture))
                        continue;
                if (fire(r, th, peers, capture, userdata) == -EBUSY) {
                        /* No slot for the capture: give the budget back and try again next poll, without
                         * a cooldown that would lose the evidence for the whole cooldown. */
                        if (capture)
                                capture_budget_give_back(&t->budget);
                        t->deferred++;
                        continue;
                }
                r2 = fired_record(t, s, r, p, dl, cooled, now);
                if (r2 < 0)
                        return r2;
        }
        return 0;
}

int trigger_evaluate(Trigger *t, const Config *c, Scanner *s, uint64_t now, TriggerFire fire,
                     TriggerAlerting alerting, void *userdata) {
        _cleanup_(peer_resolver_freep) PeerResolver *resolver = NULL; /* one per poll: its tables are a snapshot */
        _cleanup_free_ const ProcessEntry **quiet = NULL;
        unsigned classes = 0, walks = 0;

        quiet = calloc(MAX(c->n_rules, (size_t) 1), sizeof *quiet);
        if (!quiet)
                return log_oom();
        cooldowns_expire(t, now);
        checks_expire(t, s, now);
        for (size_t i = 0; i < c->n_rules; i++)
                classes |= c->rules[i].classes;
        /* The threads of the rules' classes only: 10,000 parked in a wait no rule asks about cost nothing. */
        for (ThreadClass cl = 0; cl < _THREAD_CLASS_MAX; cl++) {
                ThreadEntry *next;

                if (!(classes & (1U << cl)))
                        continue;
                for (ThreadEntry *th = s->by_class[cl]; th; th = next) {
                        int r;

                        next = th->class_next;
                        r = thread_evaluate(t, c, s, th, now, &resolver, &walks, quiet, fire, alerting, userdata);
                        if (r < 0)
                                return r;
                }
        }
        return 0;
}
