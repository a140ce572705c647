/* scan.c: the poll. Below the /proc floor with BPF: one read of the task iterator's records for every thread. At the
 * /proc floor (htop's way) otherwise: dir fds, openat, one pread of stat per thread into a fixed buffer through a
 * descriptor kept across polls, deep files only for suspects. Either way one classifier, and mark-and-sweep. */
#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "base/alloc-util.h"
#include "base/log.h"
#include "base/macro.h"
#include "base/parse-util.h"
#include "base/string-table.h"
#include "base/time-util.h"
#include "chain/peers.h"
#include "model/proc-parse.h"
#include "proc/proc-read.h"
#include "runtime/python.h"
#include "runtime/runtime.h"
#include "scan.h"

int scanner_new(Scanner **ret) {
        Scanner *s = calloc(1, sizeof *s);
        struct rlimit rl;

        if (!s)
                return -ENOMEM;
        s->proc_fd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (s->proc_fd < 0) {
                int r = negative_errno();
                free(s);
                return r;
        }
        s->hz = sysconf(_SC_CLK_TCK);
        s->self = getpid();
        s->want_all = true;
        if (cgroup_freezers_new(&s->freezers) < 0 || fd_tables_new(&s->fd_tables) < 0) {
                cgroup_freezers_free(s->freezers);
                safe_close(s->proc_fd);
                free(s);
                return -ENOMEM;
        }
        /* Keep as many stat descriptors as the hard limit allows; the rest are opened per read. */
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
                if (rl.rlim_cur < rl.rlim_max) {
                        rl.rlim_cur = rl.rlim_max;
                        if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
                                (void) getrlimit(RLIMIT_NOFILE, &rl);
                }
                s->stats.max_kept_fds = rl.rlim_cur > SCAN_FD_RESERVE * 2 ? (unsigned) MIN(rl.rlim_cur - SCAN_FD_RESERVE, 1U << 30) : 0;
        }
        *ret = s;
        return 0;
}

static void process_free(ProcessEntry *p) {
        if (!p)
                return;
        free(p->exe);
        free(p->unit);
        free(p->cgroup);
        cgroup_place_done(&p->place);
        free(p);
}

/* Whether this scan saw thread T: by a record or a read of its own, or as one of its process's threads a walk counted
 * as still there. */
static bool thread_seen(const Scanner *s, const ThreadEntry *t) {
        return t->seen_gen == s->gen || t->process->all_seen_gen == s->gen;
}

/* Forget thread T: out of the map, out of its process's list, its descriptor closed. */
static void thread_drop(Scanner *s, ThreadEntry *t) {
        if (!t)
                return;
        (void) intmap_remove(&s->threads, t->tid);
        if (t->prev)
                t->prev->next = t->next;
        else
                t->process->threads = t->next;
        if (t->next)
                t->next->prev = t->prev;
        t->process->n_threads--;
        t->process->moved_usec = s->now_usec;
        /* Seen in this scan already (a leader whose pid turned out reused): uncount it. */
        if (thread_seen(s, t) && t->have_sample)
                s->seen_threads--;
        t->cls.class = _THREAD_CLASS_INVALID;
        scanner_count_class(s, t);
        if (t->stat_fd >= 0) {
                safe_close(t->stat_fd);
                s->stats.kept_fds--;
        }
        if (t->sched_fd >= 0) {
                safe_close(t->sched_fd);
                s->stats.kept_fds--;
        }
        free(t->python_frame);
        free(t->walk_wchan);
        free(t);
}

/* Forget process P and all its threads. */
static void process_drop(Scanner *s, ProcessEntry *p) {
        while (p->threads)
                thread_drop(s, p->threads);
        if (p->seen_gen == s->gen)
                s->seen_processes--;
        (void) intmap_remove(&s->processes, p->pid);
        process_free(p);
}

Scanner *scanner_free(Scanner *s) {
        if (!s)
                return NULL;
        peer_resolver_free(s->locks);
        cgroup_freezers_free(s->freezers);
        fd_tables_free(s->fd_tables);
        for (size_t i = 0; i < s->processes.size; i++)
                if (s->processes.keys[i] > 0) {
                        ProcessEntry *p = s->processes.values[i];
                        for (ThreadEntry *t = p->threads, *next; t; t = next) {
                                next = t->next;
                                safe_close(t->stat_fd);
                                safe_close(t->sched_fd);
                                free(t->python_frame);
                                free(t->walk_wchan);
                                free(t);
                        }
                        process_free(p);
                }
        intmap_done(&s->threads);
        intmap_done(&s->processes);
        safe_close(s->proc_fd);
        symbolizer_free(s->runtime_sym);
        task_iter_free(s->iter);
        free(s->source_why);
        free(s->settling);
        free(s->settling_next);
        free(s->wanting);
        free(s);
        return NULL;
}

static const char *const scan_source_table[_SCAN_SOURCE_MAX] = {
        [SCAN_SOURCE_PROC] = "proc",
        [SCAN_SOURCE_BPF] = "bpf",
};

const char *scan_source_to_string(ScanSource v) {
        return v >= 0 && v < _SCAN_SOURCE_MAX ? scan_source_table[v] : NULL;
}

/* The /proc scan's kept descriptors, closed when the records take over. */
static void close_kept_fds(Scanner *s) {
        for (size_t i = 0; i < s->threads.size; i++)
                if (s->threads.keys[i] > 0) {
                        ThreadEntry *t = s->threads.values[i];

                        t->stat_fd = safe_close(t->stat_fd);
                        t->sched_fd = safe_close(t->sched_fd);
                }
        s->stats.kept_fds = 0;
}

static void set_source(Scanner *s, ScanSource source, TaskIter *iter, char *why) {
        if (s->iter != iter)
                task_iter_free(s->iter);
        s->iter = iter;
        s->source = source;
        free(s->source_why);
        s->source_why = why;
        if (source == SCAN_SOURCE_BPF) {
                close_kept_fds(s);
                s->want_all = true;
        }
}

int scanner_set_source(Scanner *s, ConfigScanSource want) {
        _cleanup_free_ char *why = NULL;
        TaskIter *iter = NULL;
        int r;

        if (want == CONFIG_SCAN_PROC) {
                set_source(s, SCAN_SOURCE_PROC, NULL, strdup("scan.source is proc"));
                return 0;
        }
        if (s->iter) {
                set_source(s, SCAN_SOURCE_BPF, s->iter, strdup(want == CONFIG_SCAN_BPF ? "scan.source is bpf" :
                                                                "the kernel runs the BPF task iterator"));
                return 0;
        }
        r = task_iter_new(&iter, &why);
        if (r < 0) {
                if (want == CONFIG_SCAN_BPF) {
                        free(s->source_why);
                        s->source_why = TAKE_PTR(why);
                        return r;
                }
                set_source(s, SCAN_SOURCE_PROC, NULL, TAKE_PTR(why));
                return 0;
        }
        set_source(s, SCAN_SOURCE_BPF, iter, strdup(want == CONFIG_SCAN_BPF ? "scan.source is bpf" :
                                                    "the kernel runs the BPF task iterator"));
        return 0;
}

/* ---- the walks' view of the threads (WaitThreads): this scan's samples ---- */

/* Thread TID of PID as this scan saw it; NULL when it did not (gone, or new since). */
static ThreadEntry *seen_thread(Scanner *s, pid_t pid, pid_t tid) {
        ThreadEntry *t = intmap_get(&s->threads, tid);

        return t && t->pid == pid && thread_seen(s, t) && t->have_sample ? t : NULL;
}

static int wait_threads_list(void *userdata, pid_t pid, pid_t **ret, size_t *ret_n) {
        Scanner *s = userdata;
        ProcessEntry *p = intmap_get(&s->processes, pid);
        _cleanup_close_ int dirfd = -EBADF;
        pid_t *tids;
        size_t n = 0;
        int k;

        if (!p || p->seen_gen != s->gen || p->n_threads == 0) {
                /* Not in this scan (new since, or one we may not read): as /proc lists it. */
                k = proc_open_dir(pid, 0, &dirfd);
                return k < 0 ? k : proc_list_numeric(dirfd, "task", ret, ret_n);
        }
        tids = malloc(p->n_threads * sizeof *tids);
        if (!tids)
                return -ENOMEM;
        /* The list holds the newest first: backwards, to give the oldest first as /proc does. */
        for (const ThreadEntry *t = p->threads; t; t = t->next)
                if (thread_seen(s, t))
                        tids[n++] = t->tid;
        for (size_t i = 0; i < n / 2; i++) {
                pid_t x = tids[i];

                tids[i] = tids[n - 1 - i];
                tids[n - 1 - i] = x;
        }
        *ret = tids;
        *ret_n = n;
        return 0;
}

static int wait_threads_wait(void *userdata, pid_t pid, pid_t tid, ThreadWait *ret) {
        Scanner *s = userdata;
        const ThreadEntry *t = seen_thread(s, pid, tid);
        const ThreadSample *cur = t ? &t->sample : NULL;

        /* Parked on the GIL, it wakes to ask for it every switch interval, and the look may have caught it between
         * two waits (running, or runnable behind a busy machine): it still waits where the classifier holds it
         * parked, and that is the wait to follow. A walk that took the moment for the wait found no GIL edge, and
         * with nothing changed no walk came again: the waiter stayed "waiting" for good. */
        if (cur && t->cls.parked && t->cls.parked_gil && cur->state != 't' && cur->state != 'T' &&
            !(cur->have_syscall && cur->syscall.kind == PROC_SYSCALL_BLOCKED)) {
                *ret = (ThreadWait) { .pid = pid, .tid = tid, .state = 'S', .syscall = t->cls.parked_place,
                                      .wchan_unread = !t->walk_wchan };
                if (t->walk_wchan)
                        snprintf(ret->wchan, sizeof ret->wchan, "%s", t->walk_wchan);
                return 0;
        }
        /* A stopped thread's tracer is in its status file, which no scan reads; and a sleeper whose syscall the scan
         * did not read (it ran a little since the look before) is read as /proc shows it now. */
        if (!cur || cur->state == 't' || cur->state == 'T' || (cur->state != 'R' && !cur->have_syscall))
                return thread_wait_read(pid, tid, ret);
        *ret = (ThreadWait) { .pid = pid, .tid = tid, .state = cur->state,
                              .syscall = { .kind = PROC_SYSCALL_RUNNING, .nr = -1 } };
        if (cur->have_syscall)
                ret->syscall = cur->syscall;
        if (ret->syscall.kind != PROC_SYSCALL_BLOCKED)
                return 0;
        if (cur->state == 'D' && t->wchan[0])
                snprintf(ret->wchan, sizeof ret->wchan, "%s", t->wchan);
        else if (t->walk_wchan)
                snprintf(ret->wchan, sizeof ret->wchan, "%s", t->walk_wchan);
        else
                ret->wchan_unread = true;
        return 0;
}

static int wait_threads_wchan(void *userdata, pid_t pid, pid_t tid, char *buf, size_t size) {
        Scanner *s = userdata;
        ThreadEntry *t = seen_thread(s, pid, tid);
        _cleanup_close_ int dirfd = -EBADF;
        ssize_t n;
        int k;

        assert(size > 0);
        if (t && t->walk_wchan) {
                snprintf(buf, size, "%s", t->walk_wchan);
                return 0;
        }
        k = proc_open_dir(pid, tid, &dirfd);
        if (k < 0)
                return k;
        n = proc_read_small(dirfd, "wchan", buf, size);
        if (n < 0)
                return (int) n;
        if (n == 0 || streq(buf, "0"))
                buf[0] = '\0';
        s->stats.deep_reads++;
        /* Kept until the thread moves: it sleeps where it slept. */
        if (t)
                t->walk_wchan = strdup(buf);
        return 0;
}

/* Whether process PID, as this scan saw it, has not moved since SINCE: then its fds are what they were. */
static bool fd_table_fresh(void *userdata, pid_t pid, uint64_t since) {
        Scanner *s = userdata;
        const ProcessEntry *p = intmap_get(&s->processes, pid);

        return p && p->seen_gen == s->gen && p->moved_usec <= since;
}

/* Every process this scan saw. */
static int fd_table_list(void *userdata, pid_t **ret, size_t *ret_n) {
        Scanner *s = userdata;
        pid_t *pids = malloc(MAX(s->processes.used, 1U) * sizeof *pids);
        size_t n = 0;

        if (!pids)
                return -ENOMEM;
        for (size_t i = 0; i < s->processes.size; i++)
                if (s->processes.keys[i] > 0 && ((ProcessEntry *) s->processes.values[i])->seen_gen == s->gen)
                        pids[n++] = s->processes.keys[i];
        *ret = pids;
        *ret_n = n;
        return 0;
}

/* Whether process PID, as this scan saw it, may run runtime K: its maps name K's interpreter. */
static bool resolver_may_run(void *userdata, RuntimeKind k, pid_t pid) {
        Scanner *s = userdata;
        ProcessEntry *p = intmap_get(&s->processes, pid);

        return p && scanner_process_runs(s, p, k);
}

int scanner_resolver_new(Scanner *s, uint64_t now, PeerResolver **ret) {
        _cleanup_(peer_resolver_freep) PeerResolver *r = NULL;
        Symbolizer *sym = scanner_runtime_symbolizer(s);
        int k;

        k = peer_resolver_new(&r);
        if (k < 0)
                return k;
        if (sym) {
                k = runtime_waits_attach(r, sym, 0, resolver_may_run, s);
                if (k < 0)
                        return k;
        }
        s->fd_view = (FdTablesView) { .fresh = fd_table_fresh, .list = fd_table_list, .userdata = s };
        peer_resolver_set_fd_tables(r, s->fd_tables, &s->fd_view, now);
        *ret = TAKE_PTR(r);
        return 0;
}

const WaitThreads *scanner_wait_threads(Scanner *s) {
        s->wait_threads = (WaitThreads) { .list = wait_threads_list, .wait = wait_threads_wait,
                                          .wchan = wait_threads_wchan, .userdata = s };
        return &s->wait_threads;
}

Symbolizer *scanner_runtime_symbolizer(Scanner *s) {
        /* Symbols only, no DWARF: it looks up a runtime's roots (_PyRuntime), never a frame's source line. */
        if (!s->runtime_sym && symbolizer_new(NULL, false, &s->runtime_sym) < 0)
                return NULL;
        return s->runtime_sym;
}

bool scanner_process_runs(Scanner *s, ProcessEntry *p, RuntimeKind k) {
        if (p->runtimes == 0) {
                p->runtimes = (uint16_t) (RUNTIMES_LOOKED | runtime_kinds_mapped(p->pid));
                s->stats.deep_reads++;
        }
        return p->runtimes & (1U << k);
}

int scanner_set_python_frame(Scanner *s, pid_t pid, pid_t tid, const char *frame) {
        ThreadEntry *t = intmap_get(&s->threads, tid);
        char *copy = NULL;

        if (!t || t->pid != pid)
                return 0;
        if (frame && !(copy = strdup(frame)))
                return -ENOMEM;
        free(t->python_frame);
        t->python_frame = copy;
        s->python_frames_changed++;
        return 0;
}

void scanner_forget_python_frames(Scanner *s, pid_t pid, uint64_t starttime) {
        ProcessEntry *p = intmap_get(&s->processes, pid);

        if (!p || (starttime && p->starttime != starttime))
                return;
        for (ThreadEntry *t = p->threads; t; t = t->next)
                if (t->python_frame) {
                        t->python_frame = mfree(t->python_frame);
                        s->python_frames_changed++;
                }
}

int scanner_load_identity(Scanner *s, ProcessEntry *p) {
        _cleanup_close_ int dirfd = -EBADF;
        _cleanup_free_ char *cg = NULL;
        char buf[4096];
        ProcStatus st;
        size_t len;
        ssize_t n;
        int r;

        if (p->identity_loaded)
                return 0;
        p->identity_loaded = true;
        r = proc_open_dir(p->pid, 0, &dirfd);
        if (r < 0)
                return r;
        (void) proc_readlink(dirfd, "exe", &p->exe);
        if (proc_read_full(dirfd, "cgroup", 16384, &cg, &len) >= 0)
                (void) proc_parse_cgroup(cg, len, &p->cgroup, &p->unit);
        n = proc_read_small(dirfd, "status", buf, sizeof buf);
        if (n >= 0 && proc_parse_status(buf, (size_t) n, &st) >= 0)
                p->uid = st.uid;
        return 0;
}

/* Read /proc/PID/task/TID/<name> relative to the open /proc. */
static ssize_t read_task_file(Scanner *s, ThreadEntry *t, const char *name, char *buf, size_t size) {
        char path[64];
        _cleanup_close_ int fd = -EBADF;

        snprintf(path, sizeof path, "%d/task/%d/%s", (int) t->pid, (int) t->tid, name);
        fd = openat(s->proc_fd, path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return proc_errno(negative_errno());
        s->stats.deep_reads++;
        return proc_pread(fd, buf, size);
}

/* A sleeper's schedstat, through a descriptor kept like stat's while the budget has room for both (stat first: a
 * thread's stat is read on every scan, its schedstat only while it sleeps). */
static ssize_t read_schedstat(Scanner *s, ThreadEntry *t, char *buf, size_t size) {
        if (t->sched_fd < 0 && t->stat_fd >= 0 && s->stats.kept_fds + SCAN_FD_RESERVE < s->stats.max_kept_fds) {
                char path[64];
                snprintf(path, sizeof path, "%d/task/%d/schedstat", (int) t->pid, (int) t->tid);
                t->sched_fd = openat(s->proc_fd, path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
                if (t->sched_fd < 0)
                        return proc_errno(negative_errno());
                s->stats.kept_fds++;
        }
        if (t->sched_fd < 0)
                return read_task_file(s, t, "schedstat", buf, size);
        s->stats.deep_reads++;
        return proc_pread(t->sched_fd, buf, size);
}

/* A thread's record from the iterator, as stat would show it. The CPU times are the tick's user/system split scaled
 * to the runtime, which /proc keeps from going backwards (cputime_adjust()'s prev_cputime): so here, per thread. */
static void record_stat(Scanner *s, ThreadEntry *t, const TaskRecord *rec, ProcStat *st) {
        task_record_stat(rec, s->hz, st);
        if (t->have_sample) {
                st->utime = MAX(st->utime, t->sample.utime);
                st->stime = MAX(st->stime, t->sample.stime);
        }
        /* A kernel thread's name is longer than the task's 16 bytes ("kworker/u8:3+flush-8:0"); read it where a
         * rule may name it, in an uninterruptible sleep. */
        if ((st->flags & PROC_PF_KTHREAD) && st->state == 'D') {
                char buf[sizeof st->comm];
                ssize_t n = read_task_file(s, t, "comm", buf, sizeof buf);

                if (n > 0) {
                        buf[n - (buf[n - 1] == '\n')] = '\0';
                        memcpy(st->comm, buf, sizeof st->comm);
                }
        }
}

/* The cheap tier: one pread of stat into OUT (or the record REC), the parsed stat into ST. -ESRCH when the thread is
 * gone. */
static int sample_stat(Scanner *s, ThreadEntry *t, const TaskRecord *rec, ThreadSample *out, ProcStat *st,
                       uint64_t now) {
        char buf[1024];
        ssize_t n;

        if (rec) {
                record_stat(s, t, rec, st);
                goto done;
        }

        if (t->stat_fd < 0 && s->stats.kept_fds < s->stats.max_kept_fds) {
                char path[64];
                snprintf(path, sizeof path, "%d/task/%d/stat", (int) t->pid, (int) t->tid);
                t->stat_fd = openat(s->proc_fd, path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
                if (t->stat_fd < 0)
                        return proc_errno(negative_errno());
                s->stats.kept_fds++;
        }
        if (t->stat_fd >= 0)
                n = proc_pread(t->stat_fd, buf, sizeof buf);
        else
                n = read_task_file(s, t, "stat", buf, sizeof buf);
        if (n < 0)
                return (int) n;
        if (proc_parse_stat(buf, (size_t) n, st) < 0)
                return -EIO;
done:
        *out = (ThreadSample) { .when_usec = now, .state = st->state, .kthread = st->flags & PROC_PF_KTHREAD,
                                .utime = st->utime, .stime = st->stime, .faults = st->minflt + st->majflt };
        memcpy(t->comm, st->comm, sizeof t->comm - 1);
        t->comm[sizeof t->comm - 1] = '\0';
        return 0;
}

static void sample_set_io(ThreadSample *cur, const ProcIo *io) {
        cur->have_io = io;
        if (io) {
                cur->rchar = io->rchar;
                cur->wchar = io->wchar;
                cur->syscr = io->syscr;
                cur->syscw = io->syscw;
        }
}

static void set_wchan(ThreadEntry *t, ThreadSample *cur, const char *wchan, size_t n) {
        /* Kernel symbol names are short; cut a longer one rather than overflow. */
        size_t l = MIN(n, sizeof t->wchan - 1);

        memcpy(t->wchan, wchan, l);
        t->wchan[l] = '\0';
        cur->frozen = cur->frozen || (cur->state == 'D' && startswith(t->wchan, "__refrigerator"));
        if (cur->have_syscall)
                proc_syscall_resolve_restart(&cur->syscall, t->wchan);
}

/* The deep tier from the record, as the /proc files would say it: all of it, since the record holds it anyway (the
 * walks of owed.h take a thread's syscall from here too). The wait channel is in the record where the iterator looked
 * for it (a D sleep, a frozen task, restart_syscall); elsewhere, where the classifier asks for it, or where kallsyms
 * hid the scheduler's bounds from the iterator, /proc's is read. */
static void sample_deep_record(Scanner *s, ThreadEntry *t, const TaskRecord *rec, ThreadSample *cur,
                               unsigned wants) {
        ProcSchedstat st;
        ProcIo io;

        cur->frozen = task_record_frozen(rec);
        sample_set_io(cur, task_record_io(rec, &io) ? &io : NULL);
        cur->have_syscall = task_record_syscall(rec, &cur->syscall);
        if (cur->have_syscall && cur->syscall.kind == PROC_SYSCALL_BLOCKED && cur->syscall.nr == __NR_restart_syscall)
                wants |= CLASSIFY_READ_WCHAN;
        task_record_schedstat(rec, &st);
        cur->have_sched = true;
        cur->run_ns = st.run_ns;
        cur->wait_ns = st.wait_ns;
        cur->timeslices = st.timeslices;
        if (wants & CLASSIFY_READ_WCHAN) {
                const char *w = task_record_wchan(rec);
                char buf[128];
                ssize_t n;

                if (w) {
                        set_wchan(t, cur, w, strlen(w));
                        return;
                }
                n = read_task_file(s, t, "wchan", buf, sizeof buf - 1);
                if (n > 0) {
                        buf[n] = '\0';
                        if (streq(buf, "0"))
                                n = 0;
                }
                set_wchan(t, cur, buf, n > 0 ? (size_t) n : 0);
        }
}

/* The deep tier, only what the classifier asked for. */
static void sample_deep(Scanner *s, ThreadEntry *t, ThreadSample *cur, unsigned wants) {
        const ThreadSample *prev = t->have_sample ? &t->sample : NULL;
        char buf[512];
        ssize_t n;

        /* A quiet sleeper: its run count first. Not run since the last look, it is still in the syscall read then
         * (a thread changes its syscall only by running), so that read is not made again: every sleeper is looked
         * at on every scan, at the cost of one read for most of them. */
        if (wants == (CLASSIFY_READ_SYSCALL | CLASSIFY_READ_SCHED) && prev && prev->have_sched &&
            prev->have_syscall && prev->state == cur->state) {
                ProcSchedstat st;

                n = read_schedstat(s, t, buf, sizeof buf);
                cur->have_sched = n > 0 && proc_parse_schedstat(buf, (size_t) n, &st) >= 0;
                if (!cur->have_sched)
                        return;
                cur->run_ns = st.run_ns;
                cur->wait_ns = st.wait_ns;
                cur->timeslices = st.timeslices;
                if (st.timeslices == prev->timeslices) {
                        cur->have_syscall = true;
                        cur->syscall = prev->syscall;
                        return;
                }
                wants &= ~(unsigned) CLASSIFY_READ_SCHED;
        }

        if (wants & CLASSIFY_READ_IO) {
                ProcIo io;

                n = read_task_file(s, t, "io", buf, sizeof buf);
                sample_set_io(cur, n > 0 && proc_parse_io(buf, (size_t) n, &io) >= 0 ? &io : NULL);
        }
        if (wants & CLASSIFY_READ_SYSCALL) {
                n = read_task_file(s, t, "syscall", buf, sizeof buf);
                cur->have_syscall = n > 0 && proc_parse_syscall(buf, (size_t) n, &cur->syscall) >= 0;
                /* restart_syscall says which call it continues only with the kernel function it sleeps in. */
                if (cur->have_syscall && cur->syscall.kind == PROC_SYSCALL_BLOCKED &&
                    cur->syscall.nr == __NR_restart_syscall)
                        wants |= CLASSIFY_READ_WCHAN;
        }
        if (wants & CLASSIFY_READ_SCHED) {
                ProcSchedstat st;

                n = read_task_file(s, t, "schedstat", buf, sizeof buf);
                cur->have_sched = n > 0 && proc_parse_schedstat(buf, (size_t) n, &st) >= 0;
                if (cur->have_sched) {
                        cur->run_ns = st.run_ns;
                        cur->wait_ns = st.wait_ns;
                        cur->timeslices = st.timeslices;
                }
        }
        if (wants & CLASSIFY_READ_WCHAN) {
                n = read_task_file(s, t, "wchan", buf, sizeof buf);
                set_wchan(t, cur, buf, n > 0 && !streq(buf, "0") ? (size_t) n : 0);
        }
}

static const char *const lock_probe_verdict_table[_LOCK_PROBE_VERDICT_MAX] = {
        [LOCK_PROBE_NONE] = "none",
        [LOCK_PROBE_RUNNING] = "running",
        [LOCK_PROBE_RETRYING] = "retrying",
        [LOCK_PROBE_NOT_SEEN] = "not-seen",
        [LOCK_PROBE_FAILED] = "failed",
};

const char *lock_probe_verdict_to_string(LockProbeVerdict v) {
        return v >= 0 && v < _LOCK_PROBE_VERDICT_MAX ? lock_probe_verdict_table[v] : NULL;
}

/* Whether T, which looks like it polls for a lock, does: as a probe saw it, or a probe is asked for. */
static bool thread_lock_verdict(Scanner *s, ThreadEntry *t, uint64_t now) {
        uint64_t age = now - t->lock_probe_usec;

        switch (t->lock_probe) {
        case LOCK_PROBE_RUNNING:
                return false;
        case LOCK_PROBE_RETRYING:
                if (age < SCAN_LOCK_RECONFIRM_USEC)
                        return true;
                break;
        case LOCK_PROBE_NOT_SEEN:
        case LOCK_PROBE_FAILED:
                if (age < SCAN_LOCK_NOT_SEEN_USEC)
                        return false;
                break;
        default:
                break;
        }
        if (s->n_lock_probe_wanted < SCAN_LOCK_PROBE_WANTED_MAX)
                s->lock_probe_wanted[s->n_lock_probe_wanted++] = t->tid;
        /* Seen before: it stays so while the new probe runs. */
        return t->lock_probe == LOCK_PROBE_RETRYING;
}

void scanner_lock_probe_done(Scanner *s, pid_t pid, pid_t tid, uint64_t starttime, LockProbeVerdict v, uint64_t now) {
        ThreadEntry *t = intmap_get(&s->threads, tid);

        if (!t || t->pid != pid || t->process->starttime != starttime)
                return; /* gone meanwhile */
        t->lock_probe = v;
        t->lock_probe_usec = now;
}

/* Whether thread T, sampled as CUR, sleeps between tries for a lock (see SCAN_LOCK_RETRY_WAKE_USEC). A sample whose
 * syscall was not read (it used a little CPU on a wake) keeps what the last one said. */
static bool thread_lock_retry(Scanner *s, ThreadEntry *t, const ThreadSample *cur) {
        const ThreadSample *prev = t->have_sample ? &t->sample : NULL;
        ProcessEntry *p = t->process;
        pid_t holder;
        int fd, k;

        if (!prev || cur->kthread || !(cur->state == 'S' || cur->state == 'R')) {
                t->woke_usec = 0;
                return false;
        }
        if (!cur->have_syscall)
                return prev->lock_retry;
        if (!cur->have_sched || !peers_syscall_is_sleep(&cur->syscall)) {
                t->woke_usec = 0;
                return false;
        }
        if (prev->have_sched && cur->timeslices != prev->timeslices)
                t->woke_usec = cur->when_usec;
        if (t->woke_usec == 0 || cur->when_usec - t->woke_usec > SCAN_LOCK_RETRY_WAKE_USEC)
                return false;
        if (p->lock_checked_usec == 0 || cur->when_usec - p->lock_checked_usec >= SCAN_LOCK_RECHECK_USEC) {
                if (!s->locks && peer_resolver_new(&s->locks) < 0)
                        return false;
                k = peers_lock_suspect(s->locks, p->pid, &fd, &holder);
                p->lock_suspect = k > 0;
                p->lock_checked_usec = cur->when_usec;
        }
        return p->lock_suspect && thread_lock_verdict(s, t, cur->when_usec);
}

/* Whether T waits for the GIL: a futex wait inside the GIL state of its process's CPython (on its condition
 * variable, asking again every switch interval, or on its mutex), which is looked for once per process (again
 * after a while when it was not found), and only in one whose maps hold one. */
static bool thread_gil_wait(Scanner *s, ThreadEntry *t, const ThreadSample *cur) {
        ProcessEntry *p = t->process;
        const ProcSyscall *sc = &cur->syscall;

        if (!cur->have_syscall || sc->kind != PROC_SYSCALL_BLOCKED || sc->nr != __NR_futex ||
            !scanner_process_runs(s, p, RUNTIME_PYTHON))
                return false;
        if (p->gil_looked_usec == 0 ||
            (p->gil_size == 0 && cur->when_usec - p->gil_looked_usec >= SCAN_GIL_RETRY_USEC)) {
                Symbolizer *sym = scanner_runtime_symbolizer(s);

                p->gil_looked_usec = MAX(cur->when_usec, (uint64_t) 1);
                s->stats.deep_reads++;
                if (!sym || python_gil_range(p->pid, sym, &p->gil_start, &p->gil_size) < 0)
                        p->gil_size = 0;
        }
        return p->gil_size > 0 && sc->args[0] >= p->gil_start && sc->args[0] < p->gil_start + p->gil_size;
}

/* A new entry for thread TID of P, not sampled yet; NULL on OOM. */
static ThreadEntry *thread_add(Scanner *s, ProcessEntry *p, pid_t tid) {
        ThreadEntry *t = calloc(1, sizeof *t);

        if (!t)
                return NULL;
        t->pid = p->pid;
        t->tid = tid;
        t->process = p;
        t->stat_fd = t->sched_fd = -EBADF;
        t->counted_class = -1;
        t->quiet_place = (WaitPlace) { .nr = -1, .fd = -1 };
        t->cls.class = _THREAD_CLASS_INVALID;
        if (intmap_put(&s->threads, tid, t) < 0) {
                free(t);
                return NULL;
        }
        t->next = p->threads;
        if (t->next)
                t->next->prev = t;
        p->threads = t;
        p->n_threads++;
        p->moved_usec = s->now_usec;
        return t;
}

void scanner_count_class(Scanner *s, ThreadEntry *t) {
        int c = t->cls.class >= 0 && t->cls.class < _THREAD_CLASS_MAX ? (int) t->cls.class : -1;

        if (c == t->counted_class)
                return;
        if (classify_class_is_stuck(c) != classify_class_is_stuck(t->counted_class))
                t->process->stuck_usec = s->now_usec;
        if (t->counted_class >= 0) {
                if (s->stats.by_class[t->counted_class] > 0)
                        s->stats.by_class[t->counted_class]--;
                if (t->class_prev)
                        t->class_prev->class_next = t->class_next;
                else
                        s->by_class[t->counted_class] = t->class_next;
                if (t->class_next)
                        t->class_next->class_prev = t->class_prev;
                t->class_next = t->class_prev = NULL;
        }
        if (c >= 0) {
                s->stats.by_class[c]++;
                t->class_next = s->by_class[c];
                if (t->class_next)
                        t->class_next->class_prev = t;
                s->by_class[c] = t;
        }
        t->counted_class = c;
}

/* T may change class with time alone: classed again at the next scan, moved or not. A BPF scan meets it then only as
 * a tid or a count, so it is listed. */
static void thread_set_settle(Scanner *s, ThreadEntry *t) {
        t->settle = true;
        if (s->source == SCAN_SOURCE_BPF &&
            GREEDY_REALLOC(s->settling_next, s->settling_next_allocated, s->n_settling_next + 1))
                s->settling_next[s->n_settling_next++] = t->tid;
}

/* Whether a thread moved between two looks: ran, changed state, or changed what it waits in. A sample's deep facts
 * count only where both looks read them. */
static bool sample_moved(const ThreadSample *prev, const ThreadSample *cur) {
        if (prev->state != cur->state || prev->utime != cur->utime || prev->stime != cur->stime ||
            prev->faults != cur->faults || prev->frozen != cur->frozen || prev->lock_retry != cur->lock_retry ||
            prev->gil_wait != cur->gil_wait || prev->have_syscall != cur->have_syscall)
                return true;
        if (prev->have_sched && cur->have_sched && prev->timeslices != cur->timeslices)
                return true;
        return cur->have_syscall && (prev->syscall.kind != cur->syscall.kind || prev->syscall.nr != cur->syscall.nr ||
                                     prev->syscall.sp != cur->syscall.sp || prev->syscall.pc != cur->syscall.pc ||
                                     memcmp(prev->syscall.args, cur->syscall.args, sizeof cur->syscall.args) != 0);
}

/* Classify T with sample CUR, and note what moved. */
static void thread_classify(Scanner *s, ThreadEntry *t, ThreadSample *cur) {
        const ThreadSample *prev = t->have_sample ? &t->sample : NULL;
        bool moved = !prev || sample_moved(prev, cur);

        classify_update(&t->cls, prev, cur, s->hz);
        if (moved) {
                t->process->moved_usec = cur->when_usec;
                t->walk_wchan = mfree(t->walk_wchan);
        }
        /* Classed again at the next look even if nothing moves: parked from there, or no longer polling for a lock
         * once it stops waking. */
        t->settle = false;
        if (moved || cur->lock_retry || t->woke_usec != 0)
                thread_set_settle(s, t);
        t->sample = *cur;
        t->have_sample = true;
        s->stats.reclassed++;
        scanner_count_class(s, t);
}

/* Sample thread T (from its record REC, or from /proc when NULL), deep facts too when the classifier asks, and
 * classify it; ST gets its stat. A thread that cannot be read is gone: it stays unseen and the sweep takes it. */
static int thread_scan(Scanner *s, ThreadEntry *t, const TaskRecord *rec, ProcStat *st, uint64_t now) {
        ThreadSample cur;
        unsigned wants;
        int r;

        r = sample_stat(s, t, rec, &cur, st, now);
        if (r < 0)
                return r;
        t->seen_gen = s->gen;
        if (t->process->ours) {
                /* Seen, so not swept, but never classed: a scan catches the daemon on a CPU in epoll_wait. */
                t->cls.class = _THREAD_CLASS_INVALID;
                scanner_count_class(s, t);
                t->sample = cur;
                t->have_sample = true;
                s->seen_threads++;
                s->stats.ours++;
                return 0;
        }
        wants = classify_wants(&t->cls, t->have_sample ? &t->sample : NULL, &cur, s->hz);
        if (!(wants & CLASSIFY_READ_SYSCALL) &&
            classify_may_wait_gil(&t->cls, t->have_sample ? &t->sample : NULL, &cur, s->hz) &&
            scanner_process_runs(s, t->process, RUNTIME_PYTHON))
                wants |= CLASSIFY_READ_SYSCALL | CLASSIFY_READ_SCHED;
        if (rec)
                sample_deep_record(s, t, rec, &cur, wants);
        else if (wants)
                sample_deep(s, t, &cur, wants);
        cur.lock_retry = thread_lock_retry(s, t, &cur);
        cur.gil_wait = thread_gil_wait(s, t, &cur);
        if (cur.state != 'D')
                t->wchan[0] = '\0';
        cur.frozen = cur.frozen || t->process->frozen.version > 0;
        thread_classify(s, t, &cur);
        s->seen_threads++;
        return 0;
}

/* Thread T, whose BPF record says it has not moved since the last pass (its tid alone): seen. */
static void thread_same(Scanner *s, ThreadEntry *t) {
        t->seen_gen = s->gen;
        s->seen_threads++;
        if (t->process->ours)
                s->stats.ours++;
}

/* Thread T, which did not move but may change class with time alone (ThreadEntry.settle): classed again from its
 * last sample. */
static void thread_settle(Scanner *s, ThreadEntry *t, uint64_t now) {
        ThreadSample cur = t->sample;

        cur.when_usec = now;
        cur.lock_retry = thread_lock_retry(s, t, &cur);
        cur.frozen = cur.frozen || t->process->frozen.version > 0;
        thread_classify(s, t, &cur);
}

/* List /proc/PID/task for the threads of P not sampled in this scan yet. */
static void process_walk_tasks(Scanner *s, ProcessEntry *p, uint64_t now) {
        _cleanup_closedir_ DIR *td = NULL;
        char path[32];
        int tfd;

        s->stats.task_walks++;
        snprintf(path, sizeof path, "%d/task", (int) p->pid);
        tfd = openat(s->proc_fd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (tfd < 0)
                return;
        td = fdopendir(tfd);
        if (!td) {
                safe_close(tfd);
                return;
        }
        for (struct dirent *de; (de = readdir(td));) {
                ThreadEntry *t;
                uint64_t v;
                ProcStat st;

                if (de->d_name[0] == '.' || safe_atou64(de->d_name, &v) < 0 || v == 0 || v > INT32_MAX)
                        continue;
                t = intmap_get(&s->threads, (int) v);
                if (t && t->process == p && t->seen_gen == s->gen)
                        continue; /* sampled already, through its kept descriptor */
                if (t)
                        thread_drop(s, t); /* a dead thread's id, reused */
                t = thread_add(s, p, (pid_t) v);
                if (t)
                        (void) thread_scan(s, t, NULL, &st, now);
        }
}

/* Whether a cgroup freezer holds P (its place read again every SCAN_CGROUP_REREAD_USEC; its cgroups' freezers once
 * a scan, for every process in them). */
static void process_check_frozen(Scanner *s, ProcessEntry *p, uint64_t now) {
        CgroupPlace place;

        p->frozen = (CgroupFrozen) {};
        if (!s->freezers || p->ours)
                return;
        if (p->place_usec == 0 || now - p->place_usec >= SCAN_CGROUP_REREAD_USEC) {
                if (cgroup_place_read(s->freezers, p->pid, &place) < 0)
                        return;
                cgroup_place_done(&p->place);
                p->place = place;
                p->place_usec = now;
        }
        (void) cgroup_freezers_check(s->freezers, &p->place, &p->frozen);
}

/* A freezer took P or let it go: every thread of it is classed again, moved or not. */
static void process_note_frozen(Scanner *s, ProcessEntry *p) {
        bool frozen = p->frozen.version > 0;

        if (frozen == p->was_frozen)
                return;
        p->was_frozen = frozen;
        p->moved_usec = s->now_usec;
        for (ThreadEntry *t = p->threads; t; t = t->next)
                thread_set_settle(s, t);
}

/* One process: its known threads through their kept descriptors, the leader first, whose stat tells whether the
 * pid still means the same process and how many threads it has; the task directory is listed only for a new
 * process or when that count and the threads we could read disagree (htop lists it every time). */
static ProcessEntry *process_enter(Scanner *s, pid_t pid, const TaskRecord *rec, ProcStat *ret_st, uint64_t now) {
        ProcessEntry *p = intmap_get(&s->processes, pid);
        ThreadEntry *leader;
        ProcStat st;

        if (p) {
                /* Before any of its threads is classed; a process new to this scan has its leader classed first,
                 * and is known frozen from its next scan. */
                process_check_frozen(s, p, now);
                process_note_frozen(s, p);
                leader = intmap_get(&s->threads, pid);
                if (!leader || leader->process != p || thread_scan(s, leader, rec, &st, now) < 0 ||
                    st.starttime != p->starttime) {
                        /* Gone and its pid reused, or its leader unreadable: start over. */
                        process_drop(s, p);
                        p = NULL;
                }
        }
        if (!p) {
                p = calloc(1, sizeof *p);
                if (!p)
                        return NULL;
                p->pid = pid;
                if (intmap_put(&s->processes, pid, p) < 0) {
                        free(p);
                        return NULL;
                }
                leader = intmap_get(&s->threads, pid);
                if (leader)
                        thread_drop(s, leader); /* a thread of another process had this id */
                leader = thread_add(s, p, pid);
                if (!leader || thread_scan(s, leader, rec, &st, now) < 0) {
                        process_drop(s, p); /* gone already, or a task we may not read: both normal */
                        return NULL;
                }
                p->starttime = st.starttime;
                st.num_threads = 0; /* never listed: list it */
                p->ours = pid == s->self || st.ppid == s->self;
                if (p->ours) {
                        /* Classed once already, before its parent was known. */
                        s->stats.ours++;
                        leader->cls.class = _THREAD_CLASS_INVALID;
                        scanner_count_class(s, leader);
                }
                process_check_frozen(s, p, now);
        }
        /* The leader's comm is the process's (what /proc/PID/stat shows). */
        memcpy(p->comm, st.comm, sizeof p->comm);
        p->seen_gen = s->gen;
        s->seen_processes++;
        *ret_st = st;
        return p;
}

static void process_scan(Scanner *s, pid_t pid, uint64_t now) {
        ProcessEntry *p;
        ProcStat st;
        unsigned live = 1;

        p = process_enter(s, pid, NULL, &st, now);
        if (!p)
                return;
        for (ThreadEntry *t = p->threads; t; t = t->next) {
                ProcStat tst;

                if (t->tid != pid && thread_scan(s, t, NULL, &tst, now) >= 0)
                        live++;
        }
        if (st.num_threads != live)
                process_walk_tasks(s, p, now);
}

/* Process P, whose leader's BPF record says it has not moved (or of which a walk counted the threads that did not,
 * its leader among them): its cgroups' freezers still read, the process seen. */
static void process_same(Scanner *s, ProcessEntry *p, uint64_t now) {
        process_check_frozen(s, p, now);
        process_note_frozen(s, p);
        p->seen_gen = s->gen;
        s->seen_processes++;
}

/* The thread a bare BPF record names, when the scanner knows it; else the next pass writes every whole record (a
 * thread it forgot, its process dropped as unreadable or reused, is learnt again). */
static ThreadEntry *same_thread(Scanner *s, uint32_t tid) {
        ThreadEntry *t = tid > 0 && tid <= INT32_MAX ? intmap_get(&s->threads, (int) tid) : NULL;

        if (!t || !t->have_sample)
                s->want_all = true;
        return t && t->have_sample ? t : NULL;
}

/* The process a walk's count names, when the scanner knows it; else, as above. */
static ProcessEntry *group_process(Scanner *s, const TaskGroup *g) {
        ProcessEntry *p = g->tgid > 0 && g->tgid <= INT32_MAX ? intmap_get(&s->processes, (int) g->tgid) : NULL;

        if (!p)
                s->want_all = true;
        return p;
}

/* Walk G counted the threads of P that did not move: when that is every thread of P without a record of its own in
 * this scan, they are all still there; else one or more is gone, and the next walk names them by tid. */
static void group_threads(Scanner *s, ProcessEntry *p, const TaskGroup *g) {
        unsigned with_records = p->records_gen == s->gen ? p->n_records : 0;

        if (p->n_threads >= with_records && g->same == p->n_threads - with_records) {
                p->all_seen_gen = s->gen;
                s->seen_threads += g->same;
                if (p->ours)
                        s->stats.ours += g->same;
                return;
        }
        /* For this scan they stay (the sweep takes none of them); the next says which. */
        p->all_seen_gen = s->gen;
        if (task_iter_want_tids(s->iter, (uint32_t) p->pid, true) < 0 ||
            !GREEDY_REALLOC(s->wanting, s->wanting_allocated, s->n_wanting + 1)) {
                s->want_all = true;
                return;
        }
        s->wanting[s->n_wanting++] = p->pid;
        p->want_tids_gen = s->gen;
}

/* Forget the tids asked for before this scan: its walk gave them. */
static void wanting_expire(Scanner *s) {
        size_t k = 0;

        for (size_t i = 0; i < s->n_wanting; i++) {
                const ProcessEntry *p = intmap_get(&s->processes, s->wanting[i]);

                if (p && p->want_tids_gen == s->gen)
                        s->wanting[k++] = s->wanting[i];
                else
                        (void) task_iter_want_tids(s->iter, (uint32_t) s->wanting[i], false);
        }
        s->n_wanting = k;
}

/* The threads that may change class with time alone and had no record of their own in this scan: classed again. */
static void settle(Scanner *s, uint64_t now) {
        pid_t *t_list;
        size_t n;

        /* Those of the last scan; this one's, listed meanwhile, are the next one's. */
        t_list = s->settling;
        n = s->n_settling;
        for (size_t i = 0; i < n; i++) {
                ThreadEntry *t = intmap_get(&s->threads, t_list[i]);

                if (t && t->settle && t->have_sample && thread_seen(s, t) && t->sample.when_usec != now &&
                    !t->process->ours)
                        thread_settle(s, t, now);
        }
        s->settling = s->settling_next;
        s->n_settling = s->n_settling_next;
        s->settling_next = t_list;
        s->n_settling_next = 0;
        n = s->settling_allocated;
        s->settling_allocated = s->settling_next_allocated;
        s->settling_next_allocated = n;
}

/* A scan from the iterator's records: the leaders first (each one says whether its pid still means the same
 * process), then every other thread into its process. The records list every thread, so no task directory is
 * listed, and a thread not among them is gone. A thread that has not moved since the last pass is a bare tid, or one
 * of a count per process: seen, and nothing more unless its class may change with time alone. */
static void scan_records(Scanner *s, const TaskPass *pass, uint64_t now) {
        for (size_t i = 0; i < pass->n_records; i++) {
                const TaskRecord *r = &pass->records[i];
                ProcessEntry *p;
                ProcStat st;

                if (r->tid == r->tgid && r->tid > 0 && r->tid <= INT32_MAX &&
                    (p = process_enter(s, (pid_t) r->tid, r, &st, now))) {
                        p->records_gen = s->gen;
                        p->n_records = 1;
                }
        }
        for (size_t i = 0; i < pass->n_groups; i++) {
                ProcessEntry *p = group_process(s, &pass->groups[i]);

                if (p && p->seen_gen != s->gen)
                        process_same(s, p, now);
        }
        for (size_t i = 0; i < pass->n_same; i++) {
                ThreadEntry *t = same_thread(s, pass->same[i]);

                if (t && t->tid == t->pid && t->process->seen_gen != s->gen) {
                        process_same(s, t->process, now);
                        thread_same(s, t);
                }
        }
        for (size_t i = 0; i < pass->n_records; i++) {
                const TaskRecord *r = &pass->records[i];
                ProcessEntry *p;
                ThreadEntry *t;
                ProcStat st;

                if (r->tid == r->tgid || r->tid == 0 || r->tid > INT32_MAX)
                        continue;
                p = intmap_get(&s->processes, (int) r->tgid);
                if (!p || p->seen_gen != s->gen)
                        continue; /* its leader was not readable: neither are its threads, as in /proc */
                t = intmap_get(&s->threads, (int) r->tid);
                if (t && t->process != p) {
                        thread_drop(s, t); /* a dead thread's id, reused */
                        t = NULL;
                }
                if (!t)
                        t = thread_add(s, p, (pid_t) r->tid);
                if (t && thread_scan(s, t, r, &st, now) >= 0) {
                        if (p->records_gen != s->gen) {
                                p->records_gen = s->gen;
                                p->n_records = 0;
                        }
                        p->n_records++;
                }
        }
        for (size_t i = 0; i < pass->n_same; i++) {
                ThreadEntry *t = same_thread(s, pass->same[i]);

                if (t && t->tid != t->pid && t->process->seen_gen == s->gen && !thread_seen(s, t))
                        thread_same(s, t);
        }
        for (size_t i = 0; i < pass->n_groups; i++) {
                ProcessEntry *p = intmap_get(&s->processes, (int) pass->groups[i].tgid);

                if (p && p->seen_gen == s->gen)
                        group_threads(s, p, &pass->groups[i]);
        }
        wanting_expire(s);
        settle(s, now);
        s->stats.records += pass->n_records;
        s->stats.same_records += pass->n_same;
        for (size_t i = 0; i < pass->n_groups; i++)
                s->stats.same_records += pass->groups[i].same;
}

/* Drop every thread and process this scan did not see. Collect first: dropping moves entries in the maps. */
static void sweep(Scanner *s) {
        _cleanup_free_ ThreadEntry **gone_t = NULL;
        _cleanup_free_ ProcessEntry **gone_p = NULL;
        size_t n_t = 0, n_p = 0;

        if (s->seen_threads == s->threads.used && s->seen_processes == s->processes.used)
                return; /* everything known was seen: nothing vanished */
        gone_t = malloc(MAX(s->threads.used, 1U) * sizeof *gone_t);
        gone_p = malloc(MAX(s->processes.used, 1U) * sizeof *gone_p);
        if (!gone_t || !gone_p)
                return; /* next scan, then */
        for (size_t i = 0; i < s->threads.size; i++)
                if (s->threads.keys[i] > 0 && !thread_seen(s, s->threads.values[i]))
                        gone_t[n_t++] = s->threads.values[i];
        for (size_t i = 0; i < s->processes.size; i++)
                if (s->processes.keys[i] > 0 && ((ProcessEntry *) s->processes.values[i])->seen_gen != s->gen)
                        gone_p[n_p++] = s->processes.values[i];
        for (size_t i = 0; i < n_t; i++)
                thread_drop(s, gone_t[i]);
        for (size_t i = 0; i < n_p; i++)
                process_drop(s, gone_p[i]);
}

int scanner_scan(Scanner *s, uint64_t now) {
        uint64_t start, cpu_start;
        DIR *d;
        struct dirent *de;
        int fd, r, fell_back = 0;

        start = now_usec(CLOCK_MONOTONIC);
        cpu_start = now_usec(CLOCK_THREAD_CPUTIME_ID);
        s->gen++;
        s->now_usec = now;
        s->seen_threads = s->seen_processes = 0;
        if (s->freezers)
                cgroup_freezers_forget(s->freezers);
        s->n_lock_probe_wanted = 0;
        s->stats.ours = 0;
        if (s->source == SCAN_SOURCE_BPF) {
                TaskPass pass;

                r = task_iter_read(s->iter, s->want_all, &pass);
                if (r >= 0) {
                        s->want_all = false;
                        scan_records(s, &pass, now);
                        goto swept;
                }
                /* Not expected once loaded; /proc still works. */
                free(s->source_why);
                if (asprintf(&s->source_why, "reading the BPF task iterator failed: %s", strerror(-r)) < 0)
                        s->source_why = NULL;
                s->iter = task_iter_free(s->iter);
                s->source = SCAN_SOURCE_PROC;
                fell_back = 1;
        }
        fd = openat(s->proc_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        d = fdopendir(fd);
        if (!d) {
                safe_close(fd);
                return -ENOMEM;
        }
        while ((de = readdir(d))) {
                uint64_t v;

                if (de->d_type != DT_DIR || safe_atou64(de->d_name, &v) < 0 || v == 0 || v > INT32_MAX)
                        continue;
                process_scan(s, (pid_t) v, now);
        }
        closedir(d);
swept:
        sweep(s);
        s->locks = peer_resolver_free(s->locks); /* /proc/locks is read again next time */

        s->stats.threads = (unsigned) s->threads.used - MIN(s->stats.ours, (unsigned) s->threads.used);
        s->stats.processes = (unsigned) s->processes.used;
        s->stats.scans++;
        s->stats.last_scan_usec = now_usec(CLOCK_MONOTONIC);
        s->stats.last_duration_usec = s->stats.last_scan_usec - start;
        s->stats.last_cpu_usec = now_usec(CLOCK_THREAD_CPUTIME_ID) - cpu_start;
        s->stats.cpu_usec += s->stats.last_cpu_usec;
        return fell_back;
}
