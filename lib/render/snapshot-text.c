/* snapshot-text.c: the text a pstack/eu-stack user already reads, plus kernel frames, state and syscall; and the
 * folded form flame graph tools take. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "base/escape.h"
#include "base/macro.h"
#include "base/strv.h"
#include "render/goroutine-text.h"
#include "render/snapshot-text.h"
#include "render/thread-groups.h"

/* A state letter from a stored snapshot is untrusted like any string: a letter as is, anything else escaped. */
static void put_state(FILE *f, char c) {
        if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'))
                fputc(c, f);
        else
                fprintf(f, "\\x%02x", (unsigned) (unsigned char) c);
}

static void print_syscall(FILE *f, const ThreadSnapshot *t) {
        const ProcSyscall *sc = &t->syscall;
        const char *name;

        switch (sc->kind) {
        case PROC_SYSCALL_RUNNING:
                fputs(" on CPU", f);
                return;
        case PROC_SYSCALL_NONE:
                fputs(" not in a syscall", f);
                return;
        case PROC_SYSCALL_BLOCKED:
                name = syscall_name(sc->nr);
                if (name)
                        fprintf(f, " in %s(", name);
                else
                        fprintf(f, " in syscall_%" PRId64 "(", sc->nr);
                for (size_t i = 0; i < 3; i++)
                        fprintf(f, "%s0x%" PRIx64, i ? ", " : "", sc->args[i]);
                fputs(", …)", f);
                if (sc->restarted)
                        fputs(" (restarted after a stop)", f);
                return;
        }
}

/* V in decimal, at least WIDTH characters (padded with spaces on the right, as "%-2zu"): what fprintf() writes,
 * without parsing a format for each of the hundreds of lines a deep Python stack prints. */
static void put_decimal(FILE *f, uint64_t v, size_t width) {
        char buf[24];
        size_t i = sizeof buf;

        do
                buf[--i] = (char) ('0' + v % 10);
        while ((v /= 10) > 0);
        fwrite(buf + i, 1, sizeof buf - i, f);
        for (size_t k = sizeof buf - i; k < width; k++)
                fputc(' ', f);
}

/* A Python frame as a traceback shows it: #5  File "app.py", line 12, in Worker.inner */
static void print_python_frame(FILE *f, const UserFrame *u, size_t n) {
        fputc('#', f);
        put_decimal(f, n, 2);
        fputs(" File \"", f);
        fputs_escaped(u->file ?: "?", f);
        fputc('"', f);
        if (u->line) {
                fputs(", line ", f);
                put_decimal(f, u->line, 0);
        }
        fputs(", in ", f);
        fputs_escaped(u->function ?: "?", f);
        fputc('\n', f);
}

/* A Java frame as the JVM's own thread dump shows it: #5  at Hung.takeAthenB(Hung.java:25) */
static void print_java_frame(FILE *f, const UserFrame *u, size_t n) {
        fprintf(f, "#%-2zu at ", n);
        fputs_escaped(u->function ?: "?", f);
        fputc('(', f);
        fputs_escaped(u->file ?: "Unknown Source", f);
        if (u->line)
                fprintf(f, ":%u", u->line);
        fputs(")\n", f);
}

/* A JavaScript frame as Node's stack traces show it: #5  at readConfigSync (/srv/app/config.js:3:10) */
static void print_js_frame(FILE *f, const UserFrame *u, size_t n) {
        fprintf(f, "#%-2zu at ", n);
        fputs_escaped(u->function ?: "?", f);
        fputs(" (", f);
        fputs_escaped(u->file ?: "<anonymous>", f);
        if (u->line)
                fprintf(f, ":%u:%u", u->line, u->column);
        fputs(")\n", f);
}

/* A Ruby frame as Ruby's backtraces show it: #5  app.rb:14:in `run' */
static void print_ruby_frame(FILE *f, const UserFrame *u, size_t n) {
        fprintf(f, "#%-2zu ", n);
        fputs_escaped(u->file ?: "?", f);
        if (u->line)
                fprintf(f, ":%u", u->line);
        fputs(":in `", f);
        fputs_escaped(u->function ?: "?", f);
        fputs("'\n", f);
}

/* A frame of a runtime with no printer of its own: #5  function (file:line) */
static void print_runtime_frame(FILE *f, const UserFrame *u, size_t n) {
        fprintf(f, "#%-2zu ", n);
        fputs_escaped(u->function ?: "?", f);
        fputs(" (", f);
        fputs_escaped(u->file ?: "?", f);
        if (u->line)
                fprintf(f, ":%u", u->line);
        fputs(")\n", f);
}

/* What the process's CPython is, and who holds its GIL. */
static void print_python_process(FILE *f, const ProcessRuntime *r) {
        fputs_escaped(r->version ?: "?", f);
        if (r->lock_holder > 0)
                fprintf(f, ", the GIL held by TID %d", (int) r->lock_holder);
        else
                fputs(", the GIL free", f);
}

/* What the process's Ruby is, who holds its GVL, and the Mutex deadlocks among its threads; or why none is read. */
static void print_ruby_process(FILE *f, const ProcessRuntime *r) {
        fputs_escaped(r->version ?: "?", f);
        if (r->error) {
                fputs(": no Ruby frames: ", f);
                fputs_escaped(r->error, f);
                return;
        }
        if (r->lock_holder > 0)
                fprintf(f, ", the GVL held by TID %d", (int) r->lock_holder);
        else
                fputs(", the GVL free", f);
        if (r->deadlocks > 0)
                fprintf(f, "; DEADLOCK: %u cycle%s of Mutex owners", r->deadlocks, r->deadlocks == 1 ? "" : "s");
}

/* What the JVM answered, and how fast; or why it did not. */
static void print_java_process(FILE *f, const ProcessRuntime *r) {
        if (r->version) {
                fputs_escaped(r->version, f);
                fprintf(f, ", answered in %.1f ms", (double) r->pause_usec / 1000.0);
                if (r->deadlocks > 0)
                        fprintf(f, "; DEADLOCK: the JVM reports %u Java-level deadlock%s", r->deadlocks,
                                r->deadlocks == 1 ? "" : "s");
        } else
                fputs("(no thread dump)", f);
        if (r->error) {
                fputs(": no Java frames: ", f);
                fputs_escaped(r->error, f);
        }
}

/* What a runtime with no printer of its own says of the process: its version, and its error. */
static void print_runtime_process(FILE *f, const ProcessRuntime *r) {
        fputs_escaped(r->version ?: "?", f);
        if (r->error) {
                fputs(": ", f);
                fputs_escaped(r->error, f);
        }
}

/* How text shows a runtime where its own tools' words are not the generic ones: a row for each that has them, every
 * member NULL (or false) for the generic form. */
typedef struct RuntimeText {
        void (*frame)(FILE *f, const UserFrame *u, size_t n);   /* one of its frames, as its own tools show it */
        void (*process)(FILE *f, const ProcessRuntime *r);      /* its line in the process's head, after its name */
        bool no_process_line;                                   /* it has none: its tail says all */
        void (*tail)(const Snapshot *s, FILE *f);               /* after the threads (Go's goroutines) */
        void (*tail_folded)(const Snapshot *s, FILE *f);        /* the same, folded */
} RuntimeText;

static const RuntimeText runtime_text[_RUNTIME_MAX] = {
        [RUNTIME_PYTHON] = { .frame = print_python_frame, .process = print_python_process },
        [RUNTIME_GO] = { .no_process_line = true, .tail = goroutines_print_text,
                         .tail_folded = goroutines_print_folded },
        [RUNTIME_JAVA] = { .frame = print_java_frame, .process = print_java_process },
        [RUNTIME_NODE] = { .frame = print_js_frame },
        [RUNTIME_RUBY] = { .frame = print_ruby_frame, .process = print_ruby_process },
};

/* What each runtime knows of T beside its frames, one line each: why frames are missing, the locks it holds and
 * waits for (with the owner the runtime names). */
static void print_thread_runtimes(FILE *f, const ThreadSnapshot *t) {
        for (size_t i = 0; i < t->n_runtimes; i++) {
                const ThreadRuntime *rt = &t->runtimes[i];
                const char *name = runtime_kind_to_string(rt->kind) ?: "?";

                if (rt->note) {
                        fprintf(f, "  (%s: ", name);
                        fputs_escaped(rt->note, f);
                        fputs(")\n", f);
                }
                for (size_t k = 0; k < rt->n_locks; k++) {
                        const RuntimeLock *l = &rt->locks[k];

                        fprintf(f, "  (%s: %s <0x%" PRIx64 ">", name, runtime_lock_to_string(l->kind) ?: "?",
                                l->address);
                        if (l->klass) {
                                fputs(" (a ", f);
                                fputs_escaped(l->klass, f);
                                fputc(')', f);
                        }
                        if (l->owner > 0)
                                fprintf(f, " held by TID %d", (int) l->owner);
                        fputs(")\n", f);
                }
        }
}

/* The head of a thread's lines: "TID 4242: "comm" S (sleeping) in read(0x3, …) wchan … [passive]"; for a group
 * of N (G not NULL), "N threads (TIDs …): "comm" S (sleeping) in read" with what they share (not the arguments,
 * not a pause). */
static void print_thread_head(const Snapshot *s, const ThreadSnapshot *t, const ThreadGroup *g, FILE *f) {
        bool same_comm = true;

        if (g) {
                fprintf(f, "%zu threads (TIDs ", g->n);
                thread_group_put_tids(s, g, ", ", TEXT_GROUP_TID_RUNS_MAX, f);
                fputs("):", f);
                for (size_t i = 1; i < g->n && same_comm; i++)
                        same_comm = streq_ptr(s->threads[g->threads[i]].comm, t->comm);
        } else
                fprintf(f, "TID %d:", (int) t->tid);
        if (t->comm) {
                fputs(" \"", f);
                fputs_escaped(t->comm, f);
                fputs(same_comm ? "\"" : "\" and others", f);
        }
        if (t->state == '\0' || t->state == '?')
                /* Left out before its stat was read (the time budget): nothing is known of its state. */
                fputs(" not read", f);
        else {
                fputc(' ', f);
                put_state(f, t->state);
                fprintf(f, " (%s)", thread_state_to_string(t->state));
                /* A group's threads wait in the same call, each with arguments of its own. */
                if (g && t->syscall.kind == PROC_SYSCALL_BLOCKED)
                        fprintf(f, " in %s", syscall_name(t->syscall.nr) ?: "a syscall");
                else
                        print_syscall(f, t);
        }
        if (t->wchan && !g) {
                fputs(" wchan ", f);
                fputs_escaped(t->wchan, f);
        }
        fprintf(f, " [%s", capture_method_to_string(t->method) ?: "none");
        if (t->method == CAPTURE_METHOD_PTRACE && !g)
                fprintf(f, ", paused %.1f us", t->pause_us);
        if (t->stopped_because && !g) {
                fputs(": stopped because ", f);
                fputs_escaped(t->stopped_because, f);
        }
        if (t->tracer_pid > 0 && !g)
                fprintf(f, ", traced by %d", (int) t->tracer_pid);
        fputs("]", f);
        for (size_t i = 0; i < t->n_runtimes; i++) {
                const ThreadRuntime *rt = &t->runtimes[i];
                const char *name = runtime_kind_to_string(rt->kind) ?: "?";

                if (rt->holds_global_lock)
                        fprintf(f, " holds the %s", runtime_traits[rt->kind].global_lock ?: "global lock");
                if (rt->name && !g) {
                        fprintf(f, " %s \"", name);
                        fputs_escaped(rt->name, f);
                        fputc('"', f);
                }
                if (rt->state) {
                        fputc(' ', f);
                        if (g)
                                fprintf(f, "%s ", name);
                        fputs_escaped(rt->state, f);
                }
        }
        fputc('\n', f);
}

/* A thread's lines, or a group's (G not NULL, T its first thread: they share what is printed after the head). */
static void print_thread_group(const Snapshot *s, const ThreadSnapshot *t, const ThreadGroup *g, const TextOptions *o,
                               FILE *f) {
        print_thread_head(s, t, g, f);
        if (t->error) {
                fputs("  ! ", f);
                fputs_escaped(t->error, f);
                fputc('\n', f);
        }
        if (o->kernel)
                for (size_t i = 0; i < t->n_kframes; i++) {
                        const KernelFrame *k = &t->kframes[i];
                        fputs("  [k] ", f);
                        fputs_escaped(k->function, f);
                        fprintf(f, "+0x%" PRIx64, k->offset);
                        if (k->module) {
                                fputs(" [", f);
                                fputs_escaped(k->module, f);
                                fputc(']', f);
                        }
                        fputc('\n', f);
                }
        print_thread_runtimes(f, t);
        for (size_t i = 0, shown = 0; i < t->n_frames; i++) {
                const UserFrame *u = &t->frames[i];
                const ModuleInfo *m = snapshot_frame_module(s, u);
                const char *mod = m ? m->path : NULL;

                if (!user_frame_shown(u))
                        continue;
                if (frame_kind_is_runtime(u->kind)) {
                        const RuntimeText *rt = &runtime_text[frame_kind_runtime(u->kind)];
                        (rt->frame ?: print_runtime_frame)(f, u, shown++);
                        continue;
                }
                fprintf(f, "#%-2zu 0x%016" PRIx64 " ", shown++, u->pc);
                if (u->function) {
                        fputs_escaped(o->raw_names && u->linkage_name ? u->linkage_name : u->function, f);
                        if (!u->inlined && u->function_offset)
                                fprintf(f, "+0x%" PRIx64, u->function_offset);
                } else
                        fputs("??", f);
                if (mod) {
                        fputs(" - ", f);
                        fputs_escaped(mod, f);
                        if (m->missing) {
                                fputs(" [", f);
                                if (m->build_id) {
                                        fputs("build-id ", f);
                                        fputs_escaped(m->build_id, f);
                                        fputs(", ", f);
                                }
                                if (m->missing_reason) {
                                        fputs("not read: ", f);
                                        fputs_escaped(m->missing_reason, f);
                                        fputc(']', f);
                                } else
                                        fputs("not found: the file as the process sees it cannot be read]", f);
                        }
                }
                if (u->inlined)
                        fputs(" (inlined)", f);
                if (u->method == FRAME_METHOD_FP || u->method == FRAME_METHOD_SCAN)
                        fprintf(f, " [%s]", frame_method_to_string(u->method));
                fputc('\n', f);
                if (u->file) {
                        fputs("    ", f);
                        fputs_escaped(u->file, f);
                        fprintf(f, ":%u", u->line);
                        if (u->column)
                                fprintf(f, ":%u", u->column);
                        fputc('\n', f);
                }
        }
        if (t->unwind_end && !streq(t->unwind_end, "end of stack")) {
                fputs("  (unwind: ", f);
                fputs_escaped(t->unwind_end, f);
                fputs(")\n", f);
        }
}

static void print_thread(const Snapshot *s, const ThreadSnapshot *t, const TextOptions *o, FILE *f) {
        print_thread_group(s, t, NULL, o, f);
}

/* Every thread of S, grouped unless asked not to: a group of one as a thread, a larger one once. */
static int print_threads(const Snapshot *s, const TextOptions *o, FILE *f) {
        ThreadGroup *g = NULL;
        size_t n = 0;
        int r;

        if (o->no_group) {
                for (size_t i = 0; i < s->n_threads; i++)
                        print_thread(s, &s->threads[i], o, f);
                return 0;
        }
        r = snapshot_group_threads(s, &g, &n);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n; i++)
                print_thread_group(s, &s->threads[g[i].threads[0]], g[i].n > 1 ? &g[i] : NULL, o, f);
        thread_groups_free(g, n);
        return 0;
}

/* "inner (app.py:12)": a runtime's frame in one line, the file by its base name. */
static void put_runtime_place(FILE *f, const UserFrame *u) {
        const char *fb = u->file ? strrchr(u->file, '/') : NULL;

        fputs_escaped(u->function ?: "?", f);
        fputs(" (", f);
        fputs_escaped(fb ? fb + 1 : u->file ?: "?", f);
        if (u->line)
                fprintf(f, ":%u", u->line);
        fputc(')', f);
}

/* Frame I of T in one line, numbered SHOWN (the interpreter's frames are not shown, as in the dump). */
static char *frame_line(const Snapshot *s, const ThreadSnapshot *t, size_t i, size_t shown) {
        _cleanup_free_ char *buf = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&buf, &size);

        if (!f)
                return NULL;
        if (t->n_frames == 0) {
                const KernelFrame *k = &t->kframes[i];

                fprintf(f, "[k] ");
                fputs_escaped(k->function, f);
                fprintf(f, "+0x%" PRIx64, k->offset);
        } else {
                const UserFrame *u = &t->frames[i];
                const ModuleInfo *m = snapshot_frame_module(s, u);
                const char *mod = m ? m->path : NULL, *base = mod ? strrchr(mod, '/') : NULL;

                fprintf(f, "#%-2zu ", shown);
                if (frame_kind_is_runtime(u->kind)) {
                        /* Its file and line are in its place already. */
                        put_runtime_place(f, u);
                } else if (u->function) {
                        fputs_escaped(u->function, f);
                        if (!u->inlined && u->function_offset)
                                fprintf(f, "+0x%" PRIx64, u->function_offset);
                } else
                        fprintf(f, "?? 0x%" PRIx64, u->pc);
                if (mod) {
                        fputs(" (", f);
                        fputs_escaped(base ? base + 1 : mod, f);
                        fputc(')', f);
                }
                if (u->file && !frame_kind_is_runtime(u->kind)) {
                        const char *fb = strrchr(u->file, '/');

                        fputs(" at ", f);
                        fputs_escaped(fb ? fb + 1 : u->file, f);
                        fprintf(f, ":%u", u->line);
                }
        }
        if (fclose(f) != 0)
                return NULL;
        return TAKE_PTR(buf);
}

int snapshot_thread_text(const Snapshot *s, pid_t tid, const TextOptions *o, size_t max, char **ret) {
        _cleanup_free_ char *buf = NULL;
        size_t size = 0;
        FILE *f;

        *ret = NULL;
        for (size_t i = 0; i < s->n_threads; i++)
                if (s->threads[i].tid == tid) {
                        f = open_memstream(&buf, &size);
                        if (!f)
                                return -ENOMEM;
                        print_thread(s, &s->threads[i], o, f);
                        if (fclose(f) != 0)
                                return -ENOMEM;
                        if (size > max)
                                strcpy(buf + max - strlen("\n…\n"), "\n…\n"); /* cut at MAX, visibly */
                        *ret = TAKE_PTR(buf);
                        break;
                }
        return 0;
}

int snapshot_top_frames(const Snapshot *s, pid_t tid, size_t max, char ***ret) {
        const ThreadSnapshot *t = NULL;
        char **l;
        size_t n;

        for (size_t i = 0; i < s->n_threads && !t; i++)
                if (s->threads[i].tid == tid)
                        t = &s->threads[i];
        n = t ? MIN(max, t->n_frames ?: t->n_kframes) : 0;
        if (n == 0) {
                *ret = NULL;
                return 0;
        }
        l = calloc(n + 1, sizeof *l);
        if (!l)
                return -ENOMEM;
        for (size_t i = 0, k = 0; k < n && i < (t->n_frames ?: t->n_kframes); i++) {
                if (t->n_frames > 0 && !user_frame_shown(&t->frames[i]))
                        continue;
                if (!(l[k] = frame_line(s, t, i, k))) {
                        strv_free(l);
                        return -ENOMEM;
                }
                k++;
        }
        *ret = l;
        return 0;
}

int snapshot_top_runtime_frame(const Snapshot *s, pid_t tid, char **ret) {
        _cleanup_free_ char *buf = NULL;
        size_t size = 0;
        FILE *f;

        *ret = NULL;
        for (size_t i = 0; i < s->n_threads; i++) {
                const ThreadSnapshot *t = &s->threads[i];

                if (t->tid != tid)
                        continue;
                for (size_t k = 0; k < t->n_frames; k++) {
                        if (!frame_kind_is_runtime(t->frames[k].kind))
                                continue;
                        f = open_memstream(&buf, &size);
                        if (!f)
                                return -ENOMEM;
                        put_runtime_place(f, &t->frames[k]);
                        if (fclose(f) != 0)
                                return -ENOMEM;
                        *ret = TAKE_PTR(buf);
                        return 0;
                }
        }
        return 0;
}

/* "1234 (comm)" and, when TID is known (and WITH_CALL, captured), " thread 1250 in futex". */
static void print_chain_process(const Snapshot *root, pid_t pid, pid_t tid, bool with_call, FILE *f) {
        const Snapshot *p = snapshot_process_of(root, pid);
        const ThreadSnapshot *t = p && tid > 0 ? snapshot_find_thread((Snapshot *) p, tid) : NULL;

        fprintf(f, "%d (", (int) pid);
        fputs_escaped(p ? p->comm : "?", f);
        fputc(')', f);
        if (tid > 0 && tid != pid)
                fprintf(f, " thread %d", (int) tid);
        if (tid > 0 && tid != pid && t && p && !streq_ptr(t->comm, p->comm)) {
                fputs(" (", f);
                fputs_escaped(t->comm, f);
                fputc(')', f);
        }
        if (with_call && t && t->syscall.kind == PROC_SYSCALL_BLOCKED)
                fprintf(f, " in %s", syscall_name(t->syscall.nr) ?: "?");
}

static bool same_lock(const WaitEdge *a, const WaitEdge *b) {
        return a->kind == WAIT_KIND_MUTEX && b->kind == WAIT_KIND_MUTEX && a->pid == b->pid && a->address == b->address;
}

/* The locks of the chain, one line each: the mutex, who holds it, who waits for it. */
static void print_lock_table(const Snapshot *s, FILE *f) {
        const WaitChain *c = s->wait_chain;
        size_t n = 0;

        for (size_t i = 0; i < c->n_edges; i++) {
                bool seen = false;

                for (size_t k = 0; k < i && !seen; k++)
                        seen = same_lock(&c->edges[k], &c->edges[i]);
                n += c->edges[i].kind == WAIT_KIND_MUTEX && !seen;
        }
        if (n == 0) {
                fputs("  locks: no thread waits for a mutex\n", f);
                return;
        }
        fprintf(f, "  locks (%zu waited for):\n", n);
        for (size_t i = 0; i < c->n_edges; i++) {
                const WaitEdge *e = &c->edges[i];
                bool seen = false;

                for (size_t k = 0; k < i && !seen; k++)
                        seen = same_lock(&c->edges[k], e);
                if (e->kind != WAIT_KIND_MUTEX || seen)
                        continue;
                fputs("    ", f);
                fputs_escaped(e->object, f);
                fputs(": ", f);
                if (e->peer_pid > 0) {
                        fputs("held by ", f);
                        print_chain_process(s, e->peer_pid, e->peer_tid, true, f);
                } else
                        fputs_escaped(e->reason ?: "owner unknown", f);
                fputs("; waiting:", f);
                for (size_t k = i; k < c->n_edges; k++)
                        if (same_lock(&c->edges[k], e)) {
                                fputc(' ', f);
                                print_chain_process(s, c->edges[k].pid, c->edges[k].tid, false, f);
                        }
                fputc('\n', f);
        }
}

/* The chain first, the way a person would explain it: who waits in which call on what, held by whom. */
static void print_wait_chain(const Snapshot *s, FILE *f) {
        const WaitChain *c = s->wait_chain;

        fprintf(f, "  wait chain (%u hop%s", c->depth, c->depth == 1 ? "" : "s");
        if (c->tid > 0)
                fprintf(f, " from thread %d", (int) c->tid);
        fprintf(f, ", resolved in %.1f ms)%s:\n", (double) c->resolve_usec / 1000.0,
                c->n_edges == 0 ? " nothing: no thread waits on another process" : "");
        for (size_t i = 0; i < c->n_edges; i++) {
                const WaitEdge *e = &c->edges[i];

                fputs("    ", f);
                print_chain_process(s, e->pid, e->tid, false, f);
                fputc(' ', f);
                fputs_escaped(e->syscall, f);
                if (e->fd >= 0)
                        fprintf(f, " fd %d", e->fd);
                fputs(" → ", f);
                fputs_escaped(e->object, f);
                if (e->multiplexed)
                        fputs(" (in its wait set)", f);
                fputs(" → ", f);
                if (e->peer_pid > 0)
                        print_chain_process(s, e->peer_pid, e->peer_tid, true, f);
                else
                        fputs("nobody", f);
                if (e->reason) {
                        fputs(": ", f);
                        fputs_escaped(e->reason, f);
                }
                fputc('\n', f);
        }
        if (c->lock_pid > 0 && c->n_lock_cycle > 0) {
                const Snapshot *p = snapshot_process_of(s, c->lock_pid);

                fputs("    DEADLOCK in ", f);
                print_chain_process(s, c->lock_pid, 0, false, f);
                fputc(':', f);
                for (size_t i = 0; i <= c->n_lock_cycle; i++) {
                        pid_t tid = c->lock_cycle[i % c->n_lock_cycle];
                        const ThreadSnapshot *t = p ? snapshot_find_thread((Snapshot *) p, tid) : NULL;

                        fprintf(f, "%s thread %d", i ? " →" : "", (int) tid);
                        if (t && t->comm) {
                                fputs(" (", f);
                                fputs_escaped(t->comm, f);
                                fputc(')', f);
                        }
                }
                {
                        const char *what = "mutex";
                        char runtime_lock[64];
                        bool join = false;

                        for (size_t i = 0; i < c->n_edges; i++)
                                if (c->edges[i].pid == c->lock_pid) {
                                        const WaitEdge *e = &c->edges[i];

                                        if (e->tid == c->lock_cycle[0] && e->kind == WAIT_KIND_MONITOR)
                                                what = "Java lock";
                                        /* A runtime's lock by its class ("Thread::Mutex 0x…"). */
                                        else if (e->tid == c->lock_cycle[0] && e->kind == WAIT_KIND_MUTEX &&
                                                 e->runtime && e->object && strstr(e->object, " 0x")) {
                                                snprintf(runtime_lock, sizeof runtime_lock, "%.*s",
                                                         (int) (strstr(e->object, " 0x") - e->object), e->object);
                                                what = runtime_lock;
                                        }
                                        for (size_t k = 0; k < c->n_lock_cycle; k++)
                                                join = join || (c->edges[i].kind == WAIT_KIND_JOIN &&
                                                                c->edges[i].tid == c->lock_cycle[k]);
                                }
                        if (join)
                                fputs(": each waits for the next one, to exit (join) or to unlock a mutex\n", f);
                        else
                                fprintf(f, c->n_lock_cycle == 1 ? " waits for a %s it holds itself\n"
                                                                : ": each waits for a %s the next one holds\n", what);
                }
        }
        if (c->deadlock && c->n_cycle > 0) {
                fputs("    DEADLOCK: ", f);
                for (size_t i = 0; i <= c->n_cycle; i++) {
                        const Snapshot *p = snapshot_process_of(s, c->cycle[i % c->n_cycle]);
                        fprintf(f, "%s%d (", i ? " → " : "", (int) c->cycle[i % c->n_cycle]);
                        fputs_escaped(p ? p->comm : "?", f);
                        fputc(')', f);
                }
                fputs(" wait only on each other\n", f);
        }
        for (char **e = c->errors; e && *e; e++) {
                fputs("    ! ", f);
                fputs_escaped(*e, f);
                fputc('\n', f);
        }
        if (c->truncated)
                fputs("    (the chain was cut by a budget)\n", f);
}

int snapshot_print_text(const Snapshot *s, const TextOptions *o, FILE *f) {
        fprintf(f, "PID %d - ", (int) s->pid);
        fputs_escaped(s->comm, f);
        fputs(" (", f);
        put_state(f, s->state);
        fprintf(f, " %s)", thread_state_to_string(s->state));
        if (s->kernel_thread)
                fputs(" kernel thread", f);
        if (s->unit) {
                fputs(" unit ", f);
                fputs_escaped(s->unit, f);
        }
        if (s->frozen_cgroup) {
                fputs(" frozen by cgroup ", f);
                fputs_escaped(s->frozen_cgroup, f);
                fprintf(f, " (v%u)", s->frozen_version);
        }
        fputc('\n', f);
        if (s->exe) {
                fputs("  exe ", f);
                fputs_escaped(s->exe, f);
                fputc('\n', f);
        }
        for (RuntimeKind k = 0; k < _RUNTIME_MAX; k++) {
                const ProcessRuntime *r = snapshot_runtime(s, k);

                if (!r || runtime_text[k].no_process_line)
                        continue;
                fprintf(f, "  %s ", runtime_kind_to_string(k));
                (runtime_text[k].process ?: print_runtime_process)(f, r);
                fputc('\n', f);
        }
        if (s->trigger) {
                const SnapshotTrigger *t = s->trigger;
                fputs("  trigger: rule ", f);
                fputs_escaped(t->rule, f);
                fprintf(f, ", thread %d ", (int) t->tid);
                fputs_escaped(t->klass ?: "n/a", f);
                fprintf(f, " for %.1f s (state ", (double) t->duration_usec / 1e6);
                put_state(f, t->state);
                fprintf(f, ", cpu %.0f%%", t->cpu_percent);
                if (t->syscall_nr >= 0)
                        fprintf(f, ", in %s", syscall_name(t->syscall_nr) ?: "?");
                if (t->wchan) {
                        fputs(", wchan ", f);
                        fputs_escaped(t->wchan, f);
                }
                if (t->syscalls_per_sec > 0)
                        fprintf(f, ", %.0f syscalls/s, %.0f bytes/s", t->syscalls_per_sec, t->bytes_per_sec);
                fputs(")\n", f);
                if (t->probe_window_usec > 0 && t->probe_nr >= 0) {
                        fprintf(f, "  probe: %s = ", syscall_name(t->probe_nr) ?: "?");
                        if (t->probe_result < 0 && t->probe_result > -4096)
                                fprintf(f, "-%s", strerrorname_np((int) -t->probe_result) ?: "?");
                        else
                                fprintf(f, "%" PRId64, t->probe_result);
                        fprintf(f, " ×%u of %u syscalls in %.0f ms\n", t->probe_count, t->probe_syscalls,
                                (double) t->probe_window_usec / 1000.0);
                } else if (t->probe_window_usec > 0)
                        fprintf(f, "  probe: no syscall returned in %.0f ms\n", (double) t->probe_window_usec / 1000.0);
        }
        if (s->signature) {
                fputs("  problem: ", f);
                fputs_escaped(s->signature, f);
                fputc(' ', f);
                fputs_escaped(s->title ?: "", f);
                fputc('\n', f);
        }
        for (char **e = s->errors; e && *e; e++) {
                fputs("  ! ", f);
                fputs_escaped(*e, f);
                fputc('\n', f);
        }
        if (s->wait_chain)
                print_wait_chain(s, f);
        if (s->wait_chain && o->locks)
                print_lock_table(s, f);
        if (print_threads(s, o, f) < 0)
                return -ENOMEM;
        for (RuntimeKind k = 0; k < _RUNTIME_MAX; k++)
                if (snapshot_runtime(s, k) && runtime_text[k].tail)
                        runtime_text[k].tail(s, f);
        if (o->modules)
                for (size_t i = 0; i < s->n_modules; i++) {
                        const ModuleInfo *m = &s->modules[i];
                        fprintf(f, "module 0x%016" PRIx64 "-0x%016" PRIx64 " %s ", m->start, m->end,
                                m->build_id ?: "-");
                        fputs_escaped(m->path, f);
                        fputc('\n', f);
                }
        if (s->truncated)
                fputs("(truncated by a capture budget)\n", f);
        for (size_t i = 0; i < s->n_peers; i++) {
                fprintf(f, "\npeer %zu of %zu, of PID %d: ", i + 1, s->n_peers, (int) s->pid);
                snapshot_print_text(s->peers[i], o, f);
        }
        return ferror(f) ? -EIO : 0;
}

int snapshot_print_folded(const Snapshot *s, bool kernel, FILE *f) {
        for (size_t i = 0; i < s->n_threads; i++) {
                const ThreadSnapshot *t = &s->threads[i];
                _cleanup_free_ char *name = NULL;

                fputs_folded(t->comm ?: s->comm, f);
                for (size_t k = t->n_frames; k > 0; k--) {
                        const UserFrame *u = &t->frames[k - 1];

                        if (!user_frame_shown(u))
                                continue;
                        fputc(';', f);
                        name = snapshot_frame_name(s, u);
                        if (!name)
                                return -ENOMEM;
                        fputs_folded(name, f);
                        name = mfree(name);
                }
                if (kernel)
                        for (size_t k = t->n_kframes; k > 0; k--) {
                                fputc(';', f);
                                fputs_folded(t->kframes[k - 1].function, f);
                                fputs("_[k]", f);
                        }
                fputs(" 1\n", f);
        }
        for (RuntimeKind k = 0; k < _RUNTIME_MAX; k++)
                if (snapshot_runtime(s, k) && runtime_text[k].tail_folded)
                        runtime_text[k].tail_folded(s, f);
        for (size_t i = 0; i < s->n_peers; i++)
                snapshot_print_folded(s->peers[i], kernel, f);
        return ferror(f) ? -EIO : 0;
}
