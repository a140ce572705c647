/* peers.h: who a waiting thread waits on: from the fds of its syscall to the processes holding the other end
 * (unix socket peers via sock_diag, pipe and FIFO ends, loopback TCP/UDP via inet_diag, /proc/locks holders,
 * children, the tracer). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/macro.h"
#include "capture/syscall-probe.h"
#include "model/proc-parse.h"
#include "model/snapshot.h"
#include "proc/peers-tables.h"

/* Budgets: fds looked at in one poll/select/epoll wait, holders listed for one object, fds of one process matched
 * against /proc/locks for a lock it may poll for. */
#define PEERS_WAIT_FDS_MAX 32U
#define PEERS_HOLDERS_MAX 8U
#define PEERS_SUSPECT_FDS_MAX 1024U

/* One thread, as /proc shows it: what the resolution starts from. */
typedef struct ThreadWait {
        pid_t pid, tid;
        char state;
        ProcSyscall syscall;
        pid_t tracer_pid;       /* 0 when not traced */
        char wchan[64];         /* the kernel function it sleeps in, when in a syscall; "" when not known */
        bool wchan_unread;      /* not read yet (WaitThreads.wchan() reads it when the thread's edges are followed) */
        bool retrying;          /* it polls for a lock: RETRY is the last try, seen failing (lock_retry_probe()) */
        LockAttempt retry;
} ThreadWait;

/* Read pid/tid's state, syscall and tracer from /proc. -ESRCH when it is gone. */
int thread_wait_read(pid_t pid, pid_t tid, ThreadWait *ret);

/* Append to CHAIN one edge for everything thread W waits on: each fd of its syscall (several for poll, select and
 * epoll: then marked multiplexed) with the process(es) at the other end, the lock holder, the child, the tracer.
 * An fd that leads to no process still gets an edge (peer_pid 0, a reason), so that a reader sees what the thread
 * waits on. A futex wait on a glibc mutex leads to the thread holding it (peer_tid). Returns the number of edges
 * added (0: a wait that leads nowhere we can follow, e.g. a condition variable or a sleep). */
int peers_thread_edges(PeerResolver *r, const ThreadWait *w, WaitChain *chain);

/* The glibc mutex a futex wait is for, read from the target without stopping it. */
typedef struct PeersMutex {
        const char *what;       /* "mutex", "robust mutex", "PI mutex" */
        uint64_t address;
        pid_t owner;            /* the holder's TID as the lock records it; 0 when it names none */
        bool pshared;           /* process-shared: the holder may be a thread of another process */
} PeersMutex;

/* For the futex wait SC of process PID: 1 and *RET when its layout says it is a glibc mutex (the low-level lock
 * wait, FUTEX_WAIT for 2, on a normal, recursive, errorcheck or adaptive mutex: the owner field; a robust mutex, or
 * FUTEX_LOCK_PI: the TID in the futex word); 0 when it is some other wait; -ESRCH when the process is gone. */
int peers_futex_mutex(pid_t pid, const ProcSyscall *sc, PeersMutex *ret);

/* For the futex wait SC of thread TID of PID: 1 and *RET the joined thread when it is a join (pthread_join, and
 * thrd_join, which is it). glibc waits on the joined thread's tid field for the value it holds, its TID, which the
 * kernel clears at the thread's exit and wakes, process-shared (CLONE_CHILD_CLEARTID): a shared FUTEX_WAIT or
 * FUTEX_WAIT_BITSET whose word and expected value are the TID of another live thread of PID. glibc's locks,
 * condition variables and semaphores wait private unless made process-shared, and none holds a TID it waits for.
 * 0 when it is some other wait; -ESRCH when the process is gone. */
int peers_futex_join(pid_t pid, pid_t tid, const ProcSyscall *sc, pid_t *ret);

/* How often thread TID of PID has been on a CPU (schedstat's third field); false when it cannot be read. A thread
 * whose count does not move between two reads did not run in between: what was read of its wait still holds. */
bool peers_thread_timeslices(pid_t pid, pid_t tid, uint64_t *ret);

/* The one fd a thread's syscall works on (read, write, recv, send, accept, connect, flock, fcntl …); -1 when the call
 * has none or several. */
int peers_syscall_fd(const ProcSyscall *sc);

/* Whether syscall NR is one peers_thread_edges() can follow to another process (fd, lock and child waits); futex,
 * nanosleep and the like are not. Cheap: the daemon asks it before paying for a walk. */
bool peers_syscall_follows(int64_t nr);

/* Whether NR is a call on a path or a file that waits only while its file system does (open, stat, getdents,
 * exec, fsync, …): parked in one for seconds, a thread waits on the file system, a FUSE daemon say, which its wait
 * channel tells (peers_thread_edges() then follows it there). */
bool peers_syscall_is_path_call(int64_t nr);

/* Whether SC is a sleep with nothing to wait for but time (nanosleep, clock_nanosleep, a poll or select of no fds):
 * where a program polling for a lock spends the time between tries. A restart_syscall that its wait channel did not
 * resolve (proc_syscall_resolve_restart(): the thread woke before it was read) may be one too: a sleep that a stop
 * (a capture's, a debugger's) cut short continues that way. */
bool peers_syscall_is_sleep(const ProcSyscall *sc);

/* Whether process PID could be polling for a lock: it has a regular file open (one of its first
 * PEERS_SUSPECT_FDS_MAX fds) that another owner holds a lock on, in /proc/locks. 1 with *RET_FD and *RET_HOLDER (0
 * for an open file's OFD lock), 0 when not, -errno. Only a lock_retry_probe() can tell that it does; this is what
 * earns one. */
int peers_lock_suspect(PeerResolver *r, pid_t pid, int *ret_fd, pid_t *ret_holder);
