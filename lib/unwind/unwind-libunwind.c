/* unwind-libunwind.c: the libunwind backend: a remote address space whose accessors read our captured registers
 * and stack copy, and whose unwind tables are the modules' .eh_frame_hdr found through libdwfl. Nothing here
 * uses ptrace: the thread runs again by the time we unwind. */
#include <errno.h>
#include <gelf.h>
#include <stdio.h>
#include <string.h>

#include <dwarf.h>
#include <libunwind.h>

#include "base/log.h"
#include "unwind/unwind-internal.h"

typedef struct LuContext {
        UnwindProcess *p;
        const UnwindRegs *regs;
} LuContext;

/* Exported by libunwind but not declared in its headers (perf declares them the same way), under the name of the
 * architecture it unwinds. We cannot use libunwind-ptrace's _UPT_find_proc_info: it hands its own handle, not
 * ours, to our memory accessor. */
#if defined(__x86_64__)
#define lu_dwarf_search_unwind_table _Ux86_64_dwarf_search_unwind_table
#elif defined(__aarch64__)
#define lu_dwarf_search_unwind_table _Uaarch64_dwarf_search_unwind_table
#endif
extern int lu_dwarf_search_unwind_table(unw_addr_space_t as, unw_word_t ip, unw_dyn_info_t *di, unw_proc_info_t *pi,
                                        int need_unwind_info, void *arg);

/* Size of a DW_EH_PE-encoded value we can read in .eh_frame_hdr; 0 for encodings compilers do not emit there. */
static size_t eh_pe_size(uint8_t enc) {
        switch (enc & 0x0f) {
        case DW_EH_PE_udata4:
        case DW_EH_PE_sdata4:
                return 4;
        case DW_EH_PE_udata8:
        case DW_EH_PE_sdata8:
                return 8;
        default:
                return 0;
        }
}

/* Describe the binary search table in the .eh_frame_hdr of the module holding IP, at its runtime address. */
static int eh_frame_hdr_table(UnwindProcess *p, unw_word_t ip, unw_dyn_info_t *ret) {
        Dwfl_Module *mod = dwfl_addrmodule(p->dwfl, ip);
        Dwarf_Addr low, high;
        GElf_Addr bias;
        Elf *elf;
        size_t phnum;

        if (!mod || !(elf = dwfl_module_getelf(mod, &bias)) || elf_getphdrnum(elf, &phnum) < 0)
                return -UNW_ENOINFO;
        dwfl_module_info(mod, NULL, &low, &high, NULL, NULL, NULL, NULL);
        for (size_t i = 0; i < phnum; i++) {
                GElf_Phdr ph;
                const uint8_t *hdr;
                Elf_Data *d;
                size_t ptr_size, count_size;
                uint64_t count = 0;

                if (!gelf_getphdr(elf, (int) i, &ph) || ph.p_type != PT_GNU_EH_FRAME || ph.p_filesz < 4)
                        continue;
                d = elf_getdata_rawchunk(elf, (int64_t) ph.p_offset, ph.p_filesz, ELF_T_BYTE);
                if (!d || d->d_size < 4)
                        return -UNW_ENOINFO;
                hdr = d->d_buf;
                /* version 1; the table must be datarel sdata4 pairs, the only form libunwind searches. */
                ptr_size = eh_pe_size(hdr[1]);
                count_size = eh_pe_size(hdr[2]);
                if (hdr[0] != 1 || hdr[3] != (DW_EH_PE_datarel | DW_EH_PE_sdata4) || !ptr_size || !count_size ||
                    d->d_size < 4 + ptr_size + count_size)
                        return -UNW_ENOINFO;
                if (count_size == 4) {
                        uint32_t c32;
                        memcpy(&c32, hdr + 4 + ptr_size, 4);
                        count = c32;
                } else
                        memcpy(&count, hdr + 4 + ptr_size, 8);
                *ret = (unw_dyn_info_t) {
                        .start_ip = low,
                        .end_ip = high,
                        .format = UNW_INFO_FORMAT_REMOTE_TABLE,
                        .u.rti = {
                                .segbase = ph.p_vaddr + bias,
                                .table_data = ph.p_vaddr + bias + 4 + ptr_size + count_size,
                                .table_len = count * 8 / sizeof(unw_word_t),
                        },
                };
                return 0;
        }
        return -UNW_ENOINFO;
}

static int lu_find_proc_info(unw_addr_space_t as, unw_word_t ip, unw_proc_info_t *pi, int need, void *arg) {
        LuContext *c = arg;
        unw_dyn_info_t di;
        int r;

        r = eh_frame_hdr_table(c->p, ip, &di);
        if (r < 0)
                return r;
        return lu_dwarf_search_unwind_table(as, ip, &di, pi, need, arg);
}

static void lu_put_unwind_info(unw_addr_space_t as, unw_proc_info_t *pi, void *arg) {
        /* Table-format unwind info is released by libunwind's own parser; only dynamic info comes here. */
}

static int lu_get_dyn_info_list_addr(unw_addr_space_t as, unw_word_t *dil, void *arg) {
        /* Dynamically registered unwind info (JITs) is not supported. */
        return -UNW_ENOINFO;
}

static int lu_access_mem(unw_addr_space_t as, unw_word_t addr, unw_word_t *val, int write, void *arg) {
        LuContext *c = arg;
        uint64_t v;

        if (write || !unwind_process_read_word(c->p, addr, &v))
                return -UNW_EINVAL;
        *val = v;
        return 0;
}

static int lu_access_reg(unw_addr_space_t as, unw_regnum_t reg, unw_word_t *val, int write, void *arg) {
        LuContext *c = arg;

        /* libunwind's register numbers are the DWARF ones: x86_64's UNW_X86_64_RIP = 16 = UNW_REG_IP; aarch64's
         * x0…x30, UNW_AARCH64_SP = 31, UNW_AARCH64_PC = 32 (where its first ip comes from). */
        if (write || reg < 0 || !unwind_regs_has(c->regs, (unsigned) reg))
                return -UNW_EBADREG;
        *val = c->regs->r[reg];
        return 0;
}

static int lu_access_fpreg(unw_addr_space_t as, unw_regnum_t reg, unw_fpreg_t *val, int write, void *arg) {
        return -UNW_EBADREG;
}

static int lu_resume(unw_addr_space_t as, unw_cursor_t *cursor, void *arg) {
        return -UNW_EINVAL;
}

static int lu_get_proc_name(unw_addr_space_t as, unw_word_t addr, char *buf, size_t len, unw_word_t *offp,
                            void *arg) {
        /* Symbolization is a separate pass. */
        return -UNW_ENOINFO;
}

static unw_accessors_t lu_accessors = {
        .find_proc_info = lu_find_proc_info,
        .put_unwind_info = lu_put_unwind_info,
        .get_dyn_info_list_addr = lu_get_dyn_info_list_addr,
        .access_mem = lu_access_mem,
        .access_reg = lu_access_reg,
        .access_fpreg = lu_access_fpreg,
        .resume = lu_resume,
        .get_proc_name = lu_get_proc_name,
};

static void lu_process_done(UnwindProcess *p) {
        if (p->backend_state[UNWINDER_LIBUNWIND])
                unw_destroy_addr_space(p->backend_state[UNWINDER_LIBUNWIND]);
        p->backend_state[UNWINDER_LIBUNWIND] = NULL;
}

static int lu_unwind_thread(UnwindProcess *p, pid_t tid, const UnwindRegs *regs, UnwindFrame *frames, size_t max,
                            size_t *n, UnwindRegs *last, UnwindResult *res) {
        LuContext ctx = { .p = p, .regs = regs };
        unw_cursor_t cursor;
        bool next_is_activation = true;
        int r;

        if (!p->backend_state[UNWINDER_LIBUNWIND]) {
                p->backend_state[UNWINDER_LIBUNWIND] = unw_create_addr_space(&lu_accessors, 0);
                if (!p->backend_state[UNWINDER_LIBUNWIND])
                        return -ENOMEM;
        }
        r = unw_init_remote(&cursor, p->backend_state[UNWINDER_LIBUNWIND], &ctx);
        if (r < 0) {
                snprintf(res->end, sizeof res->end, "libunwind: %s", unw_strerror(r));
                return 0;
        }
        for (;;) {
                unw_word_t ip, v;

                if (*n >= max) {
                        res->truncated = true;
                        snprintf(res->end, sizeof res->end, "max frames (%zu)", max);
                        return 0;
                }
                if (unw_get_reg(&cursor, UNW_REG_IP, &ip) < 0 || ip == 0) {
                        res->clean = ip == 0;
                        snprintf(res->end, sizeof res->end, ip == 0 ? "end of stack" : "libunwind: no ip");
                        return 0;
                }
                frames[*n] = (UnwindFrame) {
                        .pc = arch_code_address(regs->pac_mask, ip),
                        .activation = next_is_activation,
                        .method = *n == 0 ? FRAME_METHOD_INITIAL : FRAME_METHOD_CFI,
                };
                (*n)++;
                *last = (UnwindRegs) {};
                for (unsigned reg = 0; reg < UNWIND_REG_PC; reg++)
                        if (unw_get_reg(&cursor, (int) reg, &v) == 0)
                                unwind_regs_set(last, reg, v);
                unwind_regs_set(last, UNWIND_REG_PC, frames[*n - 1].pc);
                last->pac_mask = regs->pac_mask;
                if (unwind_regs_has(last, UNWIND_REG_FP))
                        frames[*n - 1].fp = last->r[UNWIND_REG_FP];
                /* After a signal frame the next pc is the interrupted instruction itself. */
                next_is_activation = unw_is_signal_frame(&cursor) > 0;
                r = unw_step(&cursor);
                if (r == 0) {
                        res->clean = true;
                        snprintf(res->end, sizeof res->end, "end of stack");
                        return 0;
                }
                if (r < 0) {
                        snprintf(res->end, sizeof res->end, "libunwind: %s", unw_strerror(r));
                        return 0;
                }
        }
}

const UnwindBackend unwind_backend_libunwind = {
        .unwind_thread = lu_unwind_thread,
        .process_done = lu_process_done,
};
