// SPDX-License-Identifier: GPL-2.0-only
/* task-iter.bpf.c: a BPF task iterator (bpf_iter_task, Linux 5.8; bpf_task_pt_regs 5.15) that writes one
 * struct sw_task_record per thread to the reader: what the scan would read from /proc/PID/task/TID/{stat,
 * schedstat,syscall,wchan,io}, in one pass and without a file per thread.
 *
 * Compiled with clang -target bpf; CO-RE: the kernel types below name only the fields we read and carry
 * preserve_access_index, so libbpf moves each access to where the running kernel's BTF puts the field. GPL-2.0 as
 * the helpers it calls (bpf_get_task_stack, bpf_task_pt_regs) require of their caller. */

typedef unsigned char __u8;
typedef unsigned short __u16;
typedef unsigned int __u32;
typedef unsigned long long __u64;
typedef signed int __s32;
typedef signed long long __s64;
typedef __u16 __be16; /* named by bpf_helper_defs.h */
typedef __u32 __be32, __wsum;
typedef _Bool bool;
#define true 1
#define false 0

#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

#include "task-record.h"

/* The kernel's own types, as far as we read them (include/linux/sched.h and friends). */
struct sched_entity {
        __u64 sum_exec_runtime;
} __attribute__((preserve_access_index));

struct sched_info {
        unsigned long pcount;
        unsigned long long run_delay;
} __attribute__((preserve_access_index));

struct task_io_accounting {
        __u64 rchar, wchar, syscr, syscw;
} __attribute__((preserve_access_index));

struct signal_struct {
        int nr_threads;
} __attribute__((preserve_access_index));

struct task_struct {
        unsigned int __state;
        unsigned int flags;
        int on_cpu;
        int exit_state;
        int pid, tgid;
        struct task_struct *real_parent;
        struct sched_entity se;
        struct sched_info sched_info;
        __u64 utime, stime;
        unsigned long nvcsw, nivcsw;
        __u64 start_boottime;
        unsigned long min_flt, maj_flt;
        char comm[16];
        struct signal_struct *signal;
        struct task_io_accounting ioac;
        unsigned long jobctl;
} __attribute__((preserve_access_index));

/* Before 5.14 the state was a long named state. */
struct task_struct___pre514 {
        long state;
} __attribute__((preserve_access_index));

#if defined(__TARGET_ARCH_x86)
struct pt_regs {
        unsigned long di, si, dx, r10, r8, r9, orig_ax, ip, sp;
} __attribute__((preserve_access_index));
#elif defined(__TARGET_ARCH_arm64)
struct pt_regs {
        __u64 regs[31];
        __u64 sp, pc;
        __u64 orig_x0;
        __s32 syscallno;
} __attribute__((preserve_access_index));
#else
#error "task-iter.bpf.c knows the saved user registers of x86-64 and arm64 only"
#endif

struct seq_file;
struct bpf_iter_meta {
        struct seq_file *seq;
} __attribute__((preserve_access_index));

struct bpf_iter__task {
        struct bpf_iter_meta *meta;
        struct task_struct *task;
} __attribute__((preserve_access_index));

/* Set by the loader before the program is loaded: the scheduler's and the lock functions' text (__sched_text_start
 * …, __lock_text_start …, from /proc/kallsyms), which /proc's wchan skips (in_sched_functions()); 0 when kallsyms
 * hid them, and then no wchan is looked for here. And restart_syscall's number on this architecture. */
const volatile __u64 sched_text_start = 0, sched_text_end = 0;
const volatile __u64 lock_text_start = 0, lock_text_end = 0;
const volatile __s64 nr_restart_syscall = -1;

#define TASK_RUNNING 0x0000
#define TASK_UNINTERRUPTIBLE 0x0002
#define TASK_NOLOAD 0x0400
#define TASK_FROZEN 0x8000
#define PF_KTHREAD 0x00200000
#define JOBCTL_TRAP_FREEZE (1UL << 23)
#define WCHAN_DEPTH 16
#define BPF_MAP_TYPE_PERCPU_ARRAY 6 /* include/uapi/linux/bpf.h */
#define BPF_MAP_TYPE_HASH 1
#define BPF_MAP_TYPE_ARRAY 2
#define BPF_MAP_TYPE_RINGBUF 27

/* One record at a time, off the 512-byte BPF stack; the iterator runs with migration disabled. */
struct {
        __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
        __uint(max_entries, 1);
        __type(key, __u32);
        __type(value, struct sw_task_record);
} record_buf SEC(".maps");

struct {
        __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
        __uint(max_entries, 1);
        __type(key, __u32);
        __type(value, __u64[WCHAN_DEPTH]);
} stack_buf SEC(".maps");

/* What each thread's last pass saw of the facts that move when it runs or changes state, in a slot of a table indexed
 * by its tid (LAST_SEEN_SLOTS, a power of two): an array map's lookup is a bounds check and an add, where task local
 * storage cost 180 ns a thread here, most of the pass. Two live threads whose tids share a slot take it in turn, and
 * each is written whole every pass: a cost, never a wrong answer. The start time tells a new task that got an old
 * tid from the one that had it. */
#define LAST_SEEN_SLOTS 65536U
struct last_seen {
        __u64 start_boottime;
        __u64 switches;                 /* nvcsw + nivcsw */
        __u32 tid;
        __u32 state;
};

struct {
        __uint(type, BPF_MAP_TYPE_ARRAY);
        __uint(max_entries, LAST_SEEN_SLOTS);
        __type(key, __u32);
        __type(value, struct last_seen);
} last_seen SEC(".maps");

/* The one-shot walk's records (stackwatch_walk), and how many of them found no room in the pass under way. */
#define WALK_RING_BYTES (512U << 10) /* ~1,700 whole records: threads that moved in one poll */
struct {
        __uint(type, BPF_MAP_TYPE_RINGBUF);
        __uint(max_entries, WALK_RING_BYTES);
} walk_ring SEC(".maps");
__u64 walk_lost = 0;
/* The process whose threads the walk is meeting, how many of them did not move, and whether their tids are wanted:
 * kept in the map of globals, not on the stack, so that the verifier sees the loop's states converge (it tracks a
 * counter on the stack value by value: 8,193 jumps, "too complex"). */
__u32 walk_tgid = 0, walk_same = 0, walk_tids = 0;

/* The processes whose threads that did not move the reader wants by tid in the next walk, not as a count. */
#define WANT_TIDS_MAX 1024U
struct {
        __uint(type, BPF_MAP_TYPE_HASH);
        __uint(max_entries, WANT_TIDS_MAX);
        __type(key, __u32);
        __type(value, __u32);
} want_tids SEC(".maps");

/* Open-coded task iterators (Linux 6.7), weak: on an older kernel they resolve to nothing, stackwatch_walk does not
 * load, and the reader loads stackwatch_tasks alone. */
struct bpf_iter_task {
        __u64 __opaque[3];
} __attribute__((aligned(8)));
#define BPF_TASK_ITER_ALL_THREADS 1
extern int bpf_iter_task_new(struct bpf_iter_task *it, struct task_struct *task, unsigned int flags) __weak __ksym;
extern struct task_struct *bpf_iter_task_next(struct bpf_iter_task *it) __weak __ksym;
extern void bpf_iter_task_destroy(struct bpf_iter_task *it) __weak __ksym;

/* Set by the reader before each pass: 1 writes every thread's whole record (the first pass, and whenever the reader
 * lost track), 0 only those of threads that changed. */
__u32 emit_all = 1;

static __always_inline bool in_sched_functions(__u64 ip) {
        return (ip >= sched_text_start && ip < sched_text_end) || (ip >= lock_text_start && ip < lock_text_end);
}

/* /proc's get_wchan(): the first return address on the kernel stack outside the scheduler, printed "%ps". */
static __always_inline void read_wchan(struct task_struct *task, struct sw_task_record *r) {
        __u32 zero = 0;
        __u64 *ips = bpf_map_lookup_elem(&stack_buf, &zero);
        long n;

        if (!ips || sched_text_end == 0)
                return;
        r->have |= SW_TASK_HAVE_WCHAN;
        n = bpf_get_task_stack(task, ips, WCHAN_DEPTH * sizeof(__u64), 0);
        if (n <= 0)
                return;
        n /= sizeof(__u64);
        for (int i = 0; i < WCHAN_DEPTH; i++) {
                __u64 ip;

                if (i >= n)
                        break;
                ip = ips[i];
                if (ip == 0)
                        break;
                if (in_sched_functions(ip))
                        continue;
                bpf_snprintf(r->wchan, sizeof r->wchan, "%ps", &ip, sizeof ip);
                break;
        }
}

/* Write REC (SIZE bytes) where the pass's reader takes it: the seq_file of a per-task pass (SEQ), or the ring buffer
 * of a one-shot walk (SEQ NULL), which counts what did not fit. */
static __always_inline void emit(struct seq_file *seq, void *rec, __u32 size) {
        if (seq)
                bpf_seq_write(seq, rec, size);
        else if (bpf_ringbuf_output(&walk_ring, rec, size, 0) < 0)
                walk_lost++;
}

/* The record of TASK, or only its tid when it has not moved since the last pass; or, with COUNT, not even that: true
 * says it did not move, for the caller to count. */
static __always_inline bool visit(struct seq_file *seq, struct task_struct *task, bool count) {
        struct sw_task_record *r;
        struct last_seen *last;
        __u32 zero = 0, state, slot;
        __u64 switches;
        bool sleeping;

        /* A thread that did not run and kept its state since the last pass: its tid says it is still there. Asleep
         * now, it ran since only if it was switched out since, so its switch count tells (a task the freezer took,
         * or one that exited, ran to get there). A runnable one is always written: its CPU time is the point. The
         * fewest cache lines of the task are read here: this runs for every thread on every pass. */
        if (bpf_core_field_exists(task->__state))
                state = task->__state;
        else
                state = (__u32) BPF_CORE_READ((struct task_struct___pre514 *) task, state);
        switches = task->nvcsw + task->nivcsw;
        slot = (__u32) task->pid & (LAST_SEEN_SLOTS - 1);
        last = bpf_map_lookup_elem(&last_seen, &slot);
        if (last) {
                __u64 start = task->start_boottime;
                bool same = last->tid == (__u32) task->pid && last->start_boottime == start &&
                            last->switches == switches && last->state == state && state != TASK_RUNNING;

                last->tid = (__u32) task->pid;
                last->start_boottime = start;
                last->switches = switches;
                last->state = state;
                if (same && !emit_all) {
                        struct sw_task_same rs = { .kind = SW_RECORD_SAME, .tid = (__u32) task->pid };

                        if (count)
                                return true;
                        emit(seq, &rs, sizeof rs);
                        return false;
                }
        }
        r = bpf_map_lookup_elem(&record_buf, &zero);
        if (!r)
                return false;
        __builtin_memset(r, 0, sizeof *r);
        r->kind = SW_RECORD_FULL;

        /* TASK is a trusted (or RCU-protected) BTF pointer: plain loads (relocated by CO-RE, faults caught by the
         * kernel), not a probe read per field, which cost a third of the pass. */
        r->tid = task->pid;
        r->tgid = task->tgid;
        r->ppid = task->real_parent->tgid;
        r->state = state;
        r->exit_state = task->exit_state;
        r->flags = task->flags;
        r->num_threads = task->signal->nr_threads;
        r->start_boottime = task->start_boottime;
        r->utime = task->utime;
        r->stime = task->stime;
        r->sum_exec_runtime = task->se.sum_exec_runtime;
        r->run_delay = task->sched_info.run_delay;
        r->pcount = task->sched_info.pcount;
        r->nvcsw = task->nvcsw;
        r->nivcsw = task->nivcsw;
        r->min_flt = task->min_flt;
        r->maj_flt = task->maj_flt;
        __builtin_memcpy(r->comm, task->comm, sizeof r->comm);
        if (bpf_core_field_exists(task->ioac)) {
                r->rchar = task->ioac.rchar;
                r->wchar = task->ioac.wchar;
                r->syscr = task->ioac.syscr;
                r->syscw = task->ioac.syscw;
                r->have |= SW_TASK_HAVE_IO;
        }
        /* In cgroup v2's freezer trap. Not task_struct.frozen, which a stopped task and a vfork() parent set too
         * (they count as frozen for cgroup.events, without a freezer). */
        if (task->jobctl & JOBCTL_TRAP_FREEZE)
                r->have |= SW_TASK_CGROUP_FROZEN;
        if (task->on_cpu)
                r->have |= SW_TASK_ON_CPU;

        /* /proc's syscall file: "running" for a runnable task, else its saved user registers. Not for a kernel thread
         * (none), nor an exiting one (its stack may be gone). */
        sleeping = r->state != TASK_RUNNING;
        r->syscall_nr = -1;
        if (sleeping && r->exit_state == 0 && !(r->flags & PF_KTHREAD)) {
                struct pt_regs *regs = (struct pt_regs *) bpf_task_pt_regs(task);

                if (regs) {
#if defined(__TARGET_ARCH_x86)
                        r->syscall_nr = (__s64) regs->orig_ax;
                        r->args[0] = regs->di;
                        r->args[1] = regs->si;
                        r->args[2] = regs->dx;
                        r->args[3] = regs->r10;
                        r->args[4] = regs->r8;
                        r->args[5] = regs->r9;
                        r->sp = regs->sp;
                        r->pc = regs->ip;
#else
                        r->syscall_nr = regs->syscallno;
                        r->args[0] = regs->orig_x0;
                        for (int i = 1; i < 6; i++)
                                r->args[i] = regs->regs[i];
                        r->sp = regs->sp;
                        r->pc = regs->pc;
#endif
                        r->have |= SW_TASK_HAVE_REGS;
                }
        }
        /* The stack walk costs: only where the scan wants the wchan (a D sleep that is not an idle kernel thread's, a
         * frozen task, restart_syscall). */
        if (sleeping && r->exit_state == 0 &&
            (((r->state & TASK_UNINTERRUPTIBLE) && !(r->state & TASK_NOLOAD)) || (r->state & TASK_FROZEN) ||
             (r->syscall_nr == nr_restart_syscall && nr_restart_syscall >= 0)))
                read_wchan(task, r);
        emit(seq, r, sizeof *r);
        return false;
}

/* The per-task pass: the kernel calls it for every thread, each found by its tid (an idr walk and a reference taken
 * and dropped each, ~0.25 us a thread here before the program does anything). Every kernel the scan runs on has it;
 * the first pass, and every pass that must write every record, use it. */
SEC("iter/task")
int stackwatch_tasks(struct bpf_iter__task *ctx) {
        struct seq_file *seq = ctx->meta->seq;
        struct task_struct *task = ctx->task;

        if (task)
                visit(seq, task, false);
        return 0;
}

/* The count of process TGID's threads that did not move, when there are any. */
static __always_inline void emit_group(__u32 tgid, __u32 same) {
        struct sw_task_group g = { .kind = SW_RECORD_GROUP, .tgid = tgid, .same = same };

        if (same > 0)
                emit(NULL, &g, sizeof g);
}

/* The one-shot walk (Linux 6.7: open-coded task iterators): attached to the reader's own thread only, so the kernel
 * calls it once a pass, and it walks every thread itself along the task lists, with no lookup or reference per
 * thread (5x cheaper a thread than the per-task pass, measured at 10,000 threads). Records go to the ring buffer,
 * which one call can fill past a seq_file's page; what did not fit is counted in walk_lost, and the reader then
 * asks the per-task pass for everything. */
SEC("iter/task")
int stackwatch_walk(struct bpf_iter__task *ctx) {
        struct bpf_iter_task it;
        struct task_struct *task;

        if (!ctx->task)
                return 0; /* the end of the walk */
        walk_lost = 0;
        walk_tgid = walk_same = walk_tids = 0;
        /* A process's threads come one after the other, its leader first: the ones that did not move are counted,
         * and the count written after the last, unless the reader asked for their tids (it lost track of which
         * of them are left). */
        bpf_iter_task_new(&it, NULL, BPF_TASK_ITER_ALL_THREADS);
        while ((task = bpf_iter_task_next(&it))) {
                __u32 tgid = (__u32) task->tgid;

                if (tgid != walk_tgid) {
                        emit_group(walk_tgid, walk_same);
                        walk_tgid = tgid;
                        walk_same = 0;
                        walk_tids = bpf_map_lookup_elem(&want_tids, &tgid) != NULL;
                }
                if (visit(NULL, task, !walk_tids))
                        walk_same++;
        }
        emit_group(walk_tgid, walk_same);
        bpf_iter_task_destroy(&it);
        return 0;
}

char LICENSE[] SEC("license") = "GPL";
