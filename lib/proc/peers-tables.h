/* peers-tables.h: the machine-wide tables a peer resolution reads once and keeps: every process's fds (who
 * holds which socket, pipe or file), the sock_diag socket tables and /proc/locks. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/macro.h"
#include "model/snapshot.h"
#include "proc/sock-diag.h"

/* /proc/locks is one line per lock; a machine with more locks than this is not one we can explain anyway. */
#define LOCKS_FILE_MAX (4U * 1024 * 1024)

typedef enum FdKind {
        FD_KIND_SOCKET,
        FD_KIND_PIPE,
        FD_KIND_PATH,
} FdKind;

/* One open fd of some process, from the pass over /proc/PID/fd. */
typedef struct FdOwner {
        uint64_t inode;         /* sockets and pipes; 0 for paths */
        pid_t pid;
        int fd;
        FdKind kind;
        char *path;             /* FD_KIND_PATH only */
        int accmode;            /* O_RDONLY, O_WRONLY or O_RDWR; -1 until asked (peer_tables_fd_accmode()) */
} FdOwner;

typedef struct LockLine {
        unsigned id;            /* the number before ':'; a waiter repeats its blocker's */
        bool waiter;            /* "->": blocked on the lock of the line with the same id */
        char type[8];           /* FLOCK, POSIX, OFDLCK, LEASE … */
        bool write;             /* WRITE (exclusive), not READ (shared) */
        pid_t pid;              /* -1 for OFD locks */
        unsigned major, minor;
        uint64_t inode;
        uint64_t start, end;    /* the byte range, END included; UINT64_MAX for "EOF" (to the end, as flock's) */
} LockLine;

/* The tables a resolution needs (socket tables, every process's fds, /proc/locks), each read once on first use
 * and kept: one resolver serves one capture or one poll, then is freed, so nothing it knows gets old. */
typedef struct PeerResolver PeerResolver;

/* Every process's fds as the last pass read them, kept across resolvers by a caller that can tell which processes
 * cannot have changed theirs since: a process changes its fd table only by running (open, close, recvmsg of
 * SCM_RIGHTS, exec, exit), so one whose threads have not run since its fds were read has the same ones. The daemon's
 * scan knows that of every process, and a poll's pass then reads only the fds of processes that ran. */
typedef struct FdTables FdTables;

/* What the caller knows of the processes, for a pass over their fds kept in FdTables. */
typedef struct FdTablesView {
        /* Whether process PID has not run since SINCE (CLOCK_MONOTONIC usec), nor been replaced by another of its
         * pid. */
        bool (*fresh)(void *userdata, pid_t pid, uint64_t since);
        /* Every process, into *RET (malloc'd): listing /proc costs the kernel a step over every thread's pid (2 ms
         * at 10,000 threads), a caller's table nothing. */
        int (*list)(void *userdata, pid_t **ret, size_t *ret_n);
        void *userdata;
} FdTablesView;

int fd_tables_new(FdTables **ret);
FdTables *fd_tables_free(FdTables *t);
DEFINE_TRIVIAL_CLEANUP_FUNC(FdTables *, fd_tables_free);
/* The fds read from /proc, and taken from T, by the passes so far. */
void fd_tables_get_stats(const FdTables *t, uint64_t *ret_read, uint64_t *ret_kept);

/* A reader of what a thread parked in a futex waits for inside a language runtime (CPython's GIL and locks), for the
 * waits no glibc lock layout explains: 1 with *RET when it knows, 0 when not, -ENOMEM. */
typedef int (*RuntimeWaitFn)(void *userdata, pid_t pid, pid_t tid, uint64_t futex, RuntimeWait *ret);

/* One runtime's reader of waits: FN with USERDATA, freed with the resolver by FREE (NULL: borrowed). */
typedef struct RuntimeWaitReader {
        RuntimeWaitFn fn;       /* NULL: none */
        void *userdata;
        void (*free)(void *userdata);
        bool any_call;          /* asked of every blocked call of its threads, not only futex waits: the runtime parks a
                                 * thread in a call of its own (Ruby's, in ppoll or a condition variable) */
} RuntimeWaitReader;

struct PeerResolver {
        pid_t self;
        RuntimeWaitReader runtime[_RUNTIME_MAX]; /* by RuntimeKind: the runtimes that can say what a futex is */
        bool have_owners, have_unix, have_tcp, have_udp, have_locks;
        FdOwner *owners;        /* sockets and pipes sorted by (kind, inode); then paths (owned by FD_TABLES
                                 * when set) */
        size_t n_owners, n_indexed;
        FdTables *fd_tables;    /* NULL: every process's fds are read */
        const FdTablesView *fd_view;
        uint64_t fd_now;        /* what the pass stamps the fds it reads with */
        size_t processes;
        size_t unreadable;      /* processes whose fds we may not list: a holder may hide among them */
        UnixSock *unix_socks;
        size_t n_unix;
        InetSock *tcp, *udp;
        size_t n_tcp, n_udp;
        LockLine *locks;
        size_t n_locks;
};

int peer_resolver_new(PeerResolver **ret);
/* Futex waits that no glibc lock explains are also asked of FN, runtime K's reader (replacing any it had). USERDATA
 * is freed with R by FREE_FN, or borrowed (FREE_FN NULL: it must outlive R's use). */
void peer_resolver_set_runtime(PeerResolver *r, RuntimeKind k, RuntimeWaitFn fn, void *userdata,
                               void (*free_fn)(void *));
/* Runtime K's reader is asked of every blocked call of a thread, before the call's own edges (FUTEX 0 when the call
 * is no futex wait). */
void peer_resolver_runtime_any_call(PeerResolver *r, RuntimeKind k);
/* Whether any runtime's reader is asked of every blocked call. */
bool peer_resolver_runtime_any(const PeerResolver *r);
/* What thread TID of PID, parked in a futex wait on FUTEX, waits for, asked of each runtime's reader in turn (only
 * those asked of any call when ANY_CALL): 1 with *RET from the first that knows, 0 when none does, -ENOMEM. */
int peer_resolver_runtime_wait(PeerResolver *r, pid_t pid, pid_t tid, uint64_t futex, bool any_call,
                               RuntimeWait *ret);
/* R's pass over every process's fds lists the processes VIEW knows, takes their fds from T where VIEW says the
 * process has not run since they were read, and reads the others into T, stamped NOW. T and VIEW must outlive R. */
void peer_resolver_set_fd_tables(PeerResolver *r, FdTables *t, const FdTablesView *view, uint64_t now);
PeerResolver *peer_resolver_free(PeerResolver *r);
DEFINE_TRIVIAL_CLEANUP_FUNC(PeerResolver *, peer_resolver_free);

/* Statistics of what a resolver read, for benchmarks and debug logs. */
typedef struct PeerResolverStats {
        size_t fds;             /* fd links read in the pass over /proc/PID/fd */
        size_t processes;       /* processes in that pass */
        size_t unix_socks, tcp_socks, udp_socks;
} PeerResolverStats;

void peer_resolver_get_stats(const PeerResolver *r, PeerResolverStats *ret);

/* "socket:[123]" / "pipe:[123]" -> kind and inode; anything else (a path, "anon_inode:...") is FD_KIND_PATH. */
FdKind peer_tables_fd_link_parse(const char *link, uint64_t *ret_inode);
/* The pass over every process's fds, once (-ENOMEM; unreadable processes are counted, not errors). */
int peer_tables_load_owners(PeerResolver *r);
/* The holders of (KIND, INODE): how many, the first at *RET_FIRST in r->owners. */
size_t peer_tables_find_owners(PeerResolver *r, FdKind kind, uint64_t inode, size_t *ret_first);
/* What PID's FD links to ("pipe:[123]", "socket:[45]", a path) into BUF: from R's fd tables where they know it and
 * the process has not run since, else /proc/PID/fd/FD. -ESRCH when it is gone or closed. */
int peer_tables_fd_link(PeerResolver *r, pid_t pid, int fd, char *buf, size_t size);
/* O_RDONLY, O_WRONLY or O_RDWR of PID's FD (its fdinfo's flags, read once and kept in R's fd tables); -errno. */
int peer_tables_fd_accmode(PeerResolver *r, pid_t pid, int fd);
/* The field KEY of PID's FD's fdinfo, a number in BASE: -ENOENT when the kernel does not print it. */
int peer_tables_fdinfo_field(pid_t pid, int fd, const char *key, unsigned base, uint64_t *ret);
/* The unix, TCP or UDP (PROTOCOL) socket table, and /proc/locks, each once. */
int peer_tables_load_unix(PeerResolver *r);
int peer_tables_load_inet(PeerResolver *r, uint8_t protocol);
int peer_tables_load_locks(PeerResolver *r);
/* The lines of /proc/locks in BUF (NUL-terminated, cut up in place) that name a file; *RET is malloc'd. */
int peer_tables_parse_locks(char *buf, LockLine **ret, size_t *ret_n);
