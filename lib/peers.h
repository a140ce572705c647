/* peers.h: who a waiting thread waits on: from the fds of its syscall to the processes holding the other end
 * (unix socket peers via sock_diag, pipe and FIFO ends, loopback TCP/UDP via inet_diag, /proc/locks holders,
 * children, the tracer). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "macro.h"
#include "peers-tables.h"
#include "proc-parse.h"
#include "snapshot.h"

/* Budgets: fds looked at in one poll/select/epoll wait, holders listed for one object. */
#define PEERS_WAIT_FDS_MAX 32U
#define PEERS_HOLDERS_MAX 8U

/* One thread, as /proc shows it: what the resolution starts from. */
typedef struct ThreadWait {
        pid_t pid, tid;
        char state;
        ProcSyscall syscall;
        pid_t tracer_pid;       /* 0 when not traced */
} ThreadWait;

/* Read pid/tid's state, syscall and tracer from /proc. -ESRCH when it is gone. */
int thread_wait_read(pid_t pid, pid_t tid, ThreadWait *ret);

/* Append to CHAIN one edge for everything thread W waits on: each fd of its syscall (several for poll, select and
 * epoll: then marked multiplexed) with the process(es) at the other end, the lock holder, the child, the tracer.
 * An fd that leads to no process still gets an edge (peer_pid 0, a reason), so that a reader sees what the thread
 * waits on. A futex wait on a glibc mutex leads to the thread holding it (peer_tid). Returns the number of edges
 * added (0: a wait that leads nowhere we can follow, e.g. a condition variable or a sleep). */
int peers_thread_edges(PeerResolver *r, const ThreadWait *w, WaitChain *chain);

/* The one fd a thread's syscall works on (read, write, recv, send, accept, connect, flock, fcntl …); -1 when the call
 * has none or several. */
int peers_syscall_fd(const ProcSyscall *sc);

/* Whether syscall NR is one peers_thread_edges() can follow to another process (fd, lock and child waits); futex,
 * nanosleep and the like are not. Cheap: the daemon asks it before paying for a walk. */
bool peers_syscall_follows(int64_t nr);
