/* python-waits.c: CPython's waits for wait chains: one interpreter per process, found on the first question about
 * it and kept for the reader's life (one capture's chain, or one poll of the daemon). */
#include <errno.h>
#include <stdlib.h>

#include "base/macro.h"
#include "proc/proc-read.h"
#include "runtime/python-waits.h"
#include "runtime/python.h"
#include "unwind/unwind.h"

/* Processes one reader remembers: a chain reaches a few, a poll judges at most a handful. */
#define PYTHON_WAITS_PROCESSES_MAX 64U

typedef struct PythonWaitsEntry {
        pid_t pid;
        PyProcess *py;          /* NULL: no CPython in it (or it could not be read) */
} PythonWaitsEntry;

struct PythonWaits {
        Symbolizer *sym;
        PythonWaitsMayRunFn may_run;
        void *may_run_userdata;
        PythonWaitsEntry entries[PYTHON_WAITS_PROCESSES_MAX];
        size_t n;
};

int python_waits_new(Symbolizer *sym, PythonWaits **ret) {
        PythonWaits *w = calloc(1, sizeof *w);

        if (!w)
                return -ENOMEM;
        w->sym = sym;
        *ret = w;
        return 0;
}

PythonWaits *python_waits_free(PythonWaits *w) {
        if (!w)
                return NULL;
        for (size_t i = 0; i < w->n; i++)
                py_process_free(w->entries[i].py);
        free(w);
        return NULL;
}

/* The interpreter of PID, opened on first use; NULL when it has none. -ENOMEM. */
static int interpreter_of(PythonWaits *w, pid_t pid, PyProcess **ret) {
        _cleanup_(unwind_process_freep) UnwindProcess *up = NULL;
        _cleanup_close_ int dirfd = -EBADF;
        _cleanup_free_ int *tids = NULL;
        PythonWaitsEntry *e;
        const char *why;
        size_t n = 0;
        int r;

        for (size_t i = 0; i < w->n; i++)
                if (w->entries[i].pid == pid) {
                        *ret = w->entries[i].py;
                        return 0;
                }
        *ret = NULL;
        if (w->n >= PYTHON_WAITS_PROCESSES_MAX)
                return 0;
        e = &w->entries[w->n++];
        *e = (PythonWaitsEntry) { .pid = pid };
        if (proc_open_dir(pid, 0, &dirfd) < 0 || proc_list_numeric(dirfd, "task", &tids, &n) < 0 ||
            unwind_process_new(pid, NULL, &up) < 0)
                return 0;
        r = py_process_open(pid, up, w->sym, tids, n, &e->py, &why);
        *ret = e->py;
        return r == -ENOMEM ? r : 0;
}

int python_gil_range(pid_t pid, Symbolizer *sym, uint64_t *ret_start, uint64_t *ret_size) {
        _cleanup_(python_waits_freep) PythonWaits *w = NULL;
        PyProcess *py;
        int r;

        r = python_waits_new(sym, &w);
        if (r < 0)
                return r;
        r = interpreter_of(w, pid, &py);
        if (r < 0)
                return r;
        return py ? py_process_gil_range(py, ret_start, ret_size) : -ENOENT;
}

int python_waits_read(void *userdata, pid_t pid, pid_t tid, uint64_t futex, RuntimeWait *ret) {
        PythonWaits *w = userdata;
        PyProcess *py;
        int r;

        if (w->may_run && !w->may_run(w->may_run_userdata, pid))
                return 0;
        r = interpreter_of(w, pid, &py);
        if (r < 0)
                return r;
        if (!py)
                return 0;
        r = py_wait_of(py, tid, futex, ret);
        if (r < 0)
                return r;
        return ret->kind != RUNTIME_WAIT_NONE;
}

static void python_waits_free_void(void *w) {
        python_waits_free(w);
}

int python_waits_attach(PeerResolver *r, Symbolizer *sym, PythonWaitsMayRunFn may_run, void *userdata) {
        PythonWaits *w;
        int k = python_waits_new(sym, &w);

        if (k < 0)
                return k;
        w->may_run = may_run;
        w->may_run_userdata = userdata;
        peer_resolver_set_runtime(r, python_waits_read, w, python_waits_free_void);
        return 0;
}
