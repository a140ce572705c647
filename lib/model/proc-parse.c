/* proc-parse.c: stat, status, syscall, io, fdinfo, stack, maps, cmdline and cgroup parsers (pure, bounded). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>

#include "base/alloc-util.h"
#include "base/macro.h"
#include "base/parse-util.h"
#include "base/strv.h"
#include "model/proc-parse.h"

int proc_parse_stat(const char *buf, size_t len, ProcStat *ret) {
        const char *end = buf + len, *open, *close, *p;
        ProcStat st = {};
        uint64_t u;
        int64_t i;
        size_t n;

        /* comm may hold spaces, parentheses and newlines: it runs from the first '(' to the last ')'. */
        open = memchr(buf, '(', len);
        if (!open)
                return -EINVAL;
        close = memrchr(open, ')', (size_t) (end - open));
        if (!close)
                return -EINVAL;

        p = buf;
        if (scan_u64(&p, open, &u) < 0 || u == 0 || u > INT32_MAX) /* (1) pid */
                return -EINVAL;
        st.pid = (int) u;
        n = MIN((size_t) (close - open - 1), sizeof st.comm - 1); /* (2) comm */
        memcpy(st.comm, open + 1, n);
        st.comm[n] = '\0';

        p = close + 1;
        if (scan_char(&p, end, &st.state) < 0) /* (3) state */
                return -EINVAL;
        if (scan_i64(&p, end, &i) < 0 || i < 0 || i > INT32_MAX) /* (4) ppid */
                return -EINVAL;
        st.ppid = (int) i;
        if (scan_skip(&p, end, 4) < 0 ||  /* (5)…(8) pgrp session tty_nr tpgid */
            scan_u64(&p, end, &st.flags) < 0 || /* (9) */
            scan_u64(&p, end, &st.minflt) < 0 || /* (10) */
            scan_skip(&p, end, 1) < 0 ||    /* (11) cminflt */
            scan_u64(&p, end, &st.majflt) < 0 || /* (12) */
            scan_skip(&p, end, 1) < 0 ||    /* (13) cmajflt */
            scan_u64(&p, end, &st.utime) < 0 || /* (14) */
            scan_u64(&p, end, &st.stime) < 0 || /* (15) */
            scan_skip(&p, end, 2) < 0 ||    /* (16), (17) cutime cstime */
            scan_i64(&p, end, &st.priority) < 0 || /* (18) */
            scan_i64(&p, end, &st.nice) < 0 ||     /* (19) */
            scan_u64(&p, end, &st.num_threads) < 0 || /* (20) */
            scan_skip(&p, end, 1) < 0 ||    /* (21) itrealvalue */
            scan_u64(&p, end, &st.starttime) < 0) /* (22) */
                return -EINVAL;
        /* (23)…(38) are optional for us; (39) processor exists on every kernel we support. */
        if (scan_skip(&p, end, 16) >= 0 && scan_i64(&p, end, &i) >= 0 && i >= 0 && i <= INT32_MAX)
                st.processor = (int) i;
        else
                st.processor = -1;
        *ret = st;
        return 0;
}

int proc_parse_syscall(const char *buf, size_t len, ProcSyscall *ret) {
        const char *p = buf, *end = buf + len;
        ProcSyscall sc = {};

        while (p < end && *p == ' ')
                p++;
        if ((size_t) (end - p) >= 7 && memcmp(p, "running", 7) == 0) {
                sc.kind = PROC_SYSCALL_RUNNING;
                sc.nr = -1;
                *ret = sc;
                return 0;
        }
        if (scan_i64(&p, end, &sc.nr) < 0 || sc.nr < -1)
                return -EINVAL;
        if (sc.nr == -1) {
                sc.kind = PROC_SYSCALL_NONE;
        } else {
                sc.kind = PROC_SYSCALL_BLOCKED;
                for (size_t k = 0; k < ELEMENTSOF(sc.args); k++)
                        if (scan_hex_u64(&p, end, &sc.args[k]) < 0)
                                return -EINVAL;
        }
        if (scan_hex_u64(&p, end, &sc.sp) < 0 || scan_hex_u64(&p, end, &sc.pc) < 0)
                return -EINVAL;
        *ret = sc;
        return 0;
}

void proc_syscall_resolve_restart(ProcSyscall *sc, const char *wchan) {
        /* Only these calls continue through the restart block (select, ppoll, epoll_wait and the rest are
         * re-issued with their own number), and each sleeps in its own kernel function. aarch64 has no poll. */
        static const struct {
                const char *wchan;      /* a prefix: the compiler may add ".constprop.0", old kernels "_me" */
                int64_t nr;
        } origins[] = {
#ifdef __NR_poll
                { "poll_schedule_timeout", __NR_poll },         /* poll: do_restart_poll() */
#endif
                { "futex_wait_queue", __NR_futex },             /* futex: futex_wait_restart() */
                { "do_nanosleep", __NR_nanosleep },             /* nanosleep or clock_nanosleep:
                                                                 * hrtimer_nanosleep_restart() */
        };

        if (sc->kind != PROC_SYSCALL_BLOCKED || sc->nr != __NR_restart_syscall || !wchan)
                return;
        for (size_t i = 0; i < ELEMENTSOF(origins); i++)
                if (startswith(wchan, origins[i].wchan)) {
                        sc->nr = origins[i].nr;
                        /* clock_nanosleep's first argument is a clock id, nanosleep's a pointer. */
                        if (sc->nr == __NR_nanosleep && sc->args[0] < 4096)
                                sc->nr = __NR_clock_nanosleep;
                        sc->restarted = true;
                        return;
                }
}

bool proc_syscall_same_place(const ProcSyscall *a, const ProcSyscall *b) {
        return a->kind == b->kind && a->nr == b->nr && a->sp == b->sp && a->pc == b->pc;
}

/* Find "Key:\t" at a line start and return a pointer after the colon, or NULL. */
static const char *status_field(const char *buf, const char *end, const char *key) {
        size_t klen = strlen(key);

        for (const char *l = buf; l && l < end;) {
                if ((size_t) (end - l) > klen && memcmp(l, key, klen) == 0 && l[klen] == ':')
                        return l + klen + 1;
                l = memchr(l, '\n', (size_t) (end - l));
                if (l)
                        l++;
        }
        return NULL;
}

int proc_parse_schedstat(const char *buf, size_t len, ProcSchedstat *ret) {
        const char *p = buf, *end = buf + len;
        ProcSchedstat st;

        if (scan_u64(&p, end, &st.run_ns) < 0 || scan_u64(&p, end, &st.wait_ns) < 0 ||
            scan_u64(&p, end, &st.timeslices) < 0)
                return -EINVAL;
        *ret = st;
        return 0;
}

int proc_parse_status(const char *buf, size_t len, ProcStatus *ret) {
        const char *end = buf + len, *p;
        ProcStatus st = {};
        uint64_t u;

        p = status_field(buf, end, "Uid");
        if (!p || scan_u64(&p, end, &u) < 0 || u > UINT32_MAX)
                return -EINVAL;
        st.uid = (uid_t) u;
        if (scan_u64(&p, end, &u) < 0 || u > UINT32_MAX)
                return -EINVAL;
        st.euid = (uid_t) u;
        p = status_field(buf, end, "Tgid");
        if (!p || scan_u64(&p, end, &u) < 0 || u > INT32_MAX)
                return -EINVAL;
        st.tgid = (int) u;
        p = status_field(buf, end, "TracerPid");
        if (!p || scan_u64(&p, end, &u) < 0 || u > INT32_MAX)
                return -EINVAL;
        st.tracer_pid = (int) u;
        /* Context switch counters are at the end and absent on very old kernels: optional. */
        p = status_field(buf, end, "voluntary_ctxt_switches");
        if (p)
                (void) scan_u64(&p, end, &st.voluntary_ctxt_switches);
        p = status_field(buf, end, "nonvoluntary_ctxt_switches");
        if (p)
                (void) scan_u64(&p, end, &st.nonvoluntary_ctxt_switches);
        *ret = st;
        return 0;
}

int proc_parse_io(const char *buf, size_t len, ProcIo *ret) {
        static const char *const keys[] = { "rchar", "wchar", "syscr", "syscw" };
        const char *end = buf + len;
        ProcIo io = {};
        uint64_t *const vals[] = { &io.rchar, &io.wchar, &io.syscr, &io.syscw };

        for (size_t i = 0; i < ELEMENTSOF(keys); i++) {
                const char *p = status_field(buf, end, keys[i]);
                if (!p || scan_u64(&p, end, vals[i]) < 0)
                        return -EINVAL;
        }
        *ret = io;
        return 0;
}

int proc_parse_fdinfo_field(const char *buf, size_t len, const char *key, unsigned base, uint64_t *ret) {
        const char *end = buf + len, *p = status_field(buf, end, key);

        if (!p)
                return -ENOENT;
        while (p < end && (*p == ' ' || *p == '\t'))
                p++;
        return scan_digits(&p, end, base, ret) < 0 ? -EINVAL : 0;
}

int proc_parse_fdinfo_flags(const char *buf, size_t len, unsigned *ret_flags) {
        uint64_t u;

        if (proc_parse_fdinfo_field(buf, len, "flags", 8, &u) < 0 || u > UINT32_MAX)
                return -EINVAL;
        *ret_flags = (unsigned) u;
        return 0;
}

size_t proc_parse_fdinfo_tfds(const char *buf, size_t len, int *fds, size_t max) {
        const char *end = buf + len;
        size_t n = 0;

        /* "tfd:        5 events:       19 data:                5  pos:0 ino:1c sdev:8", one line per fd in the set. */
        for (const char *l = buf; l < end;) {
                const char *eol = memchr(l, '\n', (size_t) (end - l)) ?: end, *p;
                uint64_t fd;

                if (eol - l > 4 && memcmp(l, "tfd:", 4) == 0) {
                        p = l + 4;
                        if (scan_u64(&p, eol, &fd) >= 0 && fd <= INT32_MAX) {
                                if (n < max)
                                        fds[n] = (int) fd;
                                n++;
                        }
                }
                l = eol + 1;
        }
        return n;
}

static void copy_bounded(char *dst, size_t size, const char *src, size_t n) {
        n = MIN(n, size - 1);
        memcpy(dst, src, n);
        dst[n] = '\0';
}

int proc_parse_kstack(const char *buf, size_t len, ProcKernelFrame *frames, size_t max) {
        const char *end = buf + len;
        size_t n = 0;

        for (const char *l = buf; l < end && n < max;) {
                const char *eol = memchr(l, '\n', (size_t) (end - l)) ?: end;
                const char *p = memchr(l, ']', (size_t) (eol - l));
                ProcKernelFrame *f = &frames[n];
                const char *plus, *slash, *sp;

                l = eol + 1;
                if (!p)
                        continue;
                p++;
                while (p < eol && *p == ' ')
                        p++;
                if (p >= eol)
                        continue;
                *f = (ProcKernelFrame) {};
                sp = memchr(p, ' ', (size_t) (eol - p)) ?: eol;
                plus = memchr(p, '+', (size_t) (sp - p));
                copy_bounded(f->function, sizeof f->function, p, (size_t) ((plus ?: sp) - p));
                if (plus) {
                        const char *q = plus + 1;
                        slash = memchr(q, '/', (size_t) (sp - q));
                        if (slash) {
                                const char *r = slash + 1;
                                (void) scan_hex_u64(&q, slash, &f->offset);
                                (void) scan_hex_u64(&r, sp, &f->size);
                        }
                }
                if (sp < eol) {
                        const char *m = sp + 1, *me;
                        if (m < eol && *m == '[') {
                                m++;
                                me = memchr(m, ']', (size_t) (eol - m)) ?: eol;
                                copy_bounded(f->module, sizeof f->module, m, (size_t) (me - m));
                        }
                }
                n++;
        }
        return (int) n;
}

static int parse_dev(const char **p, const char *end, unsigned *maj, unsigned *min) {
        const char *colon, *tok_end;
        uint64_t a, b;

        while (*p < end && **p == ' ')
                (*p)++;
        tok_end = memchr(*p, ' ', (size_t) (end - *p)) ?: end;
        colon = memchr(*p, ':', (size_t) (tok_end - *p));
        if (!colon)
                return -EINVAL;
        if (scan_hex_u64(p, colon, &a) < 0)
                return -EINVAL;
        *p = colon + 1;
        if (scan_hex_u64(p, tok_end, &b) < 0 || a > UINT32_MAX || b > UINT32_MAX)
                return -EINVAL;
        *maj = (unsigned) a;
        *min = (unsigned) b;
        return 0;
}

char *proc_maps_path_unmangle(char *path) {
        char *w = path;

        for (const char *r = path; *r;) {
                if (r[0] == '\\' && r[1] == '0' && r[2] == '1' && r[3] == '2') {
                        *w++ = '\n';
                        r += 4;
                } else
                        *w++ = *r++;
        }
        *w = '\0';
        return path;
}

int proc_parse_maps(char *buf, size_t len, ProcMap **ret, size_t *ret_n) {
        _cleanup_free_ ProcMap *maps = NULL;
        char *end = buf + len;
        size_t n = 0, alloc = 0;

        for (char *l = buf; l < end;) {
                char *eol = memchr(l, '\n', (size_t) (end - l)) ?: end;
                const char *p = l, *dash;
                ProcMap m = {};

                if (eol < end)
                        *eol = '\0'; /* the last line ends at the caller's NUL */
                dash = memchr(l, '-', (size_t) (eol - l));
                if (!dash || scan_hex_u64(&p, dash, &m.start) < 0)
                        goto next;
                p = dash + 1;
                if (scan_hex_u64(&p, eol, &m.end) < 0 || m.end <= m.start)
                        goto next;
                while (p < eol && *p == ' ')
                        p++;
                if (eol - p < 4)
                        goto next;
                m.r = p[0] == 'r';
                m.w = p[1] == 'w';
                m.x = p[2] == 'x';
                m.shared = p[3] == 's';
                p += 4;
                if (scan_hex_u64(&p, eol, &m.offset) < 0 || parse_dev(&p, eol, &m.dev_major, &m.dev_minor) < 0 ||
                    scan_u64(&p, eol, &m.inode) < 0)
                        goto next;
                while (p < eol && *p == ' ')
                        p++;
                m.path = proc_maps_path_unmangle((char *) p);
                if (!GREEDY_REALLOC(maps, alloc, n + 1))
                        return -ENOMEM;
                maps[n++] = m;
        next:
                l = eol + 1;
        }
        *ret = TAKE_PTR(maps);
        *ret_n = n;
        return 0;
}

const ProcMap *proc_maps_find(const ProcMap *maps, size_t n, uint64_t addr) {
        size_t lo = 0, hi = n;

        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (addr < maps[mid].start)
                        hi = mid;
                else if (addr >= maps[mid].end)
                        lo = mid + 1;
                else
                        return &maps[mid];
        }
        return NULL;
}

int proc_parse_cmdline(const char *buf, size_t len, char ***ret) {
        size_t n = 0, k = 0;
        char **v;

        /* A trailing NUL ends the last argument; a missing one (truncated or rewritten) still counts. */
        for (size_t i = 0; i < len; i++)
                if (buf[i] == '\0')
                        n++;
        if (len > 0 && buf[len - 1] != '\0')
                n++;
        v = calloc(n + 1, sizeof *v);
        if (!v)
                return -ENOMEM;
        for (size_t i = 0; i < len && k < n;) {
                size_t l = strnlen(buf + i, len - i);
                v[k] = strndup(buf + i, l);
                if (!v[k]) {
                        strv_free(v);
                        return -ENOMEM;
                }
                k++;
                i += l + 1;
        }
        *ret = v;
        return 0;
}

static bool has_suffix(const char *s, size_t len, const char *suffix) {
        size_t sl = strlen(suffix);
        return len > sl && memcmp(s + len - sl, suffix, sl) == 0;
}

static bool is_unit_name(const char *s, size_t len) {
        static const char *const suffixes[] = { ".service", ".scope", ".socket", ".mount", ".swap", ".timer" };

        for (size_t i = 0; i < ELEMENTSOF(suffixes); i++)
                if (has_suffix(s, len, suffixes[i]))
                        return true;
        return false;
}

int cgroup_path_get_unit(const char *path, char **ret) {
        const char *p = path;

        while (*p) {
                const char *e;
                size_t l;

                while (*p == '/')
                        p++;
                e = strchrnul(p, '/');
                l = (size_t) (e - p);
                if (l == 0)
                        break;
                if (has_suffix(p, l, ".slice")) {
                        p = e;
                        continue;
                }
                if (!is_unit_name(p, l))
                        break;
                *ret = strndup(p, l);
                return *ret ? 0 : -ENOMEM;
        }
        *ret = NULL;
        return -ENXIO;
}

int proc_parse_cgroup_hierarchy(const char *buf, size_t len, const char *controller, char **ret_path) {
        const char *end = buf + len;
        size_t want = strlen(controller);

        for (const char *l = buf; l < end;) {
                const char *eol = memchr(l, '\n', (size_t) (end - l)) ?: end;
                const char *c = memchr(l, ':', (size_t) (eol - l));
                const char *p = c ? memchr(c + 1, ':', (size_t) (eol - c - 1)) : NULL;
                bool match = false;

                /* "ID:CONTROLLERS:PATH", the controllers separated by commas; the unified hierarchy's are empty. */
                if (p && want == 0)
                        match = p == c + 1 && c - l == 1 && l[0] == '0';
                else if (p)
                        for (const char *w = c + 1; w < p && !match;) {
                                const char *comma = memchr(w, ',', (size_t) (p - w)) ?: p;

                                match = (size_t) (comma - w) == want && memcmp(w, controller, want) == 0;
                                w = comma + 1;
                        }
                if (match) {
                        char *path = strndup(p + 1, (size_t) (eol - p - 1));

                        if (!path)
                                return -ENOMEM;
                        *ret_path = path;
                        return 0;
                }
                l = eol + 1;
        }
        return -ENXIO;
}

int proc_parse_cgroup(const char *buf, size_t len, char **ret_path, char **ret_unit) {
        _cleanup_free_ char *path = NULL;
        char *unit = NULL;
        int r;

        r = proc_parse_cgroup_hierarchy(buf, len, "", &path);
        if (r < 0)
                return r;
        if (cgroup_path_get_unit(path, &unit) == -ENOMEM)
                return -ENOMEM;
        *ret_unit = unit;
        *ret_path = TAKE_PTR(path);
        return 0;
}

static const char *const syscall_names[] = {
#include "model/syscall-names.inc"
};

int64_t syscall_nr_from_name(const char *name) {
        if (!name)
                return -1;
        for (size_t nr = 0; nr < ELEMENTSOF(syscall_names); nr++)
                if (syscall_names[nr] && streq(syscall_names[nr], name))
                        return (int64_t) nr;
        return -1;
}

const char *syscall_name(int64_t nr) {
        if (nr < 0 || (uint64_t) nr >= ELEMENTSOF(syscall_names))
                return NULL;
        return syscall_names[nr];
}
