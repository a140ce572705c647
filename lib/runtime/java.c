/* java.c: a HotSpot JVM's thread dump through its attach mechanism, parsed and merged into a snapshot.
 *
 * The protocol is HotSpot's own (src/hotspot/os/linux/attachListener_linux.cpp, and the client side in
 * src/jdk.attach/linux/classes/sun/tools/attach/VirtualMachineImpl.java): when /tmp/.java_pidNSPID is not there,
 * create .attach_pidNSPID (in its /tmp) and send SIGQUIT, which makes the JVM start its attach listener instead of
 * printing a thread dump; connect to the socket; send "1\0threaddump\0-l\0\0\0" (protocol 1, the command, three
 * arguments); the answer is a result code line ("0") and the text jstack -l prints. The JVM accepts a peer of its
 * own effective uid and gid, or root; the request is made by a child with the JVM's credentials, through its root
 * (/proc/PID/root), so a JVM in a container answers too, and a JVM that hangs the connection is the child's
 * problem, killed at the deadline. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/alloc-util.h"
#include "base/macro.h"
#include "base/parse-util.h"
#include "base/process-util.h"
#include "base/time-util.h"
#include "proc/proc-read.h"
#include "runtime/java.h"

#define JAVA_ANSWER_MAX (64U * 1024 * 1024)
#define JAVA_LISTENER_POLL_USEC (5 * USEC_PER_MSEC)
#define JAVA_CHILD_MARGIN_USEC (20 * USEC_PER_MSEC)

bool java_is_jvm(const Snapshot *s) {
        for (size_t i = 0; i < s->n_modules; i++) {
                const char *p = s->modules[i].path, *b = p ? strrchr(p, '/') : NULL;

                if (b && streq(b, "/libjvm.so"))
                        return true;
        }
        return false;
}

/* What the JVM's /proc/PID/status says about attaching to it. */
typedef struct JvmIds {
        pid_t nspid;            /* its pid in its own pid namespace: the name of its socket */
        uid_t uid;              /* effective */
        gid_t gid;
        bool catches_sigquit;
} JvmIds;

static int read_ids(int dirfd, JvmIds *ret) {
        char buf[4096], *l, *save = NULL;
        bool have_uid = false, have_gid = false, have_sig = false;
        ssize_t n;

        n = proc_read_small(dirfd, "status", buf, sizeof buf);
        if (n < 0)
                return (int) n;
        *ret = (JvmIds) {};
        for (l = strtok_r(buf, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
                unsigned long long mask;
                unsigned u[2];

                if (startswith(l, "NSpid:")) {
                        /* The last field: the innermost namespace's. */
                        const char *last = strrchr(l, '\t') ?: strrchr(l, ' ');
                        int v;

                        if (last && sscanf(last + 1, "%d", &v) == 1)
                                ret->nspid = v;
                } else if (startswith(l, "Uid:") && sscanf(l + 4, "%u %u", &u[0], &u[1]) == 2) {
                        ret->uid = u[1];
                        have_uid = true;
                } else if (startswith(l, "Gid:") && sscanf(l + 4, "%u %u", &u[0], &u[1]) == 2) {
                        ret->gid = u[1];
                        have_gid = true;
                } else if (startswith(l, "SigCgt:") && sscanf(l + 7, "%llx", &mask) == 1) {
                        ret->catches_sigquit = mask & (1ULL << (SIGQUIT - 1));
                        have_sig = true;
                }
        }
        return ret->nspid > 0 && have_uid && have_gid && have_sig ? 0 : -EBADMSG;
}

/* Whether -XX:+DisableAttachMechanism is in effect, as far as the command line and the JVM's option variables say
 * (the last of + and - wins, as the JVM reads them: JAVA_TOOL_OPTIONS, then the command line, then _JAVA_OPTIONS). */
static bool scan_disable_attach(const char *buf, size_t n, char sep, int *state) {
        bool seen = false;

        for (size_t i = 0; i < n;) {
                const char *w = buf + i, *end = memchr(w, sep, n - i);
                size_t l = end ? (size_t) (end - w) : n - i;

                /* "-XX:±DisableAttachMechanism" is 27 bytes, then the word's end or a blank. */
                for (size_t k = 0; k + 27 <= l; k++)
                        if (memcmp(w + k, "-XX:", 4) == 0 && (w[k + 4] == '+' || w[k + 4] == '-') &&
                            memcmp(w + k + 5, "DisableAttachMechanism", 22) == 0 &&
                            (k + 27 == l || w[k + 27] == ' ' || w[k + 27] == sep)) {
                                *state = w[k + 4] == '+';
                                seen = true;
                        }
                i += l + 1;
        }
        return seen;
}

/* The JVM's own word on whether it may be attached to: "sun.rt.jvmCapabilities" in its performance data (the file
 * /tmp/hsperfdata_USER/NSPID it maps, read through its root), whose first character is '1' when the attach
 * mechanism is on, '0' when -XX:+DisableAttachMechanism (set anywhere: a flags file too) turned it off. The format
 * is HotSpot's (src/hotspot/share/runtime/perfMemory.hpp, perfData.hpp): a 32-byte prologue (magic 0xcafec0c0,
 * byte order, entry offset and count) and entries of 20-byte headers, each with its name and data offsets. 1
 * attachable, 0 not, -errno when there is no such data (-XX:-UsePerfData) or it cannot be read. */
#define HSPERF_MAGIC 0xcafec0c0U
#define HSPERF_MAX (4U * 1024 * 1024)

static uint32_t hsperf_u32(const uint8_t *p, bool little) {
        return little ? (uint32_t) p[0] | (uint32_t) p[1] << 8 | (uint32_t) p[2] << 16 | (uint32_t) p[3] << 24
                      : (uint32_t) p[3] | (uint32_t) p[2] << 8 | (uint32_t) p[1] << 16 | (uint32_t) p[0] << 24;
}

int java_perfdata_attachable(const uint8_t *d, size_t n) {
        static const char key[] = "sun.rt.jvmCapabilities";
        uint32_t off, count;
        bool little;

        if (n < 32 || hsperf_u32(d, false) != HSPERF_MAGIC || d[4] > 1)
                return -EBADMSG;
        little = d[4] == 1;
        off = hsperf_u32(d + 24, little);
        count = hsperf_u32(d + 28, little);
        for (uint32_t i = 0; i < count && off >= 32 && (size_t) off + 20 <= n; i++) {
                uint32_t len = hsperf_u32(d + off, little), name = hsperf_u32(d + off + 4, little),
                         vlen = hsperf_u32(d + off + 8, little), data = hsperf_u32(d + off + 16, little);

                if (len < 20 || len > n - off)
                        return -EBADMSG;
                if (name < 20 || name >= len)
                        return -EBADMSG;
                if (name + sizeof key <= len && memcmp(d + off + name, key, sizeof key) == 0) {
                        if (d[off + 12] != 'B' || vlen == 0 || data >= len || vlen > len - data)
                                return -EBADMSG;
                        return d[off + data] == '1' ? 1 : d[off + data] == '0' ? 0 : -EBADMSG;
                }
                off += len;
        }
        return -ENOENT;
}

static int perfdata_attachable(pid_t pid, int dirfd, pid_t nspid) {
        _cleanup_free_ char *maps = NULL, *data = NULL;
        _cleanup_close_ int rootfd = -EBADF;
        char suffix[32], root[64];
        size_t n = 0;
        int r;

        r = proc_read_full(dirfd, "maps", 16 * 1024 * 1024, &maps, &n);
        if (r < 0)
                return r;
        snprintf(suffix, sizeof suffix, "/%d", (int) nspid);
        for (char *l = maps, *nl; l && *l; l = nl ? nl + 1 : NULL) {
                char *path;

                nl = strchr(l, '\n');
                if (nl)
                        *nl = '\0';
                path = strchr(l, '/');
                if (!path || !strstr(path, "/hsperfdata_") || !endswith(path, suffix) || endswith(path, "(deleted)"))
                        continue;
                snprintf(root, sizeof root, "/proc/%d/root", (int) pid);
                rootfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
                if (rootfd < 0)
                        return -errno;
                r = proc_read_full(rootfd, path + 1, HSPERF_MAX, &data, &n);
                if (r < 0)
                        return r;
                return java_perfdata_attachable((const uint8_t *) data, n);
        }
        return -ENOENT;
}

static bool attach_disabled(int dirfd) {
        static const char *const vars[] = { "JAVA_TOOL_OPTIONS=", "JDK_JAVA_OPTIONS=", "_JAVA_OPTIONS=" };
        _cleanup_free_ char *cmdline = NULL, *env = NULL;
        size_t ncmd = 0, nenv = 0;
        int state = 0;

        (void) proc_read_full(dirfd, "cmdline", 1024 * 1024, &cmdline, &ncmd);
        (void) proc_read_full(dirfd, "environ", 1024 * 1024, &env, &nenv);
        for (size_t v = 0; v < ELEMENTSOF(vars); v++) {
                if (v == 1 && cmdline)
                        (void) scan_disable_attach(cmdline, ncmd, '\0', &state);
                for (size_t i = 0; env && i < nenv;) {
                        const char *e = env + i;
                        size_t l = strnlen(e, nenv - i);

                        if (startswith(e, vars[v]))
                                (void) scan_disable_attach(e + strlen(vars[v]), l - strlen(vars[v]), ' ', &state);
                        i += l + 1;
                }
        }
        return state == 1;
}

static void child_write_all(int fd, const void *p, size_t n) {
        while (n > 0) {
                ssize_t k = write(fd, p, n);

                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        _exit(EXIT_FAILURE);
                p = (const uint8_t *) p + k;
                n -= (size_t) k;
        }
}

static void child_sleep(uint64_t usec) {
        struct timespec ts = { .tv_sec = (time_t) (usec / USEC_PER_SEC), .tv_nsec = (long) (usec % USEC_PER_SEC) * 1000 };

        (void) nanosleep(&ts, NULL);
}

/* Exit codes of the child before it has an answer to pass on. */
enum {
        CHILD_NO_TMP = 10,      /* cannot open the JVM's /tmp */
        CHILD_NO_LISTENER,      /* the socket did not appear */
        CHILD_CONNECT,          /* it appeared, the connection was refused */
        CHILD_NO_CREDS,         /* cannot take the JVM's user and group (no CAP_SETUID/CAP_SETGID) */
};

/* The child: everything it needs was prepared by the parent (no allocation here). Writes the answer to OUT, then
 * a NUL and the time from the request to the answer's end, in µs, as decimal digits. */
static _Noreturn void child_request(pid_t pid, int dirfd, const char *sock_name, const char *trigger_name,
                                    uint64_t deadline_usec, int out) {
        static const char request[] = "1\0threaddump\0-l\0\0";
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        uint8_t buf[65536];
        uint64_t t0, usec;
        char digits[24];
        int sock, k;
        bool triggered = false;

        if (faccessat(dirfd, sock_name, F_OK, AT_SYMLINK_NOFOLLOW) < 0) {
                int fd = openat(dirfd, trigger_name, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);

                if (fd < 0)
                        _exit(CHILD_NO_TMP);
                close(fd);
                triggered = true;
                if (kill(pid, SIGQUIT) < 0) {
                        (void) unlinkat(dirfd, trigger_name, 0);
                        _exit(CHILD_NO_LISTENER);
                }
                /* Given up a little before the parent kills it, so that the trigger file goes with it. */
                while (faccessat(dirfd, sock_name, F_OK, AT_SYMLINK_NOFOLLOW) < 0) {
                        if (now_usec(CLOCK_MONOTONIC) + JAVA_CHILD_MARGIN_USEC >= deadline_usec) {
                                (void) unlinkat(dirfd, trigger_name, 0);
                                _exit(CHILD_NO_LISTENER);
                        }
                        child_sleep(JAVA_LISTENER_POLL_USEC);
                }
        }
        if (triggered)
                (void) unlinkat(dirfd, trigger_name, 0);
        k = snprintf(sa.sun_path, sizeof sa.sun_path, "/proc/self/fd/%d/%s", dirfd, sock_name);
        if (k < 0 || (size_t) k >= sizeof sa.sun_path)
                _exit(CHILD_CONNECT);
        sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (sock < 0 || connect(sock, (struct sockaddr *) &sa, sizeof sa) < 0)
                _exit(CHILD_CONNECT);
        t0 = now_usec(CLOCK_MONOTONIC);
        child_write_all(sock, request, sizeof request);
        for (;;) {
                ssize_t n = read(sock, buf, sizeof buf);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        break;
                child_write_all(out, buf, (size_t) n);
        }
        usec = now_usec(CLOCK_MONOTONIC) - t0;
        k = snprintf(digits, sizeof digits, "%c%" PRIu64, '\0', usec);
        child_write_all(out, digits, (size_t) k);
        _exit(EXIT_SUCCESS);
}

int java_request_threaddump(pid_t pid, uint64_t deadline_usec, char **ret, uint64_t *ret_usec, char **ret_why) {
        _cleanup_close_ int dirfd = -EBADF, tmpfd = -EBADF, rfd = -EBADF;
        _cleanup_free_ char *buf = NULL;
        char tmp[64], sock_name[48], trigger_name[48];
        size_t n = 0, alloc = 0;
        int pipefd[2], status, r;
        bool timed_out = false;
        JvmIds ids;
        pid_t child;

        *ret = *ret_why = NULL;
        r = proc_open_dir(pid, 0, &dirfd);
        if (r < 0)
                return r;
        r = read_ids(dirfd, &ids);
        if (r < 0)
                return asprintf(ret_why, "cannot read its /proc status: %s", strerror(-r)) < 0 ? -ENOMEM : r;
        /* Without a SIGQUIT handler (-Xrs), SIGQUIT would end it. */
        if (!ids.catches_sigquit)
                return (*ret_why = strdup("the JVM does not catch SIGQUIT (-Xrs?), which starts its attach "
                                          "listener")) ? -EPERM : -ENOMEM;
        /* Its performance data says; without any, its command line and option variables. */
        r = perfdata_attachable(pid, dirfd, ids.nspid);
        if (r == 0 || (r < 0 && attach_disabled(dirfd)))
                return (*ret_why = strdup("the JVM was started with -XX:+DisableAttachMechanism")) ? -EPERM : -ENOMEM;
        snprintf(tmp, sizeof tmp, "/proc/%d/root/tmp", (int) pid);
        snprintf(sock_name, sizeof sock_name, ".java_pid%d", (int) ids.nspid);
        snprintf(trigger_name, sizeof trigger_name, ".attach_pid%d", (int) ids.nspid);

        /* Opened as we are, then handed to a child that asks as the JVM's user: its check of the peer, and of the
         * trigger file's owner (JDK 8 wants both its own). */
        tmpfd = open(tmp, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (tmpfd < 0)
                return (*ret_why = strdup("cannot reach its /tmp")) ? -ECONNREFUSED : -ENOMEM;
        if (pipe2(pipefd, O_CLOEXEC) < 0)
                return -errno;
        r = fork_child(&(ForkOptions) { .flags = FORK_DEATHSIG | FORK_RESET_SIGNALS | FORK_CLOSE_FDS | FORK_SET_USER,
                                        .keep_fds = (const int[]) { tmpfd, pipefd[1] }, .n_keep_fds = 2,
                                        .uid = ids.uid, .gid = ids.gid, .setup_failed_status = CHILD_NO_CREDS },
                       &child);
        if (r < 0) {
                close(pipefd[0]);
                close(pipefd[1]);
                return r;
        }
        if (r == 0)
                child_request(pid, tmpfd, sock_name, trigger_name, deadline_usec, pipefd[1]);
        close(pipefd[1]);
        rfd = pipefd[0];
        for (;;) {
                uint64_t left = now_usec(CLOCK_MONOTONIC);
                struct pollfd p = { .fd = rfd, .events = POLLIN };
                ssize_t k;

                left = left < deadline_usec ? deadline_usec - left : 0;
                if (left == 0) {
                        timed_out = true;
                        break;
                }
                k = poll(&p, 1, (int) MAX(left / USEC_PER_MSEC, 1U));
                if (k < 0 && errno == EINTR)
                        continue;
                if (k == 0)
                        continue;
                if (n + 65536 + 1 > alloc) {
                        if (alloc >= JAVA_ANSWER_MAX) {
                                timed_out = true; /* an answer past any thread dump: stop reading it */
                                break;
                        }
                        if (!GREEDY_REALLOC(buf, alloc, n + 65536 + 1)) {
                                process_kill(child, true);
                                return -ENOMEM;
                        }
                }
                k = read(rfd, buf + n, 65536);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        break;
                n += (size_t) k;
        }
        if (timed_out)
                (void) kill(child, SIGKILL);
        if (process_wait(child, &status) < 0)
                status = 0;
        if (timed_out)
                return asprintf(ret_why, "the JVM did not answer within the deadline (its safepoint not reached, or "
                                "its attach listener busy)") < 0 ? -ENOMEM : -ETIME;
        if (WIFEXITED(status) && WEXITSTATUS(status) != EXIT_SUCCESS) {
                const char *why = WEXITSTATUS(status) == CHILD_NO_TMP ? "cannot reach its /tmp as its user"
                                : WEXITSTATUS(status) == CHILD_NO_CREDS
                                        ? "cannot take its user and group to ask it (that needs CAP_SETUID and "
                                          "CAP_SETGID)"
                                : WEXITSTATUS(status) == CHILD_NO_LISTENER
                                        ? "its attach listener did not start (no /tmp/.java_pid socket)"
                                        : "its attach socket refused the connection";
                return (*ret_why = strdup(why)) ? -ECONNREFUSED : -ENOMEM;
        }
        if (!buf || n == 0 || !WIFEXITED(status))
                return (*ret_why = strdup("the JVM closed the connection without an answer")) ? -EPROTO : -ENOMEM;
        buf[n] = '\0';
        /* The trailer: NUL, then the time of the request in µs. */
        {
                const char *nul = memrchr(buf, '\0', n);

                if (!nul || safe_atou64(nul + 1, ret_usec) < 0)
                        return (*ret_why = strdup("the JVM's answer was cut short")) ? -EPROTO : -ENOMEM;
        }
        *ret = TAKE_PTR(buf);
        return 0;
}

/* ---- the thread dump's text ---- */

/* Room for one more element at the end of *ARRAY, which holds N: capacity doubles at each power of two. */
static void *grow_one(void **array, size_t n, size_t size) {
        void *p;

        if (n == 0 || (n & (n - 1)) == 0) {
                p = reallocarray(*array, n ? 2 * n : 1, size);
                if (!p)
                        return NULL;
                *array = p;
        }
        return (uint8_t *) *array + n * size;
}

typedef struct DumpFrame {
        char *function, *file;
        unsigned line;
} DumpFrame;

typedef struct DumpThread {
        char *name, *state;
        pid_t tid;
        DumpFrame *frames;
        size_t n_frames;
        RuntimeLock *locks;
        size_t n_locks;
} DumpThread;

typedef struct Dump {
        DumpThread *threads;
        size_t n_threads;
        char *vm;
        unsigned deadlocks;
} Dump;

static void dump_done(Dump *d) {
        for (size_t i = 0; i < d->n_threads; i++) {
                DumpThread *t = &d->threads[i];

                free(t->name);
                free(t->state);
                for (size_t k = 0; k < t->n_frames; k++) {
                        free(t->frames[k].function);
                        free(t->frames[k].file);
                }
                free(t->frames);
                for (size_t k = 0; k < t->n_locks; k++)
                        free(t->locks[k].klass);
                free(t->locks);
        }
        free(d->threads);
        free(d->vm);
}

static const char *skip_blanks(const char *p) {
        while (*p == ' ' || *p == '\t')
                p++;
        return p;
}

/* A thread's header: "NAME" #12 daemon prio=5 os_prio=0 … nid=0x1a2b waiting on condition  [0x…]. The name may
 * hold quotes; it ends at the last quote before " nid=". The nid is hex up to JDK 18, decimal since 19. */
static int parse_header(const char *l, size_t len, DumpThread *t) {
        const char *nid = memmem(l, len, " nid=", 5), *q;
        uint64_t v;
        char num[24];
        size_t k = 0;

        if (!nid)
                return -EBADMSG;
        for (q = nid; q > l && *q != '"'; q--)
                ;
        if (q <= l)
                return -EBADMSG;
        for (const char *p = nid + 5; p < l + len && k + 1 < sizeof num && *p != ' '; p++)
                num[k++] = *p;
        num[k] = '\0';
        if (safe_atou64_base(num, 0, &v) < 0 || v == 0 || v > INT32_MAX)
                return -EBADMSG;
        t->tid = (pid_t) v;
        t->name = strndup(l + 1, (size_t) (q - l - 1));
        return t->name ? 0 : -ENOMEM;
}

/* "at pkg.Class.method(java.base@17.0.8/Native Method)", "(Hung.java:25)", "(Hung.java)", "(Unknown Source)". */
static int parse_frame(const char *l, size_t len, DumpThread *t) {
        const char *open = NULL, *close = NULL, *src, *colon = NULL;
        DumpFrame *f;
        size_t srclen;

        for (const char *p = l; p < l + len; p++)
                if (*p == '(')
                        open = p;
        if (open)
                close = memchr(open, ')', (size_t) (l + len - open));
        if (!open || !close)
                return 0;
        f = grow_one((void **) &t->frames, t->n_frames, sizeof *t->frames);
        if (!f)
                return -ENOMEM;
        *f = (DumpFrame) {};
        t->n_frames++;
        f->function = strndup(l, (size_t) (open - l));
        if (!f->function)
                return -ENOMEM;
        /* "module@version/" first, when the class is in a named module. */
        src = open + 1;
        for (const char *p = src; p < close; p++)
                if (*p == '/')
                        src = p + 1;
        srclen = (size_t) (close - src);
        if (srclen == 0 || (srclen == 13 && memcmp(src, "Native Method", 13) == 0) ||
            (srclen == 14 && memcmp(src, "Unknown Source", 14) == 0))
                return 0;
        for (const char *p = src; p < close; p++)
                if (*p == ':')
                        colon = p;
        if (colon) {
                char num[12];
                unsigned line;
                size_t k = MIN((size_t) (close - colon - 1), sizeof num - 1);

                memcpy(num, colon + 1, k);
                num[k] = '\0';
                if (safe_atou(num, &line) == 0) {
                        f->line = line;
                        srclen = (size_t) (colon - src);
                }
        }
        f->file = strndup(src, srclen);
        return f->file ? 0 : -ENOMEM;
}

/* "- waiting to lock <0x000000062a8164c8> (a java.lang.Object)"; in the ownable synchronizers, "- <0x…> (a …)". */
static int parse_lock(const char *l, size_t len, bool ownable, DumpThread *t) {
        static const struct {
                const char *prefix;
                RuntimeLockKind kind;
        } kinds[] = {
                { "locked ", RUNTIME_LOCK_LOCKED },
                { "waiting to lock ", RUNTIME_LOCK_WAITING_TO_LOCK },
                { "waiting on ", RUNTIME_LOCK_WAITING_ON },
                { "waiting to re-lock in wait() ", RUNTIME_LOCK_WAITING_TO_RELOCK },
                { "parking to wait for ", RUNTIME_LOCK_PARKING },
        };
        const char *addr = memmem(l, len, "<0x", 3), *gt, *cls, *end;
        RuntimeLockKind kind = _RUNTIME_LOCK_INVALID;
        char num[24];
        uint64_t v;
        RuntimeLock *k;
        size_t n;

        if (ownable)
                kind = RUNTIME_LOCK_OWNS;
        else
                for (size_t i = 0; i < ELEMENTSOF(kinds); i++)
                        if (len >= strlen(kinds[i].prefix) && memcmp(l, kinds[i].prefix, strlen(kinds[i].prefix)) == 0)
                                kind = kinds[i].kind;
        /* "eliminated", "<no object reference available>": no object to name. */
        if (kind < 0 || !addr)
                return 0;
        gt = memchr(addr, '>', (size_t) (l + len - addr));
        n = gt ? (size_t) (gt - addr - 1) : 0;
        if (n == 0 || n >= sizeof num)
                return 0;
        memcpy(num, addr + 1, n);
        num[n] = '\0';
        if (!startswith(num, "0x") || safe_atou64_base(num, 0, &v) < 0)
                return 0;
        k = grow_one((void **) &t->locks, t->n_locks, sizeof *t->locks);
        if (!k)
                return -ENOMEM;
        *k = (RuntimeLock) { .kind = kind, .address = v };
        t->n_locks++;
        cls = memmem(gt, (size_t) (l + len - gt), "(a ", 3);
        end = cls ? memchr(cls, ')', (size_t) (l + len - cls)) : NULL;
        if (cls && end) {
                k->klass = strndup(cls + 3, (size_t) (end - cls - 3));
                if (!k->klass)
                        return -ENOMEM;
        }
        return 0;
}

static int dump_parse(const char *text, Dump *d) {
        DumpThread *t = NULL;
        bool ownable = false, threads_over = false;
        int r;

        for (const char *l = text; *l;) {
                const char *nl = strchr(l, '\n');
                size_t len = nl ? (size_t) (nl - l) : strlen(l);
                const char *b = skip_blanks(l);
                size_t blen = len - (size_t) (b - l);
                unsigned k;

                if (blen > 0 && b[blen - 1] == '\r')
                        blen--;
                if (startswith(l, "Full thread dump ") && !d->vm) {
                        size_t vl = len - 17;

                        if (vl > 0 && l[17 + vl - 1] == ':')
                                vl--;
                        d->vm = strndup(l + 17, vl);
                        if (!d->vm)
                                return -ENOMEM;
                } else if (startswith(l, "JNI global refs") || startswith(l, "Found one Java-level deadlock") ||
                           startswith(l, "Found a total of")) {
                        /* The deadlock report repeats threads and frames: they are not threads of their own. */
                        threads_over = true;
                        t = NULL;
                } else if (sscanf(l, "Found %u deadlock", &k) == 1) {
                        d->deadlocks = k;
                        threads_over = true;
                } else if (threads_over) {
                        ;
                } else if (l[0] == '"') {
                        DumpThread nt = {};

                        t = NULL;
                        ownable = false;
                        r = parse_header(l, len, &nt);
                        if (r == -ENOMEM)
                                return r;
                        if (r == 0) {
                                t = grow_one((void **) &d->threads, d->n_threads, sizeof *d->threads);
                                if (!t) {
                                        free(nt.name);
                                        return -ENOMEM;
                                }
                                *t = nt;
                                d->n_threads++;
                        }
                } else if (t && startswith(b, "java.lang.Thread.State: ")) {
                        free(t->state);
                        t->state = strndup(b + 24, blen - 24);
                        if (!t->state)
                                return -ENOMEM;
                } else if (t && startswith(b, "at ")) {
                        if ((r = parse_frame(b + 3, blen - 3, t)) < 0)
                                return r;
                } else if (t && startswith(b, "- ")) {
                        if ((r = parse_lock(b + 2, blen - 2, ownable, t)) < 0)
                                return r;
                } else if (t && startswith(b, "Locked ownable synchronizers:"))
                        ownable = true;
                l += len + (nl ? 1 : 0);
        }
        return 0;
}

/* Who holds the object at ADDR: the thread with a frame that locked it (and does not wait on it: Object.wait()
 * released it, though its frame still says "locked"), or that owns it as a synchronizer; 0 when none. */
static pid_t dump_owner(const Dump *d, uint64_t addr, pid_t waiter) {
        for (size_t i = 0; i < d->n_threads; i++) {
                const DumpThread *t = &d->threads[i];
                bool holds = false, released = false;

                if (t->tid == waiter)
                        continue;
                for (size_t k = 0; k < t->n_locks; k++) {
                        if (t->locks[k].address != addr)
                                continue;
                        if (t->locks[k].kind == RUNTIME_LOCK_LOCKED || t->locks[k].kind == RUNTIME_LOCK_OWNS)
                                holds = true;
                        else
                                released = true;
                }
                if (holds && !released)
                        return t->tid;
        }
        return 0;
}

/* Where a native stack enters Java code: the first frame in no module (the JVM's code cache: interpreter and JIT
 * frames have no ELF behind them) and the run of them; none: the end, where the unwind stopped. */
static void java_span(const ThreadSnapshot *t, size_t *ret_from, size_t *ret_to) {
        size_t from = t->n_frames, to;

        for (size_t i = 0; i < t->n_frames; i++)
                if (t->frames[i].kind == FRAME_KIND_NATIVE && t->frames[i].module < 0 && i > 0) {
                        from = i;
                        break;
                }
        for (to = from; to < t->n_frames && t->frames[to].kind == FRAME_KIND_NATIVE && t->frames[to].module < 0; to++)
                ;
        *ret_from = from;
        *ret_to = to;
}

static int merge_thread(ThreadSnapshot *t, const Dump *d, const DumpThread *dt) {
        ThreadRuntime *rt = thread_runtime_add(t, RUNTIME_JAVA);
        size_t from, to, n;
        UserFrame *frames;

        if (!rt)
                return -ENOMEM;
        rt->known = true;
        rt->name = strdup(dt->name);
        if (!rt->name || (dt->state && !(rt->state = strdup(dt->state))))
                return -ENOMEM;
        for (size_t i = 0; i < dt->n_locks; i++) {
                RuntimeLock *l = thread_runtime_add_lock(rt);

                if (!l)
                        return -ENOMEM;
                *l = dt->locks[i];
                l->klass = NULL;
                if (dt->locks[i].klass && !(l->klass = strdup(dt->locks[i].klass)))
                        return -ENOMEM;
                if (l->kind == RUNTIME_LOCK_WAITING_TO_LOCK || l->kind == RUNTIME_LOCK_WAITING_TO_RELOCK ||
                    l->kind == RUNTIME_LOCK_PARKING)
                        l->owner = dump_owner(d, l->address, dt->tid);
        }
        if (dt->n_frames == 0)
                return 0;
        /* The Java frames replace the code cache's nameless ones where the native stack enters Java. */
        java_span(t, &from, &to);
        n = t->n_frames - (to - from) + dt->n_frames;
        frames = calloc(n, sizeof *frames);
        if (!frames)
                return -ENOMEM;
        memcpy(frames, t->frames, from * sizeof *frames);
        for (size_t i = 0; i < dt->n_frames; i++) {
                UserFrame *f = &frames[from + i];

                *f = (UserFrame) { .kind = FRAME_KIND_JAVA, .module = -1, .line = dt->frames[i].line };
                f->function = strdup(dt->frames[i].function);
                f->file = dt->frames[i].file ? strdup(dt->frames[i].file) : NULL;
                if (!f->function || (dt->frames[i].file && !f->file)) {
                        for (size_t k = 0; k <= i; k++) {
                                free(frames[from + k].function);
                                free(frames[from + k].file);
                        }
                        free(frames);
                        return -ENOMEM;
                }
        }
        for (size_t i = from; i < to; i++)
                user_frame_done(&t->frames[i]);
        memcpy(frames + from + dt->n_frames, t->frames + to, (t->n_frames - to) * sizeof *frames);
        free(t->frames);
        t->frames = frames;
        t->n_frames = n;
        return 0;
}

int java_merge_threaddump(Snapshot *s, const char *text, const pid_t *ns_tids) {
        ProcessRuntime *jvm = snapshot_add_runtime(s, RUNTIME_JAVA);
        _cleanup_(dump_done) Dump d = {};
        const char *nl = strchr(text, '\n');
        int r;

        if (!jvm)
                return -ENOMEM;
        /* The result code first: 0, or the JVM's error. */
        if (!startswith(text, "0\n")) {
                free(jvm->error);
                if (asprintf(&jvm->error, "the JVM refused the request: %.*s", nl ? (int) (nl - text) : 80, text) < 0)
                        return -ENOMEM;
                return 0;
        }
        r = dump_parse(nl + 1, &d);
        if (r < 0)
                return r;
        /* A JVM in a pid namespace of its own names its threads by their TIDs there. */
        for (size_t i = 0; ns_tids && i < d.n_threads; i++) {
                pid_t host = 0;

                for (size_t k = 0; k < s->n_threads && !host; k++)
                        if (ns_tids[k] == d.threads[i].tid)
                                host = s->threads[k].tid;
                d.threads[i].tid = host;
        }
        jvm->version = TAKE_PTR(d.vm);
        jvm->deadlocks = d.deadlocks;
        for (size_t i = 0; i < d.n_threads; i++) {
                ThreadSnapshot *t = d.threads[i].tid > 0 ? snapshot_find_thread(s, d.threads[i].tid) : NULL;
                const ThreadRuntime *rt = t ? thread_runtime(t, RUNTIME_JAVA) : NULL;

                if (t && !(rt && rt->known) && (r = merge_thread(t, &d, &d.threads[i])) < 0)
                        return r;
        }
        if (!jvm->version && d.n_threads == 0 && !(jvm->error = strdup("the JVM's answer held no thread dump")))
                return -ENOMEM;
        return 0;
}

/* The TID each thread of S has in the JVM's own pid namespace, in the order of S's threads (0 when it cannot be
 * read); NULL in *RET when the JVM is in ours. */
static int ns_tids_of(const Snapshot *s, pid_t **ret) {
        _cleanup_free_ pid_t *ns = NULL;
        _cleanup_close_ int dirfd = -EBADF;
        JvmIds ids;
        int r;

        *ret = NULL;
        r = proc_open_dir(s->pid, 0, &dirfd);
        if (r < 0)
                return r;
        r = read_ids(dirfd, &ids);
        if (r < 0 || ids.nspid == s->pid)
                return r < 0 ? r : 0;
        ns = calloc(s->n_threads ?: 1, sizeof *ns);
        if (!ns)
                return -ENOMEM;
        for (size_t i = 0; i < s->n_threads; i++) {
                _cleanup_close_ int taskfd = -EBADF;
                JvmIds t;

                if (proc_open_task(dirfd, s->threads[i].tid, &taskfd) == 0 && read_ids(taskfd, &t) == 0)
                        ns[i] = t.nspid;
        }
        *ret = TAKE_PTR(ns);
        return 0;
}

int java_capture(Snapshot *s, uint64_t deadline_usec) {
        _cleanup_free_ char *text = NULL, *why = NULL;
        _cleanup_free_ pid_t *ns_tids = NULL;
        ProcessRuntime *jvm = snapshot_add_runtime(s, RUNTIME_JAVA);
        uint64_t usec = 0;
        int r;

        if (!jvm)
                return -ENOMEM;
        r = java_request_threaddump(s->pid, deadline_usec, &text, &usec, &why);
        if (r == -ENOMEM)
                return r;
        if (r < 0) {
                jvm->error = why ? TAKE_PTR(why) : strdup(strerror(-r));
                return jvm->error ? 0 : -ENOMEM;
        }
        jvm->pause_usec = usec;
        r = ns_tids_of(s, &ns_tids);
        if (r == -ENOMEM)
                return r;
        return java_merge_threaddump(s, text, ns_tids);
}

/* ---- the runtime table's row ---- */

/* A JVM's own dump, after the stacks it is merged into: it costs the JVM a safepoint, our copies none. Asked within
 * what is left of the budget, and never past the answer deadline. */
static int java_finish(void *state, const RuntimeCapture *rc) {
        uint64_t now = now_usec(CLOCK_MONOTONIC);
        Snapshot *s = rc->s;
        int r;

        if (!java_is_jvm(s))
                return 0;
        if (now >= rc->deadline_usec) {
                ProcessRuntime *jvm = snapshot_add_runtime(s, RUNTIME_JAVA);
                if (!jvm || !(jvm->error = strdup("the time budget was spent before the JVM was asked")))
                        return -ENOMEM;
                return 0;
        }
        r = java_capture(s, MIN(rc->deadline_usec, now + rc->ask_usec));
        /* The answer's time bounds the safepoint its Java threads were paused for: a pause like a ptrace stop's. */
        if (r >= 0 && snapshot_runtime(s, RUNTIME_JAVA)->version)
                s->max_pause_us = MAX(s->max_pause_us, (double) snapshot_runtime(s, RUNTIME_JAVA)->pause_usec);
        return r;
}

const RuntimeOps java_runtime_ops = {
        .finish = java_finish,
};
