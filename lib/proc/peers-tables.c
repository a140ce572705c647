/* peers-tables.c: the machine-wide tables a peer resolution reads once: fd owners, sockets, /proc/locks. */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc-util.h"
#include "base/intmap.h"
#include "base/log.h"
#include "base/macro.h"
#include "base/parse-util.h"
#include "model/proc-parse.h"
#include "proc/peers-tables.h"
#include "proc/proc-read.h"

int peer_resolver_new(PeerResolver **ret) {
        PeerResolver *r = calloc(1, sizeof *r);

        if (!r)
                return -ENOMEM;
        r->self = getpid();
        *ret = r;
        return 0;
}

void peer_resolver_set_runtime(PeerResolver *r, RuntimeKind k, RuntimeWaitFn fn, void *userdata,
                               void (*free_fn)(void *)) {
        assert(k >= 0 && k < _RUNTIME_MAX);
        if (r->runtime[k].free)
                r->runtime[k].free(r->runtime[k].userdata);
        r->runtime[k] = (RuntimeWaitReader) { .fn = fn, .userdata = userdata, .free = free_fn };
}

void peer_resolver_runtime_any_call(PeerResolver *r, RuntimeKind k) {
        assert(k >= 0 && k < _RUNTIME_MAX);
        r->runtime[k].any_call = true;
}

bool peer_resolver_runtime_any(const PeerResolver *r) {
        for (RuntimeKind k = 0; k < _RUNTIME_MAX; k++)
                if (r->runtime[k].fn && r->runtime[k].any_call)
                        return true;
        return false;
}

int peer_resolver_runtime_wait(PeerResolver *r, pid_t pid, pid_t tid, uint64_t futex, bool any_call,
                               RuntimeWait *ret) {
        for (RuntimeKind k = 0; k < _RUNTIME_MAX; k++) {
                int q;

                if (!r->runtime[k].fn || (any_call && !r->runtime[k].any_call))
                        continue;
                q = r->runtime[k].fn(r->runtime[k].userdata, pid, tid, futex, ret);
                if (q > 0)
                        ret->runtime = k;
                if (q != 0)
                        return q;
        }
        *ret = (RuntimeWait) { .kind = RUNTIME_WAIT_NONE };
        return 0;
}

void peer_resolver_set_fd_tables(PeerResolver *r, FdTables *t, const FdTablesView *view, uint64_t now) {
        r->fd_tables = t;
        r->fd_view = view;
        r->fd_now = now;
}

PeerResolver *peer_resolver_free(PeerResolver *r) {
        if (!r)
                return NULL;
        for (RuntimeKind k = 0; k < _RUNTIME_MAX; k++)
                if (r->runtime[k].free)
                        r->runtime[k].free(r->runtime[k].userdata);
        for (size_t i = 0; !r->fd_tables && i < r->n_owners; i++)
                free(r->owners[i].path);
        free(r->owners);
        unix_socks_free(r->unix_socks, r->n_unix);
        free(r->tcp);
        free(r->udp);
        free(r->locks);
        free(r);
        return NULL;
}

void peer_resolver_get_stats(const PeerResolver *r, PeerResolverStats *ret) {
        *ret = (PeerResolverStats) {
                .fds = r->n_owners,
                .processes = r->processes,
                .unix_socks = r->n_unix,
                .tcp_socks = r->n_tcp,
                .udp_socks = r->n_udp,
        };
}

/* ---- what an fd link says ---- */

/* "socket:[123]" / "pipe:[123]" → kind and inode; anything else (a path, "anon_inode:…") is FD_KIND_PATH. */
FdKind peer_tables_fd_link_parse(const char *link, uint64_t *ret_inode) {
        static const struct {
                const char *prefix;
                FdKind kind;
        } table[] = {
                { "socket:[", FD_KIND_SOCKET },
                { "pipe:[", FD_KIND_PIPE },
        };

        for (size_t i = 0; i < ELEMENTSOF(table); i++)
                if (startswith(link, table[i].prefix)) {
                        const char *p = link + strlen(table[i].prefix);
                        size_t n = strcspn(p, "]");
                        char num[24];

                        if (n == 0 || n >= sizeof num || p[n] != ']')
                                break;
                        memcpy(num, p, n);
                        num[n] = 0;
                        if (safe_atou64(num, ret_inode) < 0)
                                break;
                        return table[i].kind;
                }
        *ret_inode = 0;
        return FD_KIND_PATH;
}

/* ---- the pass over every process's fds ---- */

/* One process's fds as a pass read them. */
typedef struct FdTable {
        pid_t pid;
        uint64_t read_usec;
        unsigned gen;           /* the pass that last listed the process */
        bool unreadable;
        FdOwner *owners;
        size_t n_owners;
} FdTable;

struct FdTables {
        IntMap by_pid;          /* pid → FdTable */
        unsigned gen;
        uint64_t fds_read, fds_kept;
};

int fd_tables_new(FdTables **ret) {
        FdTables *t = calloc(1, sizeof *t);

        if (!t)
                return -ENOMEM;
        *ret = t;
        return 0;
}

static void fd_table_clear(FdTable *e) {
        for (size_t i = 0; i < e->n_owners; i++)
                free(e->owners[i].path);
        e->owners = mfree(e->owners);
        e->n_owners = 0;
}

static void fd_table_free(FdTable *e) {
        if (!e)
                return;
        fd_table_clear(e);
        free(e);
}

FdTables *fd_tables_free(FdTables *t) {
        if (!t)
                return NULL;
        for (size_t i = 0; i < t->by_pid.size; i++)
                if (t->by_pid.keys[i] > 0)
                        fd_table_free(t->by_pid.values[i]);
        intmap_done(&t->by_pid);
        free(t);
        return NULL;
}

void fd_tables_get_stats(const FdTables *t, uint64_t *ret_read, uint64_t *ret_kept) {
        *ret_read = t->fds_read;
        *ret_kept = t->fds_kept;
}

/* Forget the processes the pass that just ended did not list: gone. Collected first: removing moves entries. */
static void fd_tables_sweep(FdTables *t) {
        _cleanup_free_ int *gone = NULL;
        size_t n = 0;

        gone = malloc(MAX(t->by_pid.used, 1U) * sizeof *gone);
        if (!gone)
                return;
        for (size_t i = 0; i < t->by_pid.size; i++)
                if (t->by_pid.keys[i] > 0 && ((FdTable *) t->by_pid.values[i])->gen != t->gen)
                        gone[n++] = t->by_pid.keys[i];
        for (size_t i = 0; i < n; i++)
                fd_table_free(intmap_remove(&t->by_pid, gone[i]));
}

/* Read the fds of process PID (its fd directory FDDIR) into *RET (malloc'd, paths too). */
static int read_fd_table(pid_t pid, int fddir, FdOwner **ret, size_t *ret_n) {
        _cleanup_free_ int *fds = NULL;
        FdOwner *owners = NULL;
        size_t n_fds = 0, n = 0, allocated = 0;
        int k;

        k = proc_list_numeric(fddir, ".", &fds, &n_fds);
        if (k < 0)
                return k;
        for (size_t f = 0; f < n_fds; f++) {
                char link[4097], fdname[16];
                FdOwner o = { .pid = pid, .fd = fds[f], .accmode = -1 };
                ssize_t len;

                snprintf(fdname, sizeof fdname, "%d", fds[f]);
                len = readlinkat(fddir, fdname, link, sizeof link - 1);
                if (len < 0)
                        continue;
                link[len] = 0;
                o.kind = peer_tables_fd_link_parse(link, &o.inode);
                if (o.kind == FD_KIND_PATH) {
                        if (link[0] != '/')
                                continue; /* anon inodes and the like lead to no other process */
                        o.path = strdup(link);
                        if (!o.path)
                                goto oom;
                }
                if (!GREEDY_REALLOC(owners, allocated, n + 1)) {
                        free(o.path);
                        goto oom;
                }
                owners[n++] = o;
        }
        *ret = owners;
        *ret_n = n;
        return 0;
oom:
        for (size_t i = 0; i < n; i++)
                free(owners[i].path);
        free(owners);
        return -ENOMEM;
}

/* Open and read the fds of process PID (/proc's PROCFD): -ESRCH and the like when it cannot be listed, with
 * *RET_UNREADABLE set when it is not ours to read (a holder may hide among such). */
static int open_fd_table(int procfd, pid_t pid, FdOwner **ret, size_t *ret_n, bool *ret_unreadable) {
        _cleanup_close_ int fddir = -EBADF;
        char name[32];

        *ret = NULL;
        *ret_n = 0;
        *ret_unreadable = false;
        snprintf(name, sizeof name, "%d/fd", pid);
        fddir = openat(procfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (fddir < 0) {
                *ret_unreadable = errno == EACCES || errno == EPERM;
                return *ret_unreadable ? 0 : negative_errno();
        }
        return read_fd_table(pid, fddir, ret, ret_n);
}

/* The fds of process PID from R's tables, read again unless they are fresh; NULL when it cannot be listed (gone).
 * -ENOMEM. */
static int cached_fd_table(PeerResolver *r, int procfd, pid_t pid, FdTable **ret) {
        FdTables *t = r->fd_tables;
        FdTable *e = intmap_get(&t->by_pid, pid);
        int k;

        if (!e) {
                e = calloc(1, sizeof *e);
                if (!e)
                        return -ENOMEM;
                e->pid = pid;
                if (intmap_put(&t->by_pid, pid, e) < 0) {
                        free(e);
                        return -ENOMEM;
                }
        } else if (e->read_usec > 0 && r->fd_view->fresh(r->fd_view->userdata, pid, e->read_usec)) {
                e->gen = t->gen;
                t->fds_kept += e->n_owners;
                *ret = e;
                return 0;
        }
        e->gen = t->gen;
        fd_table_clear(e);
        e->read_usec = 0;
        k = open_fd_table(procfd, pid, &e->owners, &e->n_owners, &e->unreadable);
        if (k == -ENOMEM)
                return k;
        if (k < 0) {
                *ret = NULL;
                return 0;
        }
        /* An unreadable process is asked again next time: it may have changed its credentials. */
        e->read_usec = e->unreadable ? 0 : r->fd_now;
        t->fds_read += e->n_owners;
        *ret = e;
        return 0;
}

static int cmp_owner(const void *a, const void *b) {
        const FdOwner *x = a, *y = b;

        if (x->kind != y->kind)
                return x->kind < y->kind ? -1 : 1;
        if (x->inode != y->inode)
                return x->inode < y->inode ? -1 : 1;
        return (x->pid > y->pid) - (x->pid < y->pid);
}

int peer_tables_fdinfo_field(pid_t pid, int fd, const char *key, unsigned base, uint64_t *ret) {
        char path[64], buf[1024];
        ssize_t n;

        snprintf(path, sizeof path, "/proc/%d/fdinfo/%d", (int) pid, fd);
        n = proc_read_small(AT_FDCWD, path, buf, sizeof buf);
        if (n < 0)
                return (int) n;
        return proc_parse_fdinfo_field(buf, (size_t) n, key, base, ret);
}

/* PID's FD in R's fd tables, when they hold PID's fds as they still are. */
static FdOwner *fd_tables_lookup(PeerResolver *r, pid_t pid, int fd) {
        FdTable *e = r->fd_tables ? intmap_get(&r->fd_tables->by_pid, pid) : NULL;
        size_t lo = 0, hi;

        if (!e || e->read_usec == 0 || !r->fd_view->fresh(r->fd_view->userdata, pid, e->read_usec))
                return NULL;
        /* Read in the order /proc lists them: by number. */
        hi = e->n_owners;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;

                if (e->owners[mid].fd < fd)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return lo < e->n_owners && e->owners[lo].fd == fd ? &e->owners[lo] : NULL;
}

int peer_tables_fd_link(PeerResolver *r, pid_t pid, int fd, char *buf, size_t size) {
        const FdOwner *o = fd_tables_lookup(r, pid, fd);
        char path[64];
        ssize_t n;

        assert(size > 0);
        if (o) {
                if (o->kind == FD_KIND_PATH)
                        snprintf(buf, size, "%s", o->path);
                else
                        snprintf(buf, size, "%s:[%" PRIu64 "]", o->kind == FD_KIND_PIPE ? "pipe" : "socket", o->inode);
                return 0;
        }
        snprintf(path, sizeof path, "/proc/%d/fd/%d", (int) pid, fd);
        n = readlink(path, buf, size - 1);
        if (n < 0)
                return proc_errno(negative_errno());
        buf[n] = 0;
        return 0;
}

int peer_tables_fd_accmode(PeerResolver *r, pid_t pid, int fd) {
        FdOwner *o = fd_tables_lookup(r, pid, fd);
        uint64_t flags;
        int k;

        if (o && o->accmode >= 0)
                return o->accmode;
        k = peer_tables_fdinfo_field(pid, fd, "flags", 8, &flags);
        if (k < 0)
                return k;
        if (o)
                o->accmode = (int) (flags & O_ACCMODE);
        return (int) (flags & O_ACCMODE);
}

/* One pass over /proc/[0-9]*\/fd: readlinkat into a stack buffer, keep sockets and pipes by inode, and paths (for
 * FIFOs and OFD locks), or take a process's from the fd tables kept across passes when it has not run since. A
 * process that vanishes or that we may not read is skipped. */
int peer_tables_load_owners(PeerResolver *r) {
        _cleanup_close_ int procfd = -EBADF;
        _cleanup_free_ int *pids = NULL;
        size_t n_pids = 0, allocated = 0;
        int k;

        if (r->have_owners)
                return 0;
        procfd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (procfd < 0)
                return negative_errno();
        k = r->fd_tables ? r->fd_view->list(r->fd_view->userdata, &pids, &n_pids)
                         : proc_list_numeric(procfd, ".", &pids, &n_pids);
        if (k < 0)
                return k;
        if (r->fd_tables)
                r->fd_tables->gen++;
        for (size_t i = 0; i < n_pids; i++) {
                _cleanup_free_ FdOwner *read = NULL;
                const FdOwner *owners;
                size_t n = 0;
                bool unreadable;

                if (pids[i] == r->self)
                        continue;
                if (r->fd_tables) {
                        FdTable *e;

                        /* The process's fds as they were, or read again; their paths stay the table's. */
                        k = cached_fd_table(r, procfd, pids[i], &e);
                        if (k < 0)
                                return k;
                        if (!e)
                                continue;
                        unreadable = e->unreadable;
                        owners = e->owners;
                        n = e->n_owners;
                } else {
                        k = open_fd_table(procfd, pids[i], &read, &n, &unreadable);
                        if (k == -ENOMEM)
                                return k;
                        if (k < 0)
                                continue;
                        owners = read;
                }
                if (unreadable) {
                        r->unreadable++;
                        continue;
                }
                r->processes++;
                if (!GREEDY_REALLOC(r->owners, allocated, r->n_owners + n)) {
                        for (size_t f = 0; f < n && read; f++)
                                free(read[f].path);
                        return -ENOMEM;
                }
                /* READ's paths are the resolver's now. */
                if (n > 0)
                        memcpy(r->owners + r->n_owners, owners, n * sizeof *owners);
                r->n_owners += n;
        }
        if (r->fd_tables)
                fd_tables_sweep(r->fd_tables);
        /* Sockets and pipes first, by inode, for binary search; paths last. */
        if (r->n_owners > 0)
                qsort(r->owners, r->n_owners, sizeof *r->owners, cmp_owner);
        r->n_indexed = 0;
        while (r->n_indexed < r->n_owners && r->owners[r->n_indexed].kind != FD_KIND_PATH)
                r->n_indexed++;
        r->have_owners = true;
        return 0;
}

/* The range of owners of (KIND, INODE): *RET_FIRST, count returned. */
size_t peer_tables_find_owners(PeerResolver *r, FdKind kind, uint64_t inode, size_t *ret_first) {
        size_t lo = 0, hi = r->n_indexed, first;

        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                const FdOwner *o = &r->owners[mid];
                if (o->kind < kind || (o->kind == kind && o->inode < inode))
                        lo = mid + 1;
                else
                        hi = mid;
        }
        first = lo;
        while (lo < r->n_indexed && r->owners[lo].kind == kind && r->owners[lo].inode == inode)
                lo++;
        *ret_first = first;
        return lo - first;
}

/* ---- the other tables, on first use ---- */

int peer_tables_load_unix(PeerResolver *r) {
        int k;

        if (r->have_unix)
                return 0;
        k = sock_diag_unix(&r->unix_socks, &r->n_unix);
        if (k < 0)
                return k;
        r->have_unix = true;
        return 0;
}

int peer_tables_load_inet(PeerResolver *r, uint8_t protocol) {
        bool *have = protocol == IPPROTO_TCP ? &r->have_tcp : &r->have_udp;
        int k;

        if (*have)
                return 0;
        k = sock_diag_inet(protocol, protocol == IPPROTO_TCP ? &r->tcp : &r->udp,
                           protocol == IPPROTO_TCP ? &r->n_tcp : &r->n_udp);
        if (k < 0)
                return k;
        *have = true;
        return 0;
}

/* /proc/locks: "1: FLOCK  ADVISORY  WRITE 4232 00:2a:1234 0 EOF", a waiter as "1: -> FLOCK …". */
int peer_tables_parse_locks(char *buf, LockLine **ret, size_t *ret_n) {
        _cleanup_free_ LockLine *locks = NULL;
        size_t n = 0, allocated = 0;

        for (char *line = buf, *next; line && *line; line = next) {
                LockLine l = { .end = UINT64_MAX };
                char *p, *tok, *save = NULL;
                int field = 0;
                int pid = 0;

                next = strchr(line, '\n');
                if (next)
                        *next++ = 0;
                p = strchr(line, ':');
                if (!p)
                        continue;
                *p++ = 0;
                if (safe_atou(line, &l.id) < 0)
                        continue;
                for (tok = strtok_r(p, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
                        if (streq(tok, "->")) {
                                l.waiter = true;
                                continue;
                        }
                        switch (field++) {
                        case 0:
                                snprintf(l.type, sizeof l.type, "%s", tok);
                                break;
                        case 2:
                                l.write = streq(tok, "WRITE");
                                break;
                        case 3:
                                /* OFD locks show -1: they belong to an open file, not to a process. */
                                if (safe_atoi(tok, &pid) < 0)
                                        pid = 0;
                                break;
                        case 4:
                                if (sscanf(tok, "%x:%x:%" SCNu64, &l.major, &l.minor, &l.inode) != 3)
                                        l.inode = 0;
                                break;
                        case 5:
                                if (safe_atou64(tok, &l.start) < 0)
                                        l.start = 0;
                                break;
                        case 6:
                                if (streq(tok, "EOF") || safe_atou64(tok, &l.end) < 0)
                                        l.end = UINT64_MAX;
                                break;
                        }
                }
                if (field < 5 || l.inode == 0)
                        continue;
                l.pid = (pid_t) pid;
                if (!GREEDY_REALLOC(locks, allocated, n + 1))
                        return -ENOMEM;
                locks[n++] = l;
        }
        *ret = TAKE_PTR(locks);
        *ret_n = n;
        return 0;
}

int peer_tables_load_locks(PeerResolver *r) {
        _cleanup_free_ char *buf = NULL;
        _cleanup_close_ int procfd = -EBADF;
        size_t size = 0;
        int k;

        if (r->have_locks)
                return 0;
        procfd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (procfd < 0)
                return negative_errno();
        k = proc_read_full(procfd, "locks", LOCKS_FILE_MAX, &buf, &size);
        if (k < 0)
                return k;
        k = peer_tables_parse_locks(buf, &r->locks, &r->n_locks);
        if (k < 0)
                return k;
        r->have_locks = true;
        return 0;
}
