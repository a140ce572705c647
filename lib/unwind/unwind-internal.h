/* unwind-internal.h: the UnwindProcess layout, shared by unwind.c and its backends only. */
#pragma once

#include "proc/fuse-conn.h"
#include "unwind/go-pclntab.h"
#include "unwind/unwind.h"

#define UNWIND_GO_TABLES_MAX 8

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
        char **aliases;                 /* triples: the name libdwfl knows (a path under /proc/PID/root, a
                                         * /proc/PID/map_files/… path, or UNWIND_NOT_READ_PREFIX…), the file's own
                                         * name, and why it is not read (NULL: it is) */
        size_t n_aliases, n_aliases_allocated;
        FuseMount *fuse_mounts;         /* the target's FUSE mounts, read at its first mapped file */
        size_t n_fuse_mounts;
        bool fuse_mounts_loaded;
        int *fuse_answering;            /* per mount: -1 not asked yet, 0 or 1 */
        char **fuse_why;                /* per mount, when 0: why */
        int *fuse_copies;               /* memfd copies of files on FUSE mounts (fuse_copy_file()), by
                                         * /proc/self/fd/N alias; closed with the process */
        size_t n_fuse_copies, n_fuse_copies_allocated;
        uint64_t (*unread)[2];          /* the address ranges of files not read: memory there is read only where
                                         * resident, as a page fault would ask their file system too */
        size_t n_unread, n_unread_allocated;
        int pagemap_fd;
        ProcMap *maps;
        size_t n_maps;

        /* The thread being unwound right now (libdwfl's memory_read callback has no thread argument). */
        const UnwindStack *stack;
        pid_t cur_tid;
        const UnwindRegs *cur_regs;

        /* Go modules' own function tables (pclntab), for their frame sizes where they have no CFI: looked up once
         * per module, NULL when it has none we read. */
        struct {
                Dwfl_Module *mod;
                GoPclntab *table;
                uint64_t bias;
        } go_tables[UNWIND_GO_TABLES_MAX];
        size_t n_go_tables;

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

/* The CFI frame at PC (the module's .eh_frame, else its .debug_frame; free() it), and the module's bias in
 * *RET_BIAS; NULL when there is none. */
Dwarf_Frame *unwind_cfi_frame_at(UnwindProcess *p, uint64_t pc, Dwarf_Addr *ret_bias);

extern const UnwindBackend unwind_backend_dwfl;         /* unwind-dwfl.c */
#ifdef HAVE_LIBUNWIND
extern const UnwindBackend unwind_backend_libunwind;    /* unwind-libunwind.c */
#endif
