/* snapshot-json.c: Snapshot <-> JSON through json-c; field names here are the wire contract (see the header). */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json-util.h"
#include "base/macro.h"
#include "base/parse-util.h"
#include "base/strv.h"
#include "render/signature.h"
#include "render/snapshot-json.h"
#include "render/thread-groups.h"

/* ---- writing ---- */

static json_object *jhex(uint64_t v) {
        char buf[24];
        snprintf(buf, sizeof buf, "0x%" PRIx64, v);
        return json_object_new_string(buf);
}

static json_object *jchar(char c) {
        char buf[2] = { c ?: '?', 0 };
        return json_object_new_string(buf);
}

/* json_object_object_add takes ownership; a NULL value is stored as JSON null. */
#define ADD(o, k, v) json_object_object_add((o), (k), (v))

/* ---- field tables: each key of an object written and read from one row ---- */

typedef enum JsonFieldType {
        JF_INT,                 /* int (pid_t) */
        JF_U64,                 /* uint64_t as a number */
        JF_HEX,                 /* uint64_t as "0x…" (addresses: JSON numbers lose bits past 2^53) */
        JF_STRING,              /* char *, null when NULL */
        JF_BOOL,
        JF_DOUBLE,
        JF_CHAR,                /* a one-letter string; '?' for none */
        JF_UINT,                /* unsigned as a number */
        JF_UINT_OR_NULL,        /* unsigned, null when 0 (line, column: unknown) */
        JF_PID_OR_NULL,         /* int (pid_t), null when 0 or less (none) */
        JF_INDEX,               /* int, null when negative (no module) */
        JF_UID,                 /* uid_t */
        JF_STRV,                /* char **, an array of strings; null when NULL */
} JsonFieldType;

typedef struct JsonField {
        const char *key;
        JsonFieldType type;
        size_t offset;
        bool omit_null;         /* JF_STRING, JF_UINT_OR_NULL: leave the key out rather than write null */
} JsonField;

#define FIELD_AT(base, f, type) ((type *) ((uint8_t *) (base) + (f)->offset))
#define FIELD_CAT(base, f, type) ((const __typeof__(type) *) ((const uint8_t *) (base) + (f)->offset))

static void fields_to_json(json_object *o, const JsonField *fields, size_t n, const void *base) {
        for (const JsonField *f = fields; f < fields + n; f++) {
                json_object *v = NULL;

                switch (f->type) {
                case JF_INT:
                        v = json_object_new_int(*FIELD_CAT(base, f, int));
                        break;
                case JF_U64:
                        v = json_object_new_uint64(*FIELD_CAT(base, f, uint64_t));
                        break;
                case JF_HEX:
                        v = jhex(*FIELD_CAT(base, f, uint64_t));
                        break;
                case JF_STRING:
                        if (!*FIELD_CAT(base, f, char *) && f->omit_null)
                                continue;
                        v = json_new_string_or_null(*FIELD_CAT(base, f, char *));
                        break;
                case JF_BOOL:
                        v = json_object_new_boolean(*FIELD_CAT(base, f, bool));
                        break;
                case JF_DOUBLE:
                        v = json_object_new_double(*FIELD_CAT(base, f, double));
                        break;
                case JF_CHAR:
                        v = jchar(*FIELD_CAT(base, f, char));
                        break;
                case JF_UINT:
                        v = json_object_new_uint64(*FIELD_CAT(base, f, unsigned));
                        break;
                case JF_UINT_OR_NULL:
                        if (!*FIELD_CAT(base, f, unsigned) && f->omit_null)
                                continue;
                        v = *FIELD_CAT(base, f, unsigned) ? json_object_new_int((int) *FIELD_CAT(base, f, unsigned))
                                                          : NULL;
                        break;
                case JF_PID_OR_NULL:
                        v = *FIELD_CAT(base, f, int) > 0 ? json_object_new_int(*FIELD_CAT(base, f, int)) : NULL;
                        break;
                case JF_INDEX:
                        v = *FIELD_CAT(base, f, int) >= 0 ? json_object_new_int(*FIELD_CAT(base, f, int)) : NULL;
                        break;
                case JF_UID:
                        v = json_object_new_int64(*FIELD_CAT(base, f, uid_t));
                        break;
                case JF_STRV:
                        v = json_new_strv(*FIELD_CAT(base, f, char **));
                        break;
                }
                ADD(o, f->key, v);
        }
}

static uint64_t get_u64(json_object *o, const char *key);
static int64_t get_i64(json_object *o, const char *key, int64_t def);
static char get_char(json_object *o, const char *key);

static int fields_from_json(json_object *o, const JsonField *fields, size_t n, void *base) {
        for (const JsonField *f = fields; f < fields + n; f++) {
                int64_t i;

                switch (f->type) {
                case JF_INT:
                        *FIELD_AT(base, f, int) = (int) get_i64(o, f->key, 0);
                        break;
                case JF_U64:
                case JF_HEX:
                        *FIELD_AT(base, f, uint64_t) = get_u64(o, f->key);
                        break;
                case JF_STRING: {
                        int r = json_dup_string(o, f->key, FIELD_AT(base, f, char *));
                        if (r < 0)
                                return r;
                        break;
                }
                case JF_BOOL:
                        *FIELD_AT(base, f, bool) = json_get_bool(o, f->key);
                        break;
                case JF_DOUBLE:
                        *FIELD_AT(base, f, double) = json_get_double(o, f->key);
                        break;
                case JF_CHAR:
                        *FIELD_AT(base, f, char) = get_char(o, f->key);
                        break;
                case JF_UINT:
                        *FIELD_AT(base, f, unsigned) = (unsigned) MIN(get_u64(o, f->key), (uint64_t) UINT_MAX);
                        break;
                case JF_PID_OR_NULL:
                        *FIELD_AT(base, f, int) = (int) get_i64(o, f->key, 0);
                        break;
                case JF_UINT_OR_NULL:
                        *FIELD_AT(base, f, unsigned) = (unsigned) get_i64(o, f->key, 0);
                        break;
                case JF_INDEX:
                        i = get_i64(o, f->key, -1);
                        *FIELD_AT(base, f, int) = i < -1 || i >= INT32_MAX ? -1 : (int) i;
                        break;
                case JF_UID:
                        *FIELD_AT(base, f, uid_t) = (uid_t) get_i64(o, f->key, 0);
                        break;
                case JF_STRV: {
                        int r = json_dup_strv(o, f->key, FIELD_AT(base, f, char **));
                        if (r < 0)
                                return r;
                        break;
                }
                }
        }
        return 0;
}

#define ROW(k, t, s, m, ...) { .key = (k), .type = (t), .offset = offsetof(s, m), __VA_ARGS__ }

static const JsonField process_fields[] = {
        ROW("pid", JF_INT, Snapshot, pid),
        ROW("ppid", JF_INT, Snapshot, ppid),
        ROW("uid", JF_UID, Snapshot, uid),
        ROW("state", JF_CHAR, Snapshot, state),
        ROW("kernel_thread", JF_BOOL, Snapshot, kernel_thread),
        ROW("comm", JF_STRING, Snapshot, comm),
        ROW("exe", JF_STRING, Snapshot, exe),
        ROW("cmdline", JF_STRV, Snapshot, cmdline),
        ROW("cgroup", JF_STRING, Snapshot, cgroup),
        ROW("unit", JF_STRING, Snapshot, unit),
};
static const JsonField module_fields[] = {
        ROW("path", JF_STRING, ModuleInfo, path),
        ROW("build_id", JF_STRING, ModuleInfo, build_id),
        ROW("start", JF_HEX, ModuleInfo, start),
        ROW("end", JF_HEX, ModuleInfo, end),
        ROW("bias", JF_HEX, ModuleInfo, bias),
        ROW("debuginfo", JF_BOOL, ModuleInfo, debuginfo),
        ROW("missing", JF_BOOL, ModuleInfo, missing),
        ROW("missing_reason", JF_STRING, ModuleInfo, missing_reason, .omit_null = true),
};
/* A thread's scalars before "syscall", and after it. */
static const JsonField thread_head_fields[] = {
        ROW("tid", JF_INT, ThreadSnapshot, tid),
        ROW("comm", JF_STRING, ThreadSnapshot, comm),
        ROW("state", JF_CHAR, ThreadSnapshot, state),
        ROW("tracer_pid", JF_INT, ThreadSnapshot, tracer_pid),
        ROW("utime", JF_U64, ThreadSnapshot, utime),
        ROW("stime", JF_U64, ThreadSnapshot, stime),
        ROW("voluntary_ctxt_switches", JF_U64, ThreadSnapshot, voluntary_ctxt_switches),
        ROW("nonvoluntary_ctxt_switches", JF_U64, ThreadSnapshot, nonvoluntary_ctxt_switches),
};
static const JsonField thread_tail_fields[] = {
        ROW("wchan", JF_STRING, ThreadSnapshot, wchan),
};
/* "capture": after its "method". */
static const JsonField capture_fields[] = {
        ROW("pause_us", JF_DOUBLE, ThreadSnapshot, pause_us),
        ROW("stack_bytes", JF_U64, ThreadSnapshot, stack_bytes),
        ROW("unwind_end", JF_STRING, ThreadSnapshot, unwind_end),
        ROW("truncated", JF_BOOL, ThreadSnapshot, truncated),
        ROW("error", JF_STRING, ThreadSnapshot, error),
        ROW("stopped_because", JF_STRING, ThreadSnapshot, stopped_because, .omit_null = true),
};
static const JsonField kframe_fields[] = {
        ROW("function", JF_STRING, KernelFrame, function),
        ROW("offset", JF_U64, KernelFrame, offset),
        ROW("size", JF_U64, KernelFrame, size),
        ROW("module", JF_STRING, KernelFrame, module, .omit_null = true), /* vmlinux: no key */
};
/* A user frame: before its "method". */
static const JsonField frame_fields[] = {
        ROW("pc", JF_HEX, UserFrame, pc),
        ROW("function", JF_STRING, UserFrame, function),
        ROW("linkage_name", JF_STRING, UserFrame, linkage_name, .omit_null = true), /* a C name: no key */
        ROW("offset", JF_U64, UserFrame, function_offset),
        ROW("module", JF_INDEX, UserFrame, module),
        ROW("file", JF_STRING, UserFrame, file),
        ROW("line", JF_UINT_OR_NULL, UserFrame, line),
        ROW("column", JF_UINT_OR_NULL, UserFrame, column),
        ROW("inlined", JF_BOOL, UserFrame, inlined),
        ROW("activation", JF_BOOL, UserFrame, activation),
};
/* A runtime's frame (kind "python"): no pc, module or method, just where the program is. */
static const JsonField runtime_frame_fields[] = {
        ROW("function", JF_STRING, UserFrame, function),
        ROW("file", JF_STRING, UserFrame, file),
        ROW("line", JF_UINT_OR_NULL, UserFrame, line),
        /* Added with JavaScript frames (V8 names a column): only where known. */
        ROW("column", JF_UINT_OR_NULL, UserFrame, column, .omit_null = true),
};

static const char *syscall_kind_str(ProcSyscallKind k) {
        return k == PROC_SYSCALL_BLOCKED ? "blocked" : k == PROC_SYSCALL_NONE ? "none" : "running";
}

/* ---- what the runtimes know: one shape, each runtime's keys from its row ---- */

static const JsonField runtime_lock_fields[] = {
        ROW("address", JF_HEX, RuntimeLock, address),
        ROW("class", JF_STRING, RuntimeLock, klass),
};

static const JsonField python_thread_fields[] = {
        ROW("thread_state", JF_BOOL, ThreadRuntime, known),
        ROW("holds_gil", JF_BOOL, ThreadRuntime, holds_global_lock),
        ROW("note", JF_STRING, ThreadRuntime, note),
};

static const JsonField python_process_fields[] = {
        ROW("version", JF_STRING, ProcessRuntime, version),
        ROW("gil_holder", JF_PID_OR_NULL, ProcessRuntime, lock_holder),
};

static const JsonField java_thread_fields[] = {
        ROW("name", JF_STRING, ThreadRuntime, name),
        ROW("state", JF_STRING, ThreadRuntime, state),
};

static const JsonField java_process_fields[] = {
        ROW("vm", JF_STRING, ProcessRuntime, version),
        ROW("error", JF_STRING, ProcessRuntime, error, .omit_null = true),
        ROW("pause_us", JF_U64, ProcessRuntime, pause_usec),
        ROW("deadlocks", JF_UINT, ProcessRuntime, deadlocks),
};

/* A runtime without a row of its own: every member of the shape, by the shape's names. */
static const JsonField generic_thread_fields[] = {
        ROW("known", JF_BOOL, ThreadRuntime, known),
        ROW("holds_global_lock", JF_BOOL, ThreadRuntime, holds_global_lock),
        ROW("name", JF_STRING, ThreadRuntime, name),
        ROW("state", JF_STRING, ThreadRuntime, state),
        ROW("note", JF_STRING, ThreadRuntime, note),
};

static const JsonField generic_process_fields[] = {
        ROW("version", JF_STRING, ProcessRuntime, version),
        ROW("error", JF_STRING, ProcessRuntime, error, .omit_null = true),
        ROW("pause_us", JF_U64, ProcessRuntime, pause_usec),
        ROW("lock_holder", JF_PID_OR_NULL, ProcessRuntime, lock_holder),
        ROW("deadlocks", JF_UINT, ProcessRuntime, deadlocks),
};

static void go_to_json(json_object *o, const ProcessRuntime *r);
static int go_from_json(json_object *j, json_object *go, Snapshot *s);

/* How a runtime is written and read: its object under its name in a thread ("python": {…}) and in the process, from
 * field tables over the one shape; a runtime whose process part is not one object (Go's goroutines) has its own
 * functions for it. */
typedef struct RuntimeJson {
        const JsonField *thread;        /* its keys in a thread's object; NULL: it has none */
        size_t n_thread;
        bool waits;                     /* "waits": what the thread waits on, when the runtime recorded a wait */
        bool locks;                     /* "locks": the locks it holds and waits for, always */
        const JsonField *process;       /* its keys in the process's object */
        size_t n_process;
        bool before_threads;            /* its process object comes before "threads" (Python's, as it always has) */
        void (*process_to_json)(json_object *o, const ProcessRuntime *r);       /* instead of PROCESS */
        int (*process_from_json)(json_object *j, json_object *member, Snapshot *s);
} RuntimeJson;

static const RuntimeJson runtime_json[_RUNTIME_MAX] = {
        [RUNTIME_PYTHON] = {
                .thread = python_thread_fields, .n_thread = ELEMENTSOF(python_thread_fields), .waits = true,
                .process = python_process_fields, .n_process = ELEMENTSOF(python_process_fields),
                .before_threads = true,
        },
        [RUNTIME_GO] = { .process_to_json = go_to_json, .process_from_json = go_from_json },
        [RUNTIME_JAVA] = {
                .thread = java_thread_fields, .n_thread = ELEMENTSOF(java_thread_fields), .locks = true,
                .process = java_process_fields, .n_process = ELEMENTSOF(java_process_fields),
        },
};

static const RuntimeJson generic_json = {
        .thread = generic_thread_fields, .n_thread = ELEMENTSOF(generic_thread_fields), .waits = true, .locks = true,
        .process = generic_process_fields, .n_process = ELEMENTSOF(generic_process_fields),
};

/* Runtime K's row, the generic one when it has none: a new runtime is written and read before it has keys of its
 * own. */
static const RuntimeJson *runtime_json_of(RuntimeKind k) {
        const RuntimeJson *rj = &runtime_json[k];
        return rj->thread || rj->process || rj->process_to_json ? rj : &generic_json;
}

/* Whether R says anything of its thread: a runtime that only looked is not written. */
static bool thread_runtime_says(const ThreadRuntime *r) {
        return r->known || r->holds_global_lock || r->name || r->state || r->note ||
               r->wait.kind != RUNTIME_WAIT_NONE || r->n_locks > 0;
}

static json_object *thread_runtime_to_json(const RuntimeJson *rj, const ThreadRuntime *r) {
        json_object *o = json_object_new_object();

        fields_to_json(o, rj->thread, rj->n_thread, r);
        if (rj->waits && r->wait.kind != RUNTIME_WAIT_NONE) {
                json_object *w = json_object_new_object();

                ADD(w, "kind", json_object_new_string(runtime_wait_to_string(r->wait.kind)));
                ADD(w, "owner", r->wait.owner > 0 ? json_object_new_int(r->wait.owner) : NULL);
                ADD(w, "object", r->wait.object ? jhex(r->wait.object) : NULL);
                ADD(o, "waits", w);
        }
        if (rj->locks) {
                json_object *locks = json_object_new_array();

                for (size_t i = 0; i < r->n_locks; i++) {
                        const RuntimeLock *l = &r->locks[i];
                        json_object *e = json_object_new_object();

                        ADD(e, "kind", json_object_new_string(runtime_lock_to_string(l->kind) ?: "?"));
                        fields_to_json(e, runtime_lock_fields, ELEMENTSOF(runtime_lock_fields), l);
                        if (l->owner > 0)
                                ADD(e, "owner", json_object_new_int(l->owner));
                        json_object_array_add(locks, e);
                }
                ADD(o, "locks", locks);
        }
        return o;
}

static int thread_runtime_from_json(const RuntimeJson *rj, json_object *o, ThreadRuntime *r) {
        json_object *a;
        int q;

        if ((q = fields_from_json(o, rj->thread, rj->n_thread, r)) < 0)
                return q;
        if (rj->waits && (a = json_member(o, "waits", json_type_object))) {
                json_object *k = json_member(a, "kind", json_type_string);
                RuntimeWaitKind w = k ? runtime_wait_from_string(json_object_get_string(k)) : RUNTIME_WAIT_NONE;

                r->wait = (RuntimeWait) { .kind = w < 0 ? RUNTIME_WAIT_NONE : w,
                                          .owner = (pid_t) get_i64(a, "owner", 0), .object = get_u64(a, "object") };
        }
        if (rj->locks && (a = json_member(o, "locks", json_type_array)))
                for (size_t i = 0; i < json_object_array_length(a); i++) {
                        json_object *e = json_object_array_get_idx(a, i), *k;
                        RuntimeLockKind kind;
                        RuntimeLock *l;

                        if (!json_object_is_type(e, json_type_object) || !(k = json_member(e, "kind", json_type_string)))
                                continue;
                        /* A kind from a later writer is left out, not guessed at. */
                        kind = runtime_lock_from_string(json_object_get_string(k));
                        if (kind < 0)
                                continue;
                        if (!(l = thread_runtime_add_lock(r)))
                                return -ENOMEM;
                        l->kind = kind;
                        l->owner = (pid_t) get_i64(e, "owner", 0);
                        if ((q = fields_from_json(e, runtime_lock_fields, ELEMENTSOF(runtime_lock_fields), l)) < 0)
                                return q;
                }
        return 0;
}

/* The process objects of S's runtimes, those that come BEFORE_THREADS or the others. */
static void process_runtimes_to_json(json_object *o, const Snapshot *s, bool before_threads) {
        for (RuntimeKind k = 0; k < _RUNTIME_MAX; k++) {
                const RuntimeJson *rj = runtime_json_of(k);
                const ProcessRuntime *r = snapshot_runtime(s, k);

                if (!r || rj->before_threads != before_threads)
                        continue;
                if (rj->process_to_json)
                        rj->process_to_json(o, r);
                else {
                        json_object *e = json_object_new_object();
                        fields_to_json(e, rj->process, rj->n_process, r);
                        ADD(o, runtime_kind_to_string(k), e);
                }
        }
}

static int process_runtimes_from_json(json_object *j, Snapshot *s) {
        for (RuntimeKind k = 0; k < _RUNTIME_MAX; k++) {
                const RuntimeJson *rj = runtime_json_of(k);
                json_object *a = json_member(j, runtime_kind_to_string(k), json_type_object);
                ProcessRuntime *r;
                int q;

                if (!a)
                        continue;
                if (rj->process_from_json) {
                        if ((q = rj->process_from_json(j, a, s)) < 0)
                                return q;
                        continue;
                }
                if (!(r = snapshot_add_runtime(s, k)))
                        return -ENOMEM;
                if ((q = fields_from_json(a, rj->process, rj->n_process, r)) < 0)
                        return q;
        }
        return 0;
}

static json_object *frame_to_json(const UserFrame *f) {
        json_object *k = json_object_new_object();

        if (frame_kind_is_runtime(f->kind)) {
                ADD(k, "kind", json_object_new_string(frame_kind_to_string(f->kind)));
                fields_to_json(k, runtime_frame_fields, ELEMENTSOF(runtime_frame_fields), f);
                return k;
        }
        /* A runtime's machine frame (a goroutine's) has the native keys, and its kind. */
        if (f->kind != FRAME_KIND_NATIVE)
                ADD(k, "kind", json_object_new_string(frame_kind_to_string(f->kind)));
        fields_to_json(k, frame_fields, ELEMENTSOF(frame_fields), f);
        ADD(k, "method", json_object_new_string(frame_method_to_string(f->method) ?: "cfi"));
        /* Added in stackwatch.snapshot/1 with Python frames: only where true. */
        if (f->interpreter)
                ADD(k, "interpreter", json_object_new_boolean(true));
        return k;
}

static int frame_from_json(json_object *e, UserFrame *f) {
        json_object *m = json_member(e, "kind", json_type_string);
        FrameMethod fm;
        int r;

        if (m && !streq(json_object_get_string(m), "native")) {
                FrameKind k = frame_kind_from_string(json_object_get_string(m));

                /* A kind from a later writer: its frame is kept as an unknown native frame. */
                f->kind = k < 0 ? FRAME_KIND_NATIVE : k;
                if (frame_kind_is_runtime(f->kind))
                        return fields_from_json(e, runtime_frame_fields, ELEMENTSOF(runtime_frame_fields), f);
        }
        if ((r = fields_from_json(e, frame_fields, ELEMENTSOF(frame_fields), f)) < 0)
                return r;
        f->interpreter = json_get_bool(e, "interpreter");
        m = json_member(e, "method", json_type_string);
        fm = m ? frame_method_from_string(json_object_get_string(m)) : FRAME_METHOD_CFI;
        f->method = fm < 0 ? FRAME_METHOD_CFI : fm;
        return 0;
}

static json_object *thread_to_json(const ThreadSnapshot *t) {
        json_object *o = json_object_new_object(), *sc, *cap, *ks, *fr;

        if (!o)
                return NULL;
        fields_to_json(o, thread_head_fields, ELEMENTSOF(thread_head_fields), t);

        sc = json_object_new_object();
        ADD(sc, "state", json_object_new_string(syscall_kind_str(t->syscall.kind)));
        if (t->syscall.kind == PROC_SYSCALL_BLOCKED) {
                json_object *args = json_object_new_array();
                ADD(sc, "nr", json_object_new_int64(t->syscall.nr));
                ADD(sc, "name", json_new_string_or_null(syscall_name(t->syscall.nr)));
                for (size_t i = 0; i < ELEMENTSOF(t->syscall.args); i++)
                        json_object_array_add(args, jhex(t->syscall.args[i]));
                ADD(sc, "args", args);
                if (t->syscall.restarted)
                        ADD(sc, "restarted", json_object_new_boolean(true));
        }
        if (t->syscall.kind != PROC_SYSCALL_RUNNING) {
                ADD(sc, "sp", jhex(t->syscall.sp));
                ADD(sc, "pc", jhex(t->syscall.pc));
        }
        ADD(o, "syscall", sc);
        fields_to_json(o, thread_tail_fields, ELEMENTSOF(thread_tail_fields), t);

        cap = json_object_new_object();
        ADD(cap, "method", json_object_new_string(capture_method_to_string(t->method) ?: "none"));
        fields_to_json(cap, capture_fields, ELEMENTSOF(capture_fields), t);
        ADD(o, "capture", cap);

        ks = json_object_new_array();
        for (size_t i = 0; i < t->n_kframes; i++) {
                json_object *k = json_object_new_object();
                fields_to_json(k, kframe_fields, ELEMENTSOF(kframe_fields), &t->kframes[i]);
                json_object_array_add(ks, k);
        }
        ADD(o, "kernel_stack", ks);

        fr = json_object_new_array();
        for (size_t i = 0; i < t->n_frames; i++)
                json_object_array_add(fr, frame_to_json(&t->frames[i]));
        ADD(o, "frames", fr);
        for (RuntimeKind k = 0; k < _RUNTIME_MAX; k++) {
                const ThreadRuntime *r = thread_runtime(t, k);

                if (r && runtime_json_of(k)->thread && thread_runtime_says(r))
                        ADD(o, runtime_kind_to_string(k), thread_runtime_to_json(runtime_json_of(k), r));
        }
        return o;
}

/* ---- goroutines ---- */

static const JsonField go_fields[] = {
        ROW("version", JF_STRING, GoRuntime, version),
        ROW("layout", JF_STRING, GoRuntime, layout, .omit_null = true),
        ROW("error", JF_STRING, GoRuntime, error, .omit_null = true),
        ROW("goroutines_total", JF_U64, GoRuntime, total),
        ROW("truncated", JF_BOOL, GoRuntime, truncated),
        ROW("read_us", JF_U64, GoRuntime, read_usec),
};

static json_object *goroutine_to_json(const Goroutine *g) {
        json_object *o = json_object_new_object();

        ADD(o, "goid", json_object_new_uint64(g->goid));
        ADD(o, "status", json_object_new_string(go_status_to_string(g->status) ?: "unknown"));
        if (g->wait_reason)
                ADD(o, "wait_reason", json_object_new_string(g->wait_reason));
        if (g->wait_usec >= 0)
                ADD(o, "wait_seconds", json_object_new_double((double) g->wait_usec / 1e6));
        if (g->tid > 0)
                ADD(o, "tid", json_object_new_int(g->tid));
        if (g->locked)
                ADD(o, "locked_to_thread", json_object_new_boolean(true));
        if (g->stack >= 0)
                ADD(o, "stack", json_object_new_int64(g->stack));
        if (g->error)
                ADD(o, "error", json_object_new_string(g->error));
        if (g->created_by.function) {
                json_object *c = json_object_new_object();

                ADD(c, "function", json_object_new_string(g->created_by.function));
                ADD(c, "file", json_new_string_or_null(g->created_by.file));
                ADD(c, "line", g->created_by.line ? json_object_new_int((int) g->created_by.line) : NULL);
                ADD(c, "pc", jhex(g->created_by.pc));
                ADD(c, "offset", json_object_new_uint64(g->created_by.function_offset));
                ADD(o, "created_by", c);
        }
        if (g->parent_goid)
                ADD(o, "parent_goid", json_object_new_uint64(g->parent_goid));
        if (g->wait_kind) {
                json_object *w = json_object_new_object();

                ADD(w, "kind", json_object_new_string(g->wait_kind));
                ADD(w, "address", jhex(g->wait_address));
                ADD(o, "wait_on", w);
        }
        return o;
}

/* A Go program's goroutines: "go" (the runtime), "goroutine_stacks" (distinct stacks, shared by index) and
 * "goroutines". */
static void go_to_json(json_object *o, const ProcessRuntime *r) {
        const GoRuntime *gr = r->go;
        json_object *go, *st, *gs;

        if (!gr)
                return;
        go = json_object_new_object();
        fields_to_json(go, go_fields, ELEMENTSOF(go_fields), gr);
        ADD(o, "go", go);
        if (gr->error)
                return;
        st = json_object_new_array();
        for (size_t i = 0; i < gr->n_stacks; i++) {
                json_object *fr = json_object_new_array();

                for (size_t k = 0; k < gr->stacks[i].n_frames; k++)
                        json_object_array_add(fr, frame_to_json(&gr->stacks[i].frames[k]));
                json_object_array_add(st, fr);
        }
        ADD(o, "goroutine_stacks", st);
        gs = json_object_new_array();
        for (size_t i = 0; i < gr->n_goroutines; i++)
                json_object_array_add(gs, goroutine_to_json(&gr->goroutines[i]));
        ADD(o, "goroutines", gs);
}

static int goroutine_from_json(json_object *e, GoRuntime *gr) {
        Goroutine *g = go_runtime_add(gr);
        json_object *c, *w, *m;
        int64_t stack;
        int r;

        if (!g)
                return -ENOMEM;
        g->goid = get_u64(e, "goid");
        m = json_member(e, "status", json_type_string);
        g->status = m ? go_status_from_string(json_object_get_string(m)) : _GO_STATUS_INVALID;
        if (g->status < 0)
                g->status = GO_STATUS_WAITING;
        g->wait_usec = json_member(e, "wait_seconds", json_type_double) || json_member(e, "wait_seconds", json_type_int)
                               ? (int64_t) (json_get_double(e, "wait_seconds") * 1e6)
                               : -1;
        g->tid = (pid_t) get_i64(e, "tid", 0);
        g->locked = json_get_bool(e, "locked_to_thread");
        stack = get_i64(e, "stack", -1);
        g->stack = stack >= 0 && (uint64_t) stack < gr->n_stacks ? (ssize_t) stack : -1;
        g->parent_goid = get_u64(e, "parent_goid");
        if ((r = json_dup_string(e, "wait_reason", &g->wait_reason)) < 0 ||
            (r = json_dup_string(e, "error", &g->error)) < 0)
                return r;
        if ((c = json_member(e, "created_by", json_type_object))) {
                if ((r = json_dup_string(c, "function", &g->created_by.function)) < 0 ||
                    (r = json_dup_string(c, "file", &g->created_by.file)) < 0)
                        return r;
                g->created_by.line = (unsigned) get_i64(c, "line", 0);
                g->created_by.pc = get_u64(c, "pc");
                g->created_by.function_offset = get_u64(c, "offset");
                g->created_by.kind = FRAME_KIND_GO;
        }
        if ((w = json_member(e, "wait_on", json_type_object))) {
                if ((r = json_dup_string(w, "kind", &g->wait_kind)) < 0)
                        return r;
                g->wait_address = get_u64(w, "address");
        }
        return 0;
}

static int go_from_json(json_object *j, json_object *go, Snapshot *s) {
        GoRuntime *gr;
        json_object *a;
        int r;

        gr = snapshot_add_go(s);
        if (!gr)
                return -ENOMEM;
        if ((r = fields_from_json(go, go_fields, ELEMENTSOF(go_fields), gr)) < 0)
                return r;
        if ((a = json_member(j, "goroutine_stacks", json_type_array)))
                for (size_t i = 0; i < json_object_array_length(a); i++) {
                        json_object *fr = json_object_array_get_idx(a, i);
                        GoStack *st = go_runtime_add_stack(gr);
                        size_t n;

                        if (!st)
                                return -ENOMEM;
                        if (!json_object_is_type(fr, json_type_array))
                                continue;
                        n = json_object_array_length(fr);
                        st->frames = calloc(n ?: 1, sizeof *st->frames);
                        if (!st->frames)
                                return -ENOMEM;
                        for (size_t k = 0; k < n; k++) {
                                st->frames[k].module = -1;
                                st->n_frames = k + 1;
                                if ((r = frame_from_json(json_object_array_get_idx(fr, k), &st->frames[k])) < 0)
                                        return r;
                        }
                }
        if ((a = json_member(j, "goroutines", json_type_array)))
                for (size_t i = 0; i < json_object_array_length(a); i++) {
                        json_object *e = json_object_array_get_idx(a, i);

                        if (json_object_is_type(e, json_type_object) && (r = goroutine_from_json(e, gr)) < 0)
                                return r;
                }
        return 0;
}

static json_object *pid_comm(const Snapshot *root, pid_t pid, pid_t tid) {
        json_object *o;

        if (pid <= 0)
                return NULL;
        o = json_object_new_object();
        ADD(o, "pid", json_object_new_int(pid));
        ADD(o, "tid", tid > 0 ? json_object_new_int(tid) : NULL);
        ADD(o, "comm", json_new_string_or_null(snapshot_comm_of(root, pid)));
        return o;
}

static json_object *wait_chain_to_json(const Snapshot *root, const WaitChain *c) {
        json_object *o = json_object_new_object(), *edges = json_object_new_array(), *cycle = json_object_new_array();

        ADD(o, "tid", c->tid > 0 ? json_object_new_int(c->tid) : NULL);
        ADD(o, "depth", json_object_new_int((int) c->depth));
        ADD(o, "deadlock", json_object_new_boolean(c->deadlock || c->n_lock_cycle > 0));
        for (size_t i = 0; i < c->n_cycle; i++)
                json_object_array_add(cycle, json_object_new_int(c->cycle[i]));
        ADD(o, "cycle", cycle);
        if (c->lock_pid > 0 && c->n_lock_cycle > 0) {
                json_object *l = json_object_new_object(), *threads = json_object_new_array();

                ADD(l, "pid", json_object_new_int(c->lock_pid));
                for (size_t i = 0; i < c->n_lock_cycle; i++)
                        json_object_array_add(threads, json_object_new_int(c->lock_cycle[i]));
                ADD(l, "threads", threads);
                ADD(o, "lock_cycle", l);
        } else
                ADD(o, "lock_cycle", NULL);
        ADD(o, "truncated", json_object_new_boolean(c->truncated));
        ADD(o, "errors", c->errors ? json_new_strv(c->errors) : json_object_new_array());
        ADD(o, "resolve_us", json_object_new_uint64(c->resolve_usec));
        for (size_t i = 0; i < c->n_edges; i++) {
                const WaitEdge *e = &c->edges[i];
                json_object *j = json_object_new_object();

                ADD(j, "from", pid_comm(root, e->pid, e->tid));
                ADD(j, "syscall", json_new_string_or_null(e->syscall));
                ADD(j, "kind", json_object_new_string(wait_kind_to_string(e->kind) ?: "other"));
                ADD(j, "fd", e->fd >= 0 ? json_object_new_int(e->fd) : NULL);
                ADD(j, "inode", e->inode ? json_object_new_uint64(e->inode) : NULL);
                ADD(j, "object", json_new_string_or_null(e->object));
                ADD(j, "address", e->address ? jhex(e->address) : NULL);
                ADD(j, "multiplexed", json_object_new_boolean(e->multiplexed));
                ADD(j, "to", pid_comm(root, e->peer_pid, e->peer_tid));
                ADD(j, "peer_fd", e->peer_fd >= 0 ? json_object_new_int(e->peer_fd) : NULL);
                ADD(j, "reason", json_new_string_or_null(e->reason));
                json_object_array_add(edges, j);
        }
        ADD(o, "edges", edges);
        return o;
}

/* The threads grouped as the text shows them (thread-groups.h): derived, so written and never read back. */
static void groups_to_json(json_object *o, const Snapshot *s) {
        ThreadGroup *g = NULL;
        json_object *a;
        size_t n = 0;

        if (snapshot_group_threads(s, &g, &n) < 0)
                return;
        a = json_object_new_array();
        for (size_t i = 0; i < n; i++) {
                json_object *e = json_object_new_object(), *tids = json_object_new_array();

                for (size_t k = 0; k < g[i].n; k++)
                        json_object_array_add(tids, json_object_new_int(s->threads[g[i].threads[k]].tid));
                ADD(e, "count", json_object_new_uint64(g[i].n));
                ADD(e, "tids", tids);
                ADD(e, "problem", json_object_new_boolean(g[i].problem));
                ADD(e, "culprit", json_object_new_boolean(g[i].culprit));
                json_object_array_add(a, e);
        }
        thread_groups_free(g, n);
        ADD(o, "thread_groups", a);
}

json_object *snapshot_to_json(const Snapshot *s) {
        json_object *o = json_object_new_object(), *p, *cap, *th, *mods;

        if (!o)
                return NULL;
        ADD(o, "schema", json_object_new_string(SNAPSHOT_SCHEMA));
        ADD(o, "timestamp_usec", json_object_new_uint64(s->timestamp_usec));
        ADD(o, "host", json_new_string_or_null(s->hostname));

        p = json_object_new_object();
        fields_to_json(p, process_fields, ELEMENTSOF(process_fields), s);
        if (s->frozen_cgroup) {
                json_object *fr = json_object_new_object();

                ADD(fr, "cgroup", json_object_new_string(s->frozen_cgroup));
                ADD(fr, "version", json_object_new_int((int) s->frozen_version));
                ADD(p, "frozen", fr);
        }
        ADD(o, "process", p);

        cap = json_object_new_object();
        ADD(cap, "method", json_object_new_string(capture_method_to_string(s->method_requested) ?: "auto"));
        ADD(cap, "unwinder", json_new_string_or_null(s->unwinder));
        ADD(cap, "duration_us", json_object_new_uint64(s->duration_usec));
        ADD(cap, "max_pause_us", json_object_new_double(s->max_pause_us));
        ADD(cap, "fallback_stops", json_object_new_uint64(snapshot_fallback_stops(s, false)));
        ADD(cap, "symbolize_us", json_object_new_uint64(s->symbolize_usec));
        ADD(cap, "threads_total", json_object_new_uint64(s->threads_total));
        ADD(cap, "truncated", json_object_new_boolean(s->truncated));
        ADD(cap, "partial", json_object_new_boolean(s->partial));
        ADD(cap, "errors", s->errors ? json_new_strv(s->errors) : json_object_new_array());
        ADD(o, "capture", cap);

        process_runtimes_to_json(o, s, true);

        th = json_object_new_array();
        for (size_t i = 0; i < s->n_threads; i++)
                json_object_array_add(th, thread_to_json(&s->threads[i]));
        ADD(o, "threads", th);
        groups_to_json(o, s);
        process_runtimes_to_json(o, s, false);

        if (s->trigger) {
                const SnapshotTrigger *t = s->trigger;
                json_object *tr = json_object_new_object();
                ADD(tr, "rule", json_new_string_or_null(t->rule));
                ADD(tr, "class", json_new_string_or_null(t->klass));
                ADD(tr, "tid", json_object_new_int(t->tid));
                ADD(tr, "state", jchar(t->state));
                ADD(tr, "duration_us", json_object_new_uint64(t->duration_usec));
                ADD(tr, "cpu_percent", json_object_new_double(t->cpu_percent));
                ADD(tr, "syscall", t->syscall_nr >= 0 ? json_new_string_or_null(syscall_name(t->syscall_nr)) : NULL);
                ADD(tr, "syscall_nr", t->syscall_nr >= 0 ? json_object_new_int64(t->syscall_nr) : NULL);
                ADD(tr, "wchan", json_new_string_or_null(t->wchan));
                ADD(tr, "syscalls_per_sec", json_object_new_double(t->syscalls_per_sec));
                ADD(tr, "bytes_per_sec", json_object_new_double(t->bytes_per_sec));
                if (t->probe_window_usec > 0) {
                        json_object *pr = json_object_new_object();
                        bool have = t->probe_nr >= 0;
                        ADD(pr, "window_us", json_object_new_uint64(t->probe_window_usec));
                        ADD(pr, "syscalls", json_object_new_int64(t->probe_syscalls));
                        ADD(pr, "syscall", have ? json_new_string_or_null(syscall_name(t->probe_nr)) : NULL);
                        ADD(pr, "syscall_nr", have ? json_object_new_int64(t->probe_nr) : NULL);
                        ADD(pr, "result", have ? json_object_new_int64(t->probe_result) : NULL);
                        ADD(pr, "error", have && t->probe_result < 0 && t->probe_result > -4096
                                                 ? json_new_string_or_null(strerrorname_np((int) -t->probe_result))
                                                 : NULL);
                        ADD(pr, "count", json_object_new_int64(t->probe_count));
                        ADD(tr, "probe", pr);
                } else
                        ADD(tr, "probe", NULL);
                ADD(o, "trigger", tr);
        } else
                ADD(o, "trigger", NULL);
        /* A rule's snapshot: the problem it shows (signature.h). */
        if (s->signature) {
                ADD(o, "signature", json_object_new_string(s->signature));
                ADD(o, "title", json_new_string_or_null(s->title));
                ADD(o, "proto_signature", json_new_string_or_null(s->proto_signature));
        }

        mods = json_object_new_array();
        for (size_t i = 0; i < s->n_modules; i++) {
                const ModuleInfo *m = &s->modules[i];
                json_object *k = json_object_new_object();
                fields_to_json(k, module_fields, ELEMENTSOF(module_fields), m);
                json_object_array_add(mods, k);
        }
        ADD(o, "modules", mods);

        if (s->wait_chain) {
                json_object *peers = json_object_new_array();
                ADD(o, "wait_chain", wait_chain_to_json(s, s->wait_chain));
                for (size_t i = 0; i < s->n_peers; i++)
                        json_object_array_add(peers, snapshot_to_json(s->peers[i]));
                ADD(o, "peers", peers);
        }
        return o;
}

/* ---- reading ---- */

static uint64_t get_u64(json_object *o, const char *key) {
        json_object *v;
        uint64_t u = 0;

        if ((v = json_member(o, key, json_type_string)))
                (void) safe_atou64_base(json_object_get_string(v), 0, &u);
        else if ((v = json_member(o, key, json_type_int)))
                u = json_object_get_uint64(v);
        return u;
}

/* A stored syscall number as this machine numbers it. The name stored beside it decides: a snapshot taken on
 * another architecture numbers its calls differently (aarch64's read is x86-64's 63), and a call this one does not
 * have reads as unknown (-1) rather than as whatever this one has under that number. */
static int64_t get_syscall_nr(json_object *o, const char *nr_key, const char *name_key) {
        int64_t nr = get_i64(o, nr_key, -1);
        const char *name = json_get_string(o, name_key);

        if (nr < 0 || !name || streq_ptr(syscall_name(nr), name))
                return nr;
        return syscall_nr_from_name(name);
}

static int64_t get_i64(json_object *o, const char *key, int64_t def) {
        json_object *v = json_member(o, key, json_type_int);
        return v ? json_object_get_int64(v) : def;
}

static char get_char(json_object *o, const char *key) {
        json_object *v = json_member(o, key, json_type_string);
        return v && json_object_get_string_len(v) == 1 ? json_object_get_string(v)[0] : '?';
}

static int thread_from_json(json_object *o, Snapshot *s) {
        ThreadSnapshot *t = snapshot_add_thread(s);
        json_object *sc, *cap, *a;
        const char *kind;
        int r;

        if (!t)
                return -ENOMEM;
        if ((r = fields_from_json(o, thread_head_fields, ELEMENTSOF(thread_head_fields), t)) < 0 ||
            (r = fields_from_json(o, thread_tail_fields, ELEMENTSOF(thread_tail_fields), t)) < 0)
                return r;

        sc = json_member(o, "syscall", json_type_object);
        kind = sc && json_member(sc, "state", json_type_string) ? json_object_get_string(json_member(sc, "state", json_type_string))
                                                        : "running";
        t->syscall.kind = streq(kind, "blocked") ? PROC_SYSCALL_BLOCKED
                        : streq(kind, "none")    ? PROC_SYSCALL_NONE
                                                 : PROC_SYSCALL_RUNNING;
        t->syscall.nr = get_syscall_nr(sc, "nr", "name");
        t->syscall.restarted = json_get_bool(sc, "restarted");
        t->syscall.sp = get_u64(sc, "sp");
        t->syscall.pc = get_u64(sc, "pc");
        if ((a = json_member(sc, "args", json_type_array)))
                for (size_t i = 0; i < ELEMENTSOF(t->syscall.args) && i < json_object_array_length(a); i++) {
                        json_object *e = json_object_array_get_idx(a, i);
                        if (json_object_is_type(e, json_type_string))
                                (void) safe_atou64_base(json_object_get_string(e), 0, &t->syscall.args[i]);
                }

        cap = json_member(o, "capture", json_type_object);
        if (cap) {
                json_object *m = json_member(cap, "method", json_type_string);
                CaptureMethod cm = m ? capture_method_from_string(json_object_get_string(m)) : CAPTURE_METHOD_NONE;
                t->method = cm < 0 ? CAPTURE_METHOD_NONE : cm;
                if ((r = fields_from_json(cap, capture_fields, ELEMENTSOF(capture_fields), t)) < 0)
                        return r;
        }

        if ((a = json_member(o, "kernel_stack", json_type_array)))
                for (size_t i = 0; i < json_object_array_length(a); i++) {
                        json_object *e = json_object_array_get_idx(a, i);
                        KernelFrame *k = thread_add_kframe(t);
                        if (!k)
                                return -ENOMEM;
                        if ((r = fields_from_json(e, kframe_fields, ELEMENTSOF(kframe_fields), k)) < 0)
                                return r;
                }
        if ((a = json_member(o, "frames", json_type_array)))
                for (size_t i = 0; i < json_object_array_length(a); i++) {
                        UserFrame *f = thread_add_frame(t);

                        if (!f)
                                return -ENOMEM;
                        if ((r = frame_from_json(json_object_array_get_idx(a, i), f)) < 0)
                                return r;
                }
        for (RuntimeKind k = 0; k < _RUNTIME_MAX; k++) {
                ThreadRuntime *rt;

                if (!runtime_json_of(k)->thread || !(a = json_member(o, runtime_kind_to_string(k), json_type_object)))
                        continue;
                if (!(rt = thread_runtime_add(t, k)))
                        return -ENOMEM;
                if ((r = thread_runtime_from_json(runtime_json_of(k), a, rt)) < 0)
                        return r;
        }
        return 0;
}

/* A JSON array of pids or tids (absent or empty: *RET stays NULL). */
static int get_pids(json_object *a, pid_t **ret, size_t *ret_n) {
        size_t n = a ? json_object_array_length(a) : 0;

        if (n == 0)
                return 0;
        *ret = calloc(n, sizeof **ret);
        if (!*ret)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++)
                (*ret)[(*ret_n)++] = (pid_t) json_object_get_int(json_object_array_get_idx(a, i));
        return 0;
}

static int wait_chain_from_json(json_object *o, WaitChain **ret) {
        _cleanup_(wait_chain_freep) WaitChain *c = calloc(1, sizeof *c);
        json_object *a, *l;
        int r;

        if (!c)
                return -ENOMEM;
        c->tid = (pid_t) get_i64(o, "tid", 0);
        c->depth = (unsigned) get_i64(o, "depth", 0);
        c->deadlock = json_get_bool(o, "deadlock");
        c->truncated = json_get_bool(o, "truncated");
        c->resolve_usec = get_u64(o, "resolve_us");
        if ((r = json_dup_strv(o, "errors", &c->errors)) < 0)
                return r;
        if (c->errors && !c->errors[0])
                c->errors = strv_free(c->errors);
        if ((r = get_pids(json_member(o, "cycle", json_type_array), &c->cycle, &c->n_cycle)) < 0)
                return r;
        if ((l = json_member(o, "lock_cycle", json_type_object))) {
                if ((r = get_pids(json_member(l, "threads", json_type_array), &c->lock_cycle, &c->n_lock_cycle)) < 0)
                        return r;
                if (c->n_lock_cycle > 0)
                        c->lock_pid = (pid_t) get_i64(l, "pid", 0);
        }
        if ((a = json_member(o, "edges", json_type_array)))
                for (size_t i = 0; i < json_object_array_length(a); i++) {
                        json_object *e = json_object_array_get_idx(a, i), *from, *to, *k;
                        WaitEdge *w;

                        if (!json_object_is_type(e, json_type_object))
                                continue;
                        w = wait_chain_add_edge(c);
                        if (!w)
                                return -ENOMEM;
                        if ((from = json_member(e, "from", json_type_object))) {
                                w->pid = (pid_t) get_i64(from, "pid", 0);
                                w->tid = (pid_t) get_i64(from, "tid", 0);
                        }
                        if ((to = json_member(e, "to", json_type_object))) {
                                w->peer_pid = (pid_t) get_i64(to, "pid", 0);
                                w->peer_tid = (pid_t) get_i64(to, "tid", 0);
                        }
                        k = json_member(e, "kind", json_type_string);
                        w->kind = k ? wait_kind_from_string(json_object_get_string(k)) : WAIT_KIND_OTHER;
                        if (w->kind < 0)
                                w->kind = WAIT_KIND_OTHER;
                        w->fd = (int) get_i64(e, "fd", -1);
                        w->peer_fd = (int) get_i64(e, "peer_fd", -1);
                        w->inode = get_u64(e, "inode");
                        w->address = get_u64(e, "address");
                        w->multiplexed = json_get_bool(e, "multiplexed");
                        if ((r = json_dup_string(e, "syscall", &w->syscall)) < 0 || (r = json_dup_string(e, "object", &w->object)) < 0 ||
                            (r = json_dup_string(e, "reason", &w->reason)) < 0)
                                return r;
                }
        *ret = TAKE_PTR(c);
        return 0;
}

static int snapshot_parse(json_object *j, bool top, Snapshot **ret, const char **ret_error);

int snapshot_from_json(json_object *j, Snapshot **ret, const char **ret_error) {
        return snapshot_parse(j, true, ret, ret_error);
}

/* TOP: the document itself, whose peers are parsed too (a peer's own peers are not: the schema has none). */
static int snapshot_parse(json_object *j, bool top, Snapshot **ret, const char **ret_error) {
        _cleanup_snapshot_free_ Snapshot *s = NULL;
        json_object *schema, *p, *cap, *a;
        const char *dummy;
        int r;

        if (!json_object_is_type(j, json_type_object)) {
                if (ret_error)
                        *ret_error = "not a JSON object";
                return -EINVAL;
        }
        if (!ret_error)
                ret_error = &dummy;
        schema = json_member(j, "schema", json_type_string);
        if (!schema) {
                *ret_error = "not a stackwatch snapshot (no \"schema\")";
                return -EINVAL;
        }
        if (!streq(json_object_get_string(schema), SNAPSHOT_SCHEMA)) {
                *ret_error = "unsupported snapshot schema";
                return -EINVAL;
        }
        p = json_member(j, "process", json_type_object);
        if (!p || !json_member(p, "pid", json_type_int)) {
                *ret_error = "snapshot has no process.pid";
                return -EINVAL;
        }
        s = snapshot_new();
        if (!s)
                return -ENOMEM;
        s->timestamp_usec = get_u64(j, "timestamp_usec");
        if ((r = json_dup_string(j, "host", &s->hostname)) < 0)
                return r;
        if ((r = fields_from_json(p, process_fields, ELEMENTSOF(process_fields), s)) < 0)
                return r;
        {
                json_object *fr = json_member(p, "frozen", json_type_object), *v;

                if (fr && (r = json_dup_string(fr, "cgroup", &s->frozen_cgroup)) < 0)
                        return r;
                if (fr && (v = json_member(fr, "version", json_type_int)))
                        s->frozen_version = (unsigned) MAX(json_object_get_int(v), 0);
        }

        cap = json_member(j, "capture", json_type_object);
        if (cap) {
                json_object *m = json_member(cap, "method", json_type_string);
                CaptureMethod cm = m ? capture_method_from_string(json_object_get_string(m)) : CAPTURE_METHOD_AUTO;
                s->method_requested = cm < 0 ? CAPTURE_METHOD_AUTO : cm;
                s->duration_usec = get_u64(cap, "duration_us");
                s->max_pause_us = json_get_double(cap, "max_pause_us");
                s->symbolize_usec = get_u64(cap, "symbolize_us");
                s->threads_total = get_u64(cap, "threads_total");
                s->truncated = json_get_bool(cap, "truncated");
                s->partial = json_get_bool(cap, "partial");
                if ((r = json_dup_string(cap, "unwinder", &s->unwinder)) < 0 || (r = json_dup_strv(cap, "errors", &s->errors)) < 0)
                        return r;
                if (s->errors && !s->errors[0])
                        s->errors = strv_free(s->errors);
        }

        if ((r = process_runtimes_from_json(j, s)) < 0)
                return r;
        if ((a = json_member(j, "threads", json_type_array)))
                for (size_t i = 0; i < json_object_array_length(a); i++) {
                        json_object *e = json_object_array_get_idx(a, i);
                        if (!json_object_is_type(e, json_type_object))
                                continue;
                        if ((r = thread_from_json(e, s)) < 0)
                                return r;
                }
        if ((a = json_member(j, "modules", json_type_array)))
                for (size_t i = 0; i < json_object_array_length(a); i++) {
                        json_object *e = json_object_array_get_idx(a, i);
                        ModuleInfo *m = snapshot_add_module(s);
                        if (!m)
                                return -ENOMEM;
                        if ((r = fields_from_json(e, module_fields, ELEMENTSOF(module_fields), m)) < 0)
                                return r;
                }
        json_object *tr = json_member(j, "trigger", json_type_object);
        if (tr) {
                SnapshotTrigger *t = calloc(1, sizeof *t);
                if (!t)
                        return -ENOMEM;
                s->trigger = t;
                t->tid = (pid_t) get_i64(tr, "tid", 0);
                t->state = get_char(tr, "state");
                t->duration_usec = get_u64(tr, "duration_us");
                t->cpu_percent = json_get_double(tr, "cpu_percent");
                t->syscall_nr = get_syscall_nr(tr, "syscall_nr", "syscall");
                t->syscalls_per_sec = json_get_double(tr, "syscalls_per_sec");
                t->bytes_per_sec = json_get_double(tr, "bytes_per_sec");
                t->probe_nr = -1;
                json_object *pr = json_member(tr, "probe", json_type_object);
                if (pr) {
                        t->probe_window_usec = get_u64(pr, "window_us");
                        t->probe_syscalls = (unsigned) get_i64(pr, "syscalls", 0);
                        t->probe_nr = get_syscall_nr(pr, "syscall_nr", "syscall");
                        t->probe_result = get_i64(pr, "result", 0);
                        t->probe_count = (unsigned) get_i64(pr, "count", 0);
                }
                if ((r = json_dup_string(tr, "rule", &t->rule)) < 0 || (r = json_dup_string(tr, "class", &t->klass)) < 0 ||
                    (r = json_dup_string(tr, "wchan", &t->wchan)) < 0)
                        return r;
        }
        json_object *wc = top ? json_member(j, "wait_chain", json_type_object) : NULL;
        if (wc) {
                if ((r = wait_chain_from_json(wc, &s->wait_chain)) < 0)
                        return r;
                if ((a = json_member(j, "peers", json_type_array)) && json_object_array_length(a) > 0) {
                        s->peers = calloc(json_object_array_length(a), sizeof *s->peers);
                        if (!s->peers)
                                return -ENOMEM;
                        for (size_t i = 0; i < json_object_array_length(a); i++) {
                                Snapshot *peer = NULL;
                                r = snapshot_parse(json_object_array_get_idx(a, i), false, &peer, ret_error);
                                if (r == -ENOMEM)
                                        return r;
                                if (r >= 0)
                                        s->peers[s->n_peers++] = peer;
                        }
                }
        }
        /* Frames may only point at modules the document has. */
        for (size_t i = 0; i < s->n_threads; i++)
                for (size_t k = 0; k < s->threads[i].n_frames; k++)
                        if (s->threads[i].frames[k].module >= (int) s->n_modules)
                                s->threads[i].frames[k].module = -1;
        for (size_t i = 0; snapshot_go(s) && i < snapshot_go(s)->n_stacks; i++)
                for (size_t k = 0; k < snapshot_go(s)->stacks[i].n_frames; k++)
                        if (snapshot_go(s)->stacks[i].frames[k].module >= (int) s->n_modules)
                                snapshot_go(s)->stacks[i].frames[k].module = -1;
        /* The problem it shows: as it was written, or (a snapshot written before signatures) computed now. */
        if (top && s->trigger) {
                json_object *sig = json_member(j, "signature", json_type_string);

                if (sig && signature_is_valid(json_object_get_string(sig))) {
                        if (!(s->signature = strdup(json_object_get_string(sig))) ||
                            (r = json_dup_string(j, "title", &s->title)) < 0 ||
                            (r = json_dup_string(j, "proto_signature", &s->proto_signature)) < 0)
                                return -ENOMEM;
                } else if ((r = snapshot_sign(s)) < 0)
                        return r;
        }
        *ret = TAKE_PTR(s);
        return 0;
}
