/* test-unwind-self.c: the unwinders over this process's own registers and stack, taken in a known call chain: the
 * registers as ptrace gives them (all we read here) and as a passive capture has them (SP and PC only). It needs
 * no second process, so it runs where no capture can (an aarch64 build under qemu-user), and checks the
 * architecture's register numbering against libdw's and libunwind's. */
#include "unit.h"
#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <unistd.h>

#include "base/macro.h"
#include "unwind/symbolize.h"
#include "unwind/unwind.h"

#define COPY_BYTES 65536

static UnwindRegs taken;
static uint8_t copy[COPY_BYTES];
static size_t copy_len;
static uint64_t stack_end;      /* the end of the mapping that holds the stack: the copy stops there */

/* The stack from SP up, word by word: AddressSanitizer (--enable-asan) would refuse a memcpy() over other frames'
 * redzones, which are just bytes to an unwinder. */
__attribute__((noinline, no_sanitize_address)) static void copy_stack(uint64_t sp) {
        const volatile uint64_t *from = (const volatile uint64_t *) (uintptr_t) sp;

        copy_len = (size_t) MIN((uint64_t) sizeof copy, stack_end - sp) & ~(size_t) 7;
        for (size_t i = 0; i < copy_len / 8; i++) {
                uint64_t w = from[i];
                memcpy(copy + 8 * i, &w, 8);
        }
}

__attribute__((noinline)) static void take(void) {
        uint64_t sp, fp, pc;

#if defined(__x86_64__)
        __asm__ volatile("mov %%rsp, %0\n\tmov %%rbp, %1\n\tlea 0(%%rip), %2" : "=r"(sp), "=r"(fp), "=r"(pc));
#elif defined(__aarch64__)
        uint64_t lr;

        __asm__ volatile("mov %0, sp\n\tmov %1, x29\n\tmov %2, x30\n\tadr %3, ." : "=r"(sp), "=r"(fp), "=r"(lr),
                         "=r"(pc));
        unwind_regs_set(&taken, UNWIND_REG_LR, lr);
#endif
        unwind_regs_set(&taken, UNWIND_REG_SP, sp);
        unwind_regs_set(&taken, UNWIND_REG_FP, fp);
        unwind_regs_set(&taken, UNWIND_REG_PC, pc);
        copy_stack(sp);
        /* A call, not a tail call: take has a frame of its own, as a syscall wrapper mostly has. */
        __asm__ volatile("");
}

#if defined(__aarch64__)
/* A leaf: it keeps its return address in the link register only, which a passive capture does not have (the
 * /proc syscall record has SP and PC). Its caller copies the stack. */
__attribute__((noinline)) static void take_leaf(void) {
        uint64_t sp, fp, lr, pc;

        __asm__ volatile("mov %0, sp\n\tmov %1, x29\n\tmov %2, x30\n\tadr %3, ." : "=r"(sp), "=r"(fp), "=r"(lr),
                         "=r"(pc));
        taken.valid = 0;        /* no struct assignment: a memset() call would give it a frame */
        taken.pac_mask = 0;
        unwind_regs_set(&taken, UNWIND_REG_SP, sp);
        unwind_regs_set(&taken, UNWIND_REG_FP, fp);
        unwind_regs_set(&taken, UNWIND_REG_LR, lr);
        unwind_regs_set(&taken, UNWIND_REG_PC, pc);
}

__attribute__((noinline)) static void leaf_caller(void) {
        take_leaf();
        copy_stack(taken.r[UNWIND_REG_SP]);
        __asm__ volatile("");
}
#endif

/* The empty asm after each call keeps it a call (no tail call): each level has its own frame. */
__attribute__((noinline)) static void level3(void) {
        take();
        __asm__ volatile("");
}

__attribute__((noinline)) static void level2(void) {
        level3();
        __asm__ volatile("");
}

__attribute__((noinline)) static void level1(void) {
        level2();
        __asm__ volatile("");
}

static void assert_chain(UnwindProcess *p, UnwinderKind kind, bool passive) {
        /* START_TEST names the test's function NAME_fn. */
        static const char *const want[] = { "take", "level3", "level2", "level1", "test_own_stack_fn" };
        UnwindStack stack = { .base = taken.r[UNWIND_REG_SP], .data = copy, .len = copy_len };
        UnwindRegs regs = taken;
        UnwindFrame frames[64];
        UnwindResult res;
        int r;

        if (passive)
                regs.valid = (1ULL << UNWIND_REG_SP) | (1ULL << UNWIND_REG_PC);
        r = unwind_thread(p, kind, getpid(), &regs, &stack, frames, ELEMENTSOF(frames), &res);
        if (r == -EOPNOTSUPP)
                return; /* libunwind not built */
        ck_assert_int_eq(r, 0);
        ck_assert_msg(res.n_frames >= ELEMENTSOF(want), "unwinder %d%s: %zu frames (%s)", kind,
                      passive ? " (SP and PC)" : "", res.n_frames, res.end);
        for (size_t i = 0; i < ELEMENTSOF(want); i++) {
                uint64_t pc = frames[i].pc - (frames[i].activation ? 0 : 1);
                Dwfl_Module *m = dwfl_addrmodule(unwind_process_dwfl(p), pc);
                const char *name = m ? dwfl_module_addrname(m, pc) : NULL;

                ck_assert_msg(name && streq(name, want[i]), "unwinder %d%s: frame #%zu is %s, not %s (%s)", kind,
                              passive ? " (SP and PC)" : "", i, name ?: "unknown", want[i], res.end);
                ck_assert_msg(frames[i].method == (i == 0 ? FRAME_METHOD_INITIAL : FRAME_METHOD_CFI),
                              "unwinder %d%s: frame #%zu (%s) by method %d (%s)", kind,
                              passive ? " (SP and PC)" : "", i, want[i], frames[i].method, res.end);
        }
}

START_TEST(test_own_stack) {
        _cleanup_(unwind_process_freep) UnwindProcess *p = NULL;
        const ProcMap *maps, *m;
        size_t n_maps;
        int here;

        ck_assert_int_eq(unwind_process_new(getpid(), NULL, &p), 0);
        maps = unwind_process_maps(p, &n_maps);
        m = proc_maps_find(maps, n_maps, (uint64_t) (uintptr_t) &here);
        ck_assert_ptr_nonnull(m);
        stack_end = m->end;
        level1();
        ck_assert(unwind_regs_has(&taken, UNWIND_REG_PC));
        assert_chain(p, UNWINDER_LIBDW, false);
        assert_chain(p, UNWINDER_LIBUNWIND, false);
#ifndef __SANITIZE_ADDRESS__
        /* (--enable-asan keeps frame pointers, and a function's CFA is then its frame pointer, which a passive
         * capture does not have: the unwinders stop, and the scan that follows is marked.) */
        assert_chain(p, UNWINDER_LIBDW, true);
        assert_chain(p, UNWINDER_LIBUNWIND, true);
#endif

#if defined(__aarch64__)
        /* With the link register, a leaf's caller is known. Without it (a passive capture), an unwinder names the
         * caller only where it can prove it (the caller's one call of the leaf, and its saved link register where the
         * caller's CFI puts it): then it is the very return address the link register holds, and the frames beyond
         * are those the full registers give; any other frame is marked as a stack-scan guess. */
        leaf_caller();
        for (UnwinderKind kind = 0; kind < _UNWINDER_MAX; kind++) {
                UnwindFrame full[64];
                size_t n_full = 0;

                for (unsigned passive = 0; passive < 2; passive++) {
                        UnwindStack stack = { .base = taken.r[UNWIND_REG_SP], .data = copy, .len = copy_len };
                        UnwindRegs regs = taken;
                        UnwindFrame frames[64];
                        UnwindResult res;
                        int r;

                        if (passive)
                                regs.valid = (1ULL << UNWIND_REG_SP) | (1ULL << UNWIND_REG_PC);
                        r = unwind_thread(p, kind, getpid(), &regs, &stack, frames, ELEMENTSOF(frames), &res);
                        if (r == -EOPNOTSUPP)
                                break;
                        ck_assert_int_eq(r, 0);
                        if (!passive) {
                                if (kind != UNWINDER_FP) {
                                        ck_assert_uint_ge(res.n_frames, 2);
                                        ck_assert_int_eq(frames[1].method, FRAME_METHOD_CFI);
                                }
                                memcpy(full, frames, res.n_frames * sizeof *frames);
                                n_full = res.n_frames;
                                continue;
                        }
                        /* (Under qemu-user the code cannot be read through /proc/self/mem, the emulator's: no
                         * proof there, and no frame but marked ones.) */
                        if (res.n_frames < 2 || frames[1].method == FRAME_METHOD_SCAN) {
                                for (size_t i = 1; i < res.n_frames; i++)
                                        ck_assert_msg(frames[i].method == FRAME_METHOD_SCAN,
                                                      "unwinder %d, frame #%zu: %d (%s)", kind, i, frames[i].method,
                                                      res.end);
                                continue;
                        }
                        ck_assert_msg(frames[1].method == FRAME_METHOD_CFI &&
                                      frames[1].pc == arch_code_address(taken.pac_mask, taken.r[UNWIND_REG_LR]),
                                      "unwinder %d: the leaf's caller is %#" PRIx64 " by method %d, not %#" PRIx64
                                      " (%s)", kind, frames[1].pc, frames[1].method, taken.r[UNWIND_REG_LR], res.end);
                        for (size_t i = 2; i < res.n_frames; i++)
                                ck_assert_msg(frames[i].method == FRAME_METHOD_SCAN ||
                                              (kind != UNWINDER_FP && i < n_full && frames[i].pc == full[i].pc),
                                              "unwinder %d, frame #%zu: %#" PRIx64 " by method %d (%s)", kind, i,
                                              frames[i].pc, frames[i].method, res.end);
                }
        }
#endif
}
END_TEST

/* The frame for PC (an activation) that a lookup adds to a new thread of S: the containing function's. */
static const UserFrame *lookup(Symbolizer *sym, UnwindProcess *p, Snapshot *s, uint64_t pc) {
        Dwfl_Module *mod = dwfl_addrmodule(unwind_process_dwfl(p), pc);
        UserFrame tmpl = { .pc = pc, .activation = true, .module = -1 };
        ThreadSnapshot *t = snapshot_add_thread(s);
        int n;

        ck_assert_ptr_nonnull(mod);
        ck_assert_ptr_nonnull(t);
        n = symbolizer_add_frames(sym, symbolizer_get_module(sym, mod, NULL), mod, &tmpl, t);
        ck_assert_int_ge(n, 1);
        return &t->frames[n - 1];
}

/* Deferred source (the capture's unwind pass): symbols now, without loading the module's DWARF; file:line from the
 * next lookup of the same pc without deferral, which loads it; then, with the DWARF loaded, deferring holds nothing
 * back. */
START_TEST(test_deferred_source) {
        _cleanup_(unwind_process_freep) UnwindProcess *p = NULL;
        _cleanup_(symbolizer_freep) Symbolizer *sym = NULL;
        _cleanup_snapshot_free_ Snapshot *s = snapshot_new();
        uint64_t pc2 = (uint64_t) (uintptr_t) level2, pc1 = (uint64_t) (uintptr_t) level1;
        const UserFrame *f;
        SymbolizerStats st;

        ck_assert_ptr_nonnull(s);
        ck_assert_int_eq(unwind_process_new(getpid(), NULL, &p), 0);
        ck_assert_int_eq(symbolizer_new(NULL, true, &sym), 0);

        symbolizer_defer_source(sym, true);
        f = lookup(sym, p, s, pc2);
        ck_assert_str_eq(f->function, "level2");
        ck_assert_ptr_null(f->file);
        symbolizer_get_stats(sym, &st);
        ck_assert_uint_eq(st.source_deferred, 1);
        ck_assert_uint_eq(st.source_skipped, 0);
        ck_assert_uint_eq(st.addr_misses, 0);   /* provisional: the lookup with source is the one that counts */

        symbolizer_defer_source(sym, false);
        f = lookup(sym, p, s, pc2);
        ck_assert_str_eq(f->function, "level2");
        ck_assert_ptr_nonnull(f->file);
        ck_assert_msg(strstr(f->file, "test-unwind-self.c") && f->line > 0, "%s:%u", f->file, f->line);
        symbolizer_get_stats(sym, &st);
        ck_assert_uint_eq(st.addr_misses, 1);

        symbolizer_defer_source(sym, true);
        f = lookup(sym, p, s, pc1);
        ck_assert_str_eq(f->function, "level1");
        ck_assert_ptr_nonnull(f->file);
        symbolizer_get_stats(sym, &st);
        ck_assert_uint_eq(st.source_deferred, 1);
}
END_TEST

UNIT_TEST_MAIN("unwind-self", test_own_stack, test_deferred_source)
