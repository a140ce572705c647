/* fuse-conn.c: FUSE mounts from a process's mountinfo, and whether the daemon of a connection takes requests. */
#include <asm/unistd.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/alloc-util.h"
#include "base/macro.h"
#include "base/process-util.h"
#include "model/proc-parse.h"
#include "proc/fuse-conn.h"
#include "proc/proc-read.h"

/* A daemon busy with a request comes back to read the next within a few milliseconds: look this many times. */
#define FUSE_READER_LOOKS 3
#define FUSE_READER_LOOK_GAP_NSEC (4 * 1000 * 1000)
/* The holders looked at, at most: more than this many processes serving one connection is not a daemon we know. */
#define FUSE_HOLDERS_MAX 16

/* mountinfo escapes space, tab, newline and backslash in paths as \ooo. */
static void mountinfo_unescape(char *s) {
        char *w = s;

        for (const char *r = s; *r;)
                if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] >= '0' && r[2] <= '7' && r[3] >= '0' &&
                    r[3] <= '7') {
                        *w++ = (char) ((r[1] - '0') << 6 | (r[2] - '0') << 3 | (r[3] - '0'));
                        r += 4;
                } else
                        *w++ = *r++;
        *w = '\0';
}

int fuse_mounts_parse(char *text, FuseMount **ret, size_t *ret_n) {
        _cleanup_free_ FuseMount *mounts = NULL;
        size_t n = 0, allocated = 0;

        for (char *line = text, *next; line && *line; line = next) {
                char mountpoint[PATH_MAX], fstype[64], *sep;
                unsigned id, parent, major, minor;

                next = strchr(line, '\n');
                if (next)
                        *next++ = '\0';
                sep = strstr(line, " - ");
                if (!sep || sscanf(line, "%u %u %u:%u %*s %4095s", &id, &parent, &major, &minor, mountpoint) != 5 ||
                    sscanf(sep + 3, "%63s", fstype) != 1)
                        continue;
                if (!streq(fstype, "fuse") && !startswith(fstype, "fuse.") && !streq(fstype, "fuseblk"))
                        continue;
                if (!GREEDY_REALLOC(mounts, allocated, n + 1))
                        return -ENOMEM;
                mountinfo_unescape(mountpoint);
                mounts[n] = (FuseMount) { .mnt_id = (int) id, .major = major, .minor = minor };
                snprintf(mounts[n].mountpoint, sizeof mounts[n].mountpoint, "%s", mountpoint);
                snprintf(mounts[n].fstype, sizeof mounts[n].fstype, "%s", fstype);
                n++;
        }
        *ret = TAKE_PTR(mounts);
        *ret_n = n;
        return 0;
}

int fuse_mounts_load(pid_t pid, FuseMount **ret, size_t *ret_n) {
        _cleanup_close_ int dirfd = -EBADF;
        _cleanup_free_ char *text = NULL;
        size_t len;
        int k;

        k = proc_open_dir(pid, 0, &dirfd);
        if (k < 0)
                return k;
        k = proc_read_full(dirfd, "mountinfo", 16U * 1024 * 1024, &text, &len);
        if (k < 0)
                return k;
        return fuse_mounts_parse(text, ret, ret_n);
}

const FuseMount *fuse_mounts_by_dev(const FuseMount *m, size_t n, unsigned major, unsigned minor) {
        for (size_t i = 0; i < n; i++)
                if (m[i].major == major && m[i].minor == minor)
                        return &m[i];
        return NULL;
}

const FuseMount *fuse_mounts_by_path(const FuseMount *m, size_t n, const char *path) {
        const FuseMount *best = NULL;

        for (size_t i = 0; path && i < n; i++) {
                size_t l = strlen(m[i].mountpoint);

                if (startswith(path, m[i].mountpoint) && (!best || l >= strlen(best->mountpoint)) &&
                    (path[l] == '/' || path[l] == '\0' || streq(m[i].mountpoint, "/")))
                        best = &m[i];
        }
        return best;
}

/* The distinct holders of /dev/fuse in R's fd pass, up to MAX: those for CONNECTION, or every one (ANY). */
static int dev_fuse_holders(PeerResolver *r, bool any, unsigned connection, const FdOwner **ret, size_t max,
                            bool *ret_unknown) {
        size_t found = 0;
        pid_t last = 0;
        int k;

        *ret_unknown = false;
        k = peer_tables_load_owners(r);
        if (k < 0)
                return k;
        for (size_t i = r->n_indexed; i < r->n_owners && found < max; i++) {
                const FdOwner *o = &r->owners[i];
                uint64_t conn = 0;

                if (!streq(o->path, "/dev/fuse") || o->pid == last)
                        continue;
                if (!any) {
                        k = peer_tables_fdinfo_field(o->pid, o->fd, "fuse_connection", 10, &conn);
                        if (k == -ENOENT)
                                *ret_unknown = true;
                        if (k < 0 || conn != connection)
                                continue;
                }
                ret[found++] = o;
                last = o->pid;
        }
        return (int) found;
}

int fuse_connection_holders(PeerResolver *r, unsigned connection, const FdOwner **ret, size_t max,
                            bool *ret_unknown) {
        return dev_fuse_holders(r, false, connection, ret, max, ret_unknown);
}

/* Whether the call NR waits for events: an event loop over /dev/fuse, or FUSE over io_uring, waits in one. */
static bool waits_for_events(int64_t nr) {
        switch (nr) {
#ifdef __NR_poll /* x86-64's; aarch64 has only the p* forms */
        case __NR_poll:
        case __NR_select:
        case __NR_epoll_wait:
#endif
        case __NR_ppoll:
        case __NR_pselect6:
        case __NR_epoll_pwait:
#ifdef __NR_epoll_pwait2
        case __NR_epoll_pwait2:
#endif
#ifdef __NR_io_uring_enter
        case __NR_io_uring_enter:
#endif
                return true;
        default:
                return false;
        }
}

/* Whether a thread of PID sleeps waiting for a FUSE request: in the kernel's read of /dev/fuse (by read() or
 * splice(); its wchan says so), or in a wait for events. 1, 0, or -errno when the process cannot be read. */
static int process_waits_for_requests(pid_t pid) {
        _cleanup_close_ int dirfd = -EBADF;
        _cleanup_free_ int *tids = NULL;
        size_t n = 0;
        int k;

        k = proc_open_dir(pid, 0, &dirfd);
        if (k >= 0)
                k = proc_list_numeric(dirfd, "task", &tids, &n);
        if (k < 0)
                return k;
        for (size_t i = 0; i < n; i++) {
                _cleanup_close_ int taskfd = -EBADF;
                char buf[1024];
                ProcStat st;
                ProcSyscall sc;
                ssize_t l;

                if (proc_open_task(dirfd, tids[i], &taskfd) < 0)
                        continue;
                l = proc_read_small(taskfd, "stat", buf, sizeof buf);
                if (l < 0 || proc_parse_stat(buf, (size_t) l, &st) < 0 || st.state != 'S')
                        continue;
                l = proc_read_small(taskfd, "wchan", buf, sizeof buf);
                if (l > 0 && (streq(buf, "fuse_dev_do_read") || streq(buf, "fuse_dev_read")))
                        return 1;
                l = proc_read_small(taskfd, "syscall", buf, sizeof buf);
                if (l > 0 && proc_parse_syscall(buf, (size_t) l, &sc) >= 0 && sc.kind == PROC_SYSCALL_BLOCKED &&
                    waits_for_events(sc.nr))
                        return 1;
        }
        return 0;
}

int fuse_connection_answering(PeerResolver *r, unsigned connection, char *why, size_t why_len) {
        const FdOwner *holders[FUSE_HOLDERS_MAX];
        bool unknown, all = false;
        int n, ready = 0;

        n = dev_fuse_holders(r, false, connection, holders, ELEMENTSOF(holders), &unknown);
        if (n == 0 && unknown) {
                /* This kernel does not say which /dev/fuse serves the connection: every holder must be ready. */
                all = true;
                n = dev_fuse_holders(r, true, 0, holders, ELEMENTSOF(holders), &unknown);
        }
        if (n < 0)
                return n;
        /* Nobody holds it: the kernel aborted the connection when the last holder closed it, and fails every
         * request at once. */
        if (n == 0)
                return 1;
        for (unsigned look = 0; look < FUSE_READER_LOOKS; look++) {
                if (look > 0)
                        (void) nanosleep(&(struct timespec) { .tv_nsec = FUSE_READER_LOOK_GAP_NSEC }, NULL);
                ready = 0;
                for (int i = 0; i < n; i++)
                        ready += process_waits_for_requests(holders[i]->pid) > 0;
                if (all ? ready == n : ready > 0)
                        return 1;
        }
        if (all)
                snprintf(why, why_len, "this kernel does not say which process serves it, and %d of the %d holding "
                         "/dev/fuse are not waiting for requests", n - ready, n);
        else
                snprintf(why, why_len, "its daemon (process %d%s) is not waiting for requests", (int) holders[0]->pid,
                         n > 1 ? " and others" : "");
        return 0;
}

/* The child of fuse_copy_file(): open, check, copy, send the memfd (or the errno) on SOCK. Only system calls: it runs
 * in a copy of a process that may have other threads. */
__attribute__((noreturn)) static void copy_child(int sock, const char *path, const struct stat *want) {
        char buf[64 * 1024], cbuf[CMSG_SPACE(sizeof(int))] = {};
        struct iovec iov;
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
        struct stat st;
        int err = 0, fd, mfd = -1;

        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0 || fstat(fd, &st) < 0)
                err = errno;
        else if (want && (st.st_ino != want->st_ino || st.st_dev != want->st_dev))
                err = ESTALE;
        else if (!S_ISREG(st.st_mode) || (uint64_t) st.st_size > FUSE_COPY_MAX)
                err = S_ISREG(st.st_mode) ? EFBIG : EINVAL;
        else if ((mfd = memfd_create("stackwatch-fuse-copy", MFD_CLOEXEC)) < 0)
                err = errno;
        for (ssize_t n; !err && (n = read(fd, buf, sizeof buf)) != 0;) {
                if (n < 0 && errno != EINTR)
                        err = errno;
                for (ssize_t off = 0, w; !err && n > 0 && off < n; off += w)
                        if ((w = write(mfd, buf + off, (size_t) (n - off))) < 0)
                                err = errno;
        }
        iov = (struct iovec) { .iov_base = &err, .iov_len = sizeof err };
        if (!err) {
                struct cmsghdr *c;

                mh.msg_control = cbuf;
                mh.msg_controllen = sizeof cbuf;
                c = CMSG_FIRSTHDR(&mh);
                c->cmsg_level = SOL_SOCKET;
                c->cmsg_type = SCM_RIGHTS;
                c->cmsg_len = CMSG_LEN(sizeof(int));
                memcpy(CMSG_DATA(c), &mfd, sizeof mfd);
        }
        (void) sendmsg(sock, &mh, MSG_NOSIGNAL);
        /* Closing the file sends the daemon a FLUSH, which may never be answered: the parent has what it needs. */
        _exit(0);
}

int fuse_copy_file(const char *path, const struct stat *want, uint64_t timeout_usec, int *ret_fd) {
        char cbuf[CMSG_SPACE(sizeof(int))];
        struct iovec iov;
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf };
        struct pollfd p;
        int sv[2], err = 0, k;
        pid_t child;
        ssize_t n;

        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
                return -errno;
        /* It may outlive us in D: it must not keep our files open (a pipe our parent waits to see closed). */
        k = fork_child(&(ForkOptions) { .flags = FORK_DEATHSIG | FORK_RESET_SIGNALS | FORK_CLOSE_FDS,
                                        .keep_fds = &sv[1], .n_keep_fds = 1 },
                       &child);
        if (k < 0) {
                close(sv[0]);
                close(sv[1]);
                return k;
        }
        if (k == 0)
                copy_child(sv[1], path, want);
        close(sv[1]);
        p = (struct pollfd) { .fd = sv[0], .events = POLLIN };
        do
                k = poll(&p, 1, (int) ((timeout_usec + 999) / 1000));
        while (k < 0 && errno == EINTR);
        iov = (struct iovec) { .iov_base = &err, .iov_len = sizeof err };
        n = k > 0 ? recvmsg(sv[0], &mh, MSG_CMSG_CLOEXEC) : -1;
        close(sv[0]);
        /* Done, or given up: it is not waited for (it may hang in close() or in the daemon's request, in D). */
        process_kill(child, false);
        if (k == 0)
                return -ETIMEDOUT;
        if (n != (ssize_t) sizeof err)
                return k < 0 ? -errno : -EIO;
        if (err)
                return -err;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
                if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
                        memcpy(ret_fd, CMSG_DATA(c), sizeof(int));
                        return 0;
                }
        return -EIO;
}
