/* snapshot.c: the snapshot model's constructors, growth helpers and destructor. */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/macro.h"
#include "base/string-table.h"
#include "base/strv.h"
#include "model/snapshot.h"

static const char *const capture_method_table[_CAPTURE_METHOD_MAX] = {
        [CAPTURE_METHOD_AUTO] = "auto",
        [CAPTURE_METHOD_PASSIVE] = "passive",
        [CAPTURE_METHOD_PTRACE] = "ptrace",
        [CAPTURE_METHOD_NONE] = "none",
};
DEFINE_STRING_TABLE_LOOKUP(capture_method, CaptureMethod);

static const char *const frame_method_table[_FRAME_METHOD_MAX] = {
        [FRAME_METHOD_INITIAL] = "initial",
        [FRAME_METHOD_CFI] = "cfi",
        [FRAME_METHOD_FP] = "fp",
        [FRAME_METHOD_SCAN] = "scan",
        [FRAME_METHOD_PCLNTAB] = "pclntab",
};
DEFINE_STRING_TABLE_LOOKUP(frame_method, FrameMethod);

/* The thread dump's own words (HotSpot's javaVFrame::print_lock_info_on()), "owns" for an ownable synchronizer. */
static const char *const runtime_lock_table[_RUNTIME_LOCK_MAX] = {
        [RUNTIME_LOCK_LOCKED] = "locked",
        [RUNTIME_LOCK_WAITING_TO_LOCK] = "waiting to lock",
        [RUNTIME_LOCK_WAITING_ON] = "waiting on",
        [RUNTIME_LOCK_WAITING_TO_RELOCK] = "waiting to re-lock",
        [RUNTIME_LOCK_PARKING] = "parking to wait for",
        [RUNTIME_LOCK_OWNS] = "owns",
};
DEFINE_STRING_TABLE_LOOKUP(runtime_lock, RuntimeLockKind);

ProcessRuntime *process_runtime_free(ProcessRuntime *r) {
        if (r) {
                free(r->version);
                free(r->error);
                go_runtime_free(r->go);
                free(r);
        }
        return NULL;
}

/* Go's own names (runtime/traceback.go, gStatusStrings). */
static const char *const go_status_table[_GO_STATUS_MAX] = {
        [GO_STATUS_IDLE] = "idle",
        [GO_STATUS_RUNNABLE] = "runnable",
        [GO_STATUS_RUNNING] = "running",
        [GO_STATUS_SYSCALL] = "syscall",
        [GO_STATUS_WAITING] = "waiting",
        [GO_STATUS_MORIBUND] = "moribund",
        [GO_STATUS_DEAD] = "dead",
        [GO_STATUS_ENQUEUE] = "enqueue",
        [GO_STATUS_COPYSTACK] = "copystack",
        [GO_STATUS_PREEMPTED] = "preempted",
};
DEFINE_STRING_TABLE_LOOKUP(go_status, GoStatus);

static const char *const runtime_wait_table[_RUNTIME_WAIT_MAX] = {
        [RUNTIME_WAIT_NONE] = "none",
        [RUNTIME_WAIT_GIL] = "gil",
        [RUNTIME_WAIT_RLOCK] = "rlock",
        [RUNTIME_WAIT_LOCK] = "lock",
        [RUNTIME_WAIT_CONDITION] = "condition",
        [RUNTIME_WAIT_JOIN] = "join",
};
DEFINE_STRING_TABLE_LOOKUP(runtime_wait, RuntimeWaitKind);

static const char *const wait_kind_table[_WAIT_KIND_MAX] = {
        [WAIT_KIND_UNIX] = "unix-socket",
        [WAIT_KIND_PIPE] = "pipe",
        [WAIT_KIND_FIFO] = "fifo",
        [WAIT_KIND_FUSE] = "fuse",
        [WAIT_KIND_TCP] = "tcp",
        [WAIT_KIND_UDP] = "udp",
        [WAIT_KIND_FLOCK] = "flock",
        [WAIT_KIND_POSIX_LOCK] = "posix-lock",
        [WAIT_KIND_OFD_LOCK] = "ofd-lock",
        [WAIT_KIND_CHILD] = "child",
        [WAIT_KIND_TRACER] = "tracer",
        [WAIT_KIND_OTHER] = "other",
        [WAIT_KIND_MUTEX] = "mutex",
        [WAIT_KIND_CONDVAR] = "condvar",
        [WAIT_KIND_GIL] = "gil",
        [WAIT_KIND_MONITOR] = "monitor",
        [WAIT_KIND_JOIN] = "join",
        [WAIT_KIND_PTY] = "pty",
};
DEFINE_STRING_TABLE_LOOKUP(wait_kind, WaitKind);

Snapshot *snapshot_new(void) {
        return calloc(1, sizeof(Snapshot));
}

static void thread_done(ThreadSnapshot *t) {
        free(t->comm);
        free(t->wchan);
        free(t->unwind_end);
        free(t->error);
        free(t->stopped_because);
        for (size_t i = 0; i < t->n_runtimes; i++) {
                ThreadRuntime *r = &t->runtimes[i];
                free(r->name);
                free(r->state);
                free(r->note);
                for (size_t k = 0; k < r->n_locks; k++)
                        free(r->locks[k].klass);
                free(r->locks);
        }
        free(t->runtimes);
        for (size_t i = 0; i < t->n_kframes; i++) {
                free(t->kframes[i].function);
                free(t->kframes[i].module);
        }
        free(t->kframes);
        for (size_t i = 0; i < t->n_frames; i++)
                user_frame_done(&t->frames[i]);
        free(t->frames);
}

Snapshot *snapshot_free(Snapshot *s) {
        if (!s)
                return NULL;
        for (size_t i = 0; i < s->n_threads; i++)
                thread_done(&s->threads[i]);
        free(s->threads);
        for (size_t i = 0; i < s->n_modules; i++) {
                free(s->modules[i].path);
                free(s->modules[i].build_id);
                free(s->modules[i].missing_reason);
        }
        free(s->modules);
        free(s->hostname);
        free(s->comm);
        free(s->signature);
        free(s->title);
        free(s->proto_signature);
        free(s->exe);
        strv_free(s->cmdline);
        free(s->cgroup);
        free(s->unit);
        free(s->frozen_cgroup);
        free(s->unwinder);
        for (RuntimeKind k = 0; k < _RUNTIME_MAX; k++)
                process_runtime_free(s->runtime[k]);
        strv_free(s->errors);
        if (s->trigger) {
                free(s->trigger->rule);
                free(s->trigger->klass);
                free(s->trigger->wchan);
                free(s->trigger);
        }
        wait_chain_free(s->wait_chain);
        for (size_t i = 0; i < s->n_peers; i++)
                snapshot_free(s->peers[i]);
        free(s->peers);
        free(s);
        return NULL;
}

WaitChain *wait_chain_free(WaitChain *c) {
        if (!c)
                return NULL;
        for (size_t i = 0; i < c->n_edges; i++) {
                free(c->edges[i].syscall);
                free(c->edges[i].object);
                free(c->edges[i].reason);
        }
        free(c->edges);
        free(c->cycle);
        free(c->lock_cycle);
        strv_free(c->errors);
        free(c);
        return NULL;
}

GoRuntime *go_runtime_free(GoRuntime *g) {
        if (!g)
                return NULL;
        for (size_t i = 0; i < g->n_goroutines; i++) {
                free(g->goroutines[i].wait_reason);
                free(g->goroutines[i].error);
                free(g->goroutines[i].wait_kind);
                user_frame_done(&g->goroutines[i].created_by);
        }
        free(g->goroutines);
        for (size_t i = 0; i < g->n_stacks; i++) {
                for (size_t k = 0; k < g->stacks[i].n_frames; k++)
                        user_frame_done(&g->stacks[i].frames[k]);
                free(g->stacks[i].frames);
        }
        free(g->stacks);
        free(g->version);
        free(g->layout);
        free(g->error);
        free(g);
        return NULL;
}

void snapshot_freep(Snapshot **s) {
        snapshot_free(*s);
}

/* Capacity for N elements: 4, 8, 16, … so that appending is amortised O(1) without storing a capacity. */
static size_t capacity_for(size_t n) {
        size_t c = 4;
        while (c < n)
                c *= 2;
        return c;
}

/* Append one zeroed element to *ARRAY of *N elements of size ELEM. */
static void *grow_one(void **array, size_t *n, size_t elem) {
        char *p;

        if (*n == 0 || capacity_for(*n + 1) != capacity_for(*n)) {
                p = realloc(*array, capacity_for(*n + 1) * elem);
                if (!p)
                        return NULL;
                *array = p;
        }
        p = (char *) *array + *n * elem;
        memset(p, 0, elem);
        (*n)++;
        return p;
}

ThreadSnapshot *snapshot_add_thread(Snapshot *s) {
        return grow_one((void **) &s->threads, &s->n_threads, sizeof(ThreadSnapshot));
}

WaitEdge *wait_chain_add_edge(WaitChain *c) {
        WaitEdge *e = grow_one((void **) &c->edges, &c->n_edges, sizeof(WaitEdge));
        if (e)
                e->fd = e->peer_fd = -1;
        return e;
}

ModuleInfo *snapshot_add_module(Snapshot *s) {
        return grow_one((void **) &s->modules, &s->n_modules, sizeof(ModuleInfo));
}

Goroutine *go_runtime_add(GoRuntime *g) {
        Goroutine *r = grow_one((void **) &g->goroutines, &g->n_goroutines, sizeof(Goroutine));

        if (r) {
                r->wait_usec = -1;
                r->stack = -1;
                r->created_by.module = -1;
        }
        return r;
}

GoStack *go_runtime_add_stack(GoRuntime *g) {
        return grow_one((void **) &g->stacks, &g->n_stacks, sizeof(GoStack));
}

void user_frame_done(UserFrame *f) {
        free(f->function);
        free(f->linkage_name);
        free(f->file);
        *f = (UserFrame) {};
}

UserFrame *thread_add_frame(ThreadSnapshot *t) {
        UserFrame *f = grow_one((void **) &t->frames, &t->n_frames, sizeof(UserFrame));
        if (f)
                f->module = -1;
        return f;
}

ThreadRuntime *thread_runtime(const ThreadSnapshot *t, RuntimeKind k) {
        for (size_t i = 0; i < t->n_runtimes; i++)
                if (t->runtimes[i].kind == k)
                        return &t->runtimes[i];
        return NULL;
}

ThreadRuntime *thread_runtime_add(ThreadSnapshot *t, RuntimeKind k) {
        ThreadRuntime *r = thread_runtime(t, k);

        if (!r && (r = grow_one((void **) &t->runtimes, &t->n_runtimes, sizeof(ThreadRuntime))))
                r->kind = k;
        return r;
}

RuntimeLock *thread_runtime_add_lock(ThreadRuntime *r) {
        return grow_one((void **) &r->locks, &r->n_locks, sizeof(RuntimeLock));
}

ProcessRuntime *snapshot_add_runtime(Snapshot *s, RuntimeKind k) {
        assert(k >= 0 && k < _RUNTIME_MAX);
        if (!s->runtime[k] && (s->runtime[k] = calloc(1, sizeof(ProcessRuntime))))
                s->runtime[k]->kind = k;
        return s->runtime[k];
}

GoRuntime *snapshot_add_go(Snapshot *s) {
        ProcessRuntime *r = snapshot_add_runtime(s, RUNTIME_GO);

        if (r && !r->go)
                r->go = calloc(1, sizeof(GoRuntime));
        return r ? r->go : NULL;
}

KernelFrame *thread_add_kframe(ThreadSnapshot *t) {
        return grow_one((void **) &t->kframes, &t->n_kframes, sizeof(KernelFrame));
}

/* Format a message for the snapshot's error lists and mark the snapshot partial; NULL on OOM. */
static char *partial_message(Snapshot *s, const char *fmt, va_list ap) {
        char *msg;

        s->partial = true;
        return vasprintf(&msg, fmt, ap) < 0 ? NULL : msg;
}

/* Append a formatted message to the NULL-terminated vector *V. */
static int strv_push_vprintf(char ***v, const char *fmt, va_list ap) {
        char *msg;

        if (vasprintf(&msg, fmt, ap) < 0)
                return -ENOMEM;
        return strv_consume(v, msg);
}

size_t snapshot_fallback_stops(const Snapshot *s, bool peers) {
        size_t n = 0;

        if (s->method_requested == CAPTURE_METHOD_AUTO)
                for (size_t i = 0; i < s->n_threads; i++)
                        n += s->threads[i].method == CAPTURE_METHOD_PTRACE;
        for (size_t i = 0; peers && i < s->n_peers; i++)
                n += snapshot_fallback_stops(s->peers[i], false);
        return n;
}

int snapshot_add_error(Snapshot *s, const char *fmt, ...) {
        va_list ap;
        int r;

        s->partial = true;
        va_start(ap, fmt);
        r = strv_push_vprintf(&s->errors, fmt, ap);
        va_end(ap);
        return r;
}

int wait_chain_add_error(WaitChain *c, const char *fmt, ...) {
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = strv_push_vprintf(&c->errors, fmt, ap);
        va_end(ap);
        return r;
}

int thread_set_error(Snapshot *s, ThreadSnapshot *t, const char *fmt, ...) {
        va_list ap;
        char *msg;

        va_start(ap, fmt);
        msg = partial_message(s, fmt, ap);
        va_end(ap);
        if (!msg)
                return -ENOMEM;
        free(t->error);
        t->error = msg;
        return 0;
}

ThreadSnapshot *snapshot_find_thread(Snapshot *s, pid_t tid) {
        for (size_t i = 0; i < s->n_threads; i++)
                if (s->threads[i].tid == tid)
                        return &s->threads[i];
        return NULL;
}

const char *thread_state_to_string(char state) {
        switch (state) {
        case 'R': return "running";
        case 'S': return "sleeping";
        case 'D': return "disk sleep";
        case 'T': return "stopped";
        case 't': return "tracing stop";
        case 'Z': return "zombie";
        case 'X': return "dead";
        case 'I': return "idle";
        case 'P': return "parked";
        default: return "unknown";
        }
}

const char *snapshot_comm_of(const Snapshot *root, pid_t pid) {
        if (root->pid == pid)
                return root->comm;
        for (size_t i = 0; i < root->n_peers; i++)
                if (root->peers[i]->pid == pid)
                        return root->peers[i]->comm;
        return NULL;
}

const Snapshot *snapshot_process_of(const Snapshot *root, pid_t pid) {
        if (root->pid == pid)
                return root;
        for (size_t i = 0; i < root->n_peers; i++)
                if (root->peers[i]->pid == pid)
                        return root->peers[i];
        return NULL;
}

/* The thread of PID whose wait leads to NEXT: the first edge that says so. 0 when none does. */
static pid_t cycle_waiter(const WaitChain *c, pid_t pid, pid_t next) {
        for (size_t i = 0; i < c->n_edges; i++)
                if (c->edges[i].pid == pid && c->edges[i].peer_pid == next)
                        return c->edges[i].tid;
        return 0;
}

size_t snapshot_deadlock_threads(const Snapshot *root, pid_t *pids, pid_t *tids, size_t max) {
        const WaitChain *c = root->wait_chain;
        size_t n = 0;

        if (!c)
                return 0;
        /* Threads of one process waiting for each other's mutexes: the chain names them itself. */
        if (c->lock_pid > 0 && c->n_lock_cycle > 0) {
                for (size_t i = 0; i < c->n_lock_cycle && n < max; i++, n++) {
                        pids[n] = c->lock_pid;
                        tids[n] = c->lock_cycle[i];
                }
                return n;
        }
        if (!c->deadlock)
                return 0;
        for (size_t i = 0; i < c->n_cycle && n < max; i++) {
                pid_t tid = cycle_waiter(c, c->cycle[i], c->cycle[(i + 1) % c->n_cycle]);

                if (tid > 0) {
                        pids[n] = c->cycle[i];
                        tids[n++] = tid;
                }
        }
        return n;
}

static const char *basename_of(const char *path) {
        const char *slash = path ? strrchr(path, '/') : NULL;
        return slash ? slash + 1 : path;
}

char *snapshot_frame_name(const Snapshot *s, const UserFrame *u) {
        const ModuleInfo *m = snapshot_frame_module(s, u);
        char *name = NULL;
        int r;

        if (frame_kind_is_runtime(u->kind))
                /* By function and file, not line: a flame graph adds up a function's samples. */
                r = asprintf(&name, "%s (%s)", u->function ?: "?", basename_of(u->file) ?: "?");
        else if (u->function)
                return strdup(u->function);
        else if (m && m->path)
                r = asprintf(&name, "%s+0x%" PRIx64, basename_of(m->path), u->pc - m->bias);
        else
                r = asprintf(&name, "0x%" PRIx64, u->pc);
        return r < 0 ? NULL : name;
}
