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

        /* Each backend's own per-process state, created on its first use (libunwind: its address space). */
        void *backend_state[_UNWINDER_MAX];
};

/* One unwinder backend. unwind_thread() fills FRAMES from index *N on and sets END/CLEAN in RES; on an unclean
 * end it leaves in LAST the registers of the last frame it trusts, for the frame-pointer and scan fallbacks that
 * unwind.c runs after it. process_done() (NULL: no state) frees P->backend_state[kind]. The core reaches the
 * backends only through these tables; the backends use the core's memory reader and module list. */
typedef struct UnwindBackend {
        int (*unwind_thread)(UnwindProcess *p, pid_t tid, const UnwindRegs *regs, UnwindFrame *frames, size_t max,
                             size_t *n, UnwindRegs *last, UnwindResult *res);
        void (*process_done)(UnwindProcess *p);
} UnwindBackend;

extern const UnwindBackend unwind_backend_dwfl;         /* unwind-dwfl.c */
#ifdef HAVE_LIBUNWIND
extern const UnwindBackend unwind_backend_libunwind;    /* unwind-libunwind.c */
#endif
