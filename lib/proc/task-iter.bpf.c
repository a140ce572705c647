// SPDX-License-Identifier: GPL-2.0-only
/* task-iter.bpf.c: a BPF task iterator (bpf_iter_task, Linux 5.8; bpf_task_pt_regs 5.15) that writes one
 * struct sw_task_record per thread to the reader: what the scan would read from /proc/PID/task/TID/{stat,
 * schedstat,syscall,wchan,io}, in one pass and without a file per thread.
 *
 * Compiled with clang -target bpf; CO-RE: the kernel types below name only the fields we read and carry
 * preserve_access_index, so libbpf moves each access to where the running kernel's BTF puts the field. GPL-2.0 as
 * the helpers it calls (bpf_get_task_stack, bpf_task_pt_regs) require of their caller. */

#include "bpf-types.h"

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
#define PF_EXITING 0x00000004
#define PF_KTHREAD 0x00200000
#define JOBCTL_TRAP_FREEZE (1UL << 23)
#define WCHAN_DEPTH 16
#define BPF_MAP_TYPE_PERCPU_ARRAY 6 /* include/uapi/linux/bpf.h */
#define BPF_MAP_TYPE_HASH 1
#define BPF_MAP_TYPE_ARRAY 2
#define BPF_MAP_TYPE_RINGBUF 27
#define BPF_MAP_TYPE_LRU_HASH 9

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
#define BPF_TASK_ITER_ALL_PROCS 0
#define BPF_TASK_ITER_ALL_THREADS 1
#define BPF_TASK_ITER_PROC_THREADS 2
extern int bpf_iter_task_new(struct bpf_iter_task *it, struct task_struct *task, unsigned int flags) __weak __ksym;
extern struct task_struct *bpf_iter_task_next(struct bpf_iter_task *it) __weak __ksym;
extern void bpf_iter_task_destroy(struct bpf_iter_task *it) __weak __ksym;
struct bpf_iter_num {
        __u64 __opaque[1];
} __attribute__((aligned(8)));
extern int bpf_iter_num_new(struct bpf_iter_num *it, int start, int end) __weak __ksym;
extern int *bpf_iter_num_next(struct bpf_iter_num *it) __weak __ksym;
extern void bpf_iter_num_destroy(struct bpf_iter_num *it) __weak __ksym;
extern struct task_struct *bpf_task_from_pid(__s32 pid) __weak __ksym;
extern void bpf_task_release(struct task_struct *p) __weak __ksym;

/* Lanes. A walk along a thread list waits on memory for every thread: the next thread is known only once the
 * current one's list node is read, a cache miss each when the pass comes a second after the last (10,000 threads:
 * 1.9 ms cold, 0.7 ms warm, however little the program reads of each). A large process's list is walked instead in
 * WALK_LANES stretches at once, each from a thread the last walk marked (a lane start) to the next start or the end:
 * the lanes' misses overlap (10,000 threads cold: 0.85 ms, 0.6 ms of it the walk alone). A start is marked by tid,
 * found again with bpf_task_from_pid; where one is gone, moved to another process or exiting, the process is walked as one lane and
 * its starts marked again. Set by the loader: 0 keeps the plain walk (a verifier that refuses the lanes). */
const volatile __u32 walk_lanes_on = 0;
#define WALK_LANES 4
#define LANE_MIN_THREADS 256U /* fewer threads: one lane */
#define LANE_ROUNDS_MAX (1 << 22) /* PID_MAX_LIMIT */
struct lane_starts {
        __u32 tid[WALK_LANES - 1];
};
struct {
        __uint(type, BPF_MAP_TYPE_LRU_HASH);
        __uint(max_entries, 1024);
        __type(key, __u32);
        __type(value, struct lane_starts);
} lane_starts SEC(".maps");
/* The walk's count of the threads of the process under way by lane, and the lanes still going (globals, as walk_same:
 * values the verifier does not follow one by one). */
__u32 lane_n[WALK_LANES] = {};
__u32 lanes_live = 0;
__u32 walk_laned = 0; /* processes walked along lanes in this pass */

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

/* TASK's state bits (before 5.14 a long named state). */
static __always_inline __u32 task_state(struct task_struct *task) {
        if (bpf_core_field_exists(task->__state))
                return task->__state;
        return (__u32) BPF_CORE_READ((struct task_struct___pre514 *) task, state);
}

/* Whether TASK did not move since the last pass, its slot brought up to date either way. A thread that did not run
 * and kept its state since the last pass: its tid says it is still there. Asleep now, it ran since only if it was
 * switched out since, so its switch count tells (a task the freezer took, or one that exited, ran to get there). A
 * runnable one is always written: its CPU time is the point. The fewest cache lines of the task are read here: this
 * runs for every thread on every pass. */
static __always_inline bool unmoved(struct task_struct *task) {
        struct last_seen *last;
        __u32 state, slot;
        __u64 switches, start;
        bool same;

        state = task_state(task);
        switches = task->nvcsw + task->nivcsw;
        slot = (__u32) task->pid & (LAST_SEEN_SLOTS - 1);
        last = bpf_map_lookup_elem(&last_seen, &slot);
        if (!last)
                return false;
        start = task->start_boottime;
        same = last->tid == (__u32) task->pid && last->start_boottime == start && last->switches == switches &&
               last->state == state && state != TASK_RUNNING;
        last->tid = (__u32) task->pid;
        last->start_boottime = start;
        last->switches = switches;
        last->state = state;
        return same && !emit_all;
}

/* TASK's whole record. */
static __always_inline void write_record(struct seq_file *seq, struct task_struct *task) {
        struct sw_task_record *r;
        __u32 zero = 0;
        bool sleeping;

        r = bpf_map_lookup_elem(&record_buf, &zero);
        if (!r)
                return;
        __builtin_memset(r, 0, sizeof *r);
        r->kind = SW_RECORD_FULL;

        /* TASK is a trusted (or RCU-protected) BTF pointer: plain loads (relocated by CO-RE, faults caught by the
         * kernel), not a probe read per field, which cost a third of the pass. */
        r->tid = task->pid;
        r->tgid = task->tgid;
        r->ppid = task->real_parent->tgid;
        r->state = task_state(task);
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
}

/* The record of TASK, or only its tid when it has not moved since the last pass. */
static __always_inline void visit(struct seq_file *seq, struct task_struct *task) {
        if (unmoved(task)) {
                struct sw_task_same rs = { .kind = SW_RECORD_SAME, .tid = (__u32) task->pid };

                emit(seq, &rs, sizeof rs);
                return;
        }
        write_record(seq, task);
}

/* The per-task pass: the kernel calls it for every thread, each found by its tid (an idr walk and a reference taken
 * and dropped each, ~0.25 us a thread here before the program does anything). Every kernel the scan runs on has it;
 * the first pass, and every pass that must write every record, use it. */
SEC("iter/task")
int stackwatch_tasks(struct bpf_iter__task *ctx) {
        struct seq_file *seq = ctx->meta->seq;
        struct task_struct *task = ctx->task;

        if (task)
                visit(seq, task);
        return 0;
}

/* The count of process TGID's threads that did not move, when there are any. */
static __always_inline void emit_group(__u32 tgid, __u32 same) {
        struct sw_task_group g = { .kind = SW_RECORD_GROUP, .tgid = tgid, .same = same };

        if (same > 0)
                emit(NULL, &g, sizeof g);
}

/* The whole record of the thread TID, to the ring. A subprogram of its own, verified once: inlined at each of the
 * walk's visits, its branches multiplied the verifier's states past its limit. Found again by its tid, since a
 * global subprogram takes no pointer the walk's iterators gave; gone meanwhile, it has no record, and its process's
 * count disagrees with the reader's, who asks for tids next time. */
__noinline int walk_record(__u32 tid) {
        struct task_struct *task = bpf_task_from_pid((__s32) tid);

        if (!task)
                return 0;
        write_record(NULL, task);
        bpf_task_release(task);
        return 0;
}

/* One thread met by a walk: counted in the process under way (walk_tgid) when it did not move, or its tid written
 * when the reader wants them; else its whole record. */
static __always_inline void walk_visit(struct task_struct *task) {
        if (!unmoved(task)) {
                walk_record((__u32) task->pid);
        } else if (walk_tids) {
                struct sw_task_same rs = { .kind = SW_RECORD_SAME, .tid = (__u32) task->pid };

                emit(NULL, &rs, sizeof rs);
        } else {
                walk_same++;
        }
}

/* Whether START, a lane start of process TGID, is still one of its threads and not on its way out. */
static __always_inline bool lane_start_usable(struct task_struct *start, __u32 tgid) {
        return start && (__u32) start->tgid == tgid && !(start->flags & PF_EXITING) && start->exit_state == 0;
}

/* LEADER's threads along one lane; with NR threads or more than LANE_MIN_THREADS, the lane starts of the next walk
 * marked on the way, NR / WALK_LANES threads apart. */
static __always_inline void walk_one_lane(struct task_struct *leader, __u32 nr) {
        struct lane_starts marks = {};
        struct bpf_iter_task it;
        struct task_struct *t;
        __u32 step = nr / WALK_LANES;

        lane_n[0] = 0;
        bpf_iter_task_new(&it, leader, BPF_TASK_ITER_PROC_THREADS);
        while ((t = bpf_iter_task_next(&it))) {
                if (nr >= LANE_MIN_THREADS) {
                        __u32 at = lane_n[0];

                        if (at == step)
                                marks.tid[0] = (__u32) t->pid;
                        else if (at == 2 * step)
                                marks.tid[1] = (__u32) t->pid;
                        else if (at == 3 * step)
                                marks.tid[2] = (__u32) t->pid;
                }
                lane_n[0]++;
                walk_visit(t);
        }
        bpf_iter_task_destroy(&it);
        if (nr >= LANE_MIN_THREADS && marks.tid[WALK_LANES - 2] != 0)
                bpf_map_update_elem(&lane_starts, &walk_tgid, &marks, 0);
}

/* Whether lane L, at T, reached another lane's start: where that lane took over. */
static __always_inline bool lane_done(struct task_struct *t, int l, struct task_struct *s0, struct task_struct *s1,
                                      struct task_struct *s2, struct task_struct *s3) {
        return (l != 0 && t == s0) || (l != 1 && t == s1) || (l != 2 && t == s2) || (l != 3 && t == s3);
}

#define LANE_STEP(l)                                                                                                   \
        do {                                                                                                           \
                if (lanes_live & (1U << (l))) {                                                                        \
                        struct task_struct *t = bpf_iter_task_next(&it##l);                                            \
                                                                                                                       \
                        if (!t || lane_done(t, l, s0, s1, s2, s3))                                                     \
                                lanes_live &= ~(1U << (l));                                                            \
                        else {                                                                                         \
                                lane_n[l]++;                                                                           \
                                walk_visit(t);                                                                         \
                        }                                                                                              \
                }                                                                                                      \
        } while (0)

/* The threads of the process that S0 leads along four lanes at once, from the starts S1, S2, S3 (the order of the
 * starts along the list does not matter: a lane ends at whichever start it meets). When the lanes grew uneven (the
 * threads that came since join the last one), the next walk marks new starts. */
static __always_inline void walk_lanes(struct task_struct *s0, struct task_struct *s1, struct task_struct *s2,
                                       struct task_struct *s3) {
        struct bpf_iter_task it0, it1, it2, it3;
        struct bpf_iter_num rounds;
        __u32 total, most = 0;

        lanes_live = (1U << WALK_LANES) - 1;
        lane_n[0] = lane_n[1] = lane_n[2] = lane_n[3] = 0;
        bpf_iter_task_new(&it0, s0, BPF_TASK_ITER_PROC_THREADS);
        bpf_iter_task_new(&it1, s1, BPF_TASK_ITER_PROC_THREADS);
        bpf_iter_task_new(&it2, s2, BPF_TASK_ITER_PROC_THREADS);
        bpf_iter_task_new(&it3, s3, BPF_TASK_ITER_PROC_THREADS);
        /* Rounds counted for the verifier, which sees no end in lanes_live; a process's threads are fewer. */
        bpf_iter_num_new(&rounds, 0, LANE_ROUNDS_MAX);
        while (bpf_iter_num_next(&rounds) && lanes_live) {
                LANE_STEP(0);
                LANE_STEP(1);
                LANE_STEP(2);
                LANE_STEP(3);
        }
        bpf_iter_num_destroy(&rounds);
        bpf_iter_task_destroy(&it0);
        bpf_iter_task_destroy(&it1);
        bpf_iter_task_destroy(&it2);
        bpf_iter_task_destroy(&it3);
        total = lane_n[0] + lane_n[1] + lane_n[2] + lane_n[3];
        for (int l = 0; l < WALK_LANES; l++)
                most = lane_n[l] > most ? lane_n[l] : most;
        if (most > 2 * (total / WALK_LANES) + LANE_MIN_THREADS / WALK_LANES)
                bpf_map_delete_elem(&lane_starts, &walk_tgid);
}

/* The threads of process TGID, along lanes where it has enough of them and its starts still hold, else along one;
 * then the count of those that did not move. A subprogram of its own, verified once, not for every state of the walk
 * over processes; so it takes a pid, not the walk's task, and finds the leader again. */
__noinline int walk_process(__u32 tgid) {
        struct task_struct *leader = bpf_task_from_pid((__s32) tgid), *s1 = NULL, *s2 = NULL, *s3 = NULL;
        struct lane_starts *marks;
        __u32 nr;

        if (!leader)
                return 0; /* gone meanwhile: so are its threads */
        walk_tgid = tgid;
        walk_same = 0;
        walk_tids = bpf_map_lookup_elem(&want_tids, &tgid) != NULL;
        nr = (__u32) leader->signal->nr_threads;
        marks = nr >= LANE_MIN_THREADS ? bpf_map_lookup_elem(&lane_starts, &tgid) : NULL;
        if (marks) {
                s1 = bpf_task_from_pid((__s32) marks->tid[0]);
                s2 = bpf_task_from_pid((__s32) marks->tid[1]);
                s3 = bpf_task_from_pid((__s32) marks->tid[2]);
        }
        if (s1 && s2 && s3 && lane_start_usable(s1, tgid) && lane_start_usable(s2, tgid) &&
            lane_start_usable(s3, tgid) && s1 != s2 && s2 != s3 && s1 != s3) {
                walk_laned++;
                walk_lanes(leader, s1, s2, s3);
        } else {
                walk_one_lane(leader, nr);
        }
        if (s1)
                bpf_task_release(s1);
        if (s2)
                bpf_task_release(s2);
        if (s3)
                bpf_task_release(s3);
        bpf_task_release(leader);
        emit_group(tgid, walk_same);
        return 0;
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
        walk_tgid = walk_same = walk_tids = walk_laned = 0;
        if (walk_lanes_on) {
                bpf_iter_task_new(&it, NULL, BPF_TASK_ITER_ALL_PROCS);
                while ((task = bpf_iter_task_next(&it)))
                        walk_process((__u32) task->tgid);
                bpf_iter_task_destroy(&it);
                return 0;
        }
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
                walk_visit(task);
        }
        emit_group(walk_tgid, walk_same);
        bpf_iter_task_destroy(&it);
        return 0;
}

char LICENSE[] SEC("license") = "GPL";
