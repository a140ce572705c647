/* python-waits.h: the RuntimeWaitFn of CPython for wait chains (peers-tables.h): what a thread of a Python program
 * parked in a futex waits for (the GIL, an RLock, a Lock), read from its interpreter, each process's interpreter
 * found once per reader. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/macro.h"
#include "model/snapshot.h"
#include "proc/peers-tables.h"
#include "unwind/symbolize.h"

typedef struct PythonWaits PythonWaits;

/* SYM (borrowed, outliving the reader) caches where each build's interpreter lives. */
int python_waits_new(Symbolizer *sym, PythonWaits **ret);
PythonWaits *python_waits_free(PythonWaits *w);
DEFINE_TRIVIAL_CLEANUP_FUNC(PythonWaits *, python_waits_free);

/* Whether process PID may run a CPython at all (its maps name a python3 executable or a libpython3, say): a reader
 * asks before it opens a process's interpreter, which lists its threads and reads its memory. */
typedef bool (*PythonWaitsMayRunFn)(void *userdata, pid_t pid);

/* Give resolver R a new reader of Python waits with SYM, freed with R; MAY_RUN (with USERDATA; NULL: any process
 * may) tells which processes it reads. -ENOMEM. */
int python_waits_attach(PeerResolver *r, Symbolizer *sym, PythonWaitsMayRunFn may_run, void *userdata);

/* Where the GIL of the CPython in PID lies (py_process_gil_range()), found with SYM: 0, -ENOENT when PID runs no
 * CPython we can read, -ENOMEM. */
int python_gil_range(pid_t pid, Symbolizer *sym, uint64_t *ret_start, uint64_t *ret_size);

/* A RuntimeWaitFn: USERDATA is a PythonWaits. */
int python_waits_read(void *userdata, pid_t pid, pid_t tid, uint64_t futex, RuntimeWait *ret);
