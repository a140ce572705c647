/* unwind-dwfl.c: the libdwfl backend: dwfl_attach_state over our captured registers and stack copy. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <fcntl.h>
#include <unistd.h>
#include <stdio.h>
#include <string.h>

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <libelf.h>

#include "base/log.h"
#include "unwind/unwind-internal.h"

typedef struct DwflUnwind {
        UnwindFrame *frames;
        size_t max;
        size_t *n;
        UnwindRegs *last;
        UnwindResult *res;
        uint64_t pac_mask;
} DwflUnwind;

static pid_t cb_next_thread(Dwfl *dwfl, void *dwfl_arg, void **thread_argp) {
        UnwindProcess *p = dwfl_arg;

        /* We only ever unwind the one thread we were handed; dwfl_getthread_frames asks via get_thread. */
        if (*thread_argp)
                return 0;
        *thread_argp = p;
        return p->cur_tid;
}

static bool cb_get_thread(Dwfl *dwfl, pid_t tid, void *dwfl_arg, void **thread_argp) {
        UnwindProcess *p = dwfl_arg;

        if (tid != p->cur_tid)
                return false;
        *thread_argp = p;
        return true;
}

static bool cb_memory_read(Dwfl *dwfl, Dwarf_Addr addr, Dwarf_Word *result, void *dwfl_arg) {
        uint64_t v;

        if (!unwind_process_read_word(dwfl_arg, addr, &v))
                return false;
        *result = v;
        return true;
}

static bool cb_set_initial_registers(Dwfl_Thread *thread, void *thread_arg) {
        UnwindProcess *p = thread_arg;
        const UnwindRegs *r = p->cur_regs;

        /* Hand over every contiguous run of known registers; unknown ones stay undefined, and CFI restores
         * callee-saved ones from where inner frames saved them. */
        for (unsigned i = 0; i < UNWIND_REG_PC;) {
                unsigned j = i;

                if (!unwind_regs_has(r, i)) {
                        i++;
                        continue;
                }
                while (j < UNWIND_REG_PC && unwind_regs_has(r, j))
                        j++;
                if (!dwfl_thread_state_registers(thread, (int) i, j - i, (const Dwarf_Word *) &r->r[i]))
                        return false;
                i = j;
        }
        dwfl_thread_state_register_pc(thread, r->r[UNWIND_REG_PC]);
#if defined(__aarch64__)
        /* The bits pointer authentication signs return addresses with, for a libdw that strips them (its
         * pseudo-register -2, as its own ptrace attach passes it); an older libdw refuses it, and a signed return
         * address then ends its walk where the frame-pointer fallback strips it. */
        {
                Dwarf_Word mask = r->pac_mask ?: ~arch_code_address(0, UINT64_MAX);
                (void) dwfl_thread_state_registers(thread, -2, 1, &mask);
        }
#endif
        return true;
}

static const Dwfl_Thread_Callbacks thread_callbacks = {
        .next_thread = cb_next_thread,
        .get_thread = cb_get_thread,
        .memory_read = cb_memory_read,
        .set_initial_registers = cb_set_initial_registers,
};

static int frame_cb(Dwfl_Frame *state, void *arg) {
        DwflUnwind *u = arg;
        Dwarf_Addr pc;
        bool activation;

        if (!dwfl_frame_pc(state, &pc, &activation))
                return DWARF_CB_ABORT;
        pc = arch_code_address(u->pac_mask, pc);
        if (*u->n >= u->max) {
                u->res->truncated = true;
                snprintf(u->res->end, sizeof u->res->end, "max frames (%zu)", u->max);
                return DWARF_CB_ABORT;
        }
        size_t i = (*u->n)++;
        u->frames[i] = (UnwindFrame) {
                .pc = pc,
                .activation = activation,
                .method = i == 0 ? FRAME_METHOD_INITIAL : FRAME_METHOD_CFI,
        };

        /* Remember what this frame knows, so a fallback can start from the last good frame. */
        *u->last = (UnwindRegs) {};
        for (unsigned reg = 0; reg < UNWIND_REG_PC; reg++) {
                Dwarf_Word v;
                if (dwfl_frame_reg(state, reg, &v) == 0)
                        unwind_regs_set(u->last, reg, v);
        }
        unwind_regs_set(u->last, UNWIND_REG_PC, pc);
        u->last->pac_mask = u->pac_mask;
        if (unwind_regs_has(u->last, UNWIND_REG_FP))
                u->frames[i].fp = u->last->r[UNWIND_REG_FP];
        return DWARF_CB_OK;
}

/* Does the CFI at PC say there is no caller (return address "undefined", as at _start or a clone child)? libdwfl
 * also returns "no more frames" when it merely could not compute the next one (a CFA based on a register that a
 * passive capture lacks), and only this tells the two apart. */
static bool cfi_marks_outermost(UnwindProcess *p, Dwarf_Addr pc) {
        Dwarf_Addr bias;
        Dwarf_Frame *frame = unwind_cfi_frame_at(p, pc, &bias);
        Dwarf_Op ops_mem[3], *ops = NULL;
        size_t nops = 0;
        bool outermost = false;
        int ra;

        if (!frame)
                return false;
        ra = dwarf_frame_info(frame, NULL, NULL, NULL);
        if (ra >= 0 && dwarf_frame_register(frame, ra, ops_mem, &ops, &nops) == 0)
                outermost = nops == 0 && ops == ops_mem;
        free(frame);
        return outermost;
}

static int dwfl_unwind_thread(UnwindProcess *p, pid_t tid, const UnwindRegs *regs, UnwindFrame *frames, size_t max,
                              size_t *n, UnwindRegs *last, UnwindResult *res) {
        DwflUnwind u = { .frames = frames, .max = max, .n = n, .last = last, .res = res, .pac_mask = regs->pac_mask };
        int r;

        if (!p->dwfl_attached) {
                /* libdwfl learns the architecture from a module's ELF; when no module file can be opened (a static
                 * binary run from a deleted file or memfd) it would refuse to unwind at all. The target's
                 * architecture is ours (a build captures its own: arch.h), so our own executable tells it; the
                 * target's deleted modules are then read from its memory. */
                if (!p->arch_elf) {
                        p->arch_fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
                        if (p->arch_fd >= 0)
                                p->arch_elf = elf_begin(p->arch_fd, ELF_C_READ_MMAP, NULL);
                }
                if (!dwfl_attach_state(p->dwfl, p->arch_elf, p->pid, &thread_callbacks, p)) {
                        /* Keep frame #0 from the registers; the caller's fallbacks take it from there. */
                        frames[(*n)++] = (UnwindFrame) { .pc = regs->r[UNWIND_REG_PC], .activation = true,
                                                         .method = FRAME_METHOD_INITIAL };
                        snprintf(res->end, sizeof res->end, "libdw: %s", dwfl_errmsg(-1) ?: "cannot attach");
                        return 0;
                }
                p->dwfl_attached = true;
        }
        p->cur_tid = tid;
        p->cur_regs = regs;
        r = dwfl_getthread_frames(p->dwfl, tid, frame_cb, &u);
        if (r == 0 && *n > 0 &&
            cfi_marks_outermost(p, frames[*n - 1].pc - (frames[*n - 1].activation ? 0 : 1))) {
                res->clean = true;
                snprintf(res->end, sizeof res->end, "end of stack");
        } else if (r == 0) {
                snprintf(res->end, sizeof res->end, "libdw: no caller found for 0x%" PRIx64 " (a register it needs "
                         "is unknown, or no CFI)", *n > 0 ? frames[*n - 1].pc : 0);
        } else if (!res->truncated) {
                const char *msg = dwfl_errmsg(-1);
                snprintf(res->end, sizeof res->end, "libdw: %s", msg ?: "unknown error");
                /* Some targets end the outermost frame with an error rather than 0; libdwfl's doc says to treat
                 * that as an end when the last pc is 0 or the stack is exhausted — we keep the reason instead. */
        }
        p->cur_tid = 0;
        p->cur_regs = NULL;
        return 0;
}

const UnwindBackend unwind_backend_dwfl = {
        .unwind_thread = dwfl_unwind_thread,
};
