/* owed.c: walk the waits of parked threads and tell which something owes (see owed.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>

#include "base/alloc-util.h"
#include "base/log.h"
#include "base/macro.h"
#include "chain/peers.h"
#include "chain/python-waits.h"
#include "chain/wait-chain.h"
#include "owed.h"

void owed_done(Owed *o) {
        free(o->checks);
        *o = (Owed) {};
}

static OwedCheck *check_find(Owed *o, const ProcessEntry *p) {
        for (size_t i = 0; i < o->n_checks; i++)
                if (o->checks[i].pid == p->pid && o->checks[i].starttime == p->starttime)
                        return &o->checks[i];
        return NULL;
}

/* Drop the checks that are due again, and those of processes that are gone. */
static void checks_expire(Owed *o, Scanner *s, uint64_t now) {
        size_t k = 0;

        for (size_t i = 0; i < o->n_checks; i++) {
                const ProcessEntry *p = intmap_get(&s->processes, o->checks[i].pid);

                if (!p || p->starttime != o->checks[i].starttime ||
                    now - o->checks[i].checked_usec >= o->checks[i].recheck_usec)
                        continue;
                o->checks[k++] = o->checks[i];
        }
        o->n_checks = k;
}

/* Whether T is parked, long enough, in a wait that something may owe: not a sleep, not an event loop's or a
 * condition variable's idle wait, but a read, a write, a lock, a mutex, or a wait for a child. */
static bool candidate(Scanner *s, const ThreadEntry *t, uint64_t now) {
        const ProcSyscall *sc = &t->cls.parked_place;

        if (!t->cls.parked || now - t->cls.parked_since_usec < OWED_MIN_PARKED_USEC)
                return false;
        if (sc->nr == __NR_wait4 || sc->nr == __NR_waitid)
                return true;
        /* A Python lock's or the GIL's wait looks like a semaphore's or a condition variable's: idle, unless the
         * interpreter says what it is (chain/python-waits.h). */
        if (sc->nr == __NR_futex && classify_syscall_is_idle_wait(sc))
                return scanner_process_python(s, t->process);
        return !classify_syscall_is_idle_wait(sc) && (peers_syscall_follows(sc->nr) || sc->nr == __NR_futex);
}

/* Whether process PID (as the scan saw it) is stuck for good: every thread stopped, frozen, a zombie, or blocked
 * (in D, or owed). Gone counts as stuck only when the scan never saw it: a process that exited is no one's peer. */
static bool process_stuck(Scanner *s, pid_t pid) {
        const ProcessEntry *p = intmap_get(&s->processes, pid);
        unsigned n = 0;

        if (!p || p->ours)
                return false;
        for (const ThreadEntry *t = p->threads; t; t = t->next, n++)
                if (t->cls.class != THREAD_CLASS_STOPPED && t->cls.class != THREAD_CLASS_FROZEN &&
                    t->cls.class != THREAD_CLASS_ZOMBIE && t->cls.class != THREAD_CLASS_BLOCKED)
                        return false;
        return n > 0;
}

static bool thread_stuck(Scanner *s, pid_t tid) {
        const ThreadEntry *t = intmap_get(&s->threads, tid);

        return t && (t->cls.class == THREAD_CLASS_STOPPED || t->cls.class == THREAD_CLASS_FROZEN ||
                     t->cls.class == THREAD_CLASS_BLOCKED);
}

static bool in_cycle(const WaitChain *c, pid_t pid) {
        for (size_t i = 0; c->deadlock && i < c->n_cycle; i++)
                if (c->cycle[i] == pid)
                        return true;
        return false;
}

/* Whether every thread of P is parked in a wait that may be owed: none is on a CPU or in a sleep it will wake from,
 * so none will write to what its own process holds the other end of. */
static bool all_parked(Scanner *s, const ProcessEntry *p, uint64_t now) {
        for (const ThreadEntry *t = p->threads; t; t = t->next) {
                const ProcSyscall *sc = &t->cls.parked_place;

                /* A futex wait with no timeout (a join, a condition variable) wakes only if a thread of the process
                 * (all parked) wakes it. */
                if (!candidate(s, t, now) &&
                    !(t->cls.parked && now - t->cls.parked_since_usec >= OWED_MIN_PARKED_USEC &&
                      sc->nr == __NR_futex && sc->args[3] == 0))
                        return false;
        }
        return true;
}

/* Why edge E of a thread of P is owed, or NULL when its other end may still answer. */
static const char *edge_owed(Scanner *s, const WaitChain *c, const ProcessEntry *p, const WaitEdge *e, uint64_t now) {
        if (e->kind == WAIT_KIND_MUTEX) {
                if (e->owner_exited)
                        return "a mutex whose holder exited";
                if (e->peer_tid > 0 && e->peer_tid != e->tid)
                        return e->runtime ? "a Python RLock another thread holds" : "a mutex another thread holds";
                /* A threading.Lock records no holder, but one waited on is held: by another thread, or by the
                 * waiter itself (a Lock taken twice never returns). Parked this long on it is a lock wait, as a
                 * mutex's is, not an idle one. */
                if (e->runtime && e->object && startswith(e->object, "threading.Lock "))
                        return "a threading.Lock that is held (it records no holder)";
                return NULL;
        }
        /* Parked this long for the GIL: its holder keeps it (C code that blocked without releasing it). */
        if (e->kind == WAIT_KIND_GIL)
                return e->peer_tid > 0 && e->peer_tid != e->tid ? "the GIL, which another thread keeps" : NULL;
        if (e->peer_pid == 0) {
                /* A pipe or socket whose other end only its own process holds, while every thread of it is parked
                 * in such a wait: nobody is left to write to it. */
                if (!e->multiplexed && e->reason && streq(e->reason, "the other end is held by this process only") &&
                    all_parked(s, p, now))
                        return "its other end is held by its own process, whose every thread waits";
                return NULL;
        }
        if (e->peer_pid == p->pid)
                return NULL; /* inside the process: its mutexes say more */
        if (in_cycle(c, p->pid) && in_cycle(c, e->peer_pid))
                return "a deadlock: processes that wait only on each other";
        if (e->peer_tid > 0 ? thread_stuck(s, e->peer_tid) : process_stuck(s, e->peer_pid))
                return e->kind == WAIT_KIND_CHILD ? "its child is stuck" : "its peer is stopped, frozen or blocked";
        return NULL;
}

/* The verdict for thread T of P from chain C: owed when it has edges and every one of them is (a poll waits on any
 * of its fds); a thread of a lock cycle is owed by the cycle. WHY is the first reason. */
static bool thread_owed(Scanner *s, const WaitChain *c, const ProcessEntry *p, const ThreadEntry *t, uint64_t now,
                        const char **ret_why) {
        const char *why = NULL;
        unsigned n = 0;

        if (c->lock_pid == p->pid)
                for (size_t i = 0; i < c->n_lock_cycle; i++)
                        if (c->lock_cycle[i] == t->tid) {
                                *ret_why = "a deadlock: threads that wait for each other's mutexes";
                                return true;
                        }
        for (size_t i = 0; i < c->n_edges; i++) {
                const WaitEdge *e = &c->edges[i];
                const char *w;

                if (e->pid != p->pid || e->tid != t->tid)
                        continue;
                n++;
                w = edge_owed(s, c, p, e, now);
                if (!w)
                        return false;
                why = why ?: w;
        }
        *ret_why = why;
        return n > 0;
}

static void set_owed(Scanner *s, ThreadEntry *t, bool owed, const char *why) {
        ThreadClass before = t->cls.class;

        classify_set_owed(&t->cls, owed, why);
        if (t->cls.class == before)
                return;
        scanner_count_class(s, t);
}

/* Walk P's waits and set the verdict on each of its candidate threads; *RET_COST gets the walk's CPU time. */
static int process_judge(Owed *o, Scanner *s, PeerResolver *r, ProcessEntry *p, uint64_t now, uint64_t *ret_cost) {
        _cleanup_(wait_chain_freep) WaitChain *chain = NULL;
        _cleanup_free_ pid_t *peers = NULL;
        size_t n_peers = 0;
        uint64_t t0 = now_usec(CLOCK_MONOTONIC), cpu0 = now_usec(CLOCK_THREAD_CPUTIME_ID);
        int k;

        k = wait_chain_build(r, NULL, p->pid, 0, OWED_DEPTH, &chain, &peers, &n_peers);
        o->walks++;
        o->walk_usec += now_usec(CLOCK_MONOTONIC) - t0;
        *ret_cost = now_usec(CLOCK_THREAD_CPUTIME_ID) - cpu0;
        if (k < 0)
                return k;
        for (ThreadEntry *t = p->threads; t; t = t->next) {
                const char *why = NULL;
                bool owed;

                if (!candidate(s, t, now))
                        continue;
                owed = thread_owed(s, chain, p, t, now, &why);
                if (owed && !t->cls.owed) {
                        o->owed++;
                        log_debug("Thread %d of pid %d (%s) is blocked: %s", (int) t->tid, (int) p->pid, p->comm, why);
                }
                set_owed(s, t, owed, why);
        }
        return 0;
}

/* The OWED_WALKS_PER_POLL processes to walk now into PICK (their number returned): those with a thread that is a
 * candidate and no verdict that still holds, the ones walked longest ago (or never) first. */
static unsigned pick_processes(Owed *o, Scanner *s, uint64_t now, ProcessEntry **pick) {
        unsigned n = 0;

        for (size_t i = 0; i < s->processes.size; i++) {
                ProcessEntry *p;
                bool any = false;
                unsigned at;

                if (s->processes.keys[i] <= 0)
                        continue;
                p = s->processes.values[i];
                if (p->ours || (n == OWED_WALKS_PER_POLL && p->owed_walked_usec >= pick[n - 1]->owed_walked_usec) ||
                    check_find(o, p))
                        continue;
                for (const ThreadEntry *t = p->threads; t && !any; t = t->next)
                        any = candidate(s, t, now);
                if (!any)
                        continue;
                /* Insert by the time of the last walk, keeping the oldest OWED_WALKS_PER_POLL. */
                for (at = MIN(n, OWED_WALKS_PER_POLL - 1);
                     at > 0 && pick[at - 1]->owed_walked_usec > p->owed_walked_usec; at--)
                        pick[at] = pick[at - 1];
                pick[at] = p;
                n = MIN(n + 1, OWED_WALKS_PER_POLL);
        }
        return n;
}

void owed_update(Owed *o, Scanner *s, uint64_t now) {
        _cleanup_(peer_resolver_freep) PeerResolver *r = NULL; /* one per poll: its tables are a snapshot */
        ProcessEntry *pick[OWED_WALKS_PER_POLL];
        unsigned n;

        checks_expire(o, s, now);
        n = pick_processes(o, s, now, pick);
        for (unsigned i = 0; i < n; i++) {
                ProcessEntry *p = pick[i];
                uint64_t cost = 0;
                int k;

                if (!r) {
                        Symbolizer *sym = scanner_runtime_symbolizer(s);

                        if (peer_resolver_new(&r) < 0 || (sym && python_waits_attach(r, sym) < 0))
                                return;
                }
                if (!GREEDY_REALLOC(o->checks, o->n_checks_allocated, o->n_checks + 1))
                        return (void) log_oom();
                o->checks[o->n_checks++] = (OwedCheck) { .pid = p->pid, .starttime = p->starttime, .checked_usec = now,
                                                         .recheck_usec = OWED_RECHECK_USEC };
                p->owed_walked_usec = now;
                k = process_judge(o, s, r, p, now, &cost);
                /* The checks may have moved (GREEDY_REALLOC above): the one just added is the last. */
                o->checks[o->n_checks - 1].recheck_usec = MAX((uint64_t) OWED_RECHECK_USEC, cost * OWED_COST_SHARE);
                if (k < 0 && k != -ESRCH)
                        log_debug_errno(k, "Wait-chain walk from pid %d failed: %m", (int) p->pid);
        }
}
