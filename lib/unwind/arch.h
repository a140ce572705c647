/* arch.h: what the capture engine knows of the CPU it runs on (x86-64 or aarch64): the registers the unwinders
 * use in DWARF numbering, where /proc and ptrace give them, and what a return address looks like. One build
 * captures the processes of its own architecture; configure refuses any other. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "model/proc-parse.h"

#if defined(__x86_64__)

#define ARCH_NAME "x86_64"

/* DWARF numbering: rax rdx rcx rbx rsi rdi rbp rsp r8…r15, then the return address (rip). */
enum {
        UNWIND_REG_RAX = 0,
        UNWIND_REG_RDX = 1,
        UNWIND_REG_RCX = 2,
        UNWIND_REG_RBX = 3,
        UNWIND_REG_RSI = 4,
        UNWIND_REG_RDI = 5,
        UNWIND_REG_RBP = 6,
        UNWIND_REG_RSP = 7,
        UNWIND_REG_R8 = 8,
        UNWIND_REG_R9 = 9,
        UNWIND_REG_R10 = 10,
        UNWIND_REG_RIP = 16,
        UNWIND_NREGS = 17,

        UNWIND_REG_SP = UNWIND_REG_RSP,
        UNWIND_REG_FP = UNWIND_REG_RBP,
        UNWIND_REG_PC = UNWIND_REG_RIP,
};

#elif defined(__aarch64__)

#define ARCH_NAME "aarch64"

/* DWARF numbering (libdw's and libunwind's alike): x0…x30 are 0…30, x29 the frame pointer, x30 the link register;
 * sp is 31; the pc is 32 (libdw keeps it apart, libunwind's UNW_AARCH64_PC). */
enum {
        UNWIND_REG_X0 = 0,
        UNWIND_REG_FP = 29,
        UNWIND_REG_LR = 30,
        UNWIND_REG_SP = 31,
        UNWIND_REG_PC = 32,
        UNWIND_NREGS = 33,
};

#else
#error "stackwatch captures x86_64 and aarch64 processes only (configure says so too)"
#endif

/* The registers a capture obtained; VALID has bit N set when register N is known. PAC_MASK (aarch64) has the bits
 * that pointer authentication puts into a return address; 0 when not read, and then the address-space size
 * decides (arch_code_address()). The registers come first and in order: the backends hand runs of them over. */
typedef struct UnwindRegs {
        uint64_t r[UNWIND_NREGS];
        uint64_t valid;
        uint64_t pac_mask;
} UnwindRegs;

static inline bool unwind_regs_has(const UnwindRegs *r, unsigned n) {
        return n < UNWIND_NREGS && (r->valid & (1ULL << n));
}

static inline void unwind_regs_set(UnwindRegs *r, unsigned n, uint64_t v) {
        r->r[n] = v;
        r->valid |= 1ULL << n;
}

/* The registers a /proc/…/syscall record gives. SP and PC always; for a thread inside a syscall also those the
 * syscall ABI fixes: x86-64 rdi rsi rdx r10 r8 r9 (the arguments, which the kernel leaves intact) and rcx (= PC
 * after the syscall instruction); aarch64 x0…x5 (the arguments: the kernel writes the result into x0 only when the
 * call returns). aarch64's link register and frame pointer are not in the record: CFI and the fallbacks do without.
 * -EAGAIN for a running thread (no record). */
int arch_regs_from_syscall(const ProcSyscall *sc, UnwindRegs *ret);

/* The general registers of a ptrace-stopped thread TID (PTRACE_GETREGSET NT_PRSTATUS), and on aarch64 the pointer
 * authentication mask (NT_ARM_PAC_MASK) where the kernel has one. -errno from ptrace. */
int arch_regs_from_ptrace(pid_t tid, UnwindRegs *ret);

/* A return address as the CPU will jump to it: on aarch64 without the pointer authentication code in its top bits
 * (PAC_MASK, or, when 0, everything above the 48-bit user address space, which is what Linux gives a process that
 * does not ask for more); unchanged on x86-64. */
uint64_t arch_code_address(uint64_t pac_mask, uint64_t addr);

/* Do the 8 bytes that end just before a return address (B[7] is the byte before it) end with a call instruction?
 * For the stack scan, which only trusts words that return after a call. */
bool arch_after_call(const uint8_t b[static 8]);
