/* unwind-internal.h: the UnwindProcess layout, shared by unwind.c and its backends only. */
#pragma once

#include "unwind.h"

struct UnwindProcess {
        pid_t pid;
        int mem_fd;
        Dwfl *dwfl;
        Dwfl_Callbacks callbacks;       /* must outlive dwfl */
        char *debuginfo_path;
        bool dwfl_attached;
        int arch_fd;                    /* our own executable, opened for its architecture only */
        Elf *arch_elf;
        char *maps_buf;
        char **aliases;                 /* pairs: /proc/PID/map_files/… path, original " (deleted)" name */
        size_t n_aliases, n_aliases_allocated;
        ProcMap *maps;
        size_t n_maps;

        /* The thread being unwound right now (libdwfl's memory_read callback has no thread argument). */
        const UnwindStack *stack;
        pid_t cur_tid;
        const UnwindRegs *cur_regs;

        /* libunwind backend state (unwind-libunwind.c), created on first use. */
        void *lu_as;
};

#ifdef HAVE_LIBUNWIND
void unwind_libunwind_done(UnwindProcess *p);
#endif
