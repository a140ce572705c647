/* unwind.h: turn captured registers and stack bytes into a list of PCs (libdw, libunwind or frame pointers). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <elfutils/libdwfl.h>

#include "base/macro.h"
#include "model/proc-parse.h"
#include "model/snapshot.h"
#include "model/unwind-kind.h"
#include "unwind/arch.h"

/* A copy of the top of a thread's stack: DATA holds LEN bytes that lived at BASE. */
typedef struct UnwindStack {
        uint64_t base;
        uint8_t *data;
        size_t len;
} UnwindStack;


typedef struct UnwindFrame {
        uint64_t pc;
        uint64_t fp;            /* the frame-pointer register (rbp, x29) while this frame runs, 0 when unknown: the base
                                 * of the frame of a function that keeps one (a JIT's, V8's frames hang off it) */
        bool activation;
        FrameMethod method;
} UnwindFrame;

/* Per-process unwinding context: the process's module list (a Dwfl over /proc/PID/maps) and its memory. */
typedef struct UnwindProcess UnwindProcess;

/* DEBUGINFO_PATH is libdwfl's search path syntax (NULL: ":.debug:/usr/lib/debug"). */
int unwind_process_new(pid_t pid, const char *debuginfo_path, UnwindProcess **ret);
UnwindProcess *unwind_process_free(UnwindProcess *p);
DEFINE_TRIVIAL_CLEANUP_FUNC(UnwindProcess *, unwind_process_free);

/* The process's Dwfl with its modules reported, for symbolization and the module list. */
Dwfl *unwind_process_dwfl(UnwindProcess *p);
/* The process's memory map as read when P was created (sorted by address). */
const ProcMap *unwind_process_maps(UnwindProcess *p, size_t *ret_n);
/* The name to show for a module: the original path where libdwfl was pointed at /proc/PID/map_files/… for a
 * deleted file. */
const char *unwind_process_module_name(UnwindProcess *p, const char *dwfl_name);
/* Why the module libdwfl knows as DWFL_NAME was not read at all (no ELF, no symbols), or NULL: a file on a FUSE
 * mount whose daemon does not answer, which any look would wait for with the target. */
const char *unwind_process_module_not_read(UnwindProcess *p, const char *dwfl_name);

/* Result of unwinding one thread. END names why it stopped; CLEAN is true when it reached the outermost frame. */
typedef struct UnwindResult {
        size_t n_frames;
        bool clean;
        bool truncated;
        char end[160];
} UnwindResult;

/* Unwind one thread from REGS and STACK into at most MAX frames. Memory outside STACK is read live from the
 * process. Falls back from CFI to frame pointers to a marked stack scan where the chosen backend stops. */
int unwind_thread(UnwindProcess *p, UnwinderKind kind, pid_t tid, const UnwindRegs *regs, const UnwindStack *stack,
                  UnwindFrame *frames, size_t max, UnwindResult *ret);

/* Read one word of target memory: from the current stack copy where it covers ADDR, else from the process. */
bool unwind_process_read_word(UnwindProcess *p, uint64_t addr, uint64_t *ret);

/* The GNU build-id of the ELF image mapped at START (a module's lowest address), read from the process's memory: its
 * ELF header, program headers and PT_NOTE segments, as the loader mapped them. For a module whose file cannot be
 * reached, so that it is still named by build-id. Lowercase hex in *RET; -ENOENT when there is none (not an ELF
 * header there, no note), -EIO when the memory cannot be read, -ENOMEM. */
int unwind_process_build_id(UnwindProcess *p, uint64_t start, char **ret);

/* Whether ADDR lies in an executable mapping of the process. */
bool unwind_process_is_text(UnwindProcess *p, uint64_t addr);
pid_t unwind_process_pid(UnwindProcess *p);
