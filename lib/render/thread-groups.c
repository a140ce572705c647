/* thread-groups.c: threads grouped by state, frames and wait (thread-groups.h). Each thread gets a hash of what
 * makes it alike; the threads are sorted by it and a run of equal ones (compared in full, not by hash) is a group. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/macro.h"
#include "render/thread-groups.h"

static uint64_t mix(uint64_t h, uint64_t v) {
        /* A word at a time (FNV's prime, with the high bits folded back): a dump hashes every frame of every
         * thread, and only equal threads need equal hashes (a group is compared in full). */
        h = (h ^ v) * 0x100000001b3ULL;
        return h ^ (h >> 29);
}

static uint64_t mix_str(uint64_t h, const char *s) {
        size_t n = s ? strlen(s) : 0;
        uint64_t w;

        for (; n >= 8; n -= 8, s += 8) {
                memcpy(&w, s, 8);
                h = mix(h, w);
        }
        w = 0xff;
        if (n > 0)
                memcpy(&w, s, n);
        return mix(h, w);
}

static uint64_t thread_hash(const ThreadSnapshot *t) {
        uint64_t h = 0xcbf29ce484222325ULL;

        h = mix(h, (uint64_t) (uint8_t) t->state);
        h = mix(h, (uint64_t) t->syscall.kind);
        h = mix(h, (uint64_t) t->syscall.nr);
        h = mix(h, t->n_kframes);
        for (size_t i = 0; i < t->n_kframes; i++)
                h = mix(mix_str(h, t->kframes[i].function), t->kframes[i].offset);
        h = mix(h, t->n_frames);
        for (size_t i = 0; i < t->n_frames; i++) {
                const UserFrame *f = &t->frames[i];

                h = mix(mix(h, (uint64_t) f->kind), f->pc);
                if (frame_kind_is_runtime(f->kind))
                        h = mix(mix_str(mix_str(h, f->function), f->file), f->line);
        }
        return h;
}

static bool kframes_equal(const KernelFrame *a, const KernelFrame *b) {
        return a->offset == b->offset && streq_ptr(a->function, b->function) && streq_ptr(a->module, b->module);
}

static bool frames_equal(const UserFrame *a, const UserFrame *b) {
        if (a->kind != b->kind || a->pc != b->pc || a->inlined != b->inlined || a->interpreter != b->interpreter)
                return false;
        /* Inlined frames share a pc: their names tell them apart. */
        return streq_ptr(a->function, b->function) && streq_ptr(a->file, b->file) && a->line == b->line;
}

static bool locks_equal(const ThreadRuntime *a, const ThreadRuntime *b) {
        if (a->n_locks != b->n_locks)
                return false;
        for (size_t i = 0; i < a->n_locks; i++)
                if (a->locks[i].kind != b->locks[i].kind || a->locks[i].address != b->locks[i].address ||
                    a->locks[i].owner != b->locks[i].owner)
                        return false;
        return true;
}

/* What the runtimes say alike threads do: the same global lock held, the same wait, state and locks (not their
 * names, not a note); a runtime that knows nothing of a thread says what an empty block says. */
static bool runtimes_alike(const ThreadSnapshot *a, const ThreadSnapshot *b) {
        static const ThreadRuntime none = {};

        for (RuntimeKind k = 0; k < _RUNTIME_MAX; k++) {
                const ThreadRuntime *x = thread_runtime(a, k) ?: &none, *y = thread_runtime(b, k) ?: &none;

                if (x->holds_global_lock != y->holds_global_lock || x->wait.kind != y->wait.kind ||
                    x->wait.owner != y->wait.owner || x->wait.object != y->wait.object ||
                    !streq_ptr(x->state, y->state) || !locks_equal(x, y))
                        return false;
        }
        return true;
}

bool snapshot_threads_alike(const ThreadSnapshot *a, const ThreadSnapshot *b) {
        if (a->state != b->state || a->syscall.kind != b->syscall.kind || a->syscall.nr != b->syscall.nr ||
            a->n_kframes != b->n_kframes || a->n_frames != b->n_frames || a->method != b->method ||
            !!a->error != !!b->error || !runtimes_alike(a, b))
                return false;
        for (size_t i = 0; i < a->n_kframes; i++)
                if (!kframes_equal(&a->kframes[i], &b->kframes[i]))
                        return false;
        for (size_t i = 0; i < a->n_frames; i++)
                if (!frames_equal(&a->frames[i], &b->frames[i]))
                        return false;
        return true;
}

typedef struct Entry {
        uint64_t hash;
        size_t index;
} Entry;

static int entry_cmp(const void *a, const void *b) {
        const Entry *x = a, *y = b;

        if (x->hash != y->hash)
                return x->hash < y->hash ? -1 : 1;
        return x->index < y->index ? -1 : x->index > y->index;
}

static int group_cmp(const void *a, const void *b) {
        const ThreadGroup *x = a, *y = b;

        if (x->problem != y->problem)
                return x->problem ? -1 : 1;
        if (x->culprit != y->culprit)
                return x->culprit ? -1 : 1;
        if (x->stackless != y->stackless)
                return x->stackless ? 1 : -1;
        if (x->n != y->n)
                return x->n > y->n ? -1 : 1;
        return x->threads[0] < y->threads[0] ? -1 : x->threads[0] > y->threads[0];
}

static int index_cmp(const void *a, const void *b) {
        size_t x = *(const size_t *) a, y = *(const size_t *) b;

        return x < y ? -1 : x > y;
}

/* Whether thread T of S is in the deadlock its wait chain found. */
static bool in_deadlock(const Snapshot *s, const ThreadSnapshot *t) {
        const WaitChain *c = s->wait_chain;

        for (size_t i = 0; c && c->lock_pid == s->pid && i < c->n_lock_cycle; i++)
                if (c->lock_cycle[i] == t->tid)
                        return true;
        return false;
}

void thread_groups_free(ThreadGroup *g, size_t n) {
        for (size_t i = 0; g && i < n; i++)
                free(g[i].threads);
        free(g);
}

int snapshot_group_threads(const Snapshot *s, ThreadGroup **ret, size_t *ret_n) {
        _cleanup_free_ Entry *e = NULL;
        ThreadGroup *g = NULL;
        size_t n = 0;

        *ret = NULL;
        *ret_n = 0;
        if (s->n_threads == 0)
                return 0;
        e = calloc(s->n_threads, sizeof *e);
        g = calloc(s->n_threads, sizeof *g);
        if (!e || !g) {
                free(g);
                return -ENOMEM;
        }
        for (size_t i = 0; i < s->n_threads; i++)
                e[i] = (Entry) { .hash = thread_hash(&s->threads[i]), .index = i };
        qsort(e, s->n_threads, sizeof *e, entry_cmp);
        /* Within one hash, a thread joins the first group it is alike to (a collision makes two groups). */
        for (size_t i = 0; i < s->n_threads;) {
                size_t end = i, first = n;

                while (end < s->n_threads && e[end].hash == e[i].hash)
                        end++;
                for (size_t k = i; k < end; k++) {
                        const ThreadSnapshot *t = &s->threads[e[k].index];
                        ThreadGroup *into = NULL;

                        for (size_t m = first; m < n && !into; m++)
                                if (snapshot_threads_alike(&s->threads[g[m].threads[0]], t))
                                        into = &g[m];
                        if (!into) {
                                into = &g[n++];
                                into->threads = calloc(end - i, sizeof *into->threads);
                                if (!into->threads) {
                                        thread_groups_free(g, n);
                                        return -ENOMEM;
                                }
                                /* Alike threads have the same frames: the first says it for the group. */
                                into->stackless = t->n_frames == 0 && t->n_kframes == 0;
                        }
                        into->threads[into->n++] = e[k].index;
                        into->problem = into->problem || t->state == 'D' || in_deadlock(s, t);
                        into->culprit = into->culprit || (s->trigger && s->trigger->tid == t->tid);
                }
                i = end;
        }
        for (size_t i = 0; i < n; i++)
                qsort(g[i].threads, g[i].n, sizeof *g[i].threads, index_cmp);
        qsort(g, n, sizeof *g, group_cmp);
        *ret = g;
        *ret_n = n;
        return 0;
}

void thread_group_put_tids(const Snapshot *s, const ThreadGroup *g, const char *sep, size_t max_runs, FILE *f) {
        size_t shown = 0;

        for (size_t i = 0; i < g->n;) {
                pid_t first = s->threads[g->threads[i]].tid, last = first;
                size_t k = i + 1;

                while (k < g->n && s->threads[g->threads[k]].tid == last + 1)
                        last = s->threads[g->threads[k++]].tid;
                if (shown++ == max_runs) {
                        fprintf(f, "%s… (%zu more)", sep, g->n - i);
                        return;
                }
                fprintf(f, "%s%d", i ? sep : "", (int) first);
                if (last != first)
                        fprintf(f, "%s%d", last == first + 1 ? sep : "-", (int) last);
                i = k;
        }
}
