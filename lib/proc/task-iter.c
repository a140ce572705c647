/* task-iter.c: loading the BPF task iterator and reading its records (see task-iter.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/log.h"
#include "base/macro.h"
#include "proc/task-iter.h"

#ifdef HAVE_BPF
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

/* bpftool's generated code does not meet our warnings. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wsign-conversion"
#include "proc/task-iter.skel.h"
#pragma GCC diagnostic pop

/* Both compilers must agree on the record: no padding, a multiple of 8. */
_Static_assert(sizeof(TaskRecord) % 8 == 0, "the BPF record's size must be a multiple of 8");
_Static_assert(offsetof(TaskRecord, comm) == 216 && sizeof(TaskRecord) == 280, "the BPF record's layout moved: check task-record.h");

struct TaskIter {
        struct task_iter_bpf *skel;
        char *buf;
        size_t size, allocated;
};

/* libbpf's own messages (it prints warnings to stderr otherwise) go to our debug log. */
static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap) {
        char line[512];

        if (level == LIBBPF_DEBUG)
                return 0;
        vsnprintf(line, sizeof line, fmt, ap);
        line[strcspn(line, "\n")] = '\0';
        log_debug("libbpf: %s", line);
        return 0;
}

/* The bounds of the scheduler's and the lock functions' text, which /proc's wchan skips. All four 0 when kallsyms
 * hides addresses (kptr_restrict): then the iterator looks for no wchan, and the scan reads /proc's for the few
 * threads that need one. */
static void kallsyms_sched_bounds(struct task_iter_bpf__rodata *ro) {
        static const char *const names[] = { "__sched_text_start", "__sched_text_end", "__lock_text_start",
                                             "__lock_text_end" };
        uint64_t v[ELEMENTSOF(names)] = {};
        _cleanup_fclose_ FILE *f = fopen("/proc/kallsyms", "re");
        _cleanup_free_ char *line = NULL;
        size_t n = 0, found = 0;

        if (!f)
                return;
        while (found < ELEMENTSOF(names) && getline(&line, &n, f) > 0) {
                unsigned long long addr;
                char type, name[64];

                /* 200,000 lines or so: only the four are parsed. */
                if (!strstr(line, "_text_") || sscanf(line, "%llx %c %63s", &addr, &type, name) != 3)
                        continue;
                for (size_t i = 0; i < ELEMENTSOF(names); i++)
                        if (streq(name, names[i]) && v[i] == 0) {
                                v[i] = addr;
                                found++;
                        }
        }
        if (found < ELEMENTSOF(names) || v[0] == 0 || v[1] <= v[0] || v[3] < v[2])
                return;
        ro->sched_text_start = v[0];
        ro->sched_text_end = v[1];
        ro->lock_text_start = v[2];
        ro->lock_text_end = v[3];
}

static int fail(int r, char **ret_why, const char *fmt, ...) _printf_(3, 4);
static int fail(int r, char **ret_why, const char *fmt, ...) {
        va_list ap;

        if (ret_why) {
                va_start(ap, fmt);
                if (vasprintf(ret_why, fmt, ap) < 0)
                        *ret_why = NULL;
                va_end(ap);
        }
        return r;
}

bool task_iter_built(void) {
        return true;
}

int task_iter_new(TaskIter **ret, char **ret_why) {
        _cleanup_(task_iter_freep) TaskIter *it = NULL;
        int r;

        if (ret_why)
                *ret_why = NULL;
        if (access("/sys/kernel/btf/vmlinux", R_OK) < 0)
                return fail(-errno, ret_why, "the kernel has no BTF (/sys/kernel/btf/vmlinux: %s)",
                            strerror(errno));
        libbpf_set_print(libbpf_print);
        it = calloc(1, sizeof *it);
        if (!it)
                return -ENOMEM;
        it->skel = task_iter_bpf__open();
        if (!it->skel)
                return fail(-errno ?: -ENOMEM, ret_why, "opening the BPF object: %s", strerror(errno));
        kallsyms_sched_bounds(it->skel->rodata);
        it->skel->rodata->nr_restart_syscall = SYS_restart_syscall;
        r = task_iter_bpf__load(it->skel);
        if (r < 0)
                return fail(r, ret_why,
                            r == -EPERM || r == -EACCES ?
                                    "loading the BPF program: %s (it needs CAP_BPF and CAP_PERFMON)" :
                                    "loading the BPF program: %s (it needs Linux 5.15 or later)",
                            strerror(-r));
        r = task_iter_bpf__attach(it->skel);
        if (r < 0)
                return fail(r, ret_why, "attaching the task iterator: %s", strerror(-r));
        *ret = TAKE_PTR(it);
        return 0;
}

TaskIter *task_iter_free(TaskIter *it) {
        if (!it)
                return NULL;
        task_iter_bpf__destroy(it->skel);
        free(it->buf);
        free(it);
        return NULL;
}

int task_iter_read(TaskIter *it, const TaskRecord **ret, size_t *ret_n) {
        _cleanup_close_ int fd = -EBADF;

        fd = bpf_iter_create(bpf_link__fd(it->skel->links.stackwatch_tasks));
        if (fd < 0)
                return -errno;
        it->size = 0;
        for (;;) {
                ssize_t n;

                /* Room for at least 64 KiB each read: the kernel fills a read up to the seq_file's buffer. */
                if (it->allocated - it->size < 65536) {
                        size_t a = MAX(it->allocated * 2, (size_t) 262144);
                        char *b = realloc(it->buf, a);

                        if (!b)
                                return -ENOMEM;
                        it->buf = b;
                        it->allocated = a;
                }
                n = read(fd, it->buf + it->size, it->allocated - it->size);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (n == 0)
                        break;
                it->size += (size_t) n;
        }
        if (it->size % sizeof(TaskRecord) != 0)
                return -EIO;
        *ret = (const TaskRecord *) it->buf;
        *ret_n = it->size / sizeof(TaskRecord);
        return 0;
}

#else /* !HAVE_BPF */

struct TaskIter {
        int unused;
};

bool task_iter_built(void) {
        return false;
}

int task_iter_new(TaskIter **ret, char **ret_why) {
        if (ret_why)
                *ret_why = strdup("this build has no BPF scan (configure --with-bpf)");
        return -EOPNOTSUPP;
}

TaskIter *task_iter_free(TaskIter *it) {
        free(it);
        return NULL;
}

int task_iter_read(TaskIter *it, const TaskRecord **ret, size_t *ret_n) {
        return -EOPNOTSUPP;
}
#endif

/* The kernel's TASK_* bits (include/linux/sched.h). */
#define TASK_INTERRUPTIBLE 0x0001U
#define TASK_UNINTERRUPTIBLE 0x0002U
#define TASK_NOLOAD 0x0400U
#define TASK_RTLOCK_WAIT 0x1000U
#define TASK_FROZEN 0x8000U
#define TASK_REPORT 0x7fU /* RUNNING … PARKED */
#define TASK_IDLE (TASK_UNINTERRUPTIBLE | TASK_NOLOAD)
#define PF_KTHREAD_BIT 0x00200000U

char task_record_state(const TaskRecord *r) {
        static const char letters[] = "RSDTtXZPI";
        unsigned state = (r->state | r->exit_state) & TASK_REPORT, i = 0;

        /* task_state_index(): the idle sleep of a kernel thread is I, a realtime lock's wait D. */
        if ((r->state & TASK_IDLE) == TASK_IDLE)
                return 'I';
        if (r->state == TASK_RTLOCK_WAIT)
                return 'D';
        /* Held by the freezer (v1 cgroups, suspend): /proc says D, the wait it was frozen in (measured on 6.18). */
        if (r->state & TASK_FROZEN)
                return 'D';
        while (state) {
                state >>= 1;
                i++;
        }
        return i < sizeof letters - 1 ? letters[i] : '?';
}

bool task_record_frozen(const TaskRecord *r) {
        return (r->state & TASK_FROZEN) || (r->have & SW_TASK_CGROUP_FROZEN);
}

/* mul_u64_u64_div_u64() of cputime_adjust(): A * B / C without overflow for runtimes of centuries. */
static uint64_t scale(uint64_t a, uint64_t b, uint64_t c) {
        return c ? (uint64_t) ((unsigned __int128) a * b / c) : 0;
}

void task_record_stat(const TaskRecord *r, long hz, ProcStat *ret) {
        uint64_t ns_per_tick = 1000000000ULL / (uint64_t) (hz > 0 ? hz : 100);
        uint64_t rtime = r->sum_exec_runtime, utime = r->utime, stime = r->stime;

        *ret = (ProcStat) {
                .pid = (int) r->tid,
                .state = task_record_state(r),
                .ppid = (int) r->ppid,
                .flags = r->flags,
                .minflt = r->min_flt,
                .majflt = r->maj_flt,
                .num_threads = r->num_threads,
                .starttime = r->start_boottime / ns_per_tick,
        };
        memcpy(ret->comm, r->comm, MIN(sizeof ret->comm - 1, sizeof r->comm));
        ret->comm[MIN(sizeof ret->comm - 1, sizeof r->comm)] = '\0';
        /* cputime_adjust(): the tick's user/system split, scaled to the precise runtime. */
        if (stime == 0)
                utime = rtime;
        else if (utime == 0)
                stime = rtime;
        else {
                stime = scale(stime, rtime, stime + utime);
                utime = rtime - MIN(stime, rtime);
        }
        ret->utime = utime / ns_per_tick;
        ret->stime = stime / ns_per_tick;
}

void task_record_schedstat(const TaskRecord *r, ProcSchedstat *ret) {
        *ret = (ProcSchedstat) { .run_ns = r->sum_exec_runtime, .wait_ns = r->run_delay, .timeslices = r->pcount };
}

bool task_record_io(const TaskRecord *r, ProcIo *ret) {
        if (!(r->have & SW_TASK_HAVE_IO))
                return false;
        *ret = (ProcIo) { .rchar = r->rchar, .wchar = r->wchar, .syscr = r->syscr, .syscw = r->syscw };
        return true;
}

bool task_record_syscall(const TaskRecord *r, ProcSyscall *ret) {
        *ret = (ProcSyscall) { .nr = -1 };
        if (r->state == 0 && r->exit_state == 0) {
                ret->kind = PROC_SYSCALL_RUNNING;
                return true;
        }
        if (!(r->have & SW_TASK_HAVE_REGS))
                return false;
        ret->kind = r->syscall_nr < 0 ? PROC_SYSCALL_NONE : PROC_SYSCALL_BLOCKED;
        ret->nr = r->syscall_nr < 0 ? -1 : r->syscall_nr;
        if (ret->kind == PROC_SYSCALL_BLOCKED)
                memcpy(ret->args, r->args, sizeof ret->args);
        ret->sp = r->sp;
        ret->pc = r->pc;
        return true;
}

const char *task_record_wchan(const TaskRecord *r) {
        if (!(r->have & SW_TASK_HAVE_WCHAN))
                return NULL;
        /* bpf_snprintf() NUL-terminates; the record is ours to trust no further than its size. */
        return memchr(r->wchan, '\0', sizeof r->wchan) ? r->wchan : "";
}
