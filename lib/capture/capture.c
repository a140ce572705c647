/* capture.c: capture_process(): raw capture of every thread (passive or ptrace), then, with the target running
 * again, unwinding and symbolization into a Snapshot. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "base/alloc-util.h"
#include "base/log.h"
#include "base/macro.h"
#include "base/strv.h"
#include "base/time-util.h"
#include "capture/capture-passive.h"
#include "capture/capture-ptrace.h"
#include "capture/capture-sched.h"
#include "capture/capture.h"
#include "model/proc-parse.h"
#include "proc/cgroup-freeze.h"
#include "proc/proc-read.h"
#include "proc/task-regs.h"

#define CMDLINE_BYTES_MAX (128U * 1024)
#define CGROUP_BYTES_MAX (16U * 1024)

/* capture_thread_regs(): the thread is on a CPU (or would not hold still): stop it with ptrace, in a batch. */
#define CAPTURE_NEEDS_PTRACE 1

/* What the raw pass keeps of a thread for the unwind pass. */
typedef struct RawThread {
        size_t index;           /* into Snapshot.threads */
        bool have_regs;
        UnwindRegs regs;
        UnwindStack stack;
        bool copy_truncated;    /* its stack was longer than stack_bytes: only what the copy holds was copied */
        RuntimeRaw rt;          /* what the runtimes read of it (Python's frames), in the same moment as its stack */
        bool unwound;           /* by the unwind pass (not cut by the budget) */
        UnwindFrame *pcs;       /* its unwound pcs while file:line is owed (capture_source_pass()) */
        size_t n_pcs;
        unsigned owed;          /* lookups of them the symbolizer deferred; 0: its frames are final */
} RawThread;

/* The raw copies of one capture: a thread's registers and stack bytes, by snapshot thread index. */
typedef struct RawSet {
        RawThread *raw;
        size_t n, n_allocated;
} RawSet;

typedef struct Capture {
        pid_t pid;
        const CaptureOptions *o;
        Snapshot *s;
        int dirfd;
        UnwindProcess *up;      /* NULL when the address space cannot be read */
        uint64_t start_usec;
        uint64_t deadline_usec;         /* the budget's end (CLOCK_MONOTONIC) */
        uint64_t raw_deadline_usec;     /* the current round's raw pass's share of it */
        uint64_t source_deadline_usec;  /* file:line only before it: three quarters of the budget */
        unsigned source_skipped, dbgd_failed; /* the symbolizer's counts before the capture */
        unsigned source_owed;   /* deferred lookups whose thread the source pass did not reach */
        unsigned budget_noted;  /* 1 << BudgetStep of the steps whose cut is noted */
        size_t n_unstopped;     /* threads a raw pass reached but left for ptrace, which the budget never stopped */
        size_t *carried;        /* RawSet indexes of threads left for ptrace that a round's share of the budget did
                                 * not reach: stopped first in the next round */
        size_t n_carried;
        size_t n_retired;       /* RawSet slots whose thread was carried to a later slot: before any round's first */
        bool last_round;        /* nothing is carried from this round: what its share does not stop is skipped */
        bool kernel_stack_missing_noted;
        SymModule **symmods;    /* per snapshot module, looked up lazily */
        bool *symmod_done;
        size_t n_symmods;
        CaptureSched sched;     /* nice -20 for the capture, SCHED_FIFO while threads are stopped */
        PtraceHeld held;        /* threads that never stopped (D state), still attached */
        RuntimeCapture rc;      /* what the language runtimes see of the capture */
        RuntimeSet runtimes;    /* the runtimes found in it (runtime/runtime.h) */
        char root[64];          /* /proc/PID/root, where the symbolizer opens the target's files */
        Symbolizer *sym;
} Capture;

/* The BPF reader of a sleeping thread's every register, loaded on first need (17 ms: libbpf reads the kernel's BTF),
 * once for every capture of this process and of the children it forks after (capture_regs_preload()); kept to its
 * exit. NULL when it did not load: no BPF, no privilege, an old kernel. */
static TaskRegs *regs_reader;
static bool regs_tried;

int capture_regs_preload(void) {
        _cleanup_free_ char *why = NULL;
        int r;

        if (regs_tried)
                return regs_reader ? 0 : -EOPNOTSUPP;
        regs_tried = true;
        r = task_regs_new(&regs_reader, &why);
        if (r < 0)
                log_debug("No registers from BPF: %s", why ?: strerror(-r));
        return r;
}

/* A ptrace batch item's thread, stopped: what the runtimes read of it, in the same pause. */
typedef struct RuntimeStopped {
        RuntimeSet *set;
        RuntimeRaw *raw;
} RuntimeStopped;

void capture_options_init(CaptureOptions *o) {
        *o = (CaptureOptions) {
                .method = CAPTURE_METHOD_AUTO,
                .unwinder = UNWINDER_LIBDW,
                .kernel = true,
                .max_frames = CAPTURE_FRAMES_DEFAULT,
                .stack_bytes = CAPTURE_STACK_BYTES_DEFAULT,
                .max_threads = CAPTURE_THREADS_DEFAULT,
                .time_budget_usec = CAPTURE_TIME_BUDGET_USEC_DEFAULT,
                .stop_timeout_usec = CAPTURE_STOP_TIMEOUT_USEC_DEFAULT,
                .runtime_answer_usec = CAPTURE_RUNTIME_ANSWER_USEC_DEFAULT,
        };
}

/* The budget is a wall-clock bound for the whole capture, checked between threads and before every wait. A process
 * too big for it is captured in rounds of a raw pass and the unwinding of what it copied. The first raw pass may take
 * an eighth of the budget: a probe, whose unwinding also pays what is paid once (the modules' CFI and symbols, and
 * their DWARF for file:line, which on a starved CPU has cost as much as the rest of the budget: loaded only once
 * every thread copied has its frames, see capture_unwind_pass()). Each later pass gets the share of what is left
 * that the last round's costs give it (unwinding, at the caller's priority behind a busy machine, can cost as much a
 * thread as the copy ahead of it), so that what is copied is also unwound. A capture cut short says so in the
 * snapshot (truncated, with the count of threads it reached). */
#define CAPTURE_FIRST_ROUND_SHARE 8
#define CAPTURE_ROUNDS_MAX 6
#define CAPTURE_ROUND_MARGIN 0.75

static uint64_t usec_left(uint64_t deadline) {
        uint64_t now = now_usec(CLOCK_MONOTONIC);

        return now < deadline ? deadline - now : 0;
}

static bool over_budget(const Capture *c) {
        return usec_left(c->deadline_usec) == 0;
}

/* How long to wait for a ptrace stop: the configured timeout, or what is left of the budget when less (at least
 * 1 ms: a stop that comes at once is still taken). */
static uint64_t stop_timeout(const Capture *c) {
        return MAX(MIN(c->o->stop_timeout_usec, usec_left(c->deadline_usec)), USEC_PER_MSEC);
}

/* Where the budget ran out: the error says which step it cut and how far that step got. */
typedef enum BudgetStep {
        BUDGET_STOPPED,
        BUDGET_COPIED,
        BUDGET_UNWOUND,
        _BUDGET_STEP_MAX,
} BudgetStep;

static const char *const budget_step_table[_BUDGET_STEP_MAX] = {
        [BUDGET_STOPPED] = "stopped",
        [BUDGET_COPIED] = "copied",
        [BUDGET_UNWOUND] = "unwound",
};

static void note_budget_spent(Capture *c, BudgetStep step, size_t done, size_t total) {
        if (c->budget_noted & (1U << step))
                return;
        c->budget_noted |= 1U << step;
        c->s->truncated = true;
        (void) snapshot_add_error(c->s, "time budget (%llu ms) spent: %s %zu of %zu threads",
                                  (unsigned long long) (c->o->time_budget_usec / USEC_PER_MSEC),
                                  budget_step_table[step], done, total);
}

static int read_process_identity(Capture *c) {
        Snapshot *s = c->s;
        char buf[4096];
        _cleanup_free_ char *cmdline = NULL, *cgroup = NULL;
        CgroupFrozen frozen;
        size_t len;
        ProcStat st;
        ProcStatus status;
        ssize_t n;
        int r;

        n = proc_read_small(c->dirfd, "stat", buf, sizeof buf);
        if (n < 0)
                return (int) n;
        r = proc_parse_stat(buf, (size_t) n, &st);
        if (r < 0)
                return log_debug_errno(r, "Unparseable /proc/%d/stat", (int) c->pid);
        s->comm = strdup(st.comm);
        if (!s->comm)
                return -ENOMEM;
        s->state = st.state;
        s->ppid = st.ppid;

        n = proc_read_small(c->dirfd, "status", buf, sizeof buf);
        if (n >= 0 && proc_parse_status(buf, (size_t) n, &status) >= 0)
                s->uid = status.uid;

        r = proc_readlink(c->dirfd, "exe", &s->exe);
        if (r == -ENOMEM)
                return r;
        r = proc_read_full(c->dirfd, "cmdline", CMDLINE_BYTES_MAX, &cmdline, &len);
        if (r >= 0 && len > 0 && proc_parse_cmdline(cmdline, len, &s->cmdline) == -ENOMEM)
                return -ENOMEM;
        r = proc_read_full(c->dirfd, "cgroup", CGROUP_BYTES_MAX, &cgroup, &len);
        if (r >= 0 && proc_parse_cgroup(cgroup, len, &s->cgroup, &s->unit) == -ENOMEM)
                return -ENOMEM;
        /* Frozen, its threads show D (cgroup v1) or S (v2) and nothing says why nothing moves: its cgroup does. */
        if (cgroup_frozen_read(c->pid, &frozen) > 0) {
                s->frozen_cgroup = strdup(frozen.cgroup);
                if (!s->frozen_cgroup)
                        return -ENOMEM;
                s->frozen_version = frozen.version;
        }
        return (st.flags & PROC_PF_KTHREAD) ? 1 : 0;
}

static int read_kernel_stack(Capture *c, int taskfd, ThreadSnapshot *t) {
        ProcKernelFrame kf[CAPTURE_KFRAMES_MAX];
        char buf[8192];
        ssize_t n;
        int k;

        n = proc_read_small(taskfd, "stack", buf, sizeof buf);
        if (n == -ESRCH) {
                /* The task dir is open, so ENOENT here means this kernel has no /proc/PID/stack. */
                if (faccessat(taskfd, "stat", F_OK, 0) == 0 && !c->kernel_stack_missing_noted) {
                        c->kernel_stack_missing_noted = true;
                        snapshot_add_error(c->s, "kernel stacks unavailable: this kernel has no /proc/PID/stack");
                }
                return 0;
        }
        if (n == -EACCES || n == -EPERM) {
                if (!c->kernel_stack_missing_noted) {
                        c->kernel_stack_missing_noted = true;
                        snapshot_add_error(c->s, "kernel stacks unavailable: reading /proc/PID/stack needs CAP_SYS_ADMIN");
                }
                return 0;
        }
        if (n < 0)
                return 0;
        k = proc_parse_kstack(buf, (size_t) n, kf, ELEMENTSOF(kf));
        for (int i = 0; i < k; i++) {
                KernelFrame *f = thread_add_kframe(t);
                if (!f)
                        return -ENOMEM;
                f->function = strdup(kf[i].function);
                f->offset = kf[i].offset;
                f->size = kf[i].size;
                if (!f->function)
                        return -ENOMEM;
                if (kf[i].module[0] && !(f->module = strdup(kf[i].module)))
                        return -ENOMEM;
        }
        return 0;
}

/* Read the cheap per-thread facts: stat, status, syscall, wchan, kernel stack. -ESRCH when the thread is gone. */
static int read_thread_facts(Capture *c, int taskfd, ThreadSnapshot *t) {
        char buf[2048];
        ProcStat st;
        ProcStatus status;
        ssize_t n;
        int r;

        n = proc_read_small(taskfd, "stat", buf, sizeof buf);
        if (n < 0)
                return (int) n;
        if (proc_parse_stat(buf, (size_t) n, &st) < 0)
                return -EIO;
        t->state = st.state;
        t->utime = st.utime;
        t->stime = st.stime;
        t->comm = strdup(st.comm);
        if (!t->comm)
                return -ENOMEM;

        n = proc_read_small(taskfd, "status", buf, sizeof buf);
        if (n == -ESRCH)
                return -ESRCH;
        if (n >= 0 && proc_parse_status(buf, (size_t) n, &status) >= 0) {
                t->tracer_pid = status.tracer_pid;
                t->voluntary_ctxt_switches = status.voluntary_ctxt_switches;
                t->nonvoluntary_ctxt_switches = status.nonvoluntary_ctxt_switches;
        }

        n = proc_read_small(taskfd, "syscall", buf, sizeof buf);
        if (n == -ESRCH)
                return -ESRCH;
        if (n < 0 || proc_parse_syscall(buf, (size_t) n, &t->syscall) < 0)
                t->syscall = (ProcSyscall) { .kind = PROC_SYSCALL_RUNNING, .nr = -1 };

        n = proc_read_small(taskfd, "wchan", buf, sizeof buf);
        if (n > 0 && !streq(buf, "0") && !(t->wchan = strdup(buf)))
                return -ENOMEM;
        /* Taken here, before any stop of ours, and kept: a ptrace fall-back turns poll() into restart_syscall. */
        proc_syscall_resolve_restart(&t->syscall, t->wchan);

        if (c->o->kernel) {
                r = read_kernel_stack(c, taskfd, t);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* Every saved user register of T, read through BPF (proc/task-regs.h) as it sleeps where its syscall record says,
 * into *REGS over what the record gave: -EAGAIN when it is not there (it moved), -EOPNOTSUPP when BPF cannot read
 * them here. */
int capture_regs_fd(void) {
        return regs_reader ? task_regs_fd(regs_reader) : -EBADF;
}

static int bpf_regs(Capture *c, const ThreadSnapshot *t, UnwindRegs *regs) {
        TaskRegsRecord rec;
        int r;

        r = capture_regs_preload();
        if (r < 0)
                return r == -ENOMEM ? r : -EOPNOTSUPP;
        r = task_regs_read(regs_reader, t->tid, &rec);
        if (r < 0)
                return r == -ENOMEM ? r : r == -EOPNOTSUPP || r == -EPERM ? -EOPNOTSUPP : -EAGAIN;
        /* The registers hold the number the kernel does: restart_syscall for a call continued after a stop (a JVM's
         * threads after its SIGQUIT), which the record was turned back into the call it continues. */
        if (rec.syscall_nr != (t->syscall.restarted ? (int64_t) SYS_restart_syscall : t->syscall.nr) ||
            rec.n > UNWIND_NREGS || rec.r[UNWIND_REG_SP] != t->syscall.sp || rec.r[UNWIND_REG_PC] != t->syscall.pc)
                return -EAGAIN;
        for (unsigned k = 0; k < rec.n; k++)
                unwind_regs_set(regs, k, rec.r[k]);
        return 0;
}

/* Passive capture: registers from the syscall record (all of them through BPF, with ALL_REGS), a stack copy, and a
 * second look at the record to make sure the thread did not move while we copied. -EAGAIN when it is running or
 * keeps moving. */
static int capture_passive_with(Capture *c, int taskfd, ThreadSnapshot *t, RawThread *raw, bool all_regs) {
        size_t n_maps;
        const ProcMap *maps = unwind_process_maps(c->up, &n_maps);
        char buf[512];

        for (unsigned attempt = 0; attempt < 2; attempt++) {
                ProcSyscall again;
                UnwindStack stack = {};
                bool truncated = false;
                ssize_t n;
                int r;

                r = capture_passive_regs(&t->syscall, &raw->regs);
                if (r >= 0 && all_regs)
                        r = bpf_regs(c, t, &raw->regs);
                if (r < 0)
                        return r;
                r = capture_copy_stack(c->pid, maps, n_maps, t->syscall.sp, c->o->stack_bytes, &stack, &truncated);
                if (r < 0 && r != -EFAULT)
                        return r;
                /* What the runtimes keep of it, within the same look (python_read_thread() says why that holds). */
                r = runtime_set_read_thread(&c->runtimes, t->tid, &raw->rt);
                if (r < 0) {
                        free(stack.data);
                        return r;
                }
                n = proc_read_small(taskfd, "syscall", buf, sizeof buf);
                if (n < 0) {
                        free(stack.data);
                        return (int) n;
                }
                if (proc_parse_syscall(buf, (size_t) n, &again) >= 0 &&
                    (proc_syscall_resolve_restart(&again, t->wchan), proc_syscall_same_place(&t->syscall, &again))) {
                        raw->stack = stack;
                        raw->have_regs = true;
                        t->stack_bytes = stack.len;
                        raw->copy_truncated = truncated;
                        t->method = CAPTURE_METHOD_PASSIVE;
                        return 0;
                }
                free(stack.data);
                runtime_raw_done(&raw->rt);
                t->syscall = again;
        }
        return -EAGAIN;
}

/* Whether thread T, copied passively, is still parked where it was copied: then the stack beyond its copy, which the
 * unwinder read from the process, has not changed either. */
static bool still_parked(Capture *c, const ThreadSnapshot *t) {
        _cleanup_close_ int taskfd = -EBADF;
        ProcSyscall again;
        char buf[512];
        ssize_t n;

        if (t->method != CAPTURE_METHOD_PASSIVE || proc_open_task(c->dirfd, t->tid, &taskfd) < 0)
                return false;
        n = proc_read_small(taskfd, "syscall", buf, sizeof buf);
        if (n < 0 || proc_parse_syscall(buf, (size_t) n, &again) < 0)
                return false;
        proc_syscall_resolve_restart(&again, t->wchan);
        return proc_syscall_same_place(&t->syscall, &again);
}

static int capture_passive(Capture *c, int taskfd, ThreadSnapshot *t, RawThread *raw) {
        return capture_passive_with(c, taskfd, t, raw, false);
}

/* A sleeping thread whose passive unwind ended early, read passively again with every register (BPF): 0 when it was,
 * -errno when it cannot be (no BPF here, or it moved). */
static int capture_passive_all_regs(Capture *c, ThreadSnapshot *t, RawThread *raw) {
        _cleanup_close_ int taskfd = -EBADF;
        int r;

        if (regs_tried && !regs_reader)
                return -EOPNOTSUPP;
        r = proc_open_task(c->dirfd, t->tid, &taskfd);
        if (r < 0)
                return r;
        return capture_passive_with(c, taskfd, t, raw, true);
}

/* A thread of a ptrace batch recorded: its registers and stack copy, and the pause it cost; or its error. */
static int ptrace_item_take(Capture *c, ThreadSnapshot *t, RawThread *raw, PtraceBatchItem *it) {
        if (it->error < 0) {
                free(it->stack.data);
                return it->error;
        }
        raw->regs = it->regs;
        raw->stack = it->stack;
        raw->have_regs = true;
        t->pause_us = it->pause_us;
        t->stack_bytes = raw->stack.len;
        raw->copy_truncated = it->truncated;
        t->method = CAPTURE_METHOD_PTRACE;
        if (t->pause_us > c->s->max_pause_us)
                c->s->max_pause_us = t->pause_us;
        return 0;
}

/* Back to the caller's priority, unless a thread is still held: a thread that never stopped (D state) stops when it
 * wakes and stays stopped until we detach it or exit, and if we were killed meanwhile, the kernel would release it
 * only once our exit is done; behind the load, at the caller's priority, that was tens of ms (issue #34). So the
 * priority stays raised until the last one is seen stopped and detached, here or at a later call. */
static void capture_lower(Capture *c) {
        if (ptrace_held_release(&c->held) == 0)
                capture_sched_end(&c->sched);
}

/* Stop ITEMS[0..N) of the capture's process, real-time while any is stopped: no load delays their release. In the
 * unwind pass, where the capture runs at the caller's priority, it is raised again for the stop: if SCHED_FIFO is
 * not allowed, nice -20 still is. */
static void capture_ptrace_items(Capture *c, PtraceBatchItem *items, size_t n) {
        bool lowered = !c->sched.niced;
        const ProcMap *maps;
        size_t n_maps;

        maps = unwind_process_maps(c->up, &n_maps);
        if (lowered)
                (void) capture_sched_begin(&c->sched);
        (void) capture_sched_rt_begin(&c->sched);
        (void) capture_ptrace_batch(c->pid, maps, n_maps, c->o->stack_bytes, stop_timeout(c),
                                    MAX(usec_left(c->raw_deadline_usec), stop_timeout(c)), items, n, &c->held);
        capture_sched_rt_end(&c->sched);
        if (lowered)
                capture_lower(c);
}

/* One thread, stopped briefly: what the runtimes read of it, in the same pause. */
static void runtimes_while_stopped(PtraceBatchItem *it, void *userdata) {
        RuntimeStopped *rs = userdata;

        (void) runtime_set_read_thread(rs->set, it->tid, rs->raw);
}

/* Have ITEM read what the runtimes keep of RAW's thread while it is stopped (RS: the storage for it). */
static void runtimes_item_setup(Capture *c, PtraceBatchItem *item, RuntimeStopped *rs, RawThread *raw) {
        if (!runtime_set_reads_threads(&c->runtimes))
                return;
        *rs = (RuntimeStopped) { .set = &c->runtimes, .raw = &raw->rt };
        item->while_stopped = runtimes_while_stopped;
        item->userdata = rs;
}

static int capture_ptrace(Capture *c, ThreadSnapshot *t, RawThread *raw) {
        PtraceBatchItem it = { .tid = t->tid };
        RuntimeStopped rs;

        runtimes_item_setup(c, &it, &rs, raw);
        capture_ptrace_items(c, &it, 1);
        return ptrace_item_take(c, t, raw, &it);
}

static void note_ptrace_error(Capture *c, ThreadSnapshot *t, int r) {
        switch (r) {
        case -EPERM:
                if (t->tracer_pid > 0 && t->tracer_pid != getpid())
                        thread_set_error(c->s, t, "cannot ptrace: already traced by pid %d", (int) t->tracer_pid);
                else
                        thread_set_error(c->s, t, "cannot ptrace: permission denied");
                break;
        case -ESRCH:
                thread_set_error(c->s, t, "thread exited during capture");
                break;
        case -ETIMEDOUT:
                thread_set_error(c->s, t, "thread did not stop within %llu ms (uninterruptible sleep?)",
                                 (unsigned long long) (c->o->stop_timeout_usec / USEC_PER_MSEC));
                break;
        default:
                thread_set_error(c->s, t, "ptrace capture failed: %s", strerror(-r));
        }
}

/* Pick passive or ptrace for one thread and capture its registers and stack. */
static int capture_thread_regs(Capture *c, int taskfd, ThreadSnapshot *t, RawThread *raw) {
        bool asleep = t->syscall.kind != PROC_SYSCALL_RUNNING;
        bool want_ptrace;
        int r;

        if (t->state == 'Z' || t->state == 'X') {
                t->method = CAPTURE_METHOD_NONE;
                return 0;
        }
        /* A D-state thread cannot be stopped until it wakes: passive is the only method, whatever was asked. */
        want_ptrace = !asleep || (c->o->method == CAPTURE_METHOD_PTRACE && t->state != 'D');
        if (c->o->method == CAPTURE_METHOD_PASSIVE && !asleep) {
                t->method = CAPTURE_METHOD_NONE;
                return thread_set_error(c->s, t, "running on a CPU: passive capture needs a sleeping thread "
                                                 "(use --method auto or ptrace)");
        }
        if (want_ptrace && t->tracer_pid > 0 && t->tracer_pid != getpid()) {
                /* Someone else traces it: only passive can work, and only if it sleeps. */
                if (!asleep) {
                        t->method = CAPTURE_METHOD_NONE;
                        return thread_set_error(c->s, t, "cannot ptrace: already traced by pid %d",
                                                (int) t->tracer_pid);
                }
                want_ptrace = false;
        }
        if (!want_ptrace) {
                r = capture_passive(c, taskfd, t, raw);
                if (r != -EAGAIN) {
                        if (r == -ESRCH)
                                return thread_set_error(c->s, t, "thread exited during capture");
                        if (r < 0)
                                return thread_set_error(c->s, t, "passive capture failed: %s", strerror(-r));
                        /* Traced by someone else but asleep: the passive capture is complete, not partial. */
                        return 0;
                }
                /* It woke up (or keeps waking up) under us: stop it briefly instead, unless only passive is
                 * allowed or it is traced by someone else. */
                if (c->o->method == CAPTURE_METHOD_PASSIVE || (t->tracer_pid > 0 && t->tracer_pid != getpid())) {
                        t->method = CAPTURE_METHOD_NONE;
                        return thread_set_error(c->s, t, "thread kept running during passive capture");
                }
        }
        /* Stopped later, with the other threads that need it (capture_ptrace_deferred()). */
        return CAPTURE_NEEDS_PTRACE;
}

/* After a ptrace capture that failed with R: a thread that did not stop went to sleep uninterruptibly between our
 * look and the interrupt, and is read passively; else the error is the thread's. */
static void ptrace_failed(Capture *c, ThreadSnapshot *t, RawThread *raw, int r) {
        if (r == -ETIMEDOUT) {
                _cleanup_close_ int taskfd = -EBADF;
                char buf[512];
                ssize_t n;

                ProcSyscall sc;

                if (proc_open_task(c->dirfd, t->tid, &taskfd) == 0 &&
                    (n = proc_read_small(taskfd, "syscall", buf, sizeof buf)) >= 0 &&
                    proc_parse_syscall(buf, (size_t) n, &sc) >= 0) {
                        proc_syscall_resolve_restart(&sc, t->wchan);
                        t->syscall = sc;
                        if (capture_passive(c, taskfd, t, raw) == 0) {
                                thread_set_error(c->s, t, "did not stop for ptrace; captured passively");
                                return;
                        }
                }
        }
        t->method = CAPTURE_METHOD_NONE;
        note_ptrace_error(c, t, r);
}

/* The threads the raw pass left for ptrace (RAW indexes in DEFERRED), in batches. */
/* The threads left for ptrace in DEFERRED (N of them, of TOTAL) that the budget never stopped: skipped, and why. */
static void skip_unstopped(Capture *c, RawSet *rs, const size_t *deferred, size_t n, size_t total) {
        if (n == 0)
                return;
        note_budget_spent(c, BUDGET_STOPPED, total - n, total);
        c->n_unstopped += n;
        for (size_t i = 0; i < n; i++) {
                ThreadSnapshot *t = &c->s->threads[rs->raw[deferred[i]].index];
                c->s->truncated = t->truncated = true;
                t->method = CAPTURE_METHOD_NONE;
                thread_set_error(c->s, t, "skipped: capture time budget (%llu ms) exhausted before it could be stopped",
                                 (unsigned long long) (c->o->time_budget_usec / USEC_PER_MSEC));
        }
}

static int capture_ptrace_deferred(Capture *c, RawSet *rs, const size_t *deferred, size_t n) {
        PtraceBatchItem items[PTRACE_BATCH_MAX];
        RuntimeStopped stopped[PTRACE_BATCH_MAX];

        for (size_t done = 0; done < n;) {
                size_t k = MIN(n - done, capture_ptrace_batch_max(c->o->stack_bytes));

                if (usec_left(c->raw_deadline_usec) == 0) {
                        /* The round's share is spent, not the budget: the rest are stopped first next round. */
                        if (!c->last_round && !over_budget(c)) {
                                memcpy(c->carried, deferred + done, (n - done) * sizeof *deferred);
                                c->n_carried = n - done;
                                return 0;
                        }
                        skip_unstopped(c, rs, deferred + done, n - done, n);
                        return 0;
                }
                for (size_t i = 0; i < k; i++) {
                        RawThread *raw = &rs->raw[deferred[done + i]];

                        items[i] = (PtraceBatchItem) { .tid = c->s->threads[raw->index].tid };
                        runtimes_item_setup(c, &items[i], &stopped[i], raw);
                }
                capture_ptrace_items(c, items, k);
                for (size_t i = 0; i < k; i++) {
                        RawThread *raw = &rs->raw[deferred[done + i]];
                        ThreadSnapshot *t = &c->s->threads[raw->index];
                        int r = ptrace_item_take(c, t, raw, &items[i]);

                        if (r < 0)
                                ptrace_failed(c, t, raw, r);
                }
                done += k;
        }
        return 0;
}

static int module_index_cb(Dwfl_Module *mod, void **userdata, const char *name, Dwarf_Addr start, void *arg) {
        Capture *c = arg;
        Dwarf_Addr low, high;
        GElf_Addr bias = 0;
        ModuleInfo *m;

        m = snapshot_add_module(c->s);
        if (!m)
                return DWARF_CB_ABORT;
        dwfl_module_info(mod, NULL, &low, &high, NULL, NULL, NULL, NULL);
        m->path = strdup(unwind_process_module_name(c->up, name) ?: "");
        if (!m->path)
                return DWARF_CB_ABORT;
        m->start = low;
        m->end = high;
        if (dwfl_module_getelf(mod, &bias))
                m->bias = bias;
        else
                m->missing = name && name[0] == '/'; /* a file, not [vdso] or an anonymous mapping */
        m->build_id = dwfl_module_build_id_hex(mod);
        if (unwind_process_module_not_read(c->up, name)) {
                m->missing_reason = strdup(unwind_process_module_not_read(c->up, name));
                if (!m->missing_reason)
                        return DWARF_CB_ABORT;
        }
        /* A file that cannot be reached is still named by its build-id, from the image the loader mapped: what
         * debuginfod and a later --resymbolize look it up by. (Of a file not read, only from pages in memory.) */
        if (m->missing && !m->build_id)
                (void) unwind_process_build_id(c->up, low, &m->build_id);
        *userdata = (void *) (uintptr_t) c->s->n_modules; /* index + 1 */
        return DWARF_CB_OK;
}

/* The symbolizer's entry for module IDX, looked up once per capture. */
static SymModule *capture_sym_module(Capture *c, Symbolizer *sym, const char *root, Dwfl_Module *mod, int idx) {
        if (idx < 0 || (size_t) idx >= c->n_symmods)
                return NULL;
        if (!c->symmod_done[idx]) {
                c->symmods[idx] = symbolizer_get_module(sym, mod, root);
                c->symmod_done[idx] = true;
        }
        return c->symmods[idx];
}

static int symbolize_thread(Capture *c, Symbolizer *sym, const char *root, ThreadSnapshot *t,
                            const UnwindFrame *frames, size_t n) {
        Dwfl *dwfl = unwind_process_dwfl(c->up);
        uint64_t start = now_usec(CLOCK_MONOTONIC);
        int r = 0;

        for (size_t i = 0; i < n; i++) {
                uint64_t lookup = frames[i].pc - (frames[i].activation ? 0 : 1);
                Dwfl_Module *mod = dwfl_addrmodule(dwfl, lookup);
                UserFrame tmpl = {
                        .pc = frames[i].pc,
                        .activation = frames[i].activation,
                        .method = frames[i].method,
                        .module = -1,
                };
                void **ud = NULL;

                if (mod) {
                        dwfl_module_info(mod, &ud, NULL, NULL, NULL, NULL, NULL, NULL);
                        if (ud && *ud)
                                tmpl.module = (int) (uintptr_t) *ud - 1;
                }
                r = symbolizer_add_frames(sym, capture_sym_module(c, sym, root, mod, tmpl.module), mod, &tmpl, t);
                if (r < 0)
                        break;
        }
        c->s->symbolize_usec += now_usec(CLOCK_MONOTONIC) - start;
        return MIN(r, 0);
}

/* T's frames for the pcs FRAMES[0..N) of RAW, in place of those it had. When the symbolizer deferred file:line for
 * some of them (symbolizer_defer_source()), RAW keeps the pcs for capture_source_pass(). */
static int symbolize_unwound(Capture *c, Symbolizer *sym, const char *root, ThreadSnapshot *t, RawThread *raw,
                             const UnwindFrame *frames, size_t n, bool *ret_clean) {
        SymbolizerStats before, after;
        int r;

        for (size_t i = 0; i < t->n_frames; i++)
                user_frame_done(&t->frames[i]);
        t->n_frames = 0;
        raw->pcs = mfree(raw->pcs);
        raw->n_pcs = 0;
        symbolizer_get_stats(sym, &before);
        r = symbolize_thread(c, sym, root, t, frames, n);
        if (r < 0)
                return r;
        symbolizer_get_stats(sym, &after);
        raw->owed = after.source_deferred - before.source_deferred;
        if (raw->owed > 0) {
                raw->pcs = malloc(MAX(n, (size_t) 1) * sizeof *frames);
                if (!raw->pcs)
                        return -ENOMEM;
                memcpy(raw->pcs, frames, n * sizeof *frames);
                raw->n_pcs = n;
        }
        return runtime_trim_native(t, ret_clean);
}

/* Unwind one thread's raw capture into the snapshot. RET_CLEAN says whether it reached the outermost frame. */
static int unwind_one(Capture *c, Symbolizer *sym, const char *root, ThreadSnapshot *t, RawThread *raw,
                      UnwindFrame *frames, bool *ret_clean) {
        UnwindResult res;
        int r;

        r = unwind_thread(c->up, c->o->unwinder, t->tid, &raw->regs, &raw->stack, frames, c->o->max_frames, &res);
        if (r < 0)
                return thread_set_error(c->s, t, "unwinding failed: %s", strerror(-r));
        free(t->unwind_end);
        t->unwind_end = strdup(res.end);
        if (!t->unwind_end)
                return -ENOMEM;
        if (res.truncated)
                t->truncated = true;
        *ret_clean = res.clean;
        r = runtime_set_unwound(&c->runtimes, t->tid, frames, res.n_frames, &raw->stack, &raw->rt);
        if (r < 0)
                return r;
        return symbolize_unwound(c, sym, root, t, raw, frames, res.n_frames, ret_clean);
}

static void raw_thread_done(RawThread *raw) {
        raw->stack.data = mfree(raw->stack.data);
        raw->pcs = mfree(raw->pcs);
        runtime_raw_done(&raw->rt);
}

static void raw_set_done(RawSet *rs) {
        for (size_t i = 0; rs->raw && i < rs->n; i++)
                raw_thread_done(&rs->raw[i]);
        rs->raw = mfree(rs->raw);
        rs->n = rs->n_allocated = 0;
}

static void capture_done(Capture *c) {
        /* What still holds a thread keeps the raised priority until it exits, which then releases the thread at
         * once. */
        if (ptrace_held_done(&c->held) == 0)
                capture_sched_end(&c->sched);
        else
                capture_sched_rt_end(&c->sched);
        c->symmods = mfree(c->symmods);
        c->symmod_done = mfree(c->symmod_done);
        c->carried = mfree(c->carried);
        runtime_set_done(&c->runtimes);
}

/* A new snapshot of C->pid with what needs no thread: identity, the address space (C->up stays NULL where it
 * cannot be read, which the snapshot then says). Returns 1 for a kernel thread, 0 otherwise. */
static int capture_begin(Capture *c, int *ret_dirfd, UnwindProcess **ret_up) {
        Snapshot *s = c->s;
        char host[256];
        bool kthread;
        int r;

        s->pid = c->pid;
        s->timestamp_usec = now_usec(CLOCK_REALTIME);
        s->method_requested = c->o->method;
        s->unwinder = strdup(unwinder_kind_to_string(c->o->unwinder));
        if (gethostname(host, sizeof host) == 0) {
                host[sizeof host - 1] = '\0';
                s->hostname = strdup(host);
        }
        if (!s->unwinder)
                return -ENOMEM;

        r = proc_open_dir(c->pid, 0, ret_dirfd);
        if (r < 0)
                return r;
        c->dirfd = *ret_dirfd;
        r = read_process_identity(c);
        if (r < 0)
                return r;
        kthread = r > 0;
        s->kernel_thread = kthread;
        if (!kthread && s->state != 'Z') {
                r = unwind_process_new(c->pid, c->o->debuginfo_path, ret_up);
                /* Without the address space there is no user stack to show: say so rather than half a dump. */
                if (r == -ESRCH || r == -EACCES || r == -EPERM)
                        return r;
                if (r < 0)
                        snapshot_add_error(s, "cannot read the address space: %s", strerror(-r));
        }
        c->up = *ret_up;
        return kthread;
}

/* Whether TID should be kept when the thread budget leaves threads out: the trigger thread, and the threads on a
 * CPU or in uninterruptible sleep, which are what a hang report is about; the threads that sleep are many and
 * alike (a pool parked on one queue). */
static bool thread_wanted(Capture *c, pid_t tid) {
        _cleanup_close_ int taskfd = -EBADF;
        int state;

        if (tid == c->o->keep_tid)
                return true;
        if (proc_open_task(c->dirfd, tid, &taskfd) < 0)
                return false;
        state = capture_thread_state(taskfd);
        return state == 'R' || state == 'D';
}

static int cmp_tid(const void *a, const void *b) {
        int x = *(const int *) a, y = *(const int *) b;

        return (x > y) - (x < y);
}

/* Order TIDS[0..N) so that its first MAX are the ones to capture: the wanted threads (thread_wanted()) first, then
 * the others, each group in TID order. Returns how many were wanted, or -ENOMEM. */
static ssize_t pick_threads(Capture *c, int *tids, size_t n, size_t max) {
        _cleanup_free_ int *rest = calloc(n ?: 1, sizeof *rest);
        size_t k = 0, m = 0;

        if (!rest)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++)
                if (thread_wanted(c, tids[i]))
                        tids[k++] = tids[i];
                else
                        rest[m++] = tids[i];
        memcpy(&tids[k], rest, m * sizeof *rest);
        qsort(tids, MIN(n, max), sizeof *tids, cmp_tid);
        return (ssize_t) k;
}

/* The threads to capture: all of them, or just o->tid; at most o->max_threads (the cut is recorded). */
static int capture_list_threads(Capture *c, int **ret_tids, size_t *ret_n) {
        size_t n = 0;
        int r;

        r = proc_list_numeric(c->dirfd, "task", ret_tids, &n);
        if (r < 0)
                return r;
        if (c->o->tid > 0) {
                size_t k = 0;
                for (size_t i = 0; i < n; i++)
                        if ((*ret_tids)[i] == c->o->tid)
                                (*ret_tids)[k++] = (*ret_tids)[i];
                n = k;
                if (n == 0)
                        return -ESRCH;
        }
        c->s->threads_total = n;
        if (n > c->o->max_threads) {
                ssize_t wanted = pick_threads(c, *ret_tids, n, c->o->max_threads);

                if (wanted < 0)
                        return (int) wanted;
                snapshot_add_error(c->s, "thread budget: captured %u of %zu threads: the %zd on a CPU or in D state "
                                   "(and a trigger thread) first, then the others by TID", c->o->max_threads, n,
                                   wanted);
                c->s->truncated = true;
                n = c->o->max_threads;
        }
        *ret_n = n;
        return 0;
}

/* The symbolizer a runtime's reader uses for frames of its own (a parked goroutine's): the capture's, within its
 * budget. */
static int runtime_symbolize_cb(void *userdata, const UnwindFrame *frames, size_t n, ThreadSnapshot *t) {
        Capture *c = userdata;

        if (over_budget(c))
                return -ETIME;
        return symbolize_thread(c, c->sym, c->root, t, frames, n);
}

/* The language runtimes the process runs, found before the raw pass, which reads what each keeps of a thread in the
 * moment it copies its stack. */
static int capture_runtimes_open(Capture *c, Symbolizer *sym, const int *tids, size_t n_tids) {
        c->rc = (RuntimeCapture) {
                .pid = c->pid,
                .s = c->s,
                .up = c->up,
                .sym = sym,
                .tids = tids,
                .n_tids = n_tids,
                .max_frames = c->o->max_frames,
                .deadline_usec = c->deadline_usec,
                .time_budget_usec = c->o->time_budget_usec,
                .ask_usec = c->o->runtime_answer_usec,
                .symbolize = runtime_symbolize_cb,
                .userdata = c,
        };
        return runtime_set_open(&c->runtimes, &c->rc, c->o->skip_runtimes);
}

/* Pass 1, the raw capture: per thread its facts, registers and a copy of its stack, as short as possible per
 * thread and nothing slow while one is held; the threads on a CPU are stopped after the others, in batches whose
 * waits for the stops overlap (capture_ptrace_deferred()). */
static int capture_raw_pass(Capture *c, const int *tids, size_t n_tids, size_t *next, bool kthread, RawSet *rs) {
        _cleanup_free_ size_t *deferred = NULL;
        size_t n_deferred = 0;
        Snapshot *s = c->s;
        int r;

        /* A slot per thread, and one more for each carried from an earlier round (moved to the end, so that this
         * round's unwind pass, from the round's first slot on, has it). */
        if (!GREEDY_REALLOC(rs->raw, rs->n_allocated, MAX(n_tids, rs->n + c->n_carried + (n_tids - *next))) ||
            !(deferred = calloc(c->n_carried + n_tids - *next + 1, sizeof *deferred)) ||
            (!c->carried && !(c->carried = calloc(n_tids ?: 1, sizeof *c->carried))))
                return -ENOMEM;
        for (size_t i = 0; i < c->n_carried; i++) {
                RawThread *old = &rs->raw[c->carried[i]];

                rs->raw[rs->n] = *old;
                *old = (RawThread) { .index = old->index };
                deferred[n_deferred++] = rs->n++;
        }
        c->n_retired += c->n_carried;
        c->n_carried = 0;
        for (; *next < n_tids && usec_left(c->raw_deadline_usec) > 0; (*next)++) {
                _cleanup_close_ int taskfd = -EBADF;
                ThreadSnapshot *t;

                t = snapshot_add_thread(s);
                if (!t)
                        return -ENOMEM;
                t->tid = tids[*next];
                rs->raw[rs->n++] = (RawThread) { .index = s->n_threads - 1 };
                r = proc_open_task(c->dirfd, t->tid, &taskfd);
                if (r == 0)
                        r = read_thread_facts(c, taskfd, t);
                if (r == -ENOMEM)
                        return r;
                if (r < 0) {
                        t->method = CAPTURE_METHOD_NONE;
                        thread_set_error(s, t, r == -ESRCH ? "thread exited during capture" : "cannot read thread: %s",
                                         strerror(-r));
                        continue;
                }
                if (kthread || !c->up) {
                        t->method = CAPTURE_METHOD_NONE;
                        continue;
                }
                r = capture_thread_regs(c, taskfd, t, &rs->raw[rs->n - 1]);
                if (r == -ENOMEM)
                        return r;
                if (r == CAPTURE_NEEDS_PTRACE)
                        deferred[n_deferred++] = rs->n - 1;
        }
        return capture_ptrace_deferred(c, rs, deferred, n_deferred);
}

/* The threads from NEXT on that no round reached: listed, with why they have no stack. */
static int capture_skip_rest(Capture *c, const int *tids, size_t n_tids, size_t next) {
        Snapshot *s = c->s;

        /* Copied: the threads the raw passes reached, less those left for ptrace that were never stopped. */
        if (next < n_tids)
                note_budget_spent(c, BUDGET_COPIED, next - MIN(c->n_unstopped, next), n_tids);
        for (size_t i = next; i < n_tids; i++) {
                ThreadSnapshot *t = snapshot_add_thread(s);

                if (!t)
                        return -ENOMEM;
                t->tid = tids[i];
                s->truncated = t->truncated = true;
                t->method = CAPTURE_METHOD_NONE;
                thread_set_error(s, t, "skipped: capture time budget (%llu ms) exhausted",
                                 (unsigned long long) (c->o->time_budget_usec / USEC_PER_MSEC));
        }
        return 0;
}

/* capture_unwind_pass()'s threads from FROM on, unwound and symbolized (file:line deferred). */
static int capture_unwind_threads(Capture *c, Symbolizer *sym, const char *root, RawSet *rs, size_t from,
                                  UnwindFrame *frames) {
        Snapshot *s = c->s;
        int r;

        for (size_t i = from; i < rs->n; i++) {
                RawThread *raw = &rs->raw[i];
                ThreadSnapshot *t = &s->threads[raw->index];
                bool clean = false;

                if (c->held.n > 0)
                        capture_lower(c);
                if (!raw->have_regs)
                        continue;
                if (over_budget(c)) {
                        note_budget_spent(c, BUDGET_UNWOUND, i - c->n_retired, rs->n - c->n_retired);
                        s->truncated = t->truncated = true;
                        thread_set_error(s, t, "not unwound: capture time budget exhausted");
                        continue;
                }
                raw->unwound = true;
                r = unwind_one(c, sym, root, t, raw, frames, &clean);
                if (r < 0)
                        return r;
                /* A sleeping thread whose passive unwind did not reach the outermost frame (a register its CFI
                 * needs was not in the syscall record) is read again with every register its kernel saved for it
                 * (BPF), still without stopping it; in D state too, where ptrace could not stop it. */
                bool all_regs = false;

                if (!clean && !t->truncated && !raw->copy_truncated && c->o->method != CAPTURE_METHOD_PTRACE &&
                    t->method == CAPTURE_METHOD_PASSIVE) {
                        RawThread again = { .index = raw->index };

                        r = capture_passive_all_regs(c, t, &again);
                        if (r == -ENOMEM) {
                                raw_thread_done(&again);
                                return r;
                        }
                        if (r == 0) {
                                all_regs = true;
                                raw_thread_done(raw);
                                *raw = again;
                                raw->unwound = true;
                                r = unwind_one(c, sym, root, t, raw, frames, &clean);
                                if (r < 0)
                                        return r;
                        } else
                                raw_thread_done(&again);
                }
                /* Auto mode: a sleeping thread whose passive unwind still did not reach the outermost frame gets a
                 * brief ptrace capture instead, where BPF could not give it every register (a stop would give the
                 * same registers and the same stack: the unwind ends where it ended). */
                if (!clean && !all_regs && !t->truncated && !raw->copy_truncated &&
                    c->o->method == CAPTURE_METHOD_AUTO && t->method == CAPTURE_METHOD_PASSIVE && t->state != 'D' &&
                    (t->tracer_pid == 0 || t->tracer_pid == getpid())) {
                        RawThread again = { .index = raw->index };
                        ThreadSnapshot backup = *t;

                        if (capture_ptrace(c, t, &again) == 0) {
                                bool clean2 = false;

                                /* Said in its line: a stop the user did not ask for, and it changes the thread's
                                 * wait as /proc shows it for a moment (see the chain's builder_wait_read()). */
                                free(t->stopped_because);
                                if (asprintf(&t->stopped_because, "the passive unwind ended early (%s)",
                                             backup.unwind_end ?: "?") < 0)
                                        return -ENOMEM;
                                /* The frames read while it was stopped replace the passive look's, Python's too. */
                                raw_thread_done(raw);
                                *raw = again;
                                raw->unwound = true;
                                r = unwind_one(c, sym, root, t, raw, frames, &clean2);
                                if (r < 0)
                                        return r;
                                clean = clean2;
                        } else {
                                raw_thread_done(&again);
                                t->method = backup.method;
                                t->pause_us = backup.pause_us;
                        }
                }
                /* A stack longer than the copy: the unwinder read on from the process. That holds for a thread that
                 * reached its outermost frame and was parked in the same place all along (Ruby keeps a thread's VM
                 * stack on its machine stack, a megabyte between its syscall and its outer frames); anywhere else
                 * frames may be missing, or read after the thread moved. */
                if (raw->copy_truncated && !(clean && still_parked(c, t)))
                        t->truncated = true;
                if (t->truncated)
                        s->truncated = true;
        }
        return 0;
}

/* File:line for the frames of RS's threads from FROM on that the unwind pass resolved without it: the modules' DWARF
 * loaded only now, when every thread copied has its frames, and only before the source deadline and within the
 * budget. A thread not reached keeps its frames as they are (symbols), and counts with those without file:line. */
static int capture_source_pass(Capture *c, Symbolizer *sym, const char *root, RawSet *rs, size_t from) {
        for (size_t i = from; i < rs->n; i++) {
                RawThread *raw = &rs->raw[i];
                _cleanup_free_ UnwindFrame *pcs = NULL;
                bool clean = false;
                int r;

                if (raw->owed == 0)
                        continue;
                if (over_budget(c) || now_usec(CLOCK_MONOTONIC) >= c->source_deadline_usec) {
                        c->source_owed += raw->owed;
                        raw->owed = 0;
                        raw->pcs = mfree(raw->pcs);
                        continue;
                }
                pcs = TAKE_PTR(raw->pcs);
                r = symbolize_unwound(c, sym, root, &c->s->threads[raw->index], raw, pcs, raw->n_pcs, &clean);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* Pass 2, with every thread running again: unwind and symbolize from the copies FROM on. A sleeping thread whose
 * passive unwind fell short gets one brief ptrace capture in auto mode. Every thread first gets its frames from what
 * is bounded (unwinding, symbols), and only then file:line (capture_source_pass()): loading a module's DWARF cannot
 * be cut short, and done for the first thread it took the rest of the budget on a starved CPU (libc's compressed
 * DWARF: 35 ms of CPU, up to 175 ms at the caller's priority behind 4 busy threads on 2 CPUs), which left every
 * thread the raw pass had copied but that first one without frames. The runtimes' frames are merged last, into
 * native frames that are final. */
static int capture_unwind_pass(Capture *c, Symbolizer *sym, RawSet *rs, size_t from) {
        _cleanup_free_ UnwindFrame *frames = NULL;
        Snapshot *s = c->s;
        int r;

        if (!c->up)
                return 0;
        frames = calloc(c->o->max_frames ?: 1, sizeof *frames);
        if (!frames)
                return -ENOMEM;
        if (!c->symmods) {
                SymbolizerStats stats;

                /* File:line only within three quarters of the budget: the rest is kept for what is bounded
                 * (unwinding, symbols), so that one module's DWARF, loaded late on a starved CPU, cannot overrun it. */
                symbolizer_get_stats(sym, &stats);
                c->source_skipped = stats.source_skipped;
                c->dbgd_failed = stats.debuginfod_failed + stats.debuginfod_skipped;
                symbolizer_set_source_deadline(sym, c->source_deadline_usec);
                dwfl_getmodules(unwind_process_dwfl(c->up), module_index_cb, c, 0);
                c->n_symmods = s->n_modules;
                c->symmods = calloc(s->n_modules ?: 1, sizeof *c->symmods);
                c->symmod_done = calloc(s->n_modules ?: 1, sizeof *c->symmod_done);
                if (!c->symmods || !c->symmod_done)
                        return -ENOMEM;
        }
        symbolizer_defer_source(sym, true);
        r = capture_unwind_threads(c, sym, c->root, rs, from, frames);
        symbolizer_defer_source(sym, false);
        if (r < 0)
                return r;
        r = capture_source_pass(c, sym, c->root, rs, from);
        if (r < 0)
                return r;
        for (size_t i = from; i < rs->n; i++) {
                RawThread *raw = &rs->raw[i];

                if (!raw->unwound)
                        continue;
                r = runtime_set_merge_thread(&c->runtimes, &raw->rt, &s->threads[raw->index]);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* After the last unwind pass: what the symbolizer could not do within the budget, and which modules had DWARF. */
static void capture_unwind_finish(Capture *c, Symbolizer *sym) {
        Snapshot *s = c->s;
        SymbolizerStats stats;

        if (!c->symmods)
                return;
        symbolizer_set_source_deadline(sym, 0);
        symbolizer_get_stats(sym, &stats);
        if (stats.debuginfod_failed + stats.debuginfod_skipped > c->dbgd_failed)
                (void) snapshot_add_error(s, "debuginfod gave no answer within the time budget: the modules without "
                                          "local debuginfo are left unresolved (stackctl show --resymbolize later)");
        if (stats.source_skipped - c->source_skipped + c->source_owed > 0)
                (void) snapshot_add_error(s, "time budget (%llu ms): %u frames resolved without file:line, which "
                                          "is resolved within the first three quarters of the budget",
                                          (unsigned long long) (c->o->time_budget_usec / USEC_PER_MSEC),
                                          stats.source_skipped - c->source_skipped + c->source_owed);
        for (size_t i = 0; i < c->n_symmods; i++)
                s->modules[i].debuginfo = sym_module_has_debuginfo(c->symmods[i]);
}

/* The raw passes and unwind passes, in rounds while threads are left and the budget lasts (see usec_left()). */
static int capture_rounds(Capture *c, Symbolizer *sym, const int *tids, size_t n_tids, bool kthread, RawSet *rs) {
        size_t next = 0;
        int r;

        c->raw_deadline_usec = now_usec(CLOCK_MONOTONIC) + usec_left(c->deadline_usec) / CAPTURE_FIRST_ROUND_SHARE;
        for (unsigned round = 1;; round++) {
                size_t from = rs->n;
                uint64_t t0, t1, t2;
                double copy, unwind;

                if (round > 1)
                        (void) capture_sched_begin(&c->sched);
                c->last_round = round == CAPTURE_ROUNDS_MAX;
                t0 = now_usec(CLOCK_MONOTONIC);
                r = capture_raw_pass(c, tids, n_tids, &next, kthread, rs);
                if (r < 0)
                        return r;
                /* Unwinding and symbols at the caller's priority: ahead of the load, they would keep the CPU from
                 * the very threads just released (a busy python3 under load then saw 66 ms gaps instead of 12-24
                 * ms). But only once no thread is held (capture_lower()). */
                capture_lower(c);
                if (round == 1) {
                        r = runtime_set_read_process(&c->runtimes);
                        if (r < 0)
                                return r;
                }
                t1 = now_usec(CLOCK_MONOTONIC);
                r = capture_unwind_pass(c, sym, rs, from);
                if (r < 0)
                        return r;
                t2 = now_usec(CLOCK_MONOTONIC);
                if ((next >= n_tids && c->n_carried == 0) || rs->n == from || over_budget(c) ||
                    round == CAPTURE_ROUNDS_MAX)
                        break;
                /* Threads left, and time: the next raw pass gets the share of what is left that this round's costs
                 * a thread give it, less a margin for a thread that costs more (CAPTURE_ROUND_MARGIN). */
                copy = (double) (t1 - t0) / (double) (rs->n - from);
                unwind = (double) (t2 - t1) / (double) (rs->n - from);
                c->raw_deadline_usec = t2 + (uint64_t) ((double) usec_left(c->deadline_usec) * CAPTURE_ROUND_MARGIN *
                                                        copy / (copy + unwind));
        }
        /* Carried, and then the budget ran out in the unwinding. */
        skip_unstopped(c, rs, c->carried, c->n_carried, c->n_carried);
        c->n_carried = 0;
        capture_unwind_finish(c, sym);
        return capture_skip_rest(c, tids, n_tids, next);
}

int capture_process(pid_t pid, const CaptureOptions *o, Symbolizer *sym, Snapshot **ret) {
        _cleanup_snapshot_free_ Snapshot *s = NULL;
        _cleanup_(unwind_process_freep) UnwindProcess *up = NULL;
        _cleanup_close_ int dirfd = -EBADF;
        _cleanup_free_ int *tids = NULL;
        _cleanup_(raw_set_done) RawSet raw = {};
        _cleanup_(capture_done) Capture c = {};
        size_t n_tids = 0;
        int r, kthread;

        s = snapshot_new();
        if (!s)
                return -ENOMEM;
        c = (Capture) { .pid = pid, .o = o, .s = s, .dirfd = -EBADF, .start_usec = now_usec(CLOCK_MONOTONIC),
                        .sym = sym };
        snprintf(c.root, sizeof c.root, "/proc/%d/root", (int) pid);
        c.deadline_usec = o->deadline_usec ?: c.start_usec + o->time_budget_usec;
        c.source_deadline_usec = c.start_usec + usec_left(c.deadline_usec) / 4 * 3;
        /* The raw pass ahead of the load, often the target's own busy threads: its copies are then of one moment,
         * and a stopped thread is released at once. */
        (void) capture_sched_begin(&c.sched);

        kthread = capture_begin(&c, &dirfd, &up);
        if (kthread < 0)
                return kthread;
        r = capture_list_threads(&c, &tids, &n_tids);
        if (r < 0)
                return r;
        if (up) {
                r = capture_runtimes_open(&c, sym, tids, n_tids);
                if (r < 0)
                        return r;
        }
        r = capture_rounds(&c, sym, tids, n_tids, kthread > 0, &raw);
        if (r < 0)
                return r;
        /* What the runtimes build of the whole process (the goroutines, a JVM's own dump), after the stacks it is
         * merged into. */
        r = runtime_set_finish(&c.runtimes);
        if (r < 0)
                return r;

        s->duration_usec = now_usec(CLOCK_MONOTONIC) - c.start_usec;
        *ret = TAKE_PTR(s);
        return 0;
}
