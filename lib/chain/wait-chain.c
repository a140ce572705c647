/* wait-chain.c: wait chains across processes, knot (deadlock) detection, and the capture of the peers. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "base/macro.h"
#include "base/strv.h"
#include "base/time-util.h"
#include "capture/syscall-probe.h"
#include "chain/wait-chain.h"
#include "proc/proc-read.h"
#include "runtime/runtime.h"

typedef struct ChainProc {
        pid_t pid;
        unsigned level;         /* hops from the first process */
        bool running;           /* a thread of it is on a CPU: it can still make progress */
        bool in_knot;
} ChainProc;

typedef struct Builder {
        PeerResolver *r;
        WaitChain *chain;
        ChainProc procs[WAIT_CHAIN_PEERS_MAX + 1];
        size_t n_procs;
        size_t n_lock_edges;            /* edges of futex() waits (mutexes, joins) */
        size_t n_futex_followed;        /* futex() waits followed */
        pid_t self;
        uint64_t deadline_usec;         /* CLOCK_MONOTONIC: the capture's time budget; 0 for none */
        bool cut;                       /* the deadline passed: nothing more was read */
        unsigned lock_probes;           /* sleeping threads that may still be traced for a lock they poll for */
        pid_t suspect_pid;              /* the process peers_lock_suspect() was last asked about, and its answer: */
        int suspect;                    /* its threads are read one after another */
        const Snapshot *recorded;       /* the capture the chain starts from, NULL for none */
        const WaitThreads *threads;     /* where threads are read from; NULL: /proc */
} Builder;

/* What thread TID of PID waits for. A thread of the capture the chain starts from that it stopped with ptrace is
 * taken as the capture saw it before the stop: once released, the thread is runnable until it is back in its call (a
 * poll continues in restart_syscall), and a look in that moment found no wait, so the chain lost its edges in one
 * dump of two. Its state and call before the stop are what its stack shows anyway. */
static int builder_wait_read(Builder *b, pid_t pid, pid_t tid, ThreadWait *ret) {
        const ThreadSnapshot *t;
        int k;

        k = b->threads ? b->threads->wait(b->threads->userdata, pid, tid, ret) : thread_wait_read(pid, tid, ret);
        if (k < 0 || !b->recorded || b->recorded->pid != pid)
                return k;
        t = snapshot_find_thread((Snapshot *) b->recorded, tid);
        if (!t || t->method != CAPTURE_METHOD_PTRACE || t->syscall.kind != PROC_SYSCALL_BLOCKED ||
            (t->state != 'S' && t->state != 'D'))
                return k;
        ret->state = t->state;
        ret->syscall = t->syscall;
        if (t->wchan)
                snprintf(ret->wchan, sizeof ret->wchan, "%s", t->wchan);
        return k;
}

/* Whether the budget is spent; the first time, the chain says how far it got. */
static bool builder_out_of_time(Builder *b, pid_t pid, size_t done, size_t total) {
        if (b->cut)
                return true;
        if (b->deadline_usec == 0 || now_usec(CLOCK_MONOTONIC) < b->deadline_usec)
                return false;
        b->cut = b->chain->truncated = true;
        if (total > 0)
                (void) wait_chain_add_error(b->chain, "time budget spent: the waits of %zu of %zu threads of process "
                                            "%d read", done, total, (int) pid);
        else
                (void) wait_chain_add_error(b->chain, "time budget spent before the waits of process %d were read",
                                            (int) pid);
        return true;
}

static ChainProc *builder_find(Builder *b, pid_t pid) {
        for (size_t i = 0; i < b->n_procs; i++)
                if (b->procs[i].pid == pid)
                        return &b->procs[i];
        return NULL;
}

/* "not followed: WHY N" as the edge's reason. */
static int edge_not_followed(WaitEdge *e, const char *why, unsigned v) {
        free(e->reason);
        return asprintf(&e->reason, "not followed: %s %u", why, v) < 0 ? (e->reason = NULL, -ENOMEM) : 0;
}

/* The edges FIRST..end were just added for a thread of P: queue the processes they reach. */
static int builder_queue_peers(Builder *b, const ChainProc *p, size_t first, unsigned depth) {
        for (size_t i = first; i < b->chain->n_edges; i++) {
                WaitEdge *e = &b->chain->edges[i];

                if (e->peer_pid <= 0 || e->peer_pid == e->pid || e->peer_pid == b->self || builder_find(b, e->peer_pid))
                        continue;
                if (p->level >= depth) {
                        if (edge_not_followed(e, "beyond the depth of", depth) < 0)
                                return -ENOMEM;
                        continue;
                }
                if (b->n_procs >= ELEMENTSOF(b->procs)) {
                        b->chain->truncated = true;
                        if (edge_not_followed(e, "more peers than", WAIT_CHAIN_PEERS_MAX) < 0)
                                return -ENOMEM;
                        continue;
                }
                b->procs[b->n_procs++] = (ChainProc) { .pid = e->peer_pid, .level = p->level + 1 };
        }
        return 0;
}

/* The thread of P that itself waits on the other end of an edge into P becomes that edge's peer_tid. */
static void builder_mark_peer_tid(Builder *b, const ThreadWait *w) {
        int fd = peers_syscall_fd(&w->syscall);

        if (fd < 0)
                return;
        for (size_t i = 0; i < b->chain->n_edges; i++) {
                WaitEdge *e = &b->chain->edges[i];
                if (e->peer_pid == w->pid && e->peer_fd == fd && e->peer_tid == 0)
                        e->peer_tid = w->tid;
        }
}

/* Whether process PID has a file open that another owner holds a lock on (asked once per process in a row). */
static bool builder_lock_suspect(Builder *b, pid_t pid) {
        pid_t holder;
        int fd;

        if (b->suspect_pid != pid) {
                b->suspect_pid = pid;
                b->suspect = peers_lock_suspect(b->r, pid, &fd, &holder);
        }
        return b->suspect > 0;
}

/* Thread W was caught on a CPU, or waiting for one. In a process that may poll for a lock it may be a poller that
 * woke to try again, and is back in its sleep as soon as it has had a CPU (a loaded machine delays that by
 * milliseconds): look again, without stopping it, for a little while. W's state and syscall are updated when it went
 * to sleep; a thread that stays on a CPU uses up one of the lock probes, as the wait for it costs as much. */
static void builder_settle_poller(Builder *b, ThreadWait *w) {
        uint64_t deadline = now_usec(CLOCK_MONOTONIC) + WAIT_CHAIN_LOCK_SETTLE_USEC;
        ThreadWait now;

        if (b->lock_probes == 0 || w->syscall.kind != PROC_SYSCALL_RUNNING || !builder_lock_suspect(b, w->pid))
                return;
        if (b->deadline_usec > 0)
                deadline = MIN(deadline, b->deadline_usec);
        while (now_usec(CLOCK_MONOTONIC) < deadline) {
                nanosleep(&(struct timespec) { .tv_nsec = WAIT_CHAIN_LOCK_SETTLE_STEP_NSEC }, NULL);
                if (thread_wait_read(w->pid, w->tid, &now) < 0)
                        return;
                if (now.syscall.kind == PROC_SYSCALL_RUNNING)
                        continue;
                if (peers_syscall_is_sleep(&now.syscall)) {
                        w->state = now.state;
                        w->syscall = now.syscall;
                        return;
                }
                log_debug("Thread %d, caught on a CPU, went on to wait in %s: not watched for a lock", (int) w->tid,
                          now.syscall.kind == PROC_SYSCALL_BLOCKED ? syscall_name(now.syscall.nr) ?: "?" : "no call");
                return; /* what it was caught doing stands */
        }
        log_debug("Thread %d stayed on a CPU for %llu ms: not watched for a lock", (int) w->tid,
                  (unsigned long long) (WAIT_CHAIN_LOCK_SETTLE_USEC / 1000));
        b->lock_probes--;
}

/* A thread that sleeps (or went back to sleep: builder_settle_poller()), in a process with a file open that another
 * owner holds a lock on, may be polling for that lock: watch its syscalls until a lock call fails (it then waits on
 * the holder) or the window ends. */
static int builder_probe_lock_retry(Builder *b, ThreadWait *w) {
        uint64_t window = WAIT_CHAIN_LOCK_PROBE_USEC, now;
        int k;

        if (b->lock_probes == 0 || !peers_syscall_is_sleep(&w->syscall) || !builder_lock_suspect(b, w->pid))
                return 0;
        if (b->deadline_usec > 0) {
                now = now_usec(CLOCK_MONOTONIC);
                if (now >= b->deadline_usec)
                        return 0;
                window = MIN(window, b->deadline_usec - now);
        }
        b->lock_probes--;
        k = lock_retry_probe(w->tid, window, &w->retry);
        w->retrying = k > 0;
        if (k == 0)
                log_debug("Thread %d made no lock call that failed in %llu ms", (int) w->tid,
                          (unsigned long long) (w->retry.window_usec / 1000));
        else if (k == -EPERM)
                /* Another tracer (a debugger, strace, another watcher's probe): the chain may lack the holder. */
                return wait_chain_add_error(b->chain, "thread %d of process %d may poll for a lock but was not "
                                            "watched: another process traces it", (int) w->tid, (int) w->pid);
        else if (k < 0)
                log_debug_errno(k, "Could not watch thread %d for a lock it polls for: %m", (int) w->tid);
        return 0;
}

/* Add the edges of thread W of process IDX (one more of the threads followed there, unless it waits in futex():
 * those cost one read of the lock, and a lock table wants every one), and queue what they reach. */
static int builder_follow(Builder *b, size_t idx, const ThreadWait *wait, unsigned depth, size_t *followed) {
        bool futex = wait->syscall.kind == PROC_SYSCALL_BLOCKED && wait->syscall.nr == __NR_futex;
        size_t first = b->chain->n_edges;
        ThreadWait tw = *wait, *w = &tw;
        int k;

        if (futex ? b->n_futex_followed >= WAIT_CHAIN_FUTEX_WAITS_MAX
                  : *followed >= WAIT_CHAIN_THREADS_MAX || first - b->n_lock_edges >= WAIT_CHAIN_EDGES_MAX) {
                b->chain->truncated = true;
                return 0;
        }
        if (futex)
                b->n_futex_followed++;
        else
                (*followed)++;
        /* The wait channel tells a FUSE request (or a restarted call) apart: a futex wait asleep in S waits on the
         * futex and nothing else (a fault on a FUSE page would sleep in D), and a pool has thousands of them. */
        if (w->wchan_unread && futex && w->state == 'S')
                w->wchan_unread = false;
        if (w->wchan_unread && b->threads) {
                k = b->threads->wchan(b->threads->userdata, w->pid, w->tid, w->wchan, sizeof w->wchan);
                if (k < 0)
                        w->wchan[0] = '\0';
                w->wchan_unread = false;
        }
        if (builder_probe_lock_retry(b, w) < 0)
                return -ENOMEM;
        k = peers_thread_edges(b->r, w, b->chain);
        if (k == -ENOMEM)
                return k;
        if (k < 0 && k != -ESRCH && wait_chain_add_error(b->chain, "thread %d of process %d: %s", (int) w->tid,
                                                         (int) w->pid, strerror(-k)) < 0)
                return -ENOMEM;
        if (futex)
                b->n_lock_edges += b->chain->n_edges - first;
        return builder_queue_peers(b, &b->procs[idx], first, depth);
}

static bool thread_followed(const WaitChain *c, pid_t pid, pid_t tid) {
        for (size_t i = 0; i < c->n_edges; i++)
                if (c->edges[i].pid == pid && c->edges[i].tid == tid)
                        return true;
        return false;
}

/* From thread ONLY_TID, the chain goes on through the threads holding the mutexes it (and they) wait for, and the
 * threads they wait to join: the holder of a lock, or the thread to exit, is where the wait continues, whatever its
 * TID. */
static int builder_follow_lock_holders(Builder *b, size_t idx, unsigned depth, size_t *followed) {
        pid_t pid = b->procs[idx].pid;

        for (size_t i = 0; i < b->chain->n_edges; i++) {
                const WaitEdge *e = &b->chain->edges[i];
                ThreadWait w;
                int k;

                if ((e->kind != WAIT_KIND_MUTEX && e->kind != WAIT_KIND_JOIN) || e->pid != pid || e->peer_pid != pid ||
                    e->peer_tid <= 0 || thread_followed(b->chain, pid, e->peer_tid))
                        continue;
                if (builder_wait_read(b, pid, e->peer_tid, &w) < 0)
                        continue;
                if (w.syscall.kind != PROC_SYSCALL_BLOCKED && w.state != 't')
                        continue; /* the holder runs: the chain ends at it */
                k = builder_follow(b, idx, &w, depth, followed);
                if (k < 0)
                        return k;
        }
        return 0;
}

static int builder_expand(Builder *b, size_t idx, pid_t only_tid, unsigned depth) {
        _cleanup_close_ int dirfd = -EBADF;
        _cleanup_free_ int *tids = NULL;
        size_t n_tids = 0, followed = 0;
        pid_t pid = b->procs[idx].pid;
        int k;

        if (b->threads)
                k = b->threads->list(b->threads->userdata, pid, &tids, &n_tids);
        else {
                k = proc_open_dir(pid, 0, &dirfd);
                if (k >= 0)
                        k = proc_list_numeric(dirfd, "task", &tids, &n_tids);
        }
        if (k < 0)
                return wait_chain_add_error(b->chain, "process %d: %s", (int) pid,
                                   k == -ESRCH ? "exited before its waits were read" : strerror(-k));
        for (size_t t = 0; t < n_tids; t++) {
                ThreadWait w;

                if (builder_out_of_time(b, pid, t, n_tids)) {
                        /* Not every thread was read: one of them may be on a CPU, so this process is in no knot. The
                         * thread the chain starts from is still followed: it is the point of the chain. */
                        b->procs[idx].running = true;
                        if (only_tid > 0 && !thread_followed(b->chain, pid, only_tid) &&
                            builder_wait_read(b, pid, only_tid, &w) >= 0 &&
                            (w.syscall.kind == PROC_SYSCALL_BLOCKED || w.state == 't'))
                                return builder_follow(b, idx, &w, depth, &followed);
                        return 0;
                }
                k = builder_wait_read(b, pid, tids[t], &w);
                if (k < 0)
                        continue; /* the thread exited meanwhile */
                if (w.state == 'R')
                        b->procs[idx].running = true;
                builder_mark_peer_tid(b, &w);
                if (only_tid > 0 && tids[t] != only_tid)
                        continue;
                builder_settle_poller(b, &w);
                if (w.syscall.kind != PROC_SYSCALL_BLOCKED && w.state != 't')
                        continue;
                k = builder_follow(b, idx, &w, depth, &followed);
                if (k < 0)
                        return k;
        }
        return only_tid > 0 ? builder_follow_lock_holders(b, idx, depth, &followed) : 0;
}

/* Whether the run of edges [FIRST, END) (one thread's) leads only into the knot candidates. */
static bool thread_all_in_knot(Builder *b, size_t first, size_t end) {
        for (size_t i = first; i < end; i++) {
                const WaitEdge *e = &b->chain->edges[i];
                const ChainProc *q;

                if (e->peer_pid <= 0 || e->peer_pid == e->pid)
                        return false;
                q = builder_find(b, e->peer_pid);
                if (!q || !q->in_knot)
                        return false;
        }
        return end > first;
}

/* Whether process P has a thread whose waits all lead into the knot; *RET_NEXT is where its first edge leads. */
static bool proc_waits_in_knot(Builder *b, pid_t pid, pid_t *ret_next) {
        const WaitChain *c = b->chain;

        for (size_t i = 0; i < c->n_edges;) {
                size_t end = i + 1;

                while (end < c->n_edges && c->edges[end].tid == c->edges[i].tid)
                        end++;
                if (c->edges[i].pid == pid && thread_all_in_knot(b, i, end)) {
                        if (ret_next)
                                *ret_next = c->edges[i].peer_pid;
                        return true;
                }
                i = end;
        }
        return false;
}

static int builder_find_deadlock(Builder *b) {
        WaitChain *c = b->chain;
        bool changed = true;
        ChainProc *start = NULL;
        pid_t order[ELEMENTSOF(b->procs) + 1];
        size_t n = 0;

        for (size_t i = 0; i < b->n_procs; i++)
                b->procs[i].in_knot = !b->procs[i].running;
        /* Shrink to the greatest set in which every member waits only on members: a fixed point. */
        while (changed) {
                changed = false;
                for (size_t i = 0; i < b->n_procs; i++)
                        if (b->procs[i].in_knot && !proc_waits_in_knot(b, b->procs[i].pid, NULL)) {
                                b->procs[i].in_knot = false;
                                changed = true;
                        }
        }
        for (size_t i = 0; i < b->n_procs && !start; i++)
                if (b->procs[i].in_knot)
                        start = &b->procs[i];
        if (!start)
                return 0;
        /* Walk it from the first process in it until a process repeats: that loop is the cycle to show. */
        for (pid_t p = start->pid;;) {
                pid_t next = 0;

                for (size_t k = 0; k < n; k++)
                        if (order[k] == p) {
                                c->n_cycle = n - k;
                                c->cycle = malloc(c->n_cycle * sizeof *c->cycle);
                                if (!c->cycle)
                                        return -ENOMEM;
                                memcpy(c->cycle, order + k, c->n_cycle * sizeof *c->cycle);
                                c->deadlock = true;
                                return 0;
                        }
                if (n >= ELEMENTSOF(order) || !proc_waits_in_knot(b, p, &next))
                        return 0; /* cannot happen in a knot; no cycle rather than a wrong one */
                order[n++] = p;
                p = next;
        }
}

const WaitEdge *wait_chain_mutex_wait(const WaitChain *c, pid_t pid, pid_t tid) {
        for (size_t i = 0; i < c->n_edges; i++) {
                const WaitEdge *e = &c->edges[i];
                if ((e->kind == WAIT_KIND_MUTEX || e->kind == WAIT_KIND_GIL) && e->pid == pid && e->tid == tid)
                        return e;
        }
        return NULL;
}

/* The edge from thread TID of PID to another thread of PID that must act first: the mutex (or the GIL) it waits
 * for held by that thread, or the thread it joins; NULL when none. */
static const WaitEdge *waits_in_process(const WaitChain *c, pid_t pid, pid_t tid) {
        const WaitEdge *e = wait_chain_mutex_wait(c, pid, tid);

        for (size_t i = 0; !e && i < c->n_edges; i++)
                if (c->edges[i].kind == WAIT_KIND_JOIN && c->edges[i].pid == pid && c->edges[i].tid == tid)
                        e = &c->edges[i];
        return e && e->peer_pid == pid && e->peer_tid > 0 ? e : NULL;
}

/* The edges were read one thread after the other: on a busy lock, A waiting while B held it and, a moment later, B
 * waiting while A held it looks like a cycle that never existed at once. A cycle counts only when it holds again,
 * read afresh, and none of its threads ran meanwhile: a deadlocked thread never runs. */
static bool lock_cycle_holds(PeerResolver *r, const WaitChain *c, pid_t pid, const pid_t *tids, size_t n) {
        uint64_t before[WAIT_CHAIN_EDGES_MAX + 1], after;
        bool counted[WAIT_CHAIN_EDGES_MAX + 1];

        for (size_t i = 0; i < n; i++)
                counted[i] = peers_thread_timeslices(pid, tids[i], &before[i]);
        for (size_t i = 0; i < n; i++) {
                const WaitEdge *e = waits_in_process(c, pid, tids[i]);
                ThreadWait w;
                PeersMutex m;
                RuntimeWait rw;
                pid_t joined;

                if (!e || thread_wait_read(pid, tids[i], &w) < 0)
                        return false;
                if (e->kind == WAIT_KIND_JOIN && !e->runtime) {
                        if (peers_futex_join(pid, tids[i], &w.syscall, &joined) != 1 || joined != tids[(i + 1) % n])
                                return false;
                        continue;
                }
                /* A runtime's lock (the GIL, an RLock) or join (Thread.join) is asked of the runtime again. */
                if (e->runtime) {
                        if (w.syscall.kind != PROC_SYSCALL_BLOCKED || w.syscall.args[0] != e->address ||
                            peer_resolver_runtime_wait(r, pid, tids[i], e->address, false, &rw) != 1 ||
                            rw.owner != tids[(i + 1) % n])
                                return false;
                        continue;
                }
                if (peers_futex_mutex(pid, &w.syscall, &m) != 1 || m.owner != tids[(i + 1) % n])
                        return false;
        }
        for (size_t i = 0; i < n; i++)
                if (counted[i] && (!peers_thread_timeslices(pid, tids[i], &after) || after != before[i]))
                        return false;
        return true;
}

/* A deadlock on mutexes inside one process: threads each waiting for a mutex the next one holds (one thread
 * waiting for a mutex it holds itself is the shortest), or to join it (A joins B while B waits for a mutex A holds).
 * Unlike an fd, a mutex has one way out, its holder unlocking it, and a join one, the thread's exit: a cycle of them
 * is a deadlock, with no knot to check. */
static int builder_find_lock_cycle(Builder *b) {
        WaitChain *c = b->chain;
        pid_t order[WAIT_CHAIN_EDGES_MAX + 1];

        for (size_t i = 0; i < c->n_edges; i++) {
                const WaitEdge *e = &c->edges[i];
                size_t n = 0;

                if ((e->kind != WAIT_KIND_MUTEX && e->kind != WAIT_KIND_GIL && e->kind != WAIT_KIND_JOIN) ||
                    e->peer_pid != e->pid || e->peer_tid <= 0)
                        continue;
                for (pid_t t = e->tid; n < ELEMENTSOF(order);) {
                        const WaitEdge *m;

                        for (size_t k = 0; k < n; k++)
                                if (order[k] == t) {
                                        if (!lock_cycle_holds(b->r, c, e->pid, order + k, n - k))
                                                return 0;
                                        c->n_lock_cycle = n - k;
                                        c->lock_cycle = malloc(c->n_lock_cycle * sizeof *c->lock_cycle);
                                        if (!c->lock_cycle)
                                                return -ENOMEM;
                                        memcpy(c->lock_cycle, order + k, c->n_lock_cycle * sizeof *c->lock_cycle);
                                        c->lock_pid = e->pid;
                                        return 0;
                                }
                        m = waits_in_process(c, e->pid, t);
                        if (!m)
                                break;
                        order[n++] = t;
                        t = m->peer_tid;
                }
        }
        return 0;
}

static int chain_build(PeerResolver *r, const WaitThreads *threads, const Snapshot *recorded, pid_t pid, pid_t tid,
                       unsigned depth, uint64_t deadline_usec, unsigned lock_probes, WaitChain **ret,
                       pid_t **ret_peers, size_t *ret_n_peers) {
        _cleanup_(wait_chain_freep) WaitChain *c = NULL;
        uint64_t start = now_usec(CLOCK_MONOTONIC);
        Builder b = { .r = r, .self = getpid(), .deadline_usec = deadline_usec, .lock_probes = lock_probes,
                      .recorded = recorded, .threads = threads };
        pid_t *peers;
        int k;

        c = calloc(1, sizeof *c);
        if (!c)
                return -ENOMEM;
        c->tid = tid;
        c->depth = depth = MIN(depth, WAIT_CHAIN_DEPTH_MAX);
        b.chain = c;
        b.procs[b.n_procs++] = (ChainProc) { .pid = pid };
        for (size_t i = 0; i < b.n_procs; i++) {
                if (i > 0 && builder_out_of_time(&b, b.procs[i].pid, 0, 0)) {
                        b.procs[i].running = true; /* not read: in no knot */
                        continue;
                }
                k = builder_expand(&b, i, i == 0 ? tid : 0, depth);
                if (k < 0)
                        return k;
        }
        k = builder_find_deadlock(&b);
        if (k >= 0)
                k = builder_find_lock_cycle(&b);
        if (k < 0)
                return k;
        c->resolve_usec = now_usec(CLOCK_MONOTONIC) - start;
        peers = calloc(b.n_procs, sizeof *peers);
        if (!peers)
                return -ENOMEM;
        for (size_t i = 1; i < b.n_procs; i++)
                peers[i - 1] = b.procs[i].pid;
        *ret = TAKE_PTR(c);
        *ret_peers = peers;
        *ret_n_peers = b.n_procs - 1;
        return 0;
}

int wait_chain_build(PeerResolver *r, const WaitThreads *threads, pid_t pid, pid_t tid, unsigned depth, WaitChain **ret,
                     pid_t **ret_peers, size_t *ret_n_peers) {
        return chain_build(r, threads, NULL, pid, tid, depth, 0, 0, ret, ret_peers, ret_n_peers);
}

/* Whether one of T's innermost frames is a function named PREFIX… (or __PREFIX…, ___PREFIX…). */
static bool in_function(const ThreadSnapshot *t, const char *prefix) {
        for (size_t i = 0; i < t->n_frames && i < 8; i++) {
                const char *f = t->frames[i].function;

                while (f && *f == '_')
                        f++;
                if (f && startswith(f, prefix))
                        return true;
        }
        return false;
}

/* The lock of runtime K thread T waits for whose owner the runtime names; NULL when none. */
static const RuntimeLock *lock_wait_of(const ThreadSnapshot *t, RuntimeKind k) {
        const ThreadRuntime *rt = t ? thread_runtime(t, k) : NULL;

        for (size_t i = 0; rt && i < rt->n_locks; i++) {
                const RuntimeLock *l = &rt->locks[i];

                if (l->owner > 0 && (l->kind == RUNTIME_LOCK_WAITING_TO_LOCK ||
                                     l->kind == RUNTIME_LOCK_WAITING_TO_RELOCK || l->kind == RUNTIME_LOCK_PARKING))
                        return l;
        }
        return NULL;
}

/* An edge from thread TID of P to the owner of the lock L of runtime K it waits for, unless there is one. */
static int lock_edge(const Snapshot *p, pid_t tid, RuntimeKind k, const RuntimeLock *l, WaitChain *c) {
        char object[256];
        WaitEdge *e;

        /* One edge a wait: the resolver's, when the runtime explained it there too (Ruby's Mutex). */
        for (size_t i = 0; i < c->n_edges; i++)
                if ((c->edges[i].kind == WAIT_KIND_MONITOR || c->edges[i].kind == WAIT_KIND_MUTEX) &&
                    c->edges[i].pid == p->pid && c->edges[i].tid == tid)
                        return 0;
        if (c->n_edges >= WAIT_CHAIN_EDGES_MAX)
                return 0;
        e = wait_chain_add_edge(c);
        if (!e)
                return -ENOMEM;
        snprintf(object, sizeof object, "%s <0x%" PRIx64 ">", l->klass ?: runtime_traits[k].lock_class ?: "lock",
                 l->address);
        *e = (WaitEdge) { .pid = p->pid, .tid = tid, .kind = WAIT_KIND_MONITOR, .fd = -1, .peer_fd = -1,
                          .peer_pid = p->pid, .peer_tid = l->owner, .address = l->address,
                          .syscall = strdup("futex"), .object = strdup(object) };
        return e->syscall && e->object ? 0 : -ENOMEM;
}

/* The locks the threads of P wait for in runtime K, as the runtime's own thread dump names their owners (a JVM's):
 * an edge each to the owner, from every thread, or for a chain started at one thread of the root, from it on through
 * the owners. The dump is of one moment (a JVM's safepoint), so a cycle of owners is a deadlock with no second look:
 * when the runtime reported one too (as it must have), it is the chain's lock cycle, with its edges, wherever the
 * chain started. */
static int runtime_lock_waits(pid_t root_pid, const Snapshot *p, RuntimeKind k, WaitChain *c) {
        pid_t order[WAIT_CHAIN_EDGES_MAX + 1];
        const RuntimeLock *l;
        int r;

        if (!snapshot_runtime(p, k))
                return 0;
        if (c->tid > 0 && p->pid == root_pid) {
                const ThreadSnapshot *t = snapshot_find_thread((Snapshot *) p, c->tid);

                for (size_t n = 0; t && (l = lock_wait_of(t, k)) && n < WAIT_CHAIN_EDGES_MAX; n++) {
                        if ((r = lock_edge(p, t->tid, k, l, c)) < 0)
                                return r;
                        t = snapshot_find_thread((Snapshot *) p, l->owner);
                }
        } else
                for (size_t i = 0; i < p->n_threads; i++)
                        if ((l = lock_wait_of(&p->threads[i], k)) && (r = lock_edge(p, p->threads[i].tid, k, l, c)) < 0)
                                return r;
        if (c->n_lock_cycle > 0 || snapshot_runtime(p, k)->deadlocks == 0)
                return 0;
        for (size_t i = 0; i < p->n_threads; i++) {
                const ThreadSnapshot *t = &p->threads[i];
                size_t n = 0;

                while (t && (l = lock_wait_of(t, k)) && n < ELEMENTSOF(order)) {
                        for (size_t j = 0; j < n; j++) {
                                if (order[j] != t->tid)
                                        continue;
                                c->n_lock_cycle = n - j;
                                c->lock_cycle = malloc(c->n_lock_cycle * sizeof *c->lock_cycle);
                                if (!c->lock_cycle)
                                        return -ENOMEM;
                                memcpy(c->lock_cycle, order + j, c->n_lock_cycle * sizeof *c->lock_cycle);
                                c->lock_pid = p->pid;
                                for (size_t m = j; m < n; m++) {
                                        const ThreadSnapshot *w = snapshot_find_thread((Snapshot *) p, order[m]);

                                        if ((r = lock_edge(p, order[m], k, lock_wait_of(w, k), c)) < 0)
                                                return r;
                                }
                                return 0;
                        }
                        order[n++] = t->tid;
                        t = snapshot_find_thread((Snapshot *) p, l->owner);
                }
        }
        return 0;
}

/* A thread of ROOT in futex() that the chain has no edge for (no lock layout named a holder): say what it waits on
 * rather than nothing, without making an owner up. Its stack tells a condition variable (no owner: any thread may
 * signal it) and a join; anything else is "owner unknown". A thread in a mutex or rwlock function whose holder was
 * not read got the lock, or saw it change hands, while we looked: no edge. */
static int note_futex_waits(Snapshot *root, WaitChain *c) {
        for (size_t i = 0; i < root->n_threads; i++) {
                const ThreadSnapshot *t = &root->threads[i];
                char object[64];
                WaitEdge *e;
                bool has_edge = false;

                bool cond;

                if ((c->tid > 0 && t->tid != c->tid) || t->syscall.kind != PROC_SYSCALL_BLOCKED ||
                    !streq_ptr(syscall_name(t->syscall.nr), "futex"))
                        continue;
                /* In a lock function, yet no holder was read: the lock changed hands while we looked (a busy
                 * lock), nothing to report. */
                if (in_function(t, "lll_lock_wait") || in_function(t, "pthread_mutex_") ||
                    in_function(t, "pthread_rwlock_") || in_function(t, "lll_robust"))
                        continue;
                cond = in_function(t, "pthread_cond_");
                for (size_t k = 0; k < c->n_edges && !has_edge; k++)
                        has_edge = c->edges[k].pid == root->pid && c->edges[k].tid == t->tid;
                if (has_edge)
                        continue;
                e = wait_chain_add_edge(c);
                if (!e)
                        return -ENOMEM;
                snprintf(object, sizeof object, "%s 0x%" PRIx64, cond ? "condition variable" : "futex",
                         t->syscall.args[0]);
                *e = (WaitEdge) { .pid = root->pid, .tid = t->tid, .kind = cond ? WAIT_KIND_CONDVAR : WAIT_KIND_OTHER,
                                  .fd = -1, .peer_fd = -1, .address = t->syscall.args[0], .syscall = strdup("futex"),
                                  .object = strdup(object),
                                  .reason = strdup(cond ? "no owner: any thread may signal it"
                                                   : in_function(t, "pthread_join") || in_function(t, "pthread_clockjoin")
                                                   ? "owner unknown: it waits for a thread to exit (pthread_join)"
                                                   : "owner unknown: no lock layout names one") };
                if (!e->syscall || !e->object || !e->reason)
                        return -ENOMEM;
        }
        return 0;
}

/* Name each mutex by the variable it is, where a symbol of the waiter's binaries covers its address:
 * "mutex queue_lock (0x…) in libfoo.so". The modules are those the captures recorded for that process. */
static int name_mutexes(Snapshot *root, WaitChain *c, Symbolizer *sym) {
        for (size_t i = 0; i < c->n_edges; i++) {
                WaitEdge *e = &c->edges[i];
                const Snapshot *p = NULL;
                char rootdir[64], *name = NULL, *object;
                const char *kind, *base = NULL;

                if (!e->address || !e->object || strstr(e->object, " 0x") == NULL || e->kind == WAIT_KIND_JOIN)
                        continue;
                if (e->pid == root->pid)
                        p = root;
                for (size_t k = 0; !p && k < root->n_peers; k++)
                        if (root->peers[k]->pid == e->pid)
                                p = root->peers[k];
                if (!p)
                        continue;
                snprintf(rootdir, sizeof rootdir, "/proc/%d/root", (int) e->pid);
                for (size_t m = 0; m < p->n_modules && !name; m++)
                        if (e->address >= p->modules[m].start && e->address < p->modules[m].end) {
                                name = symbolizer_data_symbol(sym, &p->modules[m], rootdir, e->address);
                                base = p->modules[m].path ? strrchr(p->modules[m].path, '/') : NULL;
                                base = base ? base + 1 : p->modules[m].path ?: "?";
                        }
                if (!name)
                        continue;
                /* "mutex 0x…" becomes "mutex NAME (0x…) in MODULE" (and "rwlock …", "PI mutex …" alike). */
                kind = strstr(e->object, " 0x");
                if (asprintf(&object, "%.*s %s (0x%" PRIx64 ") in %s", kind ? (int) (kind - e->object) : 5,
                             kind ? e->object : "mutex", name, e->address, base) < 0) {
                        free(name);
                        return -ENOMEM;
                }
                free(name);
                free(e->object);
                e->object = object;
        }
        return 0;
}

int wait_chain_capture(Snapshot *root, pid_t tid, unsigned depth, const CaptureOptions *o, Symbolizer *sym) {
        /* Declared first, so it outlives the resolver whose readers ask it. */
        _cleanup_(runtime_mapped_done) RuntimeMapped mapped = { INTMAP_NULL };
        _cleanup_(peer_resolver_freep) PeerResolver *r = NULL;
        _cleanup_(wait_chain_freep) WaitChain *c = NULL;
        _cleanup_free_ pid_t *peers = NULL;
        CaptureOptions po = *o;
        size_t n = 0;
        int k;

        k = peer_resolver_new(&r);
        if (k < 0)
                return k;
        /* What the runtimes say their threads wait on (a Python program's GIL and locks, read from its interpreter),
         * asked only of the processes that map their interpreter: any blocked call may be a Ruby wait, and opening
         * every process a chain reaches to find it is not Ruby costs a module list each. */
        k = runtime_waits_attach(r, sym, o->skip_runtimes, runtime_mapped_may_run, &mapped);
        if (k < 0)
                return k;
        /* The peers share the budget of the capture they are peers of: its deadline, or (for a caller that set
         * none) one more budget from here. Building the chain is part of it. */
        if (po.deadline_usec == 0)
                po.deadline_usec = now_usec(CLOCK_MONOTONIC) + o->time_budget_usec;
        k = chain_build(r, NULL, root, root->pid, tid, depth, po.deadline_usec, WAIT_CHAIN_LOCK_PROBES_MAX, &c, &peers, &n);
        if (k < 0)
                return k;
        root->peers = calloc(MAX(n, 1U), sizeof *root->peers);
        if (!root->peers)
                return -ENOMEM;
        po.tid = 0;
        for (size_t i = 0; i < n; i++) {
                Snapshot *s = NULL;

                if (now_usec(CLOCK_MONOTONIC) >= po.deadline_usec) {
                        c->truncated = true;
                        if (wait_chain_add_error(c, "peer %d and later ones not captured: time budget spent", (int) peers[i]) < 0)
                                return -ENOMEM;
                        break;
                }
                k = capture_process(peers[i], &po, sym, &s);
                if (k == -ENOMEM)
                        return k;
                if (k < 0) {
                        if (wait_chain_add_error(c, "peer %d not captured: %s", (int) peers[i],
                                        k == -ESRCH ? "it exited" : k == -EPERM || k == -EACCES ? "permission denied"
                                                                                                : strerror(-k)) < 0)
                                return -ENOMEM;
                        continue;
                }
                root->peers[root->n_peers++] = s;
        }
        /* What each runtime's own dump says its threads wait on (a JVM's monitors and their owners). */
        k = 0;
        for (RuntimeKind rk = 0; k >= 0 && rk < _RUNTIME_MAX; rk++) {
                k = runtime_lock_waits(root->pid, root, rk, c);
                for (size_t i = 0; k >= 0 && i < root->n_peers; i++)
                        k = runtime_lock_waits(root->pid, root->peers[i], rk, c);
        }
        if (k >= 0)
                k = note_futex_waits(root, c);
        if (k >= 0)
                k = name_mutexes(root, c, sym);
        if (k < 0)
                return k;
        root->wait_chain = TAKE_PTR(c);
        return 0;
}
