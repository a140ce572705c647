/* runtime.c: the table of language runtimes, and the capture's steps driven through it. */
#include <errno.h>
#include <string.h>

#include "base/macro.h"
#include "proc/proc-read.h"
#include "runtime/golang.h"
#include "runtime/java.h"
#include "runtime/node.h"
#include "runtime/python.h"
#include "runtime/ruby.h"
#include "runtime/runtime.h"

/* A new runtime: its RuntimeKind, its module's RuntimeOps, and a row here. */
const RuntimeOps *const runtime_table[_RUNTIME_MAX] = {
        [RUNTIME_PYTHON] = &python_runtime_ops,
        [RUNTIME_GO] = &go_runtime_ops,
        [RUNTIME_JAVA] = &java_runtime_ops,
        [RUNTIME_NODE] = &node_runtime_ops,
        [RUNTIME_RUBY] = &ruby_runtime_ops,
};

/* A process's maps read for the runtimes it runs: as the daemon's scan bounds them. */
#define RUNTIME_MAPS_BYTES_MAX (4U * 1024 * 1024)

#define FOREACH_ACTIVE(set, k, ops)                                                                             \
        for (RuntimeKind k = 0; k < _RUNTIME_MAX; k++)                                                          \
                for (const RuntimeOps *ops = runtime_table[k]; ops && ((set)->active & (1U << k)); ops = NULL)

int runtime_set_open(RuntimeSet *set, const RuntimeCapture *rc, unsigned skip) {
        *set = (RuntimeSet) { .rc = rc };
        for (RuntimeKind k = 0; k < _RUNTIME_MAX; k++) {
                const RuntimeOps *ops = runtime_table[k];
                int r;

                if (skip & (1U << k))
                        continue;
                if (!ops->open) {
                        set->active |= 1U << k;
                        continue;
                }
                r = ops->open(rc, &set->state[k]);
                if (r < 0)
                        return r;
                if (set->state[k])
                        set->active |= 1U << k;
        }
        return 0;
}

bool runtime_set_reads_threads(const RuntimeSet *set) {
        FOREACH_ACTIVE(set, k, ops)
                if (ops->read_thread)
                        return true;
        return false;
}

int runtime_set_read_thread(RuntimeSet *set, pid_t tid, RuntimeRaw *raw) {
        FOREACH_ACTIVE(set, k, ops)
                if (ops->read_thread) {
                        int r = ops->read_thread(set->state[k], set->rc, tid, &raw->raw[k]);
                        if (r < 0)
                                return r;
                }
        return 0;
}

int runtime_set_unwound(RuntimeSet *set, pid_t tid, const UnwindFrame *frames, size_t n, const UnwindStack *stack,
                        RuntimeRaw *raw) {
        FOREACH_ACTIVE(set, k, ops)
                if (ops->unwound) {
                        int r = ops->unwound(set->state[k], set->rc, tid, frames, n, stack, &raw->raw[k]);
                        if (r < 0)
                                return r;
                }
        return 0;
}

void runtime_raw_done(RuntimeRaw *raw) {
        for (RuntimeKind k = 0; k < _RUNTIME_MAX; k++)
                if (raw->raw[k]) {
                        runtime_table[k]->thread_done(raw->raw[k]);
                        raw->raw[k] = NULL;
                }
}

int runtime_set_read_process(RuntimeSet *set) {
        FOREACH_ACTIVE(set, k, ops)
                if (ops->read_process) {
                        int r = ops->read_process(set->state[k], set->rc);
                        if (r < 0)
                                return r;
                }
        return 0;
}

int runtime_set_merge_thread(RuntimeSet *set, RuntimeRaw *raw, ThreadSnapshot *t) {
        FOREACH_ACTIVE(set, k, ops)
                if (ops->merge_thread) {
                        int r = ops->merge_thread(set->state[k], set->rc, raw ? raw->raw[k] : NULL, t);
                        if (r < 0)
                                return r;
                }
        return 0;
}

int runtime_set_finish(RuntimeSet *set) {
        FOREACH_ACTIVE(set, k, ops)
                if (ops->finish) {
                        int r = ops->finish(set->state[k], set->rc);
                        if (r < 0)
                                return r;
                }
        return 0;
}

void runtime_set_done(RuntimeSet *set) {
        for (RuntimeKind k = 0; k < _RUNTIME_MAX; k++)
                if (set->state[k]) {
                        runtime_table[k]->close(set->state[k]);
                        set->state[k] = NULL;
                }
        set->active = 0;
}

int runtime_trim_native(ThreadSnapshot *t, bool *ret_clean) {
        for (RuntimeKind k = 0; k < _RUNTIME_MAX; k++)
                if (runtime_table[k]->trim_native) {
                        int r = runtime_table[k]->trim_native(t, ret_clean);
                        if (r < 0)
                                return r;
                }
        return 0;
}

int runtime_waits_attach(PeerResolver *r, Symbolizer *sym, unsigned skip, RuntimeMayRunFn may_run, void *userdata) {
        for (RuntimeKind k = 0; k < _RUNTIME_MAX; k++) {
                int q;

                if ((skip & (1U << k)) || !runtime_table[k]->waits_attach)
                        continue;
                if ((q = runtime_table[k]->waits_attach(r, sym, may_run, userdata)) < 0)
                        return q;
        }
        return 0;
}

unsigned runtime_kinds_mapped(pid_t pid) {
        _cleanup_close_ int dirfd = -EBADF;
        _cleanup_free_ char *maps = NULL;
        unsigned kinds = 0;
        size_t len;

        if (proc_open_dir(pid, 0, &dirfd) < 0 || proc_read_full(dirfd, "maps", RUNTIME_MAPS_BYTES_MAX, &maps, &len) < 0)
                return 0;
        for (char *line = maps, *end; line && *line; line = end ? end + 1 : NULL) {
                const char *path;
                RuntimeKind k;

                end = strchr(line, '\n');
                if (end)
                        *end = '\0';
                path = strchr(line, '/');
                k = path ? runtime_of_interpreter_module(path) : _RUNTIME_INVALID;
                if (k >= 0)
                        kinds |= 1U << k;
        }
        return kinds;
}

bool runtime_mapped_may_run(void *userdata, RuntimeKind k, pid_t pid) {
        RuntimeMapped *m = userdata;
        uintptr_t kinds = (uintptr_t) intmap_get(&m->kinds, pid);

        if (kinds == 0) {
                kinds = 1U << _RUNTIME_MAX | runtime_kinds_mapped(pid);
                if (intmap_put(&m->kinds, pid, (void *) kinds) < 0)
                        return true;
        }
        return kinds & (1U << k);
}

void runtime_mapped_done(RuntimeMapped *m) {
        intmap_done(&m->kinds);
}
