/* peers-tables.c: the machine-wide tables a peer resolution reads once: fd owners, sockets, /proc/locks. */
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

void peer_resolver_set_runtime(PeerResolver *r, RuntimeWaitFn fn, void *userdata, void (*free_fn)(void *)) {
        if (r->runtime_free)
                r->runtime_free(r->runtime_userdata);
        r->runtime_wait = fn;
        r->runtime_userdata = userdata;
        r->runtime_free = free_fn;
}

PeerResolver *peer_resolver_free(PeerResolver *r) {
        if (!r)
                return NULL;
        if (r->runtime_free)
                r->runtime_free(r->runtime_userdata);
        for (size_t i = 0; i < r->n_owners; i++)
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

static int owners_add(PeerResolver *r, size_t *allocated, const FdOwner *o) {
        if (!GREEDY_REALLOC(r->owners, *allocated, r->n_owners + 1))
                return -ENOMEM;
        r->owners[r->n_owners++] = *o;
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

/* One pass over /proc/[0-9]*\/fd: readlinkat into a stack buffer, keep sockets and pipes by inode, and paths (for
 * FIFOs and OFD locks). A process that vanishes or that we may not read is skipped. */
int peer_tables_fdinfo_field(pid_t pid, int fd, const char *key, unsigned base, uint64_t *ret) {
        char path[64], buf[1024];
        ssize_t n;

        snprintf(path, sizeof path, "/proc/%d/fdinfo/%d", (int) pid, fd);
        n = proc_read_small(AT_FDCWD, path, buf, sizeof buf);
        if (n < 0)
                return (int) n;
        return proc_parse_fdinfo_field(buf, (size_t) n, key, base, ret);
}

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
        k = proc_list_numeric(procfd, ".", &pids, &n_pids);
        if (k < 0)
                return k;
        for (size_t i = 0; i < n_pids; i++) {
                _cleanup_free_ int *fds = NULL;
                _cleanup_close_ int fddir = -EBADF;
                size_t n_fds = 0;
                char name[32];

                if (pids[i] == r->self)
                        continue;
                snprintf(name, sizeof name, "%d/fd", pids[i]);
                fddir = openat(procfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
                if (fddir < 0) {
                        if (errno == EACCES || errno == EPERM)
                                r->unreadable++;
                        continue;
                }
                if (proc_list_numeric(fddir, ".", &fds, &n_fds) < 0)
                        continue;
                r->processes++;
                for (size_t f = 0; f < n_fds; f++) {
                        char link[4097], fdname[16];
                        FdOwner o = { .pid = pids[i], .fd = fds[f] };
                        ssize_t n;

                        snprintf(fdname, sizeof fdname, "%d", fds[f]);
                        n = readlinkat(fddir, fdname, link, sizeof link - 1);
                        if (n < 0)
                                continue;
                        link[n] = 0;
                        o.kind = peer_tables_fd_link_parse(link, &o.inode);
                        if (o.kind == FD_KIND_PATH) {
                                if (link[0] != '/')
                                        continue; /* anon inodes and the like lead to no other process */
                                o.path = strdup(link);
                                if (!o.path)
                                        return -ENOMEM;
                        }
                        if (owners_add(r, &allocated, &o) < 0) {
                                free(o.path);
                                return -ENOMEM;
                        }
                }
        }
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
