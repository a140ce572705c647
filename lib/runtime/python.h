/* python.h: a CPython interpreter's own frames, read from outside the process without stopping it: the runtime
 * found by symbol (or section, or a scan of its data), its thread states matched to TIDs, each thread's frames copied (raw: code object and
 * instruction addresses), later decoded into function, file and line, and merged into the native stack where the
 * interpreter runs them. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "model/snapshot.h"
#include "runtime/runtime-ops.h"
#include "unwind/symbolize.h"
#include "unwind/unwind.h"

/* Python frames per thread at most (a deeper recursion is cut, and says so). */
#define PY_FRAMES_MAX 1024U

typedef struct PyProcess PyProcess;

/* One frame as copied while the thread held still: addresses only. */
typedef struct PyRawFrame {
        uint64_t code;          /* the code object */
        uint64_t instr;         /* 3.11+: the instruction's address; ≤3.10: f_lasti */
        bool entry;             /* the last frame its _PyEval_EvalFrameDefault call runs (3.11 is_entry; the
                                 * frame before a shim frame from 3.12; every frame before 3.11) */
} PyRawFrame;

/* A thread's Python frames, innermost first, as copied. */
typedef struct PyRawStack {
        bool have_tstate;       /* the thread has a Python thread state */
        PyRawFrame *frames;
        size_t n, n_allocated;
        char end[96];           /* why the walk ended early ("" when it reached the outermost frame) */
        bool truncated;         /* the frame budget cut it (a deeper recursion) */
} PyRawStack;

void py_raw_stack_done(PyRawStack *st);

/* Find the interpreter in process PID: the executable or a loaded libpython that has _PyRuntime (its address and
 * the version cached per build-id by SYM; a module named as a CPython that has neither symbol nor section is scanned
 * for it), then its interpreters and their thread states for TIDS[0..N_TIDS). 0 with *RET NULL when the process runs
 * no CPython; -EPROTONOSUPPORT with *RET_WHY (static) for one we cannot read (2.7 to 3.7, a version we have no
 * layout for, a runtime not found), -ENOMEM. */
int py_process_open(pid_t pid, UnwindProcess *up, Symbolizer *sym, const int *tids, size_t n_tids, PyProcess **ret,
                    const char **ret_why);
PyProcess *py_process_free(PyProcess *p);
DEFINE_TRIVIAL_CLEANUP_FUNC(PyProcess *, py_process_free);

/* "3.11.2" */
const char *py_process_version(const PyProcess *p);
/* Where the GIL's state lies (its mutex and condition variables: a futex wait there waits for the GIL): 0, or
 * -ENOENT when not known. */
int py_process_gil_range(const PyProcess *p, uint64_t *ret_start, uint64_t *ret_size);
/* The TID of the thread holding the GIL, 0 when none does (or it cannot be told). */
pid_t py_process_gil_holder(const PyProcess *p);

/* Copy thread TID's frames (addresses only: few reads, meant for while it holds still). */
int py_read_stack(PyProcess *p, pid_t tid, unsigned max_frames, PyRawStack *ret);

/* Decode RAW (code objects' names, files and line tables, cached per capture) and merge its frames into T's native
 * frames: each _PyEval_EvalFrameDefault frame gets the Python frames its call runs, inserted before it (inner side),
 * and is marked as their interpreter frame. Frames that find no such native frame go after the native ones. Sets
 * T's Python block (thread state, GIL, note). -ENOMEM. */
int py_merge_stack(PyProcess *p, const PyRawStack *raw, ThreadSnapshot *t);

/* What thread TID, parked in a futex wait on FUTEX, waits for (see py_thread_wait()). */
int py_wait_of(PyProcess *p, pid_t tid, uint64_t futex, RuntimeWait *ret);

/* What T, parked in a futex wait and merged (py_merge_stack()), waits for: the GIL (the futex is inside the
 * interpreter's GIL state), a threading.RLock or Lock (the lock object whose semaphore the futex is, found on its
 * top frame's locals and stack: 3.8 to 3.13), a Condition or Event; RUNTIME_WAIT_NONE when none of these. Into T's
 * Python block. Reads the thread now: meant for a thread that is still parked where it was captured. */
int py_thread_wait(PyProcess *p, ThreadSnapshot *t);

/* Give resolver R a reader of Python waits (the GIL, an RLock, a Lock a thread parked in a futex waits for, read from
 * its interpreter, each process's found once) with SYM, freed with R; MAY_RUN (with USERDATA; NULL: any process may)
 * tells which processes it reads, asked before it opens a process's interpreter (which lists its threads and reads
 * its memory). CPython's waits_attach(). -ENOMEM. */
int python_waits_attach(PeerResolver *r, Symbolizer *sym, RuntimeMayRunFn may_run, void *userdata);

/* Where the GIL of the CPython in PID lies (py_process_gil_range()), found with SYM: 0, -ENOENT when PID runs no
 * CPython we can read, -ENOMEM. */
int python_gil_range(pid_t pid, Symbolizer *sym, uint64_t *ret_start, uint64_t *ret_size);

/* CPython's row of the runtime table (runtime/runtime.h). */
extern const RuntimeOps python_runtime_ops;
