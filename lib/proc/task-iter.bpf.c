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

SEC("iter/task")
int stackwatch_tasks(struct bpf_iter__task *ctx) {
        struct seq_file *seq = ctx->meta->seq;
        struct task_struct *task = ctx->task;
        struct sw_task_record *r;
        __u32 zero = 0;
        bool sleeping;

        if (!task)
                return 0; /* the end of the walk */
        r = bpf_map_lookup_elem(&record_buf, &zero);
        if (!r)
                return 0;
        __builtin_memset(r, 0, sizeof *r);

        /* ctx->task is a trusted BTF pointer: plain loads (relocated by CO-RE, faults caught by the kernel), not a
         * probe read per field, which cost a third of the pass. */
        r->tid = task->pid;
        r->tgid = task->tgid;
        r->ppid = task->real_parent->tgid;
        if (bpf_core_field_exists(task->__state))
                r->state = task->__state;
        else
                r->state = (__u32) BPF_CORE_READ((struct task_struct___pre514 *) task, state);
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

        bpf_seq_write(seq, r, sizeof *r);
        return 0;
}

char LICENSE[] SEC("license") = "GPL";
