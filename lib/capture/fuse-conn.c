/* fuse-conn.c: FUSE mounts from a process's mountinfo, and whether the daemon of a connection takes requests. */
#include <asm/unistd.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/alloc-util.h"
#include "base/macro.h"
#include "capture/fuse-conn.h"
#include "model/proc-parse.h"
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
        case __NR_poll:
        case __NR_ppoll:
        case __NR_select:
        case __NR_pselect6:
        case __NR_epoll_wait:
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
