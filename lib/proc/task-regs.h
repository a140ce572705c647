/* task-regs.h: one sleeping thread's saved user registers, every one of them, read through a BPF task iterator
 * (task-regs.bpf.c: bpf_task_pt_regs(), Linux 5.15; one task by its TID, Linux 6.1) without stopping it. /proc's
 * syscall record gives a blocked thread's stack pointer, pc and arguments; the unwinder's CFI may need a register
 * the record lacks (a caller's frame kept in a callee-saved one), and then the thread would be stopped for it. */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include "base/macro.h"
#include "proc/task-regs-record.h"

typedef struct sw_task_regs TaskRegsRecord;
typedef struct TaskRegs TaskRegs;

/* Load the program. -errno, and *RET_WHY (malloc'd, may be NULL on OOM) says why: built without BPF, no BTF, no
 * privilege, a kernel too old. */
int task_regs_new(TaskRegs **ret, char **ret_why);
TaskRegs *task_regs_free(TaskRegs *t);
/* The fd a forked child that closes every other one must keep to read with T (the loaded program's). */
int task_regs_fd(const TaskRegs *t);
DEFINE_TRIVIAL_CLEANUP_FUNC(TaskRegs *, task_regs_free);
/* Thread TID's saved user registers (those of its last entry into the kernel: while it sleeps in a syscall, that
 * call's; the caller checks it is still there): -ESRCH when it is gone, -EINVAL from a kernel before 6.1 (which
 * cannot iterate one task by its TID), -errno. */
int task_regs_read(TaskRegs *t, pid_t tid, TaskRegsRecord *ret);
