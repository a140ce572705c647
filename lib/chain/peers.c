/* peers.c: from a waiting thread's syscall to the processes at the other end of what it waits on. */
#include <asm/unistd.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/futex.h>
#include <linux/sched.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/log.h"
#include "base/macro.h"
#include "base/parse-util.h"
#include "chain/peers.h"
#include "proc/fuse-conn.h"
#include "proc/proc-read.h"
#include "proc/sock-diag.h"

/* ---- small /proc reads about the waiting thread ---- */

int thread_wait_read(pid_t pid, pid_t tid, ThreadWait *ret) {
        _cleanup_close_ int dirfd = -EBADF;
        char buf[1024];
        ProcStat st;
        ProcStatus status;
        ThreadWait w = { .pid = pid, .tid = tid, .syscall.kind = PROC_SYSCALL_NONE, .syscall.nr = -1 };
        ssize_t n;
        int k;

        k = proc_open_dir(pid, tid, &dirfd);
        if (k < 0)
                return k;
        n = proc_read_small(dirfd, "stat", buf, sizeof buf);
        if (n < 0)
                return (int) n;
        k = proc_parse_stat(buf, (size_t) n, &st);
        if (k < 0)
                return k;
        w.state = st.state;
        /* The syscall file needs ptrace access; without it the thread still has a state, just no edges. */
        n = proc_read_small(dirfd, "syscall", buf, sizeof buf);
        if (n >= 0 && proc_parse_syscall(buf, (size_t) n, &w.syscall) < 0)
                w.syscall = (ProcSyscall) { .kind = PROC_SYSCALL_NONE, .nr = -1 };
        if (n == -ESRCH)
                return -ESRCH;
        if (w.syscall.kind == PROC_SYSCALL_BLOCKED) {
                n = proc_read_small(dirfd, "wchan", w.wchan, sizeof w.wchan);
                if (n <= 0 || streq(w.wchan, "0"))
                        w.wchan[0] = '\0';
                proc_syscall_resolve_restart(&w.syscall, w.wchan);
        }
        if (st.state == 't' || st.state == 'T') {
                char sbuf[4096];
                n = proc_read_small(dirfd, "status", sbuf, sizeof sbuf);
                if (n >= 0 && proc_parse_status(sbuf, (size_t) n, &status) >= 0)
                        w.tracer_pid = status.tracer_pid;
        }
        *ret = w;
        return 0;
}

/* The fd's link (what it is) and, for the direction of a pipe, its access mode from fdinfo. */
/* The type, inode and device of the file behind PID's FD (and the device it is, for a device node), as the kernel has them cached: AT_STATX_DONT_SYNC keeps
 * a FUSE or network file system from being asked, so a hung FUSE daemon (a dead sshfs) cannot hang us too. */
static int fd_stat(pid_t pid, int fd, struct stat *ret) {
        struct statx stx;
        char path[64];

        snprintf(path, sizeof path, "/proc/%d/fd/%d", (int) pid, fd);
        if (statx(AT_FDCWD, path, AT_STATX_DONT_SYNC, STATX_TYPE | STATX_INO, &stx) < 0)
                return proc_errno(negative_errno());
        *ret = (struct stat) {
                .st_mode = stx.stx_mode,
                .st_ino = stx.stx_ino,
                .st_dev = makedev(stx.stx_dev_major, stx.stx_dev_minor),
                .st_rdev = makedev(stx.stx_rdev_major, stx.stx_rdev_minor),
        };
        return 0;
}

/* ---- edges ---- */

typedef struct EdgeCtx {
        PeerResolver *r;
        const ThreadWait *w;
        WaitChain *chain;
        const char *syscall;
        bool multiplexed;
        int added;
} EdgeCtx;

/* Add an edge from the thread to PEER (0: none, with REASON). OBJECT is copied. */
static int edge_add(EdgeCtx *c, WaitKind kind, int fd, uint64_t inode, const char *object, pid_t peer, int peer_fd,
                    const char *reason) {
        WaitEdge *e = wait_chain_add_edge(c->chain);

        if (!e)
                return -ENOMEM;
        *e = (WaitEdge) {
                .pid = c->w->pid,
                .tid = c->w->tid,
                .kind = kind,
                .fd = fd,
                .inode = inode,
                .multiplexed = c->multiplexed,
                .peer_pid = peer,
                .peer_fd = peer_fd,
                .syscall = strdup(c->syscall),
                .object = object ? strdup(object) : NULL,
                .reason = reason ? strdup(reason) : NULL,
        };
        if (!e->syscall || (object && !e->object) || (reason && !e->reason))
                return -ENOMEM;
        c->added++;
        return 0;
}

/* The processes other than the waiter's that hold the other end: the socket or pipe OTHER_END of FKIND, or (FKIND
 * FD_KIND_PATH) the file PATH, as FIFOs and OFD-locked files are matched: by the path their fd links show, since
 * stat-ing every fd of the machine to compare inodes would cost far more. The edge itself names the waiter's INODE.
 * WANT_MODE >= 0 keeps only fds open with that access mode (the other end of a pipe). One edge per holder process,
 * or one edge with no peer saying why (NOBODY, unless the waiter alone holds it or we may not read everyone). */
static int edges_to_holders(EdgeCtx *c, WaitKind kind, int fd, uint64_t inode, const char *object, FdKind fkind,
                            uint64_t other_end, const char *path, int want_mode, const char *nobody) {
        size_t first, n, added = 0;
        pid_t last = 0;
        bool self = false;
        int k;

        k = peer_tables_load_owners(c->r);
        if (k < 0)
                return k;
        if (fkind == FD_KIND_PATH) {
                first = c->r->n_indexed; /* paths are not indexed: they sit at the end, by pid */
                n = c->r->n_owners - first;
        } else
                n = peer_tables_find_owners(c->r, fkind, other_end, &first);
        for (size_t i = first; i < first + n; i++) {
                const FdOwner *o = &c->r->owners[i];

                if (fkind == FD_KIND_PATH && !streq(o->path, path))
                        continue;
                if (o->pid == c->w->pid) {
                        self = true;
                        continue;
                }
                if (o->pid == last)
                        continue; /* one edge per process, its lowest fd */
                if (want_mode >= 0) {
                        int mode = peer_tables_fd_accmode(c->r, o->pid, o->fd);
                        if (mode >= 0 && mode != want_mode && mode != O_RDWR)
                                continue;
                }
                if (added >= PEERS_HOLDERS_MAX) {
                        c->chain->truncated = true;
                        break;
                }
                k = edge_add(c, kind, fd, inode, object, o->pid, o->fd, NULL);
                if (k < 0)
                        return k;
                last = o->pid;
                added++;
        }
        if (added == 0) {
                char why[160];
                if (!self && c->r->unreadable > 0)
                        snprintf(why, sizeof why, "%s among the processes we may read (%zu we may not)", nobody,
                                 c->r->unreadable);
                return edge_add(c, kind, fd, inode, object, 0, -1,
                                self ? "the other end is held by this process only"
                                     : c->r->unreadable > 0 ? why : nobody);
        }
        return 0;
}

static int edges_unix(EdgeCtx *c, int fd, const UnixSock *u) {
        _cleanup_free_ char *object = NULL;
        const UnixSock *peer;

        /* Connected, but still in the listener's backlog: its peer is a socket no process holds yet, and whoever
         * holds the listener is who should accept and answer. */
        if (u->peer == 0 && u->state != TCP_LISTEN &&
            (peer = unix_socks_find_listener(c->r->unix_socks, c->r->n_unix, u->inode))) {
                if (asprintf(&object, "unix socket %" PRIu64 " (not accepted yet by listening socket %" PRIu64 "%s%s)",
                             u->inode, peer->inode, peer->name ? " " : "", peer->name ?: "") < 0)
                        return -ENOMEM;
                return edges_to_holders(c, WAIT_KIND_UNIX, fd, u->inode, object, FD_KIND_SOCKET, peer->inode, NULL,
                                        -1, "no process holds the listener");
        }
        if (u->peer == 0) {
                if (asprintf(&object, "%s unix socket %" PRIu64 "%s%s", u->state == TCP_LISTEN ? "listening" : "unconnected",
                             u->inode, u->name ? " " : "", u->name ?: "") < 0)
                        return -ENOMEM;
                return edge_add(c, WAIT_KIND_OTHER, fd, u->inode, object, 0, -1,
                                u->state == TCP_LISTEN ? "waits for a new connection: no process in particular"
                                                       : "not connected to a peer");
        }
        peer = unix_socks_find(c->r->unix_socks, c->r->n_unix, u->peer);
        if (asprintf(&object, "unix socket %" PRIu64 " (peer %" PRIu64 "%s%s)", u->inode, u->peer,
                     peer && peer->name ? " " : "", peer && peer->name ? peer->name : "") < 0)
                return -ENOMEM;
        return edges_to_holders(c, WAIT_KIND_UNIX, fd, u->inode, object, FD_KIND_SOCKET, u->peer, NULL, -1,
                                "no process holds the other end (closed, or in a listener's backlog)");
}

/* Find the socket at the other end of S among the TCP/UDP sockets: its src is our dst and vice versa. */
static const InetSock *inet_find_peer(const InetSock *t, size_t n, const InetSock *s) {
        for (size_t i = 0; i < n; i++)
                if (t[i].sport == s->dport && t[i].dport == s->sport && t[i].family == s->family &&
                    memcmp(t[i].src, s->dst, 16) == 0 && memcmp(t[i].dst, s->src, 16) == 0 && &t[i] != s)
                        return &t[i];
        return NULL;
}

/* Who receives what S sends, when no socket is connected back to it: for TCP a listener on S's destination port
 * (the connection may still sit in its backlog, held by no fd), for UDP a socket bound to that address and port
 * and connected to nobody (a server answering with sendto()). */
static const InetSock *inet_find_listener(const InetSock *t, size_t n, const InetSock *s) {
        static const uint8_t any[16];

        for (size_t i = 0; i < n; i++)
                if ((s->protocol == IPPROTO_TCP ? t[i].state == TCP_LISTEN : t[i].dport == 0) &&
                    t[i].sport == s->dport && t[i].family == s->family && t[i].inode != 0 && &t[i] != s &&
                    (memcmp(t[i].src, s->dst, 16) == 0 || memcmp(t[i].src, any, 16) == 0))
                        return &t[i];
        return NULL;
}

static int edges_inet(EdgeCtx *c, int fd, const InetSock *s, const InetSock *table, size_t n) {
        WaitKind kind = s->protocol == IPPROTO_TCP ? WAIT_KIND_TCP : WAIT_KIND_UDP;
        char src[64], dst[64], object[160];
        const InetSock *peer;

        inet_sock_format(s->family, s->src, s->sport, src, sizeof src);
        if (s->state == TCP_LISTEN) {
                snprintf(object, sizeof object, "listening %s socket %s", kind == WAIT_KIND_TCP ? "tcp" : "udp", src);
                return edge_add(c, WAIT_KIND_OTHER, fd, s->inode, object, 0, -1,
                                "waits for a new connection: no process in particular");
        }
        inet_sock_format(s->family, s->dst, s->dport, dst, sizeof dst);
        snprintf(object, sizeof object, "%s %s -> %s", kind == WAIT_KIND_TCP ? "tcp" : "udp", src, dst);
        if (s->dport == 0)
                return edge_add(c, WAIT_KIND_OTHER, fd, s->inode, object, 0, -1, "not connected to a peer");
        if (!inet_sock_is_loopback(s->family, s->dst) && !inet_find_peer(table, n, s))
                return edge_add(c, kind, fd, s->inode, object, 0, -1, "the other end is on another host");
        peer = inet_find_peer(table, n, s);
        if (peer && peer->inode != 0)
                return edges_to_holders(c, kind, fd, s->inode, object, FD_KIND_SOCKET, peer->inode, NULL, -1,
                                        "no process holds the other end");
        /* TCP connected, but not accepted yet: whoever owns the listener is who should answer. UDP: whoever
         * owns the socket bound to the address we send to. */
        peer = inet_find_listener(table, n, s);
        if (peer) {
                char o2[200];
                snprintf(o2, sizeof o2, "%s (%s)", object,
                         kind == WAIT_KIND_TCP ? "not accepted yet" : "the socket bound there");
                return edges_to_holders(c, kind, fd, s->inode, o2, FD_KIND_SOCKET, peer->inode, NULL, -1,
                                        kind == WAIT_KIND_TCP ? "no process holds the listener"
                                                              : "no process holds the bound socket");
        }
        return edge_add(c, kind, fd, s->inode, object, 0, -1, "no local socket at the other end");
}

/* A socket fd: unix first, then TCP, then UDP. */
static int edges_socket(EdgeCtx *c, int fd, uint64_t inode) {
        const UnixSock *u;
        char object[64];
        int k;

        k = peer_tables_load_unix(c->r);
        if (k < 0)
                return k;
        u = unix_socks_find(c->r->unix_socks, c->r->n_unix, inode);
        if (u)
                return edges_unix(c, fd, u);
        for (uint8_t proto = IPPROTO_TCP;; proto = IPPROTO_UDP) {
                const InetSock *t;
                size_t n;

                k = peer_tables_load_inet(c->r, proto);
                if (k < 0)
                        return k;
                t = proto == IPPROTO_TCP ? c->r->tcp : c->r->udp;
                n = proto == IPPROTO_TCP ? c->r->n_tcp : c->r->n_udp;
                for (size_t i = 0; i < n; i++)
                        if (t[i].inode == inode)
                                return edges_inet(c, fd, &t[i], t, n);
                if (proto == IPPROTO_UDP)
                        break;
        }
        snprintf(object, sizeof object, "socket %" PRIu64, inode);
        return edge_add(c, WAIT_KIND_OTHER, fd, inode, object, 0, -1, "not a unix, TCP or UDP socket");
}

/* A pipe or FIFO: the holders of the other end (writers for a reader, readers for a writer). */
static int edges_pipe(EdgeCtx *c, int fd, uint64_t inode, const char *path) {
        int mode = peer_tables_fd_accmode(c->r, c->w->pid, fd), want;
        char object[4200];

        want = mode == O_RDONLY ? O_WRONLY : mode == O_WRONLY ? O_RDONLY : -1;
        if (!path) {
                snprintf(object, sizeof object, "pipe %" PRIu64 " (%s end)", inode,
                         mode == O_RDONLY ? "read" : mode == O_WRONLY ? "write" : "either");
                return edges_to_holders(c, WAIT_KIND_PIPE, fd, inode, object, FD_KIND_PIPE, inode, NULL, want,
                                        "no process holds the other end");
        }
        snprintf(object, sizeof object, "fifo %s (%s end)", path,
                 mode == O_RDONLY ? "read" : mode == O_WRONLY ? "write" : "either");
        return edges_to_holders(c, WAIT_KIND_FIFO, fd, inode, object, FD_KIND_PATH, 0, path, want,
                                "no other process has it open");
}

/* What one fd leads to. */
/* The slave side of a Unix98 pty: its index (minor of major 136, which modern kernels use for every index). */
#define PTY_SLAVE_MAJOR 136

/* Whether process PID's ptmx fd FD is the master of the pty whose slave is on devpts DEVPTS with index INDEX: the
 * index from its fdinfo, and the devpts instance from what the holder sees at /dev/pts (a container's own devpts
 * numbers its ptys from 0 too). */
static bool holds_pty_master(pid_t pid, int fd, dev_t devpts, uint64_t index) {
        char path[64];
        struct stat st;
        uint64_t v;

        if (peer_tables_fdinfo_field(pid, fd, "tty-index", 10, &v) < 0 || v != index)
                return false;
        snprintf(path, sizeof path, "/proc/%d/root/dev/pts", (int) pid);
        return stat(path, &st) >= 0 && st.st_dev == devpts;
}

/* A read or write on a terminal, the slave side of a pty: whoever holds its master side (a terminal emulator, sshd,
 * script, a container runtime) reads what it writes and writes what it reads. One edge per holder; a holder that is
 * stopped is said to be, and one that waits itself is where the chain goes on. */
static int edges_pty(EdgeCtx *c, int fd, const char *link, const struct stat *slave) {
        uint64_t index = minor(slave->st_rdev);
        size_t added = 0;
        pid_t last = 0;
        char object[128];
        int k;

        k = peer_tables_load_owners(c->r);
        if (k < 0)
                return k;
        snprintf(object, sizeof object, "terminal %.100s", link);
        for (size_t i = c->r->n_indexed; i < c->r->n_owners; i++) {
                const FdOwner *o = &c->r->owners[i];
                ThreadWait h;

                if (o->pid == last || (!streq(o->path, "/dev/ptmx") && !streq(o->path, "/dev/pts/ptmx")) ||
                    !holds_pty_master(o->pid, o->fd, slave->st_dev, index))
                        continue;
                if (added >= PEERS_HOLDERS_MAX) {
                        c->chain->truncated = true;
                        break;
                }
                k = edge_add(c, WAIT_KIND_PTY, fd, (uint64_t) slave->st_ino, object, o->pid, o->fd,
                             thread_wait_read(o->pid, o->pid, &h) >= 0 && (h.state == 'T' || h.state == 't')
                                     ? "the holder of its master side is stopped: nobody reads or writes it"
                                     : NULL);
                if (k < 0)
                        return k;
                last = o->pid;
                added++;
        }
        if (added > 0)
                return 0;
        return edge_add(c, WAIT_KIND_PTY, fd, (uint64_t) slave->st_ino, object, 0, -1,
                        c->r->unreadable > 0 ? "no process we may read holds its master side"
                                             : "no process holds its master side");
}

static int edges_fd(EdgeCtx *c, int fd) {
        char link[4097];
        uint64_t inode;
        FdKind kind;
        struct stat st;
        int k;

        k = peer_tables_fd_link(c->r, c->w->pid, fd, link, sizeof link);
        if (k < 0) {
                char object[32];
                snprintf(object, sizeof object, "fd %d", fd);
                return k == -ESRCH && c->multiplexed ? 0 /* a stale entry of an epoll set */
                                                      : edge_add(c, WAIT_KIND_OTHER, fd, 0, object, 0, -1,
                                                                 k == -ESRCH ? "closed" : "unreadable");
        }
        kind = peer_tables_fd_link_parse(link, &inode);
        switch (kind) {
        case FD_KIND_SOCKET:
                return edges_socket(c, fd, inode);
        case FD_KIND_PIPE:
                return edges_pipe(c, fd, inode, NULL);
        case FD_KIND_PATH:
                if (link[0] == '/' && fd_stat(c->w->pid, fd, &st) >= 0) {
                        if (S_ISFIFO(st.st_mode))
                                return edges_pipe(c, fd, (uint64_t) st.st_ino, link);
                        if (S_ISCHR(st.st_mode) && major(st.st_rdev) == PTY_SLAVE_MAJOR)
                                return edges_pty(c, fd, link, &st);
                }
                return edge_add(c, WAIT_KIND_OTHER, fd, 0, link, 0, -1, "leads to no other process");
        }
        return 0;
}

/* ---- locks polled for: F_SETLK or flock(LOCK_NB) failing, a sleep, again (SQLite's busy handler) ---- */

/* Whether lock L (another owner's, on the same file) conflicts with attempt A: the same family (flock() locks are
 * their own; POSIX and OFD locks conflict with each other), one of the two exclusive, the byte ranges overlapping.
 * A range from the file position or its end (SEEK_CUR, SEEK_END) is taken as the whole file: the offset the kernel
 * resolved it against is not known here. */
static bool lock_conflicts(const LockLine *l, const LockAttempt *a) {
        uint64_t s = 0, e = UINT64_MAX;

        if ((a->nr == __NR_flock) != streq(l->type, "FLOCK") || (!a->write && !l->write))
                return false;
        if (a->nr == __NR_fcntl && a->whence == SEEK_SET && a->start >= 0) {
                if (a->len > 0) {
                        s = (uint64_t) a->start;
                        e = (uint64_t) a->start + (uint64_t) a->len - 1;
                } else if (a->len == 0)
                        s = (uint64_t) a->start;
                else if (a->start + a->len >= 0) {
                        s = (uint64_t) (a->start + a->len);
                        e = (uint64_t) a->start - 1;
                }
        }
        return s <= l->end && l->start <= e;
}

/* "lock /var/lib/x.db, retried: F_SETLK read bytes 1073741824-1073741824 = -EAGAIN" */
static void lock_retry_object(const LockAttempt *a, const char *path, char *buf, size_t size) {
        const char *err = strerrorname_np((int) -a->result) ?: "?";
        char range[64] = "";

        if (a->nr == __NR_flock) {
                snprintf(buf, size, "flock %s, retried: flock(%s|LOCK_NB) = -%s", path,
                         a->write ? "LOCK_EX" : "LOCK_SH", err);
                return;
        }
        if (a->whence != SEEK_SET)
                snprintf(range, sizeof range, "from %s %+" PRIi64 ", length %" PRIi64,
                         a->whence == SEEK_CUR ? "the file position" : "the end", a->start, a->len);
        else if (a->len == 0)
                snprintf(range, sizeof range, "bytes %" PRIi64 "-EOF", a->start);
        else if (a->len > 0)
                snprintf(range, sizeof range, "bytes %" PRIi64 "-%" PRIi64, a->start, a->start + a->len - 1);
        else
                snprintf(range, sizeof range, "bytes %" PRIi64 "-%" PRIi64, a->start + a->len, a->start - 1);
        snprintf(buf, size, "lock %s, retried: %s %s %s = -%s", path, a->cmd == F_OFD_SETLK ? "F_OFD_SETLK" : "F_SETLK",
                 a->write ? "write" : "read", range, err);
}

/* Whether /proc/locks line L is a lock on the file ST. */
static bool lock_on(const LockLine *l, const struct stat *st) {
        return l->inode == (uint64_t) st->st_ino && makedev(l->major, l->minor) == st->st_dev;
}

/* The edges of a thread held up by file locks on its FD: one to each process holding a lock that stops it, as
 * /proc/locks has them now. A thread waiting in flock() or F_SETLKW (RETRY NULL) is stopped by the lock its own
 * "->" line names; a thread polling for a lock (RETRY, its last try) by every lock that conflicts with the one it
 * asks for. An OFD lock belongs to an open file, not a process: it leads to whoever else has the file open. */
static int edges_lock(EdgeCtx *c, WaitKind kind, int fd, const LockAttempt *retry) {
        char link[4097], object[4300];
        pid_t seen[PEERS_HOLDERS_MAX];
        const LockLine *waiter = NULL;
        size_t added = 0;
        bool ofd = false;
        struct stat st;
        int k;

        k = peer_tables_fd_link(c->r, c->w->pid, fd, link, sizeof link);
        if (k >= 0)
                k = fd_stat(c->w->pid, fd, &st);
        if (k < 0)
                return k;
        if (retry)
                lock_retry_object(retry, link, object, sizeof object);
        else
                snprintf(object, sizeof object, "%s %s", kind == WAIT_KIND_FLOCK ? "flock" : "lock", link);
        k = peer_tables_load_locks(c->r);
        if (k < 0)
                return edge_add(c, kind, fd, st.st_ino, object, 0, -1, "/proc/locks is unreadable");
        for (size_t i = 0; !retry && !waiter && i < c->r->n_locks; i++)
                if (c->r->locks[i].waiter && c->r->locks[i].pid == c->w->pid && lock_on(&c->r->locks[i], &st))
                        waiter = &c->r->locks[i];
        for (size_t i = 0; i < c->r->n_locks; i++) {
                const LockLine *l = &c->r->locks[i];
                bool dup = false;

                if (l->waiter || !lock_on(l, &st) ||
                    (retry ? !lock_conflicts(l, retry) : !waiter || l->id != waiter->id))
                        continue;
                if (l->pid <= 0) {
                        ofd = true;
                        continue;
                }
                if (l->pid == c->w->pid)
                        continue;
                for (size_t j = 0; j < added; j++)
                        dup = dup || seen[j] == l->pid;
                if (dup)
                        continue;
                if (added >= PEERS_HOLDERS_MAX) {
                        c->chain->truncated = true;
                        break;
                }
                k = edge_add(c, kind, fd, st.st_ino, object, l->pid, -1, NULL);
                if (k < 0)
                        return k;
                seen[added++] = l->pid;
        }
        if (added > 0)
                return 0;
        if (ofd)
                return edges_to_holders(c, WAIT_KIND_OFD_LOCK, fd, st.st_ino, object, FD_KIND_PATH, 0, link, -1,
                                        "no other process has the locked file open");
        return edge_add(c, kind, fd, st.st_ino, object, 0, -1,
                        retry ? "no conflicting lock in /proc/locks now: released since the try"
                              : "no holder found in /proc/locks");
}

bool peers_syscall_is_sleep(const ProcSyscall *sc) {
        if (sc->kind != PROC_SYSCALL_BLOCKED)
                return false;
        switch (sc->nr) {
        case __NR_nanosleep: case __NR_clock_nanosleep: case __NR_restart_syscall:
                return true;
#ifdef __NR_poll /* x86-64's; aarch64 has only ppoll and pselect6 */
        case __NR_poll:
                return sc->args[1] == 0; /* no fds: a timeout */
        case __NR_select:
                return sc->args[0] == 0;
#endif
        case __NR_ppoll:
                return sc->args[1] == 0;
        case __NR_pselect6:
                return sc->args[0] == 0;
        default:
                return false;
        }
}

int peers_lock_suspect(PeerResolver *r, pid_t pid, int *ret_fd, pid_t *ret_holder) {
        _cleanup_close_ int dirfd = -EBADF;
        _cleanup_free_ int *fds = NULL;
        size_t n_fds = 0;
        bool others = false;
        int k;

        k = peer_tables_load_locks(r);
        if (k < 0)
                return k;
        for (size_t i = 0; i < r->n_locks && !others; i++)
                others = !r->locks[i].waiter && r->locks[i].pid != pid;
        if (!others)
                return 0; /* the common case, and one read of /proc/locks */
        k = proc_open_dir(pid, 0, &dirfd);
        if (k >= 0)
                k = proc_list_numeric(dirfd, "fd", &fds, &n_fds);
        if (k < 0)
                return k;
        for (size_t f = 0; f < MIN(n_fds, (size_t) PEERS_SUSPECT_FDS_MAX); f++) {
                struct stat st;

                if (fd_stat(pid, fds[f], &st) < 0 || !S_ISREG(st.st_mode))
                        continue;
                for (size_t i = 0; i < r->n_locks; i++) {
                        const LockLine *l = &r->locks[i];

                        if (l->waiter || l->pid == pid || !lock_on(l, &st))
                                continue;
                        *ret_fd = fds[f];
                        *ret_holder = MAX(l->pid, 0);
                        return 1;
                }
        }
        return 0;
}

/* The children a wait4()/waitid()/vfork() waits for: every thread's "children" file (a child belongs to the thread
 * that forked it, but any thread may reap it). ONLY > 0 keeps that child. NONE_EDGE: with no child, an edge that
 * says so (a wait4() that waits for nobody); without it, nothing. */
static int edges_children(EdgeCtx *c, pid_t only, const char *why, bool none_edge) {
        _cleanup_close_ int dirfd = -EBADF;
        _cleanup_free_ int *tids = NULL;
        size_t n_tids = 0, added = 0;
        char object[64];
        int k;

        k = proc_open_dir(c->w->pid, 0, &dirfd);
        if (k < 0)
                return k;
        k = proc_list_numeric(dirfd, "task", &tids, &n_tids);
        if (k < 0)
                return k;
        for (size_t i = 0; i < n_tids; i++) {
                char name[48], buf[4096];
                ssize_t n;

                snprintf(name, sizeof name, "task/%d/children", tids[i]);
                n = proc_read_small(dirfd, name, buf, sizeof buf);
                if (n <= 0)
                        continue;
                for (char *tok, *save = NULL, *p = buf; (tok = strtok_r(p, " \n", &save)); p = NULL) {
                        unsigned child;
                        if (safe_atou(tok, &child) < 0 || (only > 0 && (pid_t) child != only))
                                continue;
                        if (added >= PEERS_HOLDERS_MAX) {
                                c->chain->truncated = true;
                                return 0;
                        }
                        snprintf(object, sizeof object, "%s %u", why, child);
                        k = edge_add(c, WAIT_KIND_CHILD, -1, 0, object, (pid_t) child, -1, NULL);
                        if (k < 0)
                                return k;
                        added++;
                }
        }
        if (added == 0 && none_edge) {
                snprintf(object, sizeof object, only > 0 ? "child %d" : "any child", (int) only);
                return edge_add(c, WAIT_KIND_CHILD, -1, 0, object, 0, -1, "no such child");
        }
        return 0;
}

/* Read COUNT bytes at ADDR of the thread's process. */
static int read_target(pid_t pid, uint64_t addr, void *buf, size_t count) {
        return proc_errno(proc_mem_read(pid, addr, buf, count));
}

/* glibc's pthread_mutex_t (x86-64, aarch64 and the other 64-bit ABIs alike for these fields): the futex word, a
 * recursion count, the owner's TID, the number of users, the kind. */
typedef struct GlibcMutex {
        int32_t lock;
        uint32_t count;
        int32_t owner;
        uint32_t nusers;
        int32_t kind;
} GlibcMutex;

#define GLIBC_MUTEX_KIND_TYPE_MASK 3            /* normal, recursive, errorcheck, adaptive */
#define GLIBC_MUTEX_ROBUST 16
#define GLIBC_MUTEX_PI 32
#define GLIBC_MUTEX_PP 64
#define GLIBC_MUTEX_PSHARED 128
#define GLIBC_MUTEX_ELISION 256                 /* lock elision flags, set by glibc on its own */
#define GLIBC_MUTEX_NO_ELISION 512

/* The process TID belongs to, 0 when there is no such thread. */
static pid_t thread_group_of(pid_t tid) {
        _cleanup_close_ int dirfd = -EBADF;
        ProcStatus status;
        char buf[4096];
        ssize_t n;

        if (proc_open_dir(tid, 0, &dirfd) < 0)
                return 0;
        n = proc_read_small(dirfd, "status", buf, sizeof buf);
        return n >= 0 && proc_parse_status(buf, (size_t) n, &status) >= 0 ? status.tgid : 0;
}

/* An edge from a thread waiting for the mutex at ADDR, held by thread OWNER (the TID read from the lock): to the
 * owner in this process, in another one (a process-shared mutex), or to nobody when the owner is gone. */
static int edge_mutex(EdgeCtx *c, const char *what, uint64_t addr, pid_t owner, bool pshared) {
        char object[64], reason[96];
        pid_t tgid;

        snprintf(object, sizeof object, "%s 0x%" PRIx64, what, addr);
        tgid = owner > 0 ? thread_group_of(owner) : 0;
        if (tgid == c->w->pid || (tgid > 0 && pshared)) {
                WaitEdge *e;
                int k = edge_add(c, WAIT_KIND_MUTEX, -1, 0, object, tgid, -1, NULL);

                if (k < 0)
                        return k;
                e = &c->chain->edges[c->chain->n_edges - 1];
                e->peer_tid = owner;
                e->address = addr;
                return 0;
        }
        if (owner <= 0)
                snprintf(reason, sizeof reason, "owner unknown (the lock names none)");
        else if (tgid == 0)
                snprintf(reason, sizeof reason, "held by TID %d, which exited", (int) owner);
        else
                snprintf(reason, sizeof reason, "owner unknown (TID %d is a thread of process %d, and the mutex is not "
                         "process-shared)", (int) owner, (int) tgid);
        if (edge_add(c, WAIT_KIND_MUTEX, -1, 0, object, 0, -1, reason) < 0)
                return -ENOMEM;
        c->chain->edges[c->chain->n_edges - 1].owner_exited = owner > 0 && tgid == 0;
        c->chain->edges[c->chain->n_edges - 1].address = addr;
        return 0;
}

/* glibc's pthread_rwlock_t (2.25 and later, 64-bit ABIs): the futex words, the TID of the writer holding it, whether
 * it is process-shared, padding that stays 0, and its flags (the preference: 0 to 2). */
typedef struct GlibcRwlock {
        uint32_t readers;
        uint32_t writers;
        uint32_t wrphase_futex;
        uint32_t writers_futex;
        uint32_t pad3, pad4;
        int32_t cur_writer;
        int32_t shared;
        int8_t rwelision;
        uint8_t pad1[7];
        uint64_t pad2;
        uint32_t flags;
} GlibcRwlock;

#define GLIBC_RWLOCK_WRPHASE 1U
#define GLIBC_RWLOCK_WRLOCKED 2U

/* A FUTEX_WAIT_BITSET on one of a write-locked rwlock's futex words (readers and writers wait on __wrphase_futex,
 * writers also on __writers_futex): the writer holding it, when every field agrees. Condition variables and
 * semaphores wait with the same operation: a layout that is not exactly a write-locked rwlock is not taken. */
static int futex_rwlock(pid_t pid, uint64_t addr, bool private, PeersMutex *ret) {
        static const size_t offsets[] = { offsetof(GlibcRwlock, wrphase_futex), offsetof(GlibcRwlock, writers_futex) };

        for (size_t i = 0; i < ELEMENTSOF(offsets); i++) {
                GlibcRwlock rw;
                uint64_t base = addr - offsets[i];
                int k;

                if (addr < offsets[i])
                        continue;
                k = read_target(pid, base, &rw, sizeof rw);
                if (k == -ESRCH)
                        return k;
                if (k < 0)
                        continue;
                if ((rw.readers & (GLIBC_RWLOCK_WRPHASE | GLIBC_RWLOCK_WRLOCKED)) !=
                            (GLIBC_RWLOCK_WRPHASE | GLIBC_RWLOCK_WRLOCKED) ||
                    rw.cur_writer <= 0 || (rw.shared != 0 && rw.shared != 1) || rw.shared == private ||
                    rw.pad3 != 0 || rw.pad4 != 0 || rw.pad2 != 0 || rw.flags > 2)
                        continue;
                *ret = (PeersMutex) { .what = "rwlock", .address = base, .owner = rw.cur_writer,
                                      .pshared = rw.shared };
                return 1;
        }
        return 0;
}

int peers_futex_mutex(pid_t pid, const ProcSyscall *sc, PeersMutex *ret) {
        uint64_t addr = sc->args[0];
        uint64_t cmd = sc->args[1] & (uint64_t) (uint32_t) FUTEX_CMD_MASK;
        bool private = sc->args[1] & FUTEX_PRIVATE_FLAG;
        uint32_t tid_mask = FUTEX_TID_MASK;
        GlibcMutex m;
        int k;

        if (sc->kind != PROC_SYSCALL_BLOCKED || sc->nr != __NR_futex || addr == 0 || addr % 4 != 0)
                return 0;
        *ret = (PeersMutex) { .address = addr };
        if (cmd == FUTEX_LOCK_PI || cmd == FUTEX_LOCK_PI2) {
                uint32_t word;

                k = read_target(pid, addr, &word, sizeof word);
                if (k < 0)
                        return k == -ESRCH ? k : 0;
                ret->what = "PI mutex";
                ret->owner = (pid_t) (word & tid_mask);
                ret->pshared = !private;
                return 1;
        }
        if (cmd == FUTEX_WAIT_BITSET)                   /* rwlocks, and condition variables and semaphores */
                return futex_rwlock(pid, addr, private, ret);
        if (cmd != FUTEX_WAIT)
                return 0;
        k = read_target(pid, addr, &m, sizeof m);
        if (k < 0)
                return k == -ESRCH ? k : 0;
        /* The layout says it is a mutex: a known kind, no flag that takes another path (PI, PP). */
        if ((m.kind & ~(GLIBC_MUTEX_KIND_TYPE_MASK | GLIBC_MUTEX_ROBUST | GLIBC_MUTEX_PSHARED |
                        GLIBC_MUTEX_ELISION | GLIBC_MUTEX_NO_ELISION)) != 0)
                return 0;
        ret->pshared = m.kind & GLIBC_MUTEX_PSHARED;
        if (m.kind & GLIBC_MUTEX_ROBUST) {
                /* The word holds the owner's TID, with FUTEX_WAITERS; the waiter waits for that value. */
                if ((uint32_t) m.lock == 0 || ((uint32_t) m.lock & tid_mask) != ((uint32_t) m.owner & tid_mask))
                        return 0;
                ret->what = "robust mutex";
                ret->owner = (pid_t) ((uint32_t) m.lock & tid_mask);
                return 1;
        }
        /* The low-level lock: it waits while the word is 2 (locked, with waiters). */
        if (sc->args[2] != 2 || m.lock == 0 || m.owner <= 0 || m.nusers == 0)
                return 0;
        ret->what = "mutex";
        ret->owner = m.owner;
        return 1;
}

int peers_futex_join(pid_t pid, pid_t tid, const ProcSyscall *sc, pid_t *ret) {
        uint64_t cmd = sc->args[1] & (uint64_t) (uint32_t) FUTEX_CMD_MASK;
        pid_t joined = (pid_t) sc->args[2];
        uint32_t word;
        int k;

        if (sc->kind != PROC_SYSCALL_BLOCKED || sc->nr != __NR_futex || sc->args[0] == 0 || sc->args[0] % 4 != 0 ||
            (sc->args[1] & FUTEX_PRIVATE_FLAG) || (cmd != FUTEX_WAIT && cmd != FUTEX_WAIT_BITSET) ||
            sc->args[2] == 0 || sc->args[2] > INT32_MAX || joined == tid)
                return 0;
        k = read_target(pid, sc->args[0], &word, sizeof word);
        if (k < 0)
                return k == -ESRCH ? k : 0;
        if ((pid_t) word != joined || thread_group_of(joined) != pid)
                return 0;
        *ret = joined;
        return 1;
}

bool peers_thread_timeslices(pid_t pid, pid_t tid, uint64_t *ret) {
        _cleanup_close_ int dirfd = -EBADF;
        ProcSchedstat st;
        char buf[128];
        ssize_t n;

        if (proc_open_dir(pid, tid, &dirfd) < 0)
                return false;
        n = proc_read_small(dirfd, "schedstat", buf, sizeof buf);
        if (n < 0 || proc_parse_schedstat(buf, (size_t) n, &st) < 0)
                return false;
        *ret = st.timeslices;
        return true;
}

/* A thread that seems to wait for a mutex it holds: its wait and the lock were read at two moments, and on a busy
 * lock it may have got the lock in between. It does wait for itself only if it still does, read afresh, and did
 * not run meanwhile. */
static bool waits_for_itself(const ThreadWait *w, uint64_t address) {
        ThreadWait again;
        PeersMutex m;
        uint64_t before, after;
        bool counted = peers_thread_timeslices(w->pid, w->tid, &before);

        if (thread_wait_read(w->pid, w->tid, &again) < 0 || peers_futex_mutex(w->pid, &again.syscall, &m) != 1 ||
            m.address != address || m.owner != w->tid)
                return false;
        return !counted || (peers_thread_timeslices(w->pid, w->tid, &after) && after == before);
}

/* A join: an edge to the thread it waits to exit, in its own process. */
static int edge_join(EdgeCtx *c, uint64_t addr, pid_t joined) {
        char object[64];
        WaitEdge *e;
        int k;

        snprintf(object, sizeof object, "the exit of thread %d", (int) joined);
        k = edge_add(c, WAIT_KIND_JOIN, -1, 0, object, c->w->pid, -1, NULL);
        if (k < 0)
                return k;
        e = &c->chain->edges[c->chain->n_edges - 1];
        e->peer_tid = joined;
        e->address = addr;
        return 0;
}

/* A futex wait on a glibc mutex is an edge to its holder (see peers_futex_mutex()). Any other futex wait (a
 * condition variable, a semaphore, glibc's internal locks, another library's own) is not: nothing in it names an
 * owner, and we do not guess one. */
/* A wait that a language runtime explains (RuntimeWaitFn): its global lock to its holder, a lock that records its
 * owner to the owner, a lock that records none to nobody, a join to the thread to exit. Futex waits are asked; so
 * is any blocked call (ANY_CALL, FUTEX 0 when not a futex wait) of the runtimes that park threads in calls of their
 * own. */
static int edges_runtime(EdgeCtx *c, const ProcSyscall *sc, bool any_call) {
        PeerResolver *r = c->r;
        const char *reason = NULL;
        const RuntimeTraits *tr;
        char object[64], why[128];
        RuntimeWait rw;
        WaitEdge *e;
        int k;

        k = peer_resolver_runtime_wait(r, c->w->pid, c->w->tid, sc->nr == __NR_futex ? sc->args[0] : 0, any_call, &rw);
        if (k <= 0 || rw.kind == RUNTIME_WAIT_NONE || rw.kind == RUNTIME_WAIT_CONDITION)
                return k;
        tr = &runtime_traits[rw.runtime];
        if (rw.kind == RUNTIME_WAIT_JOIN) {
                /* Its owner is the thread to exit: found by its tstate lock where the version keeps it. */
                if (rw.owner <= 0 || thread_group_of(rw.owner) != c->w->pid) {
                        snprintf(why, sizeof why, "it waits for a thread to exit (%s)", tr->join_call ?: "join");
                        return edge_add(c, WAIT_KIND_OTHER, -1, 0, tr->join_call ?: "join", 0, -1, why);
                }
                k = edge_join(c, sc->args[0], rw.owner);
                if (k >= 0) {
                        c->chain->edges[c->chain->n_edges - 1].runtime = true;
                        c->chain->edges[c->chain->n_edges - 1].runtime_kind = rw.runtime;
                }
                return k;
        }
        if (rw.kind == RUNTIME_WAIT_GIL)
                snprintf(object, sizeof object, "the %s", tr->global_lock ?: "global lock");
        else
                snprintf(object, sizeof object, "%s 0x%" PRIx64,
                         (rw.kind == RUNTIME_WAIT_RLOCK ? tr->owned_lock_class : tr->lock_class) ?: "lock", rw.object);
        if (rw.owner > 0 && thread_group_of(rw.owner) == c->w->pid) {
                ThreadWait h;

                /* The classic whole-process hang: C code that kept the GIL and blocked. */
                if (rw.kind == RUNTIME_WAIT_GIL && thread_wait_read(c->w->pid, rw.owner, &h) == 0 &&
                    h.syscall.kind == PROC_SYSCALL_BLOCKED) {
                        snprintf(why, sizeof why, "it holds the %s while blocked in a syscall: no other thread runs %s",
                                 tr->global_lock ?: "global lock", tr->language ?: "its code");
                        reason = why;
                }
        } else {
                rw.owner = 0;
                if (rw.kind == RUNTIME_WAIT_GIL)
                        snprintf(why, sizeof why, "no thread held the %s as we looked", tr->global_lock ?: "lock");
                else if (rw.kind == RUNTIME_WAIT_RLOCK)
                        snprintf(why, sizeof why, "owner unknown: the %s names no live thread",
                                 tr->owned_lock_class ?: "lock");
                else
                        snprintf(why, sizeof why, "no owner recorded (%s): see each waiter's %s line",
                                 tr->lock_class ?: "lock", tr->language ?: "runtime");
                reason = why;
        }
        k = edge_add(c, rw.kind == RUNTIME_WAIT_GIL ? WAIT_KIND_GIL : WAIT_KIND_MUTEX, -1, 0, object,
                     rw.owner > 0 ? c->w->pid : 0, -1, reason);
        if (k < 0)
                return k;
        e = &c->chain->edges[c->chain->n_edges - 1];
        e->peer_tid = rw.owner;
        e->address = sc->args[0];
        e->runtime = true;
        e->runtime_kind = rw.runtime;
        return 0;
}

static int edges_futex(EdgeCtx *c, const ProcSyscall *sc) {
        PeersMutex m;
        pid_t joined;
        int k = peers_futex_mutex(c->w->pid, sc, &m);

        if (k == 0) {
                k = peers_futex_join(c->w->pid, c->w->tid, sc, &joined);
                if (k != 0)
                        return k < 0 ? k : edge_join(c, sc->args[0], joined);
                return edges_runtime(c, sc, false);
        }
        if (k < 0)
                return k;
        if (m.owner == c->w->tid && !waits_for_itself(c->w, m.address))
                return 0; /* it got the lock while we looked: no wait any more */
        return edge_mutex(c, m.what, m.address, m.owner, m.pshared);
}

static int edges_poll(EdgeCtx *c, uint64_t addr, uint64_t nfds) {
        struct pollfd fds[PEERS_WAIT_FDS_MAX];
        size_t n = MIN(nfds, (uint64_t) PEERS_WAIT_FDS_MAX);
        int k;

        if (nfds > PEERS_WAIT_FDS_MAX)
                c->chain->truncated = true;
        if (n == 0)
                return 0;
        k = read_target(c->w->pid, addr, fds, n * sizeof *fds);
        if (k < 0)
                return k;
        c->multiplexed = true;
        for (size_t i = 0; i < n; i++)
                if (fds[i].fd >= 0 && (k = edges_fd(c, fds[i].fd)) < 0)
                        return k;
        return 0;
}

static int edges_select(EdgeCtx *c, uint64_t nfds, const uint64_t sets[3]) {
        unsigned seen = 0;
        int k;

        nfds = MIN(nfds, (uint64_t) FD_SETSIZE);
        c->multiplexed = true;
        for (size_t s = 0; s < 3; s++) {
                fd_set set;

                if (sets[s] == 0)
                        continue;
                k = read_target(c->w->pid, sets[s], &set, DIV_ROUND_UP(nfds, 64) * 8);
                if (k < 0)
                        return k;
                for (int fd = 0; fd < (int) nfds; fd++) {
                        if (!FD_ISSET(fd, &set))
                                continue;
                        if (seen++ >= PEERS_WAIT_FDS_MAX) {
                                c->chain->truncated = true;
                                return 0;
                        }
                        k = edges_fd(c, fd);
                        if (k < 0)
                                return k;
                }
        }
        return 0;
}

/* An epoll wait: the fds of the set, from the epoll fd's fdinfo ("tfd:        5 events: …"). */
static int edges_epoll(EdgeCtx *c, int epfd) {
        _cleanup_close_ int dirfd = -EBADF;
        _cleanup_free_ char *buf = NULL;
        int fds[PEERS_WAIT_FDS_MAX];
        char name[32];
        size_t size, n;
        int k;

        k = proc_open_dir(c->w->pid, 0, &dirfd);
        if (k < 0)
                return k;
        snprintf(name, sizeof name, "fdinfo/%d", epfd);
        k = proc_read_full(dirfd, name, 1024 * 1024, &buf, &size);
        if (k < 0)
                return k;
        c->multiplexed = true;
        n = proc_parse_fdinfo_tfds(buf, size, fds, ELEMENTSOF(fds));
        for (size_t i = 0; i < MIN(n, ELEMENTSOF(fds)); i++) {
                k = edges_fd(c, fds[i]);
                if (k < 0)
                        return k;
        }
        if (n > ELEMENTSOF(fds))
                c->chain->truncated = true;
        return 0;
}

/* ---- FUSE ---- */

/* Whether WCHAN is where a thread waits for a FUSE daemon: for the answer to its request, for the connection's
 * initialisation or for room among the requests. Not the daemon's own wait for a request (fuse_dev_do_read). */
static bool wchan_is_fuse_request(const char *wchan) {
        return startswith(wchan, "request_wait_answer") ||
               (startswith(wchan, "fuse_") && !startswith(wchan, "fuse_dev_"));
}

/* The path argument of the path-based calls a FUSE request can come from, and the dirfd argument of the *at()
 * ones (-1: none, relative to the working directory). -1 for other calls. */
static int fuse_path_arg(int64_t nr, int *ret_dirfd_arg) {
        static const struct {
                int64_t nr;
                int path, dirfd;
        } calls[] = {
#ifdef __NR_open /* the calls without a dirfd that only x86-64 keeps (aarch64 has their *at() forms alone) */
                { __NR_open, 0, -1 }, { __NR_stat, 0, -1 }, { __NR_lstat, 0, -1 }, { __NR_access, 0, -1 },
                { __NR_readlink, 0, -1 }, { __NR_mkdir, 0, -1 }, { __NR_unlink, 0, -1 }, { __NR_rmdir, 0, -1 },
                { __NR_rename, 0, -1 }, { __NR_creat, 0, -1 },
#endif
                { __NR_chdir, 0, -1 }, { __NR_execve, 0, -1 }, { __NR_truncate, 0, -1 },
                { __NR_getxattr, 0, -1 }, { __NR_lgetxattr, 0, -1 }, { __NR_listxattr, 0, -1 },
                { __NR_llistxattr, 0, -1 }, { __NR_statfs, 0, -1 }, { __NR_fchmodat, 1, 0 }, { __NR_fchownat, 1, 0 },
                { __NR_openat, 1, 0 }, { __NR_newfstatat, 1, 0 }, { __NR_statx, 1, 0 }, { __NR_faccessat, 1, 0 },
                { __NR_faccessat2, 1, 0 }, { __NR_readlinkat, 1, 0 }, { __NR_mkdirat, 1, 0 },
                { __NR_unlinkat, 1, 0 }, { __NR_renameat, 1, 0 }, { __NR_renameat2, 1, 0 }, { __NR_openat2, 1, 0 },
                { __NR_execveat, 1, 0 },
        };

        for (size_t i = 0; i < ELEMENTSOF(calls); i++)
                if (calls[i].nr == nr) {
                        *ret_dirfd_arg = calls[i].dirfd;
                        return calls[i].path;
                }
        return -1;
}

/* The NUL-terminated string at ADDR of PID into BUF (SIZE bytes), read a page at most at a time so that a string
 * near the end of a mapping reads too. */
static int read_target_string(pid_t pid, uint64_t addr, char *buf, size_t size) {
        size_t got = 0;

        while (got + 1 < size) {
                size_t chunk = MIN(4096 - (size_t) ((addr + got) % 4096), size - 1 - got);
                int k = read_target(pid, addr + got, buf + got, chunk);

                if (k < 0)
                        return k;
                if (memchr(buf + got, '\0', chunk))
                        return 0;
                got += chunk;
        }
        return -ENAMETOOLONG;
}

/* The path the call of thread W names, as its process sees it (made absolute with its working directory or its
 * dirfd, as readlink() of /proc names them: without asking any file system) into BUF. -ENOENT when its call names
 * no path, -errno when the path could not be read. */
static int call_path(const ThreadWait *w, char *buf, size_t size) {
        const ProcSyscall *sc = &w->syscall;
        char path[PATH_MAX], base[PATH_MAX], link[64];
        int arg, dirfd_arg, dirfd, k;
        ssize_t n;

        arg = fuse_path_arg(sc->nr, &dirfd_arg);
        if (arg < 0)
                return -ENOENT;
        k = read_target_string(w->pid, sc->args[arg], path, sizeof path);
        if (k < 0)
                return k;
        if (path[0] == '/') {
                snprintf(buf, size, "%s", path);
                return 0;
        }
        dirfd = dirfd_arg >= 0 ? (int) (int32_t) sc->args[dirfd_arg] : AT_FDCWD;
        if (dirfd == AT_FDCWD)
                snprintf(link, sizeof link, "/proc/%d/cwd", (int) w->pid);
        else
                snprintf(link, sizeof link, "/proc/%d/fd/%d", (int) w->pid, dirfd);
        n = readlink(link, base, sizeof base - 1);
        if (n < 0)
                n = 0;
        base[n] = '\0';
        snprintf(buf, size, "%s/%s", base, path);
        return 0;
}

/* The FUSE mount of PID's mount table that is mount MNT_ID (>= 0), or else that holds PATH (the longest mount point
 * that is a prefix of it, at a component boundary), or else whose connection is CONNECTION (> 0). Paths are as PID
 * sees them. 1 when found, 0 when that mount is not FUSE or there is none. Nothing here touches a FUSE file. */
static int fuse_mount_find(pid_t pid, int mnt_id, const char *path, unsigned connection, FuseMount *ret) {
        _cleanup_free_ FuseMount *mounts = NULL;
        const FuseMount *found = NULL;
        size_t n = 0;
        int k;

        k = fuse_mounts_load(pid, &mounts, &n);
        if (k < 0)
                return k;
        if (mnt_id < 0 && path)
                found = fuse_mounts_by_path(mounts, n, path);
        for (size_t i = 0; !found && (mnt_id >= 0 || !path) && i < n; i++)
                if (mnt_id >= 0 ? mounts[i].mnt_id == mnt_id : fuse_mount_connection(&mounts[i]) == connection)
                        found = &mounts[i];
        if (found)
                *ret = *found;
        return !!found;
}

/* The connection a thread's FUSE request is on: the mount of the fd or path its call names, else the one
 * connection with requests waiting. */
static int fuse_request_mount(EdgeCtx *c, int fd, FuseMount *ret) {
        const ProcSyscall *sc = &c->w->syscall;
        char full[2 * PATH_MAX];
        int dirfd_arg, k;
        uint64_t mnt_id;

        if (fd < 0 && sc->args[0] <= INT32_MAX && fuse_path_arg(sc->nr, &dirfd_arg) < 0)
                fd = (int) sc->args[0];  /* fsync, getdents64, ioctl, fstat…: the fd comes first */
        if (fd >= 0 && peer_tables_fdinfo_field(c->w->pid, fd, "mnt_id", 10, &mnt_id) >= 0 && mnt_id <= INT32_MAX &&
            fuse_mount_find(c->w->pid, (int) mnt_id, NULL, 0, ret) > 0)
                return 1;
        if (call_path(c->w, full, sizeof full) >= 0) {
                k = fuse_mount_find(c->w->pid, -1, full, 0, ret);
                if (k != 0)
                        return k;
        }
        /* The call names nothing we can read: if one connection has requests waiting, it is that one. */
        {
                _cleanup_closedir_ DIR *d = opendir("/sys/fs/fuse/connections");
                unsigned only = 0, busy = 0;
                struct dirent *de;

                while (d && (de = readdir(d))) {
                        char p[PATH_MAX], buf[32];
                        const char *q = buf;
                        uint64_t id, waiting;
                        ssize_t n;

                        if (safe_atou64(de->d_name, &id) < 0 || id > UINT32_MAX)
                                continue;
                        snprintf(p, sizeof p, "/sys/fs/fuse/connections/%s/waiting", de->d_name);
                        n = proc_read_small(AT_FDCWD, p, buf, sizeof buf);
                        if (n > 0 && scan_u64(&q, buf + n, &waiting) >= 0 && waiting > 0) {
                                only = (unsigned) id;
                                busy++;
                        }
                }
                if (busy == 1)
                        return fuse_mount_find(c->w->pid, -1, NULL, only, ret);
        }
        return 0;
}

/* A thread waiting for a FUSE daemon: an edge to the processes holding /dev/fuse for that mount's connection. */
static int edges_fuse(EdgeCtx *c, int fd) {
        char object[PATH_MAX + 128];
        const FdOwner *holders[PEERS_HOLDERS_MAX];
        FuseMount m = {};
        bool unknown;
        int k, n;

        k = fuse_request_mount(c, fd, &m);
        if (k <= 0)
                return k < 0 ? k
                             : edge_add(c, WAIT_KIND_FUSE, fd, 0, "a FUSE request", 0, -1,
                                        "the FUSE mount it is on could not be told");
        snprintf(object, sizeof object, "%s mount %s (connection %u)", m.fstype, m.mountpoint,
                 fuse_mount_connection(&m));
        n = fuse_connection_holders(c->r, fuse_mount_connection(&m), holders, ELEMENTSOF(holders), &unknown);
        if (n < 0)
                return n;
        for (int i = 0; i < n; i++) {
                k = edge_add(c, WAIT_KIND_FUSE, fd, 0, object, holders[i]->pid, holders[i]->fd, NULL);
                if (k < 0)
                        return k;
        }
        if (n == 0)
                return edge_add(c, WAIT_KIND_FUSE, fd, 0, object, 0, -1,
                                unknown ? "this kernel does not say which /dev/fuse serves a connection"
                                        : "no process holds /dev/fuse for it (the daemon is gone)");
        return 0;
}

/* ---- A FIFO's open ---- */

/* Whether WCHAN is where an open() of a FIFO waits for the other side (fifo_open(): nobody has it open the other
 * way, or it would have returned). */
static bool wchan_is_fifo_open(const char *wchan) {
        return startswith(wchan, "wait_for_partner");
}

/* A thread in the open() of a FIFO that nobody has open the other way: an edge to nobody that names the FIFO and
 * the side it waits for. */
static int edges_fifo_open(EdgeCtx *c) {
        const ProcSyscall *sc = &c->w->syscall;
        char path[2 * PATH_MAX], object[2 * PATH_MAX + 32];
        uint64_t flags = UINT64_MAX;

        switch (sc->nr) {
#ifdef __NR_open
        case __NR_open:
                flags = sc->args[1];
                break;
#endif
        case __NR_openat:
                flags = sc->args[2];
                break;
        case __NR_openat2: /* struct open_how: its flags come first */
                if (read_target(c->w->pid, sc->args[2], &flags, sizeof flags) < 0)
                        flags = UINT64_MAX;
                break;
        default:
                break;
        }
        if (call_path(c->w, path, sizeof path) < 0)
                snprintf(path, sizeof path, "(its path could not be read)");
        if ((flags & O_ACCMODE) == O_RDONLY) {
                snprintf(object, sizeof object, "fifo %s (read end)", path);
                return edge_add(c, WAIT_KIND_FIFO, -1, 0, object, 0, -1, "no process has it open for writing");
        }
        if ((flags & O_ACCMODE) == O_WRONLY) {
                snprintf(object, sizeof object, "fifo %s (write end)", path);
                return edge_add(c, WAIT_KIND_FIFO, -1, 0, object, 0, -1, "no process has it open for reading");
        }
        snprintf(object, sizeof object, "fifo %s", path);
        return edge_add(c, WAIT_KIND_FIFO, -1, 0, object, 0, -1, "no process has it open the other way");
}

int peers_syscall_fd(const ProcSyscall *sc) {
        if (sc->kind != PROC_SYSCALL_BLOCKED)
                return -1;
        switch (sc->nr) {
        case __NR_read: case __NR_write: case __NR_pread64: case __NR_pwrite64: case __NR_readv: case __NR_writev:
        case __NR_preadv: case __NR_pwritev: case __NR_preadv2: case __NR_pwritev2:
        case __NR_recvfrom: case __NR_sendto: case __NR_recvmsg: case __NR_sendmsg: case __NR_recvmmsg:
        case __NR_sendmmsg: case __NR_accept: case __NR_accept4: case __NR_connect: case __NR_flock:
        case __NR_fcntl: case __NR_sendfile:
                return sc->args[0] <= INT32_MAX ? (int) sc->args[0] : -1;
        default:
                return -1;
        }
}

bool peers_syscall_follows(int64_t nr) {
        ProcSyscall sc = { .kind = PROC_SYSCALL_BLOCKED, .nr = nr };

        if (peers_syscall_fd(&sc) >= 0)
                return true;
        switch (nr) {
#ifdef __NR_poll /* x86-64's; aarch64 has only the p* forms, and vfork by clone */
        case __NR_poll: case __NR_select: case __NR_epoll_wait: case __NR_vfork:
#endif
        case __NR_ppoll: case __NR_pselect6: case __NR_epoll_pwait: case __NR_epoll_pwait2: case __NR_wait4:
        case __NR_waitid: case __NR_clone:
                return true;
        default:
                return false;
        }
}

bool peers_syscall_is_path_call(int64_t nr) {
        int dirfd_arg;

        if (fuse_path_arg(nr, &dirfd_arg) >= 0)
                return true;
        switch (nr) { /* the calls on an fd that wait on its file system */
        case __NR_fstat: case __NR_getdents64: case __NR_ftruncate: case __NR_fstatfs: case __NR_fgetxattr:
        case __NR_flistxattr: case __NR_fsync: case __NR_fdatasync: case __NR_close:
                return true;
        default:
                return false;
        }
}

int peers_thread_edges(PeerResolver *r, const ThreadWait *w, WaitChain *chain) {
        const ProcSyscall *sc = &w->syscall;
        EdgeCtx c = { .r = r, .w = w, .chain = chain };
        int fd, k = 0;

        /* A thread in a tracing stop waits for its tracer, whatever call it was in. */
        if (w->state == 't' && w->tracer_pid > 0) {
                char object[48];
                c.syscall = sc->kind == PROC_SYSCALL_BLOCKED ? syscall_name(sc->nr) ?: "?" : "-";
                snprintf(object, sizeof object, "traced by %d", (int) w->tracer_pid);
                k = edge_add(&c, WAIT_KIND_TRACER, -1, 0, object, w->tracer_pid, -1, NULL);
                return k < 0 ? k : c.added;
        }
        /* Polling for a lock, seen failing: the holders of the lock it asks for, whatever it sleeps in now. */
        if (w->retrying) {
                c.syscall = w->retry.nr == __NR_flock ? "flock" : "fcntl";
                k = edges_lock(&c, w->retry.nr == __NR_flock ? WAIT_KIND_FLOCK : WAIT_KIND_POSIX_LOCK, w->retry.fd,
                               &w->retry);
                if (k < 0)
                        log_debug_errno(k, "Could not follow the lock retried by thread %d: %m", (int) w->tid);
                return k < 0 && (k == -ENOMEM || c.added == 0) ? k : c.added;
        }
        if (sc->kind != PROC_SYSCALL_BLOCKED)
                return 0;
        c.syscall = syscall_name(sc->nr) ?: "?";
        fd = peers_syscall_fd(sc);
        /* Waiting for a FUSE daemon, whatever the call: its file is not to be looked at (a stat would wait too). */
        if (wchan_is_fuse_request(w->wchan)) {
                k = edges_fuse(&c, fd);
                return k < 0 ? k : c.added;
        }
        if (wchan_is_fifo_open(w->wchan)) {
                k = edges_fifo_open(&c);
                return k < 0 ? k : c.added;
        }
        /* A runtime that parks its threads in calls of its own says first what they wait for. */
        if (peer_resolver_runtime_any(r)) {
                k = edges_runtime(&c, sc, true);
                if (k < 0 || c.added > 0)
                        return k < 0 ? k : c.added;
        }
        switch (sc->nr) {
        case __NR_flock:
                k = edges_lock(&c, WAIT_KIND_FLOCK, fd, NULL);
                break;
        case __NR_fcntl:
                if (sc->args[1] == F_SETLKW)
                        k = edges_lock(&c, WAIT_KIND_POSIX_LOCK, fd, NULL);
                else if (sc->args[1] == F_OFD_SETLKW)
                        k = edges_lock(&c, WAIT_KIND_OFD_LOCK, fd, NULL);
                break;
#ifdef __NR_poll /* x86-64's; aarch64 has only the p* forms, and vfork by clone */
        case __NR_poll:
#endif
        case __NR_ppoll:
                k = edges_poll(&c, sc->args[0], sc->args[1]);
                break;
#ifdef __NR_select
        case __NR_select:
#endif
        case __NR_pselect6:
                k = edges_select(&c, sc->args[0], (const uint64_t[3]) { sc->args[1], sc->args[2], sc->args[3] });
                break;
#ifdef __NR_epoll_wait
        case __NR_epoll_wait:
#endif
        case __NR_epoll_pwait:
        case __NR_epoll_pwait2:
                k = edges_epoll(&c, sc->args[0] <= INT32_MAX ? (int) sc->args[0] : -1);
                break;
        case __NR_wait4:
                k = edges_children(&c, (int64_t) sc->args[0] > 0 ? (pid_t) sc->args[0] : 0, "child", true);
                break;
        case __NR_waitid:
                k = edges_children(&c, sc->args[0] == P_PID ? (pid_t) sc->args[1] : 0, "child", true);
                break;
#ifdef __NR_vfork
        case __NR_vfork:
                k = edges_children(&c, 0, "vfork child", true);
                break;
#endif
        case __NR_futex:
                k = edges_futex(&c, sc);
                break;
        case __NR_clone:
                if (sc->args[0] & CLONE_VFORK)
                        k = edges_children(&c, 0, "vfork child", true);
                break;
        default:
                /* read, write, recv, send, accept, connect (a blocked connect() waits for room in the listener's
                 * backlog: the socket already knows its peer for TCP) … */
                if (fd >= 0)
                        k = edges_fd(&c, fd);
                break;
        }
        /* A poll, select or epoll wait also ends when a signal arrives, and the one a process surely gets is SIGCHLD
         * when a child exits: make waits for its jobs in pselect6() on the jobserver pipe, whose write ends its
         * ancestors hold while they wait4() for it. Without these edges that read as a deadlock. */
        if (k >= 0 && c.multiplexed)
                k = edges_children(&c, 0, "SIGCHLD from child", false);
        if (k < 0) {
                /* The thread or its fd went away, or we may not look: the caller records why. What was found before
                 * the failure (a poll set half read) still stands. */
                log_debug_errno(k, "Could not follow %s of thread %d: %m", c.syscall, (int) w->tid);
                if (k != -ENOMEM && c.added > 0)
                        return c.added;
        }
        return k < 0 ? k : c.added;
}
