/* unwind-dwfl.c: the libdwfl backend: dwfl_attach_state over our captured registers and stack copy. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <dwarf.h>

#include "log.h"
#include "unwind-internal.h"

typedef struct DwflUnwind {
        UnwindFrame *frames;
        size_t max;
        size_t *n;
        UnwindRegs *last;
        UnwindResult *res;
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
        for (unsigned i = 0; i < UNWIND_REG_RIP;) {
                unsigned j = i;

                if (!unwind_regs_has(r, i)) {
                        i++;
                        continue;
                }
                while (j < UNWIND_REG_RIP && unwind_regs_has(r, j))
                        j++;
                if (!dwfl_thread_state_registers(thread, (int) i, j - i, (const Dwarf_Word *) &r->r[i]))
                        return false;
                i = j;
        }
        dwfl_thread_state_register_pc(thread, r->r[UNWIND_REG_RIP]);
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
        for (unsigned reg = 0; reg < UNWIND_REG_RIP; reg++) {
                Dwarf_Word v;
                if (dwfl_frame_reg(state, reg, &v) == 0)
                        unwind_regs_set(u->last, reg, v);
        }
        unwind_regs_set(u->last, UNWIND_REG_RIP, pc);
        return DWARF_CB_OK;
}

int unwind_dwfl_thread(UnwindProcess *p, pid_t tid, const UnwindRegs *regs, UnwindFrame *frames, size_t max,
                       size_t *n, UnwindRegs *last, UnwindResult *res) {
        DwflUnwind u = { .frames = frames, .max = max, .n = n, .last = last, .res = res };
        int r;

        if (!p->dwfl_attached) {
                if (!dwfl_attach_state(p->dwfl, NULL, p->pid, &thread_callbacks, p))
                        return log_debug_errno(EIO, "dwfl_attach_state(%d): %s", (int) p->pid, dwfl_errmsg(-1));
                p->dwfl_attached = true;
        }
        p->cur_tid = tid;
        p->cur_regs = regs;
        r = dwfl_getthread_frames(p->dwfl, tid, frame_cb, &u);
        if (r == 0) {
                res->clean = true;
                snprintf(res->end, sizeof res->end, "end of stack");
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
