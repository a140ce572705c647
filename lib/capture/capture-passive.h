/* capture-passive.h: registers from /proc/…/syscall and a stack copy, without stopping the thread. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "model/proc-parse.h"
#include "unwind/unwind.h"

/* The registers a /proc syscall record gives: SP and PC always, and for a thread inside a syscall the registers
 * its architecture's syscall ABI fixes (arch_regs_from_syscall()). -EAGAIN for a running thread (no record). */
int capture_passive_regs(const ProcSyscall *sc, UnwindRegs *ret);

/* The state letter (R, S, D, …) in the stat file below TASKFD, a /proc/PID/task/TID directory; -errno when it cannot
 * be read. */
int capture_thread_state(int taskfd);

/* Copy up to MAX bytes of stack from SP of process PID, clamped to the mapping that holds SP. The copy is in a
 * new buffer in RET. RET_TRUNCATED says whether MAX cut it short. */
int capture_copy_stack(pid_t pid, const ProcMap *maps, size_t n_maps, uint64_t sp, size_t max, UnwindStack *ret,
                       bool *ret_truncated);
/* The same into BUF (MAX bytes, the caller's): no allocation, for a copy taken while the thread is stopped. RET's
 * data is BUF. */
int capture_read_stack(pid_t pid, const ProcMap *maps, size_t n_maps, uint64_t sp, uint8_t *buf, size_t max,
                       UnwindStack *ret, bool *ret_truncated);
