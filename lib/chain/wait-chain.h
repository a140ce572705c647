/* wait-chain.h: follow what a thread waits on, process to process, to a depth; name deadlocks; capture the peers. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "capture/capture.h"
#include "chain/peers.h"
#include "model/snapshot.h"
#include "unwind/symbolize.h"

/* Budgets of one chain (each overrun marks it truncated). */
#define WAIT_CHAIN_DEPTH_MAX 8U
#define WAIT_CHAIN_PEERS_MAX 16U        /* processes reached besides the first */
#define WAIT_CHAIN_EDGES_MAX 256U       /* edges other than mutex waits */
#define WAIT_CHAIN_THREADS_MAX 64U      /* threads of one process whose waits are followed, futex() waits aside */
#define WAIT_CHAIN_FUTEX_WAITS_MAX 1024U /* futex() waits followed: one read of the lock each, so many more of them
                                          * (a pool of 10,000 parked threads would cost 10,000 reads a walk) */
/* A capture's chain (never the daemon's own walks) traces at most this many sleeping threads that may poll for a
 * lock, each until a lock call fails or this long: SQLite's busy handler sleeps 100 ms at most between tries. */
#define WAIT_CHAIN_LOCK_PROBES_MAX 4U
#define WAIT_CHAIN_LOCK_PROBE_USEC (300 * 1000ULL)
/* Such a thread caught on a CPU, or waiting for one, is looked at again this often for this long (reads of /proc: it
 * does not stop), until it sleeps. */
#define WAIT_CHAIN_LOCK_SETTLE_USEC (50 * 1000ULL)
#define WAIT_CHAIN_LOCK_SETTLE_STEP_NSEC (500 * 1000L)

/* Where a walk reads the threads of a process and what each of them waits on. NULL: /proc, thread by thread. The
 * daemon passes its scan's view instead: this poll's samples already hold every thread's state and syscall, so a walk
 * of a process of 10,000 parked threads reads no file per thread. */
typedef struct WaitThreads {
        /* The tids of process PID into *RET (malloc'd); -ESRCH when it is gone. */
        int (*list)(void *userdata, pid_t pid, pid_t **ret, size_t *ret_n);
        /* What thread TID of PID waits on, as thread_wait_read() tells it, except that the wait channel may be left
         * unread (ThreadWait.wchan_unread): wchan() is then asked for it before the thread's edges are followed.
         * -ESRCH when the thread is gone. */
        int (*wait)(void *userdata, pid_t pid, pid_t tid, ThreadWait *ret);
        /* The wait channel of thread TID of PID into BUF ("" for none); -ESRCH when it is gone. */
        int (*wchan)(void *userdata, pid_t pid, pid_t tid, char *buf, size_t size);
        void *userdata;
} WaitThreads;

/*
 * Build the wait chain of thread TID of PID (TID 0: every thread of PID that waits in a syscall), DEPTH hops deep:
 * the edges of PID's thread(s), then of every thread of each process they reach, and so on. The processes at the
 * last hop still get their edges (so that a cycle back into the chain closes), but what they reach beyond is not
 * followed (the edge says so). *RET_PEERS lists the processes reached, in the order reached, PID excluded.
 *
 * A deadlock is a knot, as in the OR model of waits: a set of processes none of which has a thread on a CPU, each
 * with a thread whose every wait edge (all fds of a poll, all holders of a pipe) leads to a process of the set. An
 * idle server in epoll_wait() on a listening socket and on its clients is therefore not deadlocked with a client
 * that waits on it (the listening socket leads outside), while two processes each reading from the other are.
 * Waits inside one process (a self-pipe, a mutex) never make a process deadlock on their own; mutex edges between
 * threads of one process make a lock cycle instead (WaitChain.lock_cycle), a deadlock by themselves. A
 * poll, select or epoll wait also leads to every child (SIGCHLD would wake it). The chain's cycle is one loop in
 * the knot, found from PID: PID may be on it, or only wait on it (a parent in wait4() for a deadlocked child).
 */
int wait_chain_build(PeerResolver *r, const WaitThreads *threads, pid_t pid, pid_t tid, unsigned depth, WaitChain **ret,
                     pid_t **ret_peers, size_t *ret_n_peers);

/* The mutex edge of thread TID of PID in C (its holder known or not; the GIL counts as one), NULL when the thread
 * waits on no mutex. */
const WaitEdge *wait_chain_mutex_wait(const WaitChain *c, pid_t pid, pid_t tid);

/* Build the chain of ROOT (starting at TID, 0 for every waiting thread) and capture every process it reached with
 * options O, into ROOT->wait_chain and ROOT->peers. A peer that exits or that we may not read is an error in the
 * chain, never a failure of the whole capture. */
int wait_chain_capture(Snapshot *root, pid_t tid, unsigned depth, const CaptureOptions *o, Symbolizer *sym);
