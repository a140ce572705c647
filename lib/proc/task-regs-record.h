/* task-regs-record.h: the record task-regs.bpf.c writes for one thread, read by task-regs.c. Shared by the BPF
 * program and user space: fixed-width types, naturally aligned, the size a multiple of 8. */
#pragma once

#ifndef __bpf__
#include <linux/types.h>
#endif

/* The registers in the unwinder's (DWARF) numbering: x86-64 rax rdx rcx rbx rsi rdi rbp rsp r8-r15 rip (17);
 * aarch64 x0-x30 sp pc (33). */
#define SW_TASK_REGS_MAX 33

struct sw_task_regs {
        __u32 tid;
        __u32 n;                        /* registers in r[]: 17 or 33; 0 when none were read */
        __s64 syscall_nr;               /* the call it sleeps in (orig_ax, syscallno); -1 when none */
        __u64 r[SW_TASK_REGS_MAX];
};
