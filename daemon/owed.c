/* owed.c: walk the waits of parked threads and tell which something owes (see owed.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>

#include "base/alloc-util.h"
#include "base/log.h"
#include "base/macro.h"
#include "chain/peers.h"
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

/* Whether check C still holds at NOW: its process the same, and since its walk none of the waits its verdicts rest
 * on moved (owed_waits_key()) and no thread of it became old enough to judge; and no other process the walk read
 * changed how stuck its threads are (a verdict, a stop, a D sleep) or, for longer than the peer hold, where its
 * threads wait (it may have closed a deadlock). */
static bool check_holds(Scanner *s, const OwedCheck *c, uint64_t now) {
        ProcessEntry *p = intmap_get(&s->processes, c->pid);

        if (!p || p->starttime != c->starttime)
                return false;
        if (now - c->checked_usec < c->hold_usec)
                return true;
        if (now >= c->due_usec || (p->moved_usec > c->checked_usec && owed_waits_key(s, p) != c->keys[0]))
                return false;
        for (unsigned i = 1; i < c->n_chain; i++) {
                ProcessEntry *q = intmap_get(&s->processes, c->chain[i]);

                if (!q || q->stuck_usec > c->checked_usec)
                        return false;
                if (q->moved_usec > c->checked_usec && now - c->checked_usec >= c->peer_hold_usec &&
                    owed_waits_key(s, q) != c->keys[i])
                        return false;
        }
        return true;
}

/* Drop the checks that no longer hold. */
static void checks_expire(Owed *o, Scanner *s, uint64_t now) {
        size_t k = 0;

        for (size_t i = 0; i < o->n_checks; i++)
                if (check_holds(s, &o->checks[i], now))
                        o->checks[k++] = o->checks[i];
        o->n_checks = k;
}

/* Whether T's parked wait is one that something may owe: not a sleep, not an event loop's or a condition variable's
 * idle wait, but a read, a write, a lock, a mutex, a wait for a child, or a call on a file that its file system
 * (a FUSE daemon's) holds up. */
static bool may_be_owed(Scanner *s, const ThreadEntry *t) {
        const ProcSyscall *sc = &t->cls.parked_place;

        if (!t->cls.parked)
                return false;
        if (sc->nr == __NR_wait4 || sc->nr == __NR_waitid)
                return true;
        /* A Python lock's or the GIL's wait looks like a semaphore's or a condition variable's: idle, unless the
         * interpreter says what it is (runtime/python.h). Ruby parks a thread in a Mutex, a join or the GVL in a
         * condition variable or in ppoll alike (runtime/ruby.h). */
        if (classify_syscall_is_idle_wait(sc))
                return (sc->nr == __NR_futex && scanner_process_runs(s, t->process, RUNTIME_PYTHON)) ||
                       scanner_process_runs(s, t->process, RUNTIME_RUBY);
        return !classify_syscall_is_idle_wait(sc) &&
               (peers_syscall_follows(sc->nr) || sc->nr == __NR_futex || peers_syscall_is_path_call(sc->nr));
}

/* Whether T has been parked long enough to judge its wait. */
static bool parked_long(const ThreadEntry *t, uint64_t now) {
        return t->cls.parked && now - t->cls.parked_since_usec + OWED_PARK_SLACK_USEC >= OWED_MIN_PARKED_USEC;
}

/* Whether T is parked, long enough, in a wait that something may owe. */
static bool candidate(Scanner *s, const ThreadEntry *t, uint64_t now) {
        return parked_long(t, now) && may_be_owed(s, t);
}

/* Whether process PID (as the scan saw it) is stuck for good: every thread stopped, frozen, a zombie, or blocked
 * (in D, or owed). Gone counts as stuck only when the scan never saw it: a process that exited is no one's peer. */
static bool process_stuck(Scanner *s, pid_t pid) {
        const ProcessEntry *p = intmap_get(&s->processes, pid);
        unsigned n = 0;

        if (!p || p->ours)
                return false;
        for (const ThreadEntry *t = p->threads; t; t = t->next, n++)
                if (!classify_class_is_stuck(t->cls.class))
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
                if (!candidate(s, t, now) && !(parked_long(t, now) && sc->nr == __NR_futex && sc->args[3] == 0))
                        return false;
        }
        return true;
}

/* Whether T's wait is one a verdict on its process rests on: a wait that may be owed (judged), or a futex wait with
 * no timeout (one all_parked() counts), long parked or not. */
static bool wait_counts(Scanner *s, const ThreadEntry *t) {
        const ProcSyscall *sc = &t->cls.parked_place;

        return t->cls.parked && (may_be_owed(s, t) || (sc->nr == __NR_futex && sc->args[3] == 0));
}

/* Whether T is parked where a walk last found nobody owes it its wait (ThreadEntry.quiet_place). */
static bool in_quiet_place(const ThreadEntry *t) {
        return t->quiet_place.nr == t->cls.parked_place.nr && t->quiet_place.fd >= 0 &&
               t->quiet_place.fd == peers_syscall_fd(&t->cls.parked_place);
}

/* What the verdicts on P's threads, and on waits that lead to P, rest on in P itself, as one number: each thread in a
 * wait that counts (wait_counts()), where it waits and since when, and whether any thread is elsewhere (on a CPU, in
 * an idle wait or a sleep: then all_parked() is false). The rest of P may move as it likes: an event loop waking
 * each second next to two threads parked for good on pipes does not call for a new walk of those, nor does a busy
 * client of a parked server. Nor do threads that park again where a walk found nobody owes them their wait (a pool's
 * workers woken one by one from the read of a pipe, ThreadEntry.quiet_place): they wait as they did, the verdict a
 * thread gets when it parks. Made once a scan (ProcessEntry.waits_key). */
uint64_t owed_waits_key(Scanner *s, ProcessEntry *p) {
        uint64_t key = 0;
        bool elsewhere = false;

        if (p->waits_key_gen == s->gen)
                return p->waits_key;
        for (const ThreadEntry *t = p->threads; t; t = t->next) {
                const ProcSyscall *sc = &t->cls.parked_place;
                uint64_t h;

                if (!wait_counts(s, t)) {
                        elsewhere = true;
                        continue;
                }
                if (in_quiet_place(t))
                        continue;
                h = hash_u64((uint64_t) t->tid ^ hash_u64(t->cls.parked_since_usec));
                h = hash_u64(h ^ (uint64_t) sc->nr);
                for (size_t i = 0; i < ELEMENTSOF(sc->args); i++)
                        h = hash_u64(h ^ sc->args[i]);
                key += h; /* the threads' order in the list does not count */
        }
        p->waits_key = hash_u64(key ^ elsewhere);
        p->waits_key_gen = s->gen;
        return p->waits_key;
}

/* Why edge E of a thread of P is owed, or NULL when its other end may still answer. *ALL is whether every thread of P
 * is parked (all_parked()), -1 until an edge needs it: asked once a walk, not once an edge. */
static const char *edge_owed(Scanner *s, const WaitChain *c, const ProcessEntry *p, const WaitEdge *e, uint64_t now,
                             int *all) {
        if (e->kind == WAIT_KIND_MUTEX) {
                if (e->owner_exited)
                        return "a mutex whose holder exited";
                if (e->peer_tid > 0 && e->peer_tid != e->tid && !e->runtime)
                        return "a mutex another thread holds";
                if (e->peer_tid > 0 && e->peer_tid != e->tid)
                        return runtime_traits[e->runtime_kind].owned_lock_held ?: "a lock another thread holds";
                /* A threading.Lock records no holder, but one waited on is held: by another thread, or by the
                 * waiter itself (a Lock taken twice never returns). Parked this long on it is a lock wait, as a
                 * mutex's is, not an idle one. */
                if (e->runtime && e->object && startswith(e->object, "threading.Lock "))
                        return "a threading.Lock that is held (it records no holder)";
                return NULL;
        }
        /* Parked this long for the GIL: its holder keeps it (C code that blocked without releasing it). */
        if (e->kind == WAIT_KIND_GIL)
                return e->peer_tid <= 0 || e->peer_tid == e->tid ? NULL
                       : runtime_traits[e->runtime_kind].global_lock_kept ?: "a global lock another thread keeps";
        if (e->peer_pid == 0) {
                /* A pipe or socket whose other end only its own process holds, while every thread of it is parked
                 * in such a wait: nobody is left to write to it. */
                if (!e->multiplexed && e->reason && streq(e->reason, "the other end is held by this process only")) {
                        if (*all < 0)
                                *all = all_parked(s, p, now);
                        if (*all)
                                return "its other end is held by its own process, whose every thread waits";
                }
                return NULL;
        }
        if (e->peer_pid == p->pid)
                return NULL; /* inside the process: its mutexes say more */
        if (in_cycle(c, p->pid) && in_cycle(c, e->peer_pid))
                return "a deadlock: processes that wait only on each other";
        /* A file lock is a mutex between processes: its holder may run, or sleep, but this wait ends only when the
         * holder lets go, however it spends its time. */
        if (e->kind == WAIT_KIND_FLOCK || e->kind == WAIT_KIND_POSIX_LOCK || e->kind == WAIT_KIND_OFD_LOCK)
                return "a file lock another process holds";
        if (e->peer_tid > 0 ? thread_stuck(s, e->peer_tid) : process_stuck(s, e->peer_pid))
                return e->kind == WAIT_KIND_CHILD ? "its child is stuck" : "its peer is stopped, frozen or blocked";
        return NULL;
}

static bool in_lock_cycle(const WaitChain *c, const ProcessEntry *p, const ThreadEntry *t) {
        for (size_t i = 0; c->lock_pid == p->pid && i < c->n_lock_cycle; i++)
                if (c->lock_cycle[i] == t->tid)
                        return true;
        return false;
}

/* The verdict for thread T of P from chain C: owed (1) when it has edges and every one of them is (a poll waits on any
 * of its fds), 0 when not, -1 when it has no edge; a thread of a lock cycle is owed by the cycle. WHY is the first
 * reason. */
static int thread_owed(Scanner *s, const WaitChain *c, const IntMap *first, const ProcessEntry *p,
                        const ThreadEntry *t, uint64_t now, int *all, const char **ret_why) {
        const char *why = NULL;
        uintptr_t from = (uintptr_t) intmap_get(first, t->tid);
        unsigned n = 0;

        if (in_lock_cycle(c, p, t)) {
                *ret_why = "a deadlock: threads that wait for each other's mutexes";
                return 1;
        }
        /* Its edges are one run, from the first (FIRST: tid → index + 1; none: no edge). */
        for (size_t i = from ? from - 1 : c->n_edges; i < c->n_edges; i++) {
                const WaitEdge *e = &c->edges[i];
                const char *w;

                if (e->pid != p->pid || e->tid != t->tid)
                        break;
                n++;
                w = edge_owed(s, c, p, e, now, all);
                if (!w)
                        return 0;
                why = why ?: w;
        }
        *ret_why = why;
        return n > 0 ? 1 : -1;
}

/* The verdict on a wait on one fd (a read of a pipe, say), which every thread parked in the same call on the same fd
 * shares: a walk follows WAIT_CHAIN_THREADS_MAX threads of a process, and the rest of a pool of 10,000 parked on one
 * pipe waits on what the first 64 wait on. */
typedef struct PlaceVerdict {
        int64_t nr;
        int fd;
        bool owed;
        const char *why;
} PlaceVerdict;

#define OWED_PLACES_MAX 16U

static const PlaceVerdict *place_find(const PlaceVerdict *places, size_t n, const ThreadEntry *t) {
        int fd = peers_syscall_fd(&t->cls.parked_place);

        for (size_t i = 0; fd >= 0 && i < n; i++)
                if (places[i].nr == t->cls.parked_place.nr && places[i].fd == fd)
                        return &places[i];
        return NULL;
}

/* Set the verdict OWED (WHY) on thread T of P. */
static void judge(Owed *o, Scanner *s, ProcessEntry *p, ThreadEntry *t, bool owed, const char *why) {
        if (owed && !t->cls.owed) {
                o->owed++;
                log_debug("Thread %d of pid %d (%s) is blocked: %s", (int) t->tid, (int) p->pid, p->comm, why);
        }
        classify_set_owed(&t->cls, owed, why);
        scanner_count_class(s, t);
        t->quiet_place = (WaitPlace) { .nr = owed ? -1 : t->cls.parked_place.nr,
                                       .fd = owed ? -1 : peers_syscall_fd(&t->cls.parked_place) };
}

/* Walk P's waits and set the verdict on each of its candidate threads into check C (the processes the walk read, and
 * when a thread of P parked too recently to judge becomes old enough); *RET_COST gets the walk's CPU time. */
static int process_judge(Owed *o, Scanner *s, PeerResolver *r, ProcessEntry *p, uint64_t now, OwedCheck *c,
                         uint64_t *ret_cost) {
        _cleanup_(wait_chain_freep) WaitChain *chain = NULL;
        _cleanup_(intmap_done) IntMap first = INTMAP_NULL;
        _cleanup_free_ pid_t *peers = NULL;
        PlaceVerdict places[OWED_PLACES_MAX];
        size_t n_peers = 0, n_places = 0, unjudged = 0;
        uint64_t t0 = now_usec(CLOCK_MONOTONIC), cpu0 = now_usec(CLOCK_THREAD_CPUTIME_ID);
        int k, all = -1;

        k = wait_chain_build(r, scanner_wait_threads(s), p->pid, 0, OWED_DEPTH, &chain, &peers, &n_peers);
        o->walks++;
        if (k >= 0)
                /* A thread's edges are added together, one run each: where P's threads' runs start. */
                for (size_t i = 0; i < chain->n_edges && k >= 0; i++)
                        if (chain->edges[i].pid == p->pid && !intmap_get(&first, chain->edges[i].tid))
                                k = intmap_put(&first, chain->edges[i].tid, (void *) (uintptr_t) (i + 1));
        if (k < 0) {
                *ret_cost = now_usec(CLOCK_THREAD_CPUTIME_ID) - cpu0;
                o->walk_usec += now_usec(CLOCK_MONOTONIC) - t0;
                return k;
        }
        c->chain[0] = p->pid;
        c->n_chain = 1;
        for (size_t i = 0; i < n_peers && c->n_chain < OWED_CHAIN_MAX; i++) {
                ProcessEntry *q = intmap_get(&s->processes, peers[i]);

                c->keys[c->n_chain] = q ? owed_waits_key(s, q) : 0;
                c->chain[c->n_chain++] = peers[i];
        }
        for (ThreadEntry *t = p->threads; t; t = t->next) {
                const char *why = NULL;
                int owed;

                /* One parked too recently in a wait that counts may be judged once it is not (and every other
                 * may then be owed, when all of them wait on what their own process holds); back where nobody
                 * owed it its wait, it waits as it did. */
                if (wait_counts(s, t) && !parked_long(t, now) && !in_quiet_place(t))
                        c->due_usec = MIN(c->due_usec,
                                          t->cls.parked_since_usec + OWED_MIN_PARKED_USEC - OWED_PARK_SLACK_USEC);
                if (!candidate(s, t, now))
                        continue;
                owed = thread_owed(s, chain, &first, p, t, now, &all, &why);
                if (owed < 0) {
                        unjudged++;
                        continue;
                }
                if (n_places < OWED_PLACES_MAX && peers_syscall_fd(&t->cls.parked_place) >= 0 &&
                    !place_find(places, n_places, t))
                        places[n_places++] = (PlaceVerdict) { .nr = t->cls.parked_place.nr, .owed = owed, .why = why,
                                                              .fd = peers_syscall_fd(&t->cls.parked_place) };
                judge(o, s, p, t, owed, why);
        }
        /* The threads the walk did not follow: as those parked in the same call on the same fd, else not owed. */
        for (ThreadEntry *t = p->threads; unjudged > 0 && t; t = t->next) {
                const PlaceVerdict *v;

                if (!candidate(s, t, now) || intmap_get(&first, t->tid) || in_lock_cycle(chain, p, t))
                        continue;
                v = place_find(places, n_places, t);
                judge(o, s, p, t, v && v->owed, v ? v->why : NULL);
        }
        p->waits_key_gen = 0; /* made again with the threads' quiet places */
        c->keys[0] = owed_waits_key(s, p);
        *ret_cost = now_usec(CLOCK_THREAD_CPUTIME_ID) - cpu0;
        o->walk_usec += now_usec(CLOCK_MONOTONIC) - t0;
        log_debug("Walked the waits of pid %d (%s): %zu other processes, %llu us CPU", (int) p->pid, p->comm, n_peers,
                  (unsigned long long) *ret_cost);
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
                OwedCheck *c;
                int k;

                if (!r && scanner_resolver_new(s, now, &r) < 0)
                        return (void) log_oom();
                if (!GREEDY_REALLOC(o->checks, o->n_checks_allocated, o->n_checks + 1))
                        return (void) log_oom();
                c = &o->checks[o->n_checks++];
                *c = (OwedCheck) { .pid = p->pid, .starttime = p->starttime, .checked_usec = now,
                                   .due_usec = now + OWED_BACKSTOP_USEC };
                p->owed_walked_usec = now;
                k = process_judge(o, s, r, p, now, c, &cost);
                c->hold_usec = cost * OWED_COST_SHARE;
                c->peer_hold_usec = cost * OWED_PEER_COST_SHARE;
                c->due_usec = MAX(c->due_usec, now + c->hold_usec);
                if (k < 0 && k != -ESRCH)
                        log_debug_errno(k, "Wait-chain walk from pid %d failed: %m", (int) p->pid);
        }
}
