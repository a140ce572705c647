/* arch.c: the capture engine's per-architecture parts: registers from /proc and from ptrace, return addresses as the
 * CPU sees them, call instructions for the stack scan. */
#include <elf.h>
#include <errno.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/user.h>

#include "base/macro.h"
#include "unwind/arch.h"

#if defined(__aarch64__)
#include <asm/ptrace.h>

#ifndef NT_ARM_PAC_MASK
#define NT_ARM_PAC_MASK 0x406
#endif

/* Linux gives a process 48 bits of address space unless it maps above them on purpose (52-bit VA kernels). */
#define ARCH_USER_VA_BITS 48
#endif

int arch_regs_from_syscall(const ProcSyscall *sc, UnwindRegs *ret) {
        UnwindRegs r = {};

        if (sc->kind == PROC_SYSCALL_RUNNING)
                return -EAGAIN;
        unwind_regs_set(&r, UNWIND_REG_SP, sc->sp);
        unwind_regs_set(&r, UNWIND_REG_PC, sc->pc);
        if (sc->kind == PROC_SYSCALL_BLOCKED) {
#if defined(__x86_64__)
                /* x86_64 syscall ABI: arguments in rdi rsi rdx r10 r8 r9; `syscall` put the return rip in rcx.
                 * glibc's vfork keeps its return address in rdi across the call, so these matter to CFI. */
                unwind_regs_set(&r, UNWIND_REG_RDI, sc->args[0]);
                unwind_regs_set(&r, UNWIND_REG_RSI, sc->args[1]);
                unwind_regs_set(&r, UNWIND_REG_RDX, sc->args[2]);
                unwind_regs_set(&r, UNWIND_REG_R10, sc->args[3]);
                unwind_regs_set(&r, UNWIND_REG_R8, sc->args[4]);
                unwind_regs_set(&r, UNWIND_REG_R9, sc->args[5]);
                unwind_regs_set(&r, UNWIND_REG_RCX, sc->pc);
#elif defined(__aarch64__)
                /* aarch64: `svc #0` takes its arguments in x0…x5 (the record's first is the original x0). */
                for (unsigned k = 0; k < 6; k++)
                        unwind_regs_set(&r, UNWIND_REG_X0 + k, sc->args[k]);
#endif
        }
        *ret = r;
        return 0;
}

int arch_regs_from_ptrace(pid_t tid, UnwindRegs *ret) {
        UnwindRegs r = {};
#if defined(__x86_64__)
        struct user_regs_struct u;
#elif defined(__aarch64__)
        struct user_pt_regs u;
#endif
        struct iovec iov = { .iov_base = &u, .iov_len = sizeof u };

        if (ptrace(PTRACE_GETREGSET, tid, (void *) NT_PRSTATUS, &iov) < 0)
                return negative_errno();
#if defined(__x86_64__)
        unwind_regs_set(&r, UNWIND_REG_RAX, u.rax);
        unwind_regs_set(&r, UNWIND_REG_RDX, u.rdx);
        unwind_regs_set(&r, UNWIND_REG_RCX, u.rcx);
        unwind_regs_set(&r, UNWIND_REG_RBX, u.rbx);
        unwind_regs_set(&r, UNWIND_REG_RSI, u.rsi);
        unwind_regs_set(&r, UNWIND_REG_RDI, u.rdi);
        unwind_regs_set(&r, UNWIND_REG_RBP, u.rbp);
        unwind_regs_set(&r, UNWIND_REG_RSP, u.rsp);
        unwind_regs_set(&r, UNWIND_REG_R8, u.r8);
        unwind_regs_set(&r, UNWIND_REG_R9, u.r9);
        unwind_regs_set(&r, UNWIND_REG_R10, u.r10);
        unwind_regs_set(&r, 11, u.r11);
        unwind_regs_set(&r, 12, u.r12);
        unwind_regs_set(&r, 13, u.r13);
        unwind_regs_set(&r, 14, u.r14);
        unwind_regs_set(&r, 15, u.r15);
        unwind_regs_set(&r, UNWIND_REG_RIP, u.rip);
#elif defined(__aarch64__)
        for (unsigned k = 0; k < 31; k++)
                unwind_regs_set(&r, UNWIND_REG_X0 + k, u.regs[k]);
        unwind_regs_set(&r, UNWIND_REG_SP, u.sp);
        unwind_regs_set(&r, UNWIND_REG_PC, u.pc);

        /* Where the CPU signs return addresses, the kernel says which bits the signature takes (5.0+). */
        struct {
                uint64_t data_mask, insn_mask;
        } pac;
        struct iovec pac_iov = { .iov_base = &pac, .iov_len = sizeof pac };
        if (ptrace(PTRACE_GETREGSET, tid, (void *) NT_ARM_PAC_MASK, &pac_iov) == 0 && pac_iov.iov_len == sizeof pac)
                r.pac_mask = pac.insn_mask;
#endif
        *ret = r;
        return 0;
}

uint64_t arch_code_address(uint64_t pac_mask, uint64_t addr) {
#if defined(__aarch64__)
        if (pac_mask != 0)
                return addr & ~pac_mask;
        return addr & ((UINT64_C(1) << ARCH_USER_VA_BITS) - 1);
#else
        return addr;
#endif
}

bool arch_after_call(const uint8_t b[static 8]) {
#if defined(__x86_64__)
        /* The encodings compilers emit: call rel32 (E8) and call r/m64 (FF /2) of 2, 3, 6 and 7 bytes. */
        if (b[3] == 0xe8)
                return true;
        for (unsigned len = 2; len <= 7; len++) {
                uint8_t op = b[8 - len], modrm = b[8 - len + 1];
                if (op == 0xff && ((modrm >> 3) & 7) == 2)
                        return true;
        }
        return false;
#elif defined(__aarch64__)
        /* Fixed 4-byte instructions, little-endian: BL imm26, BLR Xn, and the authenticating BLRAA/BLRAB(Z). */
        uint32_t insn = (uint32_t) b[4] | (uint32_t) b[5] << 8 | (uint32_t) b[6] << 16 | (uint32_t) b[7] << 24;

        return (insn & 0xfc000000U) == 0x94000000U ||   /* BL */
               (insn & 0xfffffc1fU) == 0xd63f0000U ||   /* BLR */
               (insn & 0xfefff800U) == 0xd63f0800U;     /* BLRAA, BLRAAZ, BLRAB, BLRABZ */
#endif
}
