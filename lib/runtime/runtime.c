/* runtime.c: the table of language runtimes, and the capture's steps driven through it. */
#include <errno.h>
#include <string.h>

#include "base/macro.h"
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
