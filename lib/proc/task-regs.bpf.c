// SPDX-License-Identifier: GPL-2.0-only
/* task-regs.bpf.c: a BPF task iterator that writes one thread's saved user registers (bpf_task_pt_regs, Linux
 * 5.15), the thread chosen by its TID where the link is made (Linux 6.1).
 *
 * Compiled with clang -target bpf. GPL-2.0 as bpf_task_pt_regs requires. */

#include "bpf-types.h"

#include <bpf/bpf_helpers.h>

#include "task-regs-record.h"

/* Only pointers to these, and the saved registers' layout (the ABI ptrace gives them in): no field the loader must
 * relocate through the kernel's BTF, whose parse would cost every capture 20 ms. */
struct task_struct;

#if defined(__TARGET_ARCH_x86)
struct pt_regs { /* arch/x86/include/asm/ptrace.h: user_regs_struct's order */
        unsigned long r15, r14, r13, r12, bp, bx, r11, r10, r9, r8, ax, cx, dx, si, di, orig_ax, ip, cs, flags, sp;
};
#elif defined(__TARGET_ARCH_arm64)
struct pt_regs { /* arch/arm64/include/asm/ptrace.h: user_pt_regs, then orig_x0, syscallno */
        __u64 regs[31];
        __u64 sp, pc, pstate;
        __u64 orig_x0;
        __s32 syscallno;
};
#else
#error "task-regs.bpf.c knows the saved user registers of x86-64 and arm64 only"
#endif

struct seq_file;
struct bpf_iter_meta { /* the iterator's context: fixed by the program type */
        struct seq_file *seq;
};

struct bpf_iter__task {
        struct bpf_iter_meta *meta;
        struct task_struct *task;
};

/* Attached with the one thread's TID (Linux 6.1), it is called for that task alone: its registers as saved, whatever
 * it does now. The reader tells a sleeping thread's from a moving one's by the syscall record it reads before and
 * after (the call, its stack pointer and pc must be these). */
SEC("iter/task")
int stackwatch_regs(struct bpf_iter__task *ctx) {
        struct task_struct *task = ctx->task;
        struct sw_task_regs r = {};
        struct pt_regs *regs;

        if (!task)
                return 0;
        regs = (struct pt_regs *) bpf_task_pt_regs(task);
        if (!regs)
                return 0;
#if defined(__TARGET_ARCH_x86)
        r.syscall_nr = (__s64) regs->orig_ax;
        r.r[0] = regs->ax;
        r.r[1] = regs->dx;
        r.r[2] = regs->cx;
        r.r[3] = regs->bx;
        r.r[4] = regs->si;
        r.r[5] = regs->di;
        r.r[6] = regs->bp;
        r.r[7] = regs->sp;
        r.r[8] = regs->r8;
        r.r[9] = regs->r9;
        r.r[10] = regs->r10;
        r.r[11] = regs->r11;
        r.r[12] = regs->r12;
        r.r[13] = regs->r13;
        r.r[14] = regs->r14;
        r.r[15] = regs->r15;
        r.r[16] = regs->ip;
        r.n = 17;
#else
        r.syscall_nr = regs->syscallno;
        for (int i = 0; i < 31; i++)
                r.r[i] = regs->regs[i];
        r.r[31] = regs->sp;
        r.r[32] = regs->pc;
        r.n = 33;
#endif
        bpf_seq_write(ctx->meta->seq, &r, sizeof r);
        return 0;
}

char LICENSE[] SEC("license") = "GPL";
