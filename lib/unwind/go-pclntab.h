/* go-pclntab.h: a Go binary's own table of functions and lines (.gopclntab), which the runtime's tracebacks read:
 * the function, file, line and inlined calls at a pc, and whether a function is a compiler wrapper, for a binary
 * without DWARF (-ldflags=-w), from the file alone. Go 1.18 and 1.19's format (magic 0xfffffff0: src/runtime/
 * symtab.go's pcHeader, _func, inlinedCall and pcvalue, go1.19.8); other formats are refused. */
#pragma once

#include <gelf.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct GoPclntab GoPclntab;

/* One frame at a pc, innermost (inlined) first. Strings point into the ELF's data. */
typedef struct GoPcFrame {
        const char *function;
        const char *file;       /* NULL when the table has none for the pc */
        unsigned line;
        bool inlined;           /* a call inlined at the pc (the last frame is the physical function) */
        bool wrapper;           /* a compiler wrapper (funcID_wrapper), which Go's traceback leaves out */
        uint64_t entry;         /* the physical function's entry (ELF address) */
} GoPcFrame;

/* The table of ELF, which must outlive it. -ENOENT when it has none; -EPROTONOSUPPORT for a format not read (Go 1.17
 * and older, 1.20 and later); -EBADMSG for one that does not hold together; -ENOMEM. */
int go_pclntab_open(Elf *elf, GoPclntab **ret);
GoPclntab *go_pclntab_free(GoPclntab *t);

/* The size of the frame at ELF address PC of the function that holds it (runtime.funcspdelta(): its return address
 * is at SP + *RET_DELTA on x86-64), and whether that function is a stack's top (funcFlag_TOPFRAME: nothing calls
 * it). -ENOENT when no Go function holds PC, -EBADMSG for a table that does not say. */
int go_pclntab_spdelta(const GoPclntab *t, uint64_t pc, int32_t *ret_delta, bool *ret_top);

/* The frames at ELF address PC (a return address already moved back into its call): at most MAX into OUT. Returns
 * how many; 0 when no Go function holds PC. */
size_t go_pclntab_frames(const GoPclntab *t, uint64_t pc, GoPcFrame *out, size_t max);
