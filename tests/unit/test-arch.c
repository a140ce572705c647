/* test-arch.c: the capture engine's per-architecture rules: registers from a /proc syscall record, return addresses
 * without pointer authentication bits, call instructions before a return address. */
#include "unit.h"
#include <string.h>
#include <sys/syscall.h>

#include "base/macro.h"
#include "unwind/arch.h"

START_TEST(test_regs_from_syscall) {
        ProcSyscall blocked = { .kind = PROC_SYSCALL_BLOCKED, .nr = __NR_read, .args = { 3, 0x1000, 64, 4, 5, 6 },
                                .sp = 0x7ffd0000, .pc = 0x7f0000001234 };
        ProcSyscall none = { .kind = PROC_SYSCALL_NONE, .nr = -1, .sp = 0x7ffd0100, .pc = 0x401000 };
        ProcSyscall running = { .kind = PROC_SYSCALL_RUNNING, .nr = -1 };
        UnwindRegs r;

        ck_assert_int_eq(arch_regs_from_syscall(&blocked, &r), 0);
        ck_assert(unwind_regs_has(&r, UNWIND_REG_SP));
        ck_assert(unwind_regs_has(&r, UNWIND_REG_PC));
        ck_assert_uint_eq(r.r[UNWIND_REG_SP], 0x7ffd0000);
        ck_assert_uint_eq(r.r[UNWIND_REG_PC], 0x7f0000001234);
        ck_assert(!unwind_regs_has(&r, UNWIND_REG_FP));         /* not in the record: CFI must do without */
        ck_assert_uint_eq(r.pac_mask, 0);
#if defined(__x86_64__)
        ck_assert_uint_eq(r.r[UNWIND_REG_RDI], 3);
        ck_assert_uint_eq(r.r[UNWIND_REG_R10], 4);
        ck_assert_uint_eq(r.r[UNWIND_REG_RCX], 0x7f0000001234); /* syscall put the return rip there */
#elif defined(__aarch64__)
        for (unsigned k = 0; k < 6; k++)
                ck_assert_uint_eq(r.r[UNWIND_REG_X0 + k], blocked.args[k]);
        ck_assert(!unwind_regs_has(&r, UNWIND_REG_LR));         /* not in the record either */
#endif

        /* Between syscalls: SP and PC only. */
        ck_assert_int_eq(arch_regs_from_syscall(&none, &r), 0);
        ck_assert_uint_eq(r.valid, (1ULL << UNWIND_REG_SP) | (1ULL << UNWIND_REG_PC));
        ck_assert_int_eq(arch_regs_from_syscall(&running, &r), -EAGAIN);
}
END_TEST

START_TEST(test_code_address) {
        /* A user address is kept as it is. */
        ck_assert_uint_eq(arch_code_address(0, 0x0000ffff9a3b1234ULL), 0x0000ffff9a3b1234ULL);
        ck_assert_uint_eq(arch_code_address(0, 0x401000), 0x401000);
#if defined(__aarch64__)
        /* A signed return address loses its PAC: by the kernel's mask, or without one above 48 bits. */
        ck_assert_uint_eq(arch_code_address(0x007f000000000000ULL, 0x002c00000040a8b4ULL), 0x40a8b4);
        ck_assert_uint_eq(arch_code_address(0, 0x3a7fffff9a3b1234ULL), 0x0000ffff9a3b1234ULL);
#else
        /* x86-64 has no such bits: nothing is taken away. */
        ck_assert_uint_eq(arch_code_address(0, 0x3a7fffff9a3b1234ULL), 0x3a7fffff9a3b1234ULL);
#endif
}
END_TEST

static bool after(const uint8_t *code, size_t len) {
        uint8_t b[8] = {};

        /* The 8 bytes that end at the return address, the code's last LEN bytes at their end. */
        memcpy(b + 8 - len, code, len);
        return arch_after_call(b);
}

#if defined(__aarch64__)
static bool after_insn(uint32_t insn) {
        uint8_t w[4];

        for (unsigned k = 0; k < 4; k++)
                w[k] = (uint8_t) (insn >> (8 * k));
        return after(w, sizeof w);
}
#endif

START_TEST(test_after_call) {
#if defined(__x86_64__)
        static const uint8_t call_rel32[] = { 0xe8, 0x10, 0x20, 0x00, 0x00 };     /* call rel32 */
        static const uint8_t call_rax[] = { 0xff, 0xd0 };                         /* call *%rax */
        static const uint8_t call_mem[] = { 0xff, 0x15, 0x00, 0x10, 0x00, 0x00 }; /* call *0x1000(%rip) */
        static const uint8_t jmp_rax[] = { 0xff, 0xe0 };                          /* jmp *%rax */
        static const uint8_t ret_nop[] = { 0xc3, 0x90 };                          /* ret; nop */

        ck_assert(after(call_rel32, sizeof call_rel32));
        ck_assert(after(call_rax, sizeof call_rax));
        ck_assert(after(call_mem, sizeof call_mem));
        ck_assert(!after(jmp_rax, sizeof jmp_rax));
        ck_assert(!after(ret_nop, sizeof ret_nop));
#elif defined(__aarch64__)
        /* Little-endian words: bl, blr x8, blraaz x1, blrab x2 x3 — and b, br x16, ret, nop, which are not calls. */
        static const uint32_t calls[] = { 0x94001234, 0xd63f0100, 0xd63f083f, 0xd73f0c43 };
        static const uint32_t others[] = { 0x14001234, 0xd61f0200, 0xd65f03c0, 0xd503201f };

        for (size_t i = 0; i < ELEMENTSOF(calls); i++)
                ck_assert_msg(after_insn(calls[i]), "0x%08x", calls[i]);
        for (size_t i = 0; i < ELEMENTSOF(others); i++)
                ck_assert_msg(!after_insn(others[i]), "0x%08x", others[i]);
#endif
}
END_TEST

UNIT_TEST_MAIN("arch", test_regs_from_syscall, test_code_address, test_after_call)
