/* task-iter.c: loading the BPF task iterator and reading its records (see task-iter.h). */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/alloc-util.h"
#include "base/log.h"
#include "base/macro.h"
#include "proc/bpf-log.h"
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
_Static_assert(offsetof(TaskRecord, comm) == 224 && sizeof(TaskRecord) == 288, "the BPF record's layout moved: check task-record.h");
_Static_assert(sizeof(struct sw_task_same) == 8 && sizeof(TaskGroup) == 16,
               "a bare tid's record and a process's count must keep whole records 8-aligned");

struct TaskIter {
        struct task_iter_bpf *skel;
        struct bpf_link *walk;          /* the one-shot walk, attached to our own thread; NULL: the kernel has none */
        struct ring_buffer *ring;       /* its records */
        size_t ring_bytes;              /* its size (walk_ring's max_entries) */
        bool need_all;                  /* reloaded: the next pass writes everything, as the first did */
        bool after_all;                 /* the last pass wrote everything */
        TaskIterWalk walk_kind;
        char *buf;
        size_t size, allocated;
        uint32_t *same;                 /* the tids of the last pass's bare records */
        size_t n_same, same_allocated;
        TaskGroup *groups;              /* its counts per process */
        size_t n_groups, groups_allocated;
};

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

/* Make room for SIZE more bytes in IT's buffer: at least 64 KiB, since the kernel fills a read up to the seq_file's
 * buffer. */
static int buf_reserve(TaskIter *it, size_t size) {
        size = MAX(size, (size_t) 65536);
        if (it->allocated - it->size < size) {
                size_t a = MAX(MAX(it->allocated * 2, (size_t) 262144), it->size + size);
                /* Mapped, not malloc'd: the megabytes of a pass of every whole record go back to the kernel when a
                 * pass of changes follows (malloc would keep them in its heap). */
                char *b = it->buf ? mremap(it->buf, it->allocated, a, MREMAP_MAYMOVE)
                                  : mmap(NULL, a, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

                if (b == MAP_FAILED)
                        return -ENOMEM;
                it->buf = b;
                it->allocated = a;
        }
        return 0;
}

static void buf_release(TaskIter *it) {
        if (it->buf)
                (void) munmap(it->buf, it->allocated);
        it->buf = NULL;
        it->allocated = 0;
}

/* A record of the one-shot walk, appended to the pass's stream as the per-task pass would have written it. */
static int ring_record(void *userdata, void *data, size_t size) {
        TaskIter *it = userdata;

        if (buf_reserve(it, size) < 0)
                return -ENOMEM;
        memcpy(it->buf + it->size, data, size);
        it->size += size;
        return 0;
}

/* The walk's ring buffer holds the records of the threads that moved since the last pass: what does not fit is lost
 * to the walk, and that pass writes every thread per task, a hundred times the walk's cost (50,000 threads, 5 % of
 * them waking each second: 60 ms a pass, and the poll stretched to 8 s). Sized for an eighth of the machine's threads
 * moving in a poll, at least 512 KiB (some 1,700 records), and made again twice the size of what a pass that
 * overflowed wanted to write, up to 16 MiB. */
#define WALK_RING_MIN_BYTES ((size_t) 512 << 10)
#define WALK_RING_MAX_BYTES ((size_t) 16 << 20)
#define WALK_RING_RECORD_BYTES (sizeof(TaskRecord) + 8) /* and the ring's header */

static size_t ring_bytes_for(size_t records) {
        size_t want = records * WALK_RING_RECORD_BYTES, b = WALK_RING_MIN_BYTES;

        while (b < want && b < WALK_RING_MAX_BYTES)
                b <<= 1;
        return b;
}

/* The machine's threads, as the kernel counts its scheduling entities (/proc/loadavg's "running/total"); 0 when
 * unreadable. */
static size_t machine_threads(void) {
        char buf[128];
        unsigned long total;
        const char *slash;
        FILE *f = fopen("/proc/loadavg", "re");
        bool ok = f && fgets(buf, sizeof buf, f);

        if (f)
                fclose(f);
        slash = ok ? strchr(buf, '/') : NULL;
        return slash && sscanf(slash + 1, "%lu", &total) == 1 ? (size_t) total : 0;
}

/* Open and load the object: with the one-shot walk along lanes or along the task list (both Linux 6.7; the list for a
 * verifier that refuses the lanes) and a ring of IT->ring_bytes, else the per-task pass alone and a ring buffer of
 * one page, unused. */
static int load(TaskIter *it, TaskIterWalk walk) {
        it->skel = task_iter_bpf__open();
        if (!it->skel)
                return -errno ?: -ENOMEM;
        kallsyms_sched_bounds(it->skel->rodata);
        it->skel->rodata->nr_restart_syscall = SYS_restart_syscall;
        it->skel->rodata->walk_lanes_on = walk == TASK_ITER_WALK_LANES;
        /* Attached by hand, to our thread only: attached to every task, it would walk them all for each. */
        bpf_program__set_autoattach(it->skel->progs.stackwatch_walk, false);
        if (walk == TASK_ITER_WALK_PER_TASK) {
                (void) bpf_program__set_autoload(it->skel->progs.stackwatch_walk, false);
                (void) bpf_map__set_max_entries(it->skel->maps.walk_ring, (uint32_t) getpagesize());
        } else
                (void) bpf_map__set_max_entries(it->skel->maps.walk_ring, (uint32_t) it->ring_bytes);
        return task_iter_bpf__load(it->skel);
}

static int attach_walk(TaskIter *it) {
        union bpf_iter_link_info info = { .task.tid = (uint32_t) gettid() };
        LIBBPF_OPTS(bpf_iter_attach_opts, opts, .link_info = &info, .link_info_len = sizeof info);

        it->walk = bpf_program__attach_iter(it->skel->progs.stackwatch_walk, &opts);
        if (!it->walk)
                return -errno;
        it->ring = ring_buffer__new(bpf_map__fd(it->skel->maps.walk_ring), ring_record, it, NULL);
        if (!it->ring)
                return -errno;
        return 0;
}

int task_iter_new(TaskIter **ret, char **ret_why) {
        return task_iter_new_walk(ret, TASK_ITER_WALK_BEST, ret_why);
}

int task_iter_new_walk(TaskIter **ret, TaskIterWalk walk, char **ret_why) {
        _cleanup_(task_iter_freep) TaskIter *it = NULL;
        TaskIterWalk w = walk == TASK_ITER_WALK_BEST ? TASK_ITER_WALK_LANES : walk;
        int r;

        assert(walk >= 0 && walk < _TASK_ITER_WALK_MAX);

        if (ret_why)
                *ret_why = NULL;
        if (access("/sys/kernel/btf/vmlinux", R_OK) < 0)
                return fail(-errno, ret_why, "the kernel has no BTF (/sys/kernel/btf/vmlinux: %s)",
                            strerror(errno));
        bpf_log_to_debug();
        it = calloc(1, sizeof *it);
        if (!it)
                return -ENOMEM;
        it->ring_bytes = ring_bytes_for(machine_threads() / 8);
        /* Asked for the best, the next when one does not load. */
        for (;;) {
                r = load(it, w);
                if (r >= 0 || walk != TASK_ITER_WALK_BEST || w == TASK_ITER_WALK_PER_TASK)
                        break;
                if (w == TASK_ITER_WALK_LANES)
                        log_debug_errno(r, "The task walk along lanes does not load, walking the task list: %m");
                else
                        log_debug_errno(r, "The one-shot task walk does not load (it needs Linux 6.7), passing per "
                                           "task: %m");
                task_iter_bpf__destroy(it->skel);
                it->skel = NULL;
                w++;
        }
        it->walk_kind = w;
        if (!it->skel)
                return fail(r, ret_why, "opening the BPF object: %s", strerror(-r));
        if (r < 0)
                return fail(r, ret_why,
                            r == -EPERM || r == -EACCES ?
                                    "loading the BPF program: %s (it needs CAP_BPF and CAP_PERFMON)" :
                                    "loading the BPF program: %s (it needs Linux 5.15 or later)",
                            strerror(-r));
        r = task_iter_bpf__attach(it->skel);
        if (r < 0)
                return fail(r, ret_why, "attaching the task iterator: %s", strerror(-r));
        if (bpf_program__fd(it->skel->progs.stackwatch_walk) >= 0) {
                r = attach_walk(it);
                if (r < 0) {
                        log_debug_errno(r, "Attaching the one-shot task walk failed, passing per task: %m");
                        if (walk != TASK_ITER_WALK_BEST)
                                return fail(r, ret_why, "attaching the task walk: %s", strerror(-r));
                        ring_buffer__free(it->ring);
                        it->ring = NULL;
                        bpf_link__destroy(it->walk);
                        it->walk = NULL;
                        it->walk_kind = TASK_ITER_WALK_PER_TASK;
                }
        }
        *ret = TAKE_PTR(it);
        return 0;
}

/* Drop the loaded object, its links and the walk's ring. */
static void unload(TaskIter *it) {
        ring_buffer__free(it->ring);
        it->ring = NULL;
        bpf_link__destroy(it->walk);
        it->walk = NULL;
        task_iter_bpf__destroy(it->skel);
        it->skel = NULL;
}

/* Load the walk again with a ring of RING_BYTES; where that fails, pass per task. The maps start empty: the next pass
 * writes everything. */
static int walk_reload(TaskIter *it, size_t ring_bytes) {
        int r;

        log_debug("The task walk's ring of %zu KiB overflowed: loading it again with %zu KiB.", it->ring_bytes >> 10,
                  ring_bytes >> 10);
        unload(it);
        it->need_all = true;
        it->ring_bytes = ring_bytes;
        r = load(it, it->walk_kind);
        if (r >= 0)
                r = task_iter_bpf__attach(it->skel);
        if (r >= 0)
                r = attach_walk(it);
        if (r >= 0)
                return 0;
        log_debug_errno(r, "Loading the task walk again failed, passing per task: %m");
        unload(it);
        it->walk_kind = TASK_ITER_WALK_PER_TASK;
        r = load(it, TASK_ITER_WALK_PER_TASK);
        if (r >= 0)
                r = task_iter_bpf__attach(it->skel);
        return r;
}

TaskIter *task_iter_free(TaskIter *it) {
        if (!it)
                return NULL;
        unload(it);
        buf_release(it);
        free(it->same);
        free(it->groups);
        free(it);
        return NULL;
}

/* Split the pass's stream in place: whole records moved to the front of the buffer (each is a multiple of 8 long, so
 * they stay aligned), bare tids into IT->same, counts into IT->groups. */
static int split_records(TaskIter *it, size_t *ret_n) {
        size_t in = 0, out = 0, n = 0;

        it->n_same = it->n_groups = 0;
        while (in < it->size) {
                uint32_t kind;

                if (it->size - in < sizeof(struct sw_task_same))
                        return -EIO;
                memcpy(&kind, it->buf + in, sizeof kind);
                if (kind == SW_RECORD_GROUP) {
                        if (it->size - in < sizeof(TaskGroup) ||
                            !GREEDY_REALLOC(it->groups, it->groups_allocated, it->n_groups + 1))
                                return it->size - in < sizeof(TaskGroup) ? -EIO : -ENOMEM;
                        memcpy(&it->groups[it->n_groups++], it->buf + in, sizeof(TaskGroup));
                        in += sizeof(TaskGroup);
                        continue;
                }
                if (kind == SW_RECORD_SAME) {
                        struct sw_task_same rs;

                        memcpy(&rs, it->buf + in, sizeof rs);
                        if (it->n_same == it->same_allocated) {
                                size_t a = MAX(it->same_allocated * 2, (size_t) 1024);
                                uint32_t *b = reallocarray(it->same, a, sizeof *b);

                                if (!b)
                                        return -ENOMEM;
                                it->same = b;
                                it->same_allocated = a;
                        }
                        it->same[it->n_same++] = rs.tid;
                        in += sizeof rs;
                        continue;
                }
                if (kind != SW_RECORD_FULL || it->size - in < sizeof(TaskRecord))
                        return -EIO;
                if (out != in)
                        memmove(it->buf + out, it->buf + in, sizeof(TaskRecord));
                in += sizeof(TaskRecord);
                out += sizeof(TaskRecord);
                n++;
        }
        *ret_n = n;
        return 0;
}

/* Run LINK's pass to its end: its records, if it writes them to the seq_file, appended to IT's buffer. */
static int run_pass(TaskIter *it, struct bpf_link *link) {
        _cleanup_close_ int fd = -EBADF;

        fd = bpf_iter_create(bpf_link__fd(link));
        if (fd < 0)
                return -errno;
        for (;;) {
                ssize_t n;

                if (buf_reserve(it, 65536) < 0)
                        return -ENOMEM;
                n = read(fd, it->buf + it->size, it->allocated - it->size);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (n == 0)
                        return 0;
                it->size += (size_t) n;
        }
}

TaskIterWalk task_iter_walk(const TaskIter *it) {
        return it->walk_kind;
}

int task_iter_want_tids(TaskIter *it, uint32_t tgid, bool want) {
        uint32_t one = 1;
        int fd = bpf_map__fd(it->skel->maps.want_tids);

        if (want ? bpf_map_update_elem(fd, &tgid, &one, BPF_ANY) < 0 : bpf_map_delete_elem(fd, &tgid) < 0)
                return errno == ENOENT && !want ? 0 : -errno;
        return 0;
}

int task_iter_read(TaskIter *it, bool all, TaskPass *ret) {
        size_t n_full, grow = 0;
        bool overflowed = false;
        unsigned laned = 0;
        int r;

        /* A pass of every whole record grew the buffer past what one of changes needs: give it back, once (passes of
         * changes that need as much keep it: 50,000 threads with 5 % waking faulted 4 MB in again every pass). */
        if (!all && it->walk && it->after_all && it->allocated > (1U << 20))
                buf_release(it);
        it->after_all = false;
        it->size = 0;
        all = all || it->need_all;
        it->need_all = false;
        it->skel->data->emit_all = all;
        if (!all && it->walk) {
                r = run_pass(it, it->walk);
                if (r >= 0) {
                        r = ring_buffer__consume(it->ring);
                        r = r < 0 ? r : 0;
                }
                laned = it->skel->bss->walk_laned;
                /* What found no room in the ring is lost to this pass: the per-task pass writes everything, and the
                 * ring is made for twice what this pass wanted to write. */
                if (r >= 0 && it->skel->bss->walk_lost > 0) {
                        overflowed = true;
                        grow = ring_bytes_for((it->size / WALK_RING_RECORD_BYTES + it->skel->bss->walk_lost) * 2);
                }
                if (r < 0 || overflowed) {
                        if (r < 0)
                                log_debug_errno(r, "The one-shot task walk failed, passing per task: %m");
                        it->size = 0;
                        it->skel->data->emit_all = all = true;
                        laned = 0;
                }
        }
        if (all || !it->walk) {
                r = run_pass(it, it->skel->links.stackwatch_tasks);
                if (r < 0)
                        return r;
                it->after_all = true;
        }
        r = split_records(it, &n_full);
        if (r < 0)
                return r;
        /* The pass's records stay in IT's buffer, which the reload leaves alone. */
        if (grow > it->ring_bytes) {
                r = walk_reload(it, grow);
                if (r < 0)
                        return r;
        }
        *ret = (TaskPass) { .records = (const TaskRecord *) it->buf, .n_records = n_full, .same = it->same,
                            .n_same = it->n_same, .groups = it->groups, .n_groups = it->n_groups,
                            .n_laned = laned, .overflowed = overflowed };
        return 0;
}

size_t task_iter_ring_bytes(const TaskIter *it) {
        return it->walk ? it->ring_bytes : 0;
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

int task_iter_read(TaskIter *it, bool all, TaskPass *ret) {
        return -EOPNOTSUPP;
}

int task_iter_want_tids(TaskIter *it, uint32_t tgid, bool want) {
        return -EOPNOTSUPP;
}

int task_iter_new_walk(TaskIter **ret, TaskIterWalk walk, char **ret_why) {
        return task_iter_new(ret, ret_why);
}

TaskIterWalk task_iter_walk(const TaskIter *it) {
        return TASK_ITER_WALK_PER_TASK;
}

size_t task_iter_ring_bytes(const TaskIter *it) {
        return 0;
}
#endif

const char *task_iter_walk_to_string(TaskIterWalk w) {
        static const char *const names[_TASK_ITER_WALK_MAX] = {
                [TASK_ITER_WALK_BEST] = "best",
                [TASK_ITER_WALK_LANES] = "lanes",
                [TASK_ITER_WALK_LIST] = "list",
                [TASK_ITER_WALK_PER_TASK] = "per-task",
        };

        return w >= 0 && w < _TASK_ITER_WALK_MAX ? names[w] : NULL;
}

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
