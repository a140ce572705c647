/* signature.c: a snapshot's problem signature, after Sentry's grouping (module and function of the meaningful
 * frames, no lines, recursion collapsed), Socorro's skip lists and Windows Error Reporting's wait chains for hangs
 * (shared/REFERENCES.md, Signatures). Every rule of what counts is in this file: the skip list below, the frame's
 * form (frame_name()), the thread's wait (thread_wait()) and which threads and processes a chain adds. */
#include <errno.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc-util.h"
#include "base/macro.h"
#include "model/proc-parse.h"
#include "render/goroutine-text.h"
#include "render/signature.h"

/* One rule of the skip list: a frame of KIND whose module matches MODULE and whose function matches FUNCTION (an
 * fnmatch() pattern each; NULL: any) says how the thread waits or what runs it, not where it is: it is left out. A
 * native frame's module is its file's base name; a Python or JavaScript frame's, its script's base name. */
typedef struct SkipRule {
        FrameKind kind;
        const char *module;
        const char *function;
} SkipRule;

static const SkipRule skip_rules[] = {
        /* libc and the dynamic loader: the call a thread makes, not who makes it (Socorro's "irrelevant" list) */
        { FRAME_KIND_NATIVE, "libc.so*", NULL },
        { FRAME_KIND_NATIVE, "libc-*.so", NULL },
        { FRAME_KIND_NATIVE, "libpthread*.so*", NULL },
        { FRAME_KIND_NATIVE, "ld-linux*.so*", NULL },
        { FRAME_KIND_NATIVE, "ld-*.so*", NULL },
        { FRAME_KIND_NATIVE, "linux-vdso*", NULL },
        { FRAME_KIND_NATIVE, "[vdso]", NULL },
        /* lock primitives, wherever they are linked */
        { FRAME_KIND_NATIVE, NULL, "pthread_*" },
        { FRAME_KIND_NATIVE, NULL, "__pthread_*" },
        { FRAME_KIND_NATIVE, NULL, "__lll_*" },
        { FRAME_KIND_NATIVE, NULL, "__futex*" },
        { FRAME_KIND_NATIVE, NULL, "futex_*" },
        { FRAME_KIND_NATIVE, NULL, "sem_*wait*" },
        { FRAME_KIND_NATIVE, NULL, "std::mutex::*" },
        { FRAME_KIND_NATIVE, NULL, "std::condition_variable*" },
        { FRAME_KIND_NATIVE, NULL, "std::unique_lock*" },
        { FRAME_KIND_NATIVE, NULL, "std::__*" },
        { FRAME_KIND_NATIVE, "libstdc++.so*", NULL },
        { FRAME_KIND_NATIVE, "libgcc_s.so*", NULL },
        /* the runtimes' machinery, as native frames: their own frames say where */
        { FRAME_KIND_NATIVE, "libpython*", NULL },
        { FRAME_KIND_NATIVE, "python3*", "_Py*" },
        { FRAME_KIND_NATIVE, "python3*", "Py*" },
        { FRAME_KIND_NATIVE, "libjvm.so", NULL },
        { FRAME_KIND_NATIVE, "libjli.so", NULL },
        { FRAME_KIND_NATIVE, "libuv.so*", NULL },
        { FRAME_KIND_NATIVE, NULL, "uv_*" },
        { FRAME_KIND_NATIVE, NULL, "uv__*" },
        { FRAME_KIND_NATIVE, NULL, "v8::*" },
        { FRAME_KIND_NATIVE, NULL, "Builtins_*" },
        { FRAME_KIND_NATIVE, "libruby*", NULL },
        /* the runtimes' own lock primitives and machinery */
        { FRAME_KIND_PYTHON, "threading.py", NULL },
        { FRAME_KIND_PYTHON, "queue.py", NULL },
        { FRAME_KIND_GO, NULL, "runtime.*" },
        { FRAME_KIND_GO, NULL, "sync.*" },
        { FRAME_KIND_GO, NULL, "internal/*" },
        { FRAME_KIND_GO, NULL, "syscall.*" },
        { FRAME_KIND_JAVA, NULL, "java.lang.Object.wait*" },
        { FRAME_KIND_JAVA, NULL, "java.lang.Thread.sleep*" },
        { FRAME_KIND_JAVA, NULL, "java.lang.Thread.join*" },
        { FRAME_KIND_JAVA, NULL, "jdk.internal.misc.Unsafe.park" },
        { FRAME_KIND_JAVA, NULL, "sun.misc.Unsafe.park" },
        { FRAME_KIND_JAVA, NULL, "java.util.concurrent.locks.*" },
        { FRAME_KIND_JS, "node:*", NULL },
        { FRAME_KIND_RUBY, "<internal:*", NULL },
};

static const char *base_name(const char *path) {
        const char *b = path ? strrchr(path, '/') : NULL;

        return b ? b + 1 : path;
}

/* The module a frame is matched and named by: a native frame's file, a script's; NULL for Go and Java, whose
 * function names carry their package or class. */
static const char *frame_module(const Snapshot *s, const UserFrame *u) {
        const ModuleInfo *m;

        switch (u->kind) {
        case FRAME_KIND_NATIVE:
                m = snapshot_frame_module(s, u);
                return m ? base_name(m->path) : NULL;
        case FRAME_KIND_PYTHON:
        case FRAME_KIND_JS:
        case FRAME_KIND_RUBY:
                return base_name(u->file);
        default:
                return NULL;
        }
}

static bool frame_skipped(const Snapshot *s, const UserFrame *u) {
        const char *module = frame_module(s, u), *function = u->function;
        RuntimeKind rk = frame_kind_runtime(u->kind);

        if (!user_frame_shown(u))
                return true;
        if (rk >= 0 && runtime_traits[rk].machinery && function && startswith(function, runtime_traits[rk].machinery))
                return true;
        /* A Go program's own functions are native frames of its threads' stacks: the Go rules hold for them. */
        bool go = u->kind == FRAME_KIND_NATIVE && snapshot_runtime(s, RUNTIME_GO);

        if (go && function && startswith(function, runtime_traits[RUNTIME_GO].machinery))
                return true;
        for (size_t i = 0; i < ELEMENTSOF(skip_rules); i++) {
                const SkipRule *r = &skip_rules[i];

                if (r->kind != u->kind && !(go && r->kind == FRAME_KIND_GO))
                        continue;
                if (r->module && (!module || fnmatch(r->module, module, 0) != 0))
                        continue;
                if (r->function && (!function || fnmatch(r->function, function, 0) != 0))
                        continue;
                return true;
        }
        return false;
}

/* A native function as the key has it: template arguments as <T>, no argument list, no Rust hash ("::h" and 16
 * hex digits, which a rebuild changes). */
static void put_native_function(const char *f, FILE *out) {
        size_t n = strlen(f), end = n;
        int depth = 0;

        /* The argument list: the parenthesis that closes the name, matched back to the one that opens it. */
        if (n > 0 && (f[n - 1] == ')' || endswith(f, ") const"))) {
                size_t k = f[n - 1] == ')' ? n - 1 : n - strlen(" const") - 1;
                int parens = 0;

                for (;;) {
                        parens += f[k] == ')' ? 1 : f[k] == '(' ? -1 : 0;
                        if (parens == 0 || k == 0)
                                break;
                        k--;
                }
                if (parens == 0 && k > 0)
                        end = k;
        }
        if (end > 19 && f[end - 19] == ':' && f[end - 18] == ':' && f[end - 17] == 'h' &&
            strspn(f + end - 16, "0123456789abcdef") >= 16)
                end -= 19;
        for (size_t i = 0; i < end; i++) {
                if (f[i] == '<' && !(i >= 8 && !strncmp(f + i - 8, "operator", 8))) {
                        if (depth++ == 0)
                                fputs("<T>", out);
                        continue;
                }
                if (f[i] == '>' && depth > 0) {
                        depth--;
                        continue;
                }
                if (depth == 0)
                        fputc(f[i], out);
        }
}

/* A frame as the key and the title name it: "pipedl.py:<module>", "app!worker", "main.worker", "Hung.run". No
 * address, offset or line. */
static int frame_name(const Snapshot *s, const UserFrame *u, char **ret) {
        const char *module = frame_module(s, u);
        size_t size = 0;
        FILE *f;

        f = open_memstream(ret, &size);
        if (!f)
                return -ENOMEM;
        if (u->kind == FRAME_KIND_NATIVE) {
                fprintf(f, "%s!", module ?: "?");
                if (u->function)
                        put_native_function(u->function, f);
                else
                        fputc('?', f);
        } else {
                if (module)
                        fprintf(f, "%s:", module);
                fputs(u->function ?: "?", f);
        }
        return fclose(f) == 0 ? 0 : -ENOMEM;
}

/* Up to SIGNATURE_FRAMES meaningful frames of FRAMES[0..N), innermost first, recursion collapsed, as ": a | b | c"
 * into *RET and the first into *RET_FIRST: the runtime's own frames when there are any, else native ones. Returns 1
 * when there were meaningful frames; 0 when the skip list left none, and then the innermost frame shown stands. */
static int frames_text(const Snapshot *s, const UserFrame *frames, size_t n, char **ret, char **ret_first) {
        _cleanup_free_ char *last = NULL, *first = NULL, *text = NULL;
        size_t shown = 0, size = 0;
        bool runtime = false;
        int pass, r = 0;
        FILE *out;

        out = open_memstream(&text, &size);
        if (!out)
                return -ENOMEM;
        for (size_t i = 0; i < n && !runtime; i++)
                runtime = frame_kind_runtime(frames[i].kind) >= 0 && !frame_skipped(s, &frames[i]);
        for (pass = 0; pass < 2 && shown == 0 && r >= 0; pass++)
                for (size_t i = 0; i < n && shown < SIGNATURE_FRAMES; i++) {
                        const UserFrame *u = &frames[i];
                        _cleanup_free_ char *name = NULL;

                        if (pass == 0 && (frame_skipped(s, u) || runtime != (frame_kind_runtime(u->kind) >= 0)))
                                continue;
                        if (pass == 1 && !user_frame_shown(u))
                                continue;
                        r = frame_name(s, u, &name);
                        if (r < 0)
                                break;
                        if (last && streq(last, name))
                                continue;
                        fputs(shown++ ? " | " : ": ", out);
                        fputs(name, out);
                        if (!first && !(first = strdup(name))) {
                                r = -ENOMEM;
                                break;
                        }
                        free(last);
                        last = TAKE_PTR(name);
                        if (pass == 1)
                                break;
                }
        if (fclose(out) != 0 || r < 0)
                return r < 0 ? r : -ENOMEM;
        *ret = TAKE_PTR(text);
        *ret_first = TAKE_PTR(first);
        return pass == 1 && shown > 0;
}

static int cmp_str(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

/* Sort the N strings of V, drop the repeated ones; the new count. */
static size_t sort_unique(char **v, size_t n) {
        size_t k = 0;

        qsort(v, n, sizeof *v, cmp_str);
        for (size_t i = 0; i < n; i++) {
                if (k > 0 && streq(v[k - 1], v[i])) {
                        free(v[i]);
                        continue;
                }
                v[k++] = v[i];
        }
        return k;
}

static void strings_free(char **v, size_t n) {
        for (size_t i = 0; i < n; i++)
                free(v[i]);
}

/* A thread's or a process's part of the key, with what the title says of it: the wait and the first frame of the
 * thread that leads it. */
typedef struct Part {
        char *text;
        char *wait, *first;
        pid_t pid;
} Part;

static void parts_free(Part *v, size_t n) {
        for (size_t i = 0; i < n; i++) {
                free(v[i].text);
                free(v[i].wait);
                free(v[i].first);
        }
}

static int cmp_part(const void *a, const void *b) {
        return strcmp(((const Part *) a)->text, ((const Part *) b)->text);
}

/* Sort the N parts of V by their text, drop the repeated ones; the new count. */
static size_t parts_sort_unique(Part *v, size_t n) {
        size_t k = 0;

        qsort(v, n, sizeof *v, cmp_part);
        for (size_t i = 0; i < n; i++) {
                if (k > 0 && streq(v[k - 1].text, v[i].text)) {
                        parts_free(&v[i], 1);
                        continue;
                }
                v[k++] = v[i];
        }
        return k;
}

/* What thread T of process P waits on, as the key has it: each edge of the chain from it as "read pipe" (sorted,
 * once each); else the call it is parked in, as the trigger saw it for the culprit (the probe's for a spin, none
 * for a busy loop) or as the capture did for another thread. NULL: nothing. */
static int thread_wait(const Snapshot *root, const Snapshot *p, const ThreadSnapshot *t, char **ret) {
        const WaitChain *c = root->wait_chain;
        const SnapshotTrigger *tr = root->trigger;
        char *waits[16];
        size_t n = 0, size = 0;
        int64_t nr = -1;
        FILE *f;

        *ret = NULL;
        for (size_t i = 0; c && i < c->n_edges && n < ELEMENTSOF(waits); i++) {
                const WaitEdge *e = &c->edges[i];

                if (e->pid != p->pid || e->tid != t->tid)
                        continue;
                if (asprintf(&waits[n], "%s %s", e->syscall ?: "?", wait_kind_to_string(e->kind) ?: "?") < 0) {
                        strings_free(waits, n);
                        return -ENOMEM;
                }
                n++;
        }
        if (n == 0) {
                if (p == root && tr && tr->tid == t->tid) {
                        if (streq_ptr(tr->klass, "syscall-spin"))
                                nr = tr->probe_nr >= 0 ? tr->probe_nr : tr->syscall_nr;
                        else if (!streq_ptr(tr->klass, "busy-loop"))
                                nr = tr->syscall_nr;
                } else if (t->syscall.kind == PROC_SYSCALL_BLOCKED)
                        nr = t->syscall.nr;
                if (nr < 0 || !syscall_name(nr))
                        return 0;
                *ret = strdup(syscall_name(nr));
                return *ret ? 0 : -ENOMEM;
        }
        n = sort_unique(waits, n);
        f = open_memstream(ret, &size);
        if (!f) {
                strings_free(waits, n);
                return -ENOMEM;
        }
        for (size_t i = 0; i < n; i++)
                fprintf(f, "%s%s", i ? ", " : "", waits[i]);
        strings_free(waits, n);
        return fclose(f) == 0 ? 0 : -ENOMEM;
}

/* One thread's part of the key: "read pipe: pipedl.py:<module>", with its wait and first frame for the title. A Go
 * thread whose frames are all the runtime's (an M parked in the scheduler) stands for where the program is stuck:
 * its largest group of waiting goroutines. */
static int thread_part(const Snapshot *root, const Snapshot *p, const ThreadSnapshot *t, Part *ret) {
        _cleanup_free_ char *wait = NULL, *frames = NULL, *first = NULL;
        const GoStack *st = NULL;
        bool goroutines = false;
        int r;

        r = thread_wait(root, p, t, &wait);
        if (r < 0)
                return r;
        r = frames_text(p, t->frames, t->n_frames, &frames, &first);
        if (r == 0 && snapshot_go(p)) {
                r = goroutines_stuck_stack(p, &st);
                if (r >= 0 && st) {
                        free(frames);
                        free(first);
                        frames = first = NULL;
                        goroutines = true;
                        r = frames_text(p, st->frames, st->n_frames, &frames, &first);
                }
        }
        if (r < 0)
                return r;
        *ret = (Part) { .pid = p->pid };
        if (asprintf(&ret->text, "%s%s%s", wait ?: "", goroutines ? " goroutines" : "", frames ?: "") < 0) {
                ret->text = NULL;
                return -ENOMEM;
        }
        ret->wait = TAKE_PTR(wait);
        ret->first = TAKE_PTR(first);
        return 0;
}

/* Whether TID is already in TIDS[0..N). */
static bool has_tid(const pid_t *tids, size_t n, pid_t tid) {
        for (size_t i = 0; i < n; i++)
                if (tids[i] == tid)
                        return true;
        return false;
}

/* One process's part: "python3[read pipe: pipedl.py:<module>]", its threads on the chain sorted and joined by " + ".
 * Its lead, for the title, is the culprit (ROOT's trigger thread) when CULPRIT_LEADS, else the thread whose part sorts
 * first. A process the chain reached but none of whose threads it names is its comm alone. */
static int process_part(const Snapshot *root, pid_t pid, bool culprit_leads, Part *ret) {
        const Snapshot *p = snapshot_process_of(root, pid);
        const WaitChain *c = root->wait_chain;
        Part parts[SIGNATURE_THREADS], lead = {};
        pid_t tids[SIGNATURE_THREADS];
        size_t n_tids = 0, n = 0, size = 0;
        FILE *f;
        int r = 0;

        *ret = (Part) { .pid = pid };
        if (!p)
                return 0;
        if (p == root && root->trigger && root->trigger->tid > 0)
                tids[n_tids++] = root->trigger->tid;
        for (size_t i = 0; c && i < c->n_edges && n_tids < SIGNATURE_THREADS; i++) {
                const WaitEdge *e = &c->edges[i];

                if (e->pid == pid && e->tid > 0 && !has_tid(tids, n_tids, e->tid))
                        tids[n_tids++] = e->tid;
                if (n_tids < SIGNATURE_THREADS && e->peer_pid == pid && e->peer_tid > 0 &&
                    !has_tid(tids, n_tids, e->peer_tid))
                        tids[n_tids++] = e->peer_tid;
        }
        for (size_t i = 0; i < n_tids && r >= 0; i++) {
                const ThreadSnapshot *t = snapshot_find_thread((Snapshot *) p, tids[i]);

                if (!t)
                        continue;
                r = thread_part(root, p, t, &parts[n]);
                if (r < 0)
                        break;
                /* The culprit leads: kept aside before the sort, its copy of the wait and frame. */
                if (culprit_leads && p == root && i == 0 &&
                    ((parts[n].wait && !(lead.wait = strdup(parts[n].wait))) ||
                     (parts[n].first && !(lead.first = strdup(parts[n].first)))))
                        r = -ENOMEM;
                n++;
        }
        if (r >= 0)
                n = parts_sort_unique(parts, n);
        if (r >= 0 && !lead.wait && !lead.first && n > 0) {
                lead.wait = TAKE_PTR(parts[0].wait);
                lead.first = TAKE_PTR(parts[0].first);
        }
        f = r >= 0 ? open_memstream(&ret->text, &size) : NULL;
        if (!f) {
                parts_free(parts, n);
                parts_free(&lead, 1);
                return r < 0 ? r : -ENOMEM;
        }
        fputs(p->comm ?: "?", f);
        if (n > 0) {
                fputc('[', f);
                for (size_t i = 0; i < n; i++)
                        fprintf(f, "%s%s", i ? " + " : "", parts[i].text);
                fputc(']', f);
        }
        parts_free(parts, n);
        ret->wait = lead.wait;
        ret->first = lead.first;
        return fclose(f) == 0 ? 0 : -ENOMEM;
}

/* Cut S at MAX bytes, at a character's start. */
static void cut_utf8(char *s, size_t max) {
        size_t k = max;

        if (strlen(s) <= max)
                return;
        while (k > 0 && ((unsigned char) s[k] & 0xc0) == 0x80)
                k--;
        s[k] = 0;
}

/* FNV-1a, 64 bits: a stable hash, the same on every host and build (no library function of ours' dependencies is
 * both stable across versions and this small). */
static uint64_t fnv1a64(const char *s) {
        uint64_t h = UINT64_C(0xcbf29ce484222325);

        for (; *s; s++)
                h = (h ^ (uint8_t) *s) * UINT64_C(0x100000001b3);
        return h;
}

/* "python3 blocked in read ← pipedl.py:<module> ⇄ python3 (deadlock)": LEAD's comm, its wait and first frame, then
 * the comms of the OTHER processes. */
static int put_title(const Snapshot *s, const Part *lead, const Part *other, size_t n_other, char **ret) {
        size_t size = 0;
        FILE *f;

        f = open_memstream(ret, &size);
        if (!f)
                return -ENOMEM;
        fputs(snapshot_comm_of(s, lead->pid) ?: "?", f);
        fprintf(f, " %s", s->trigger->klass ?: "?");
        /* The call alone ("read"): what it leads to is the rest of the title. */
        if (lead->wait)
                fprintf(f, " in %.*s", (int) strcspn(lead->wait, " ,"), lead->wait);
        if (lead->first) {
                fputs(" ← ", f);
                fputs(lead->first, f);
        }
        for (size_t i = 0; i < n_other; i++) {
                fputs(" ⇄ ", f);
                fputs(snapshot_comm_of(s, other[i].pid) ?: "?", f);
        }
        if (s->wait_chain && (s->wait_chain->deadlock || s->wait_chain->n_lock_cycle > 0))
                fputs(" (deadlock)", f);
        if (fclose(f) != 0)
                return -ENOMEM;
        cut_utf8(*ret, SIGNATURE_TITLE_MAX);
        return 0;
}

int snapshot_signature(const Snapshot *s, SnapshotSignature *ret) {
        _cleanup_free_ char *proto = NULL, *title = NULL;
        const WaitChain *c = s->wait_chain;
        /* A cycle of processes, or of one process's threads over its mutexes. */
        bool deadlock = c && (c->deadlock || c->n_lock_cycle > 0);
        Part parts[SIGNATURE_PROCESSES];
        pid_t pids[SIGNATURE_PROCESSES] = { s->pid };
        size_t n_pids = 1, n = 0, size = 0, lead = 0;
        FILE *f;
        int r = 0;

        *ret = (SnapshotSignature) {};
        if (!s->trigger)
                return -ENODATA;
        for (size_t i = 0; c && i < c->n_edges && n_pids < SIGNATURE_PROCESSES; i++)
                if (c->edges[i].peer_pid > 0 && !has_tid(pids, n_pids, c->edges[i].peer_pid) &&
                    snapshot_process_of(s, c->edges[i].peer_pid))
                        pids[n_pids++] = c->edges[i].peer_pid;
        /* A deadlock has no culprit: whichever of its processes fired, the title leads with the one that sorts
         * first, so that both sides read alike. */
        for (size_t i = 0; i < n_pids && r >= 0; i++) {
                r = process_part(s, pids[i], !deadlock, &parts[n]);
                if (r >= 0 && parts[n].text)
                        n++;
                else if (r >= 0)
                        parts_free(&parts[n], 1);
        }
        if (r < 0 || n == 0) {
                parts_free(parts, n);
                return r < 0 ? r : -ENODATA;
        }
        /* Sorted, repeats kept: two processes alike (a pipe deadlock of two copies of one program) are two. */
        qsort(parts, n, sizeof *parts, cmp_part);
        for (size_t i = 0; !deadlock && i < n; i++)
                if (parts[i].pid == s->pid)
                        lead = i;
        f = open_memstream(&proto, &size);
        if (!f) {
                parts_free(parts, n);
                return -ENOMEM;
        }
        fprintf(f, "%s%s: ", s->trigger->klass ?: "?", deadlock ? " deadlock" : "");
        for (size_t i = 0; i < n; i++)
                fprintf(f, "%s%s", i ? " ⇄ " : "", parts[i].text);
        if (fclose(f) != 0) {
                parts_free(parts, n);
                return -ENOMEM;
        }
        cut_utf8(proto, SIGNATURE_PROTO_MAX);
        /* The others in key order, the lead taken out. */
        Part lead_part = parts[lead];
        memmove(parts + lead, parts + lead + 1, (n - lead - 1) * sizeof *parts);
        r = put_title(s, &lead_part, parts, n - 1, &title);
        parts_free(parts, n - 1);
        parts_free(&lead_part, 1);
        if (r < 0)
                return r;
        snprintf(ret->key, sizeof ret->key, "%016" PRIx64, fnv1a64(proto));
        ret->title = TAKE_PTR(title);
        ret->proto = TAKE_PTR(proto);
        return 0;
}
void snapshot_signature_done(SnapshotSignature *sig) {
        free(sig->title);
        free(sig->proto);
        *sig = (SnapshotSignature) {};
}

int snapshot_sign(Snapshot *s) {
        SnapshotSignature sig;
        int r;

        if (s->signature)
                return 0;
        r = snapshot_signature(s, &sig);
        if (r == -ENODATA)
                return 0;
        if (r < 0)
                return r;
        s->signature = strdup(sig.key);
        if (!s->signature) {
                snapshot_signature_done(&sig);
                return -ENOMEM;
        }
        free(s->title);
        free(s->proto_signature);
        s->title = TAKE_PTR(sig.title);
        s->proto_signature = TAKE_PTR(sig.proto);
        snapshot_signature_done(&sig);
        return 0;
}

bool signature_is_valid(const char *s) {
        return s && strlen(s) == SIGNATURE_LENGTH && strspn(s, "0123456789abcdef") == SIGNATURE_LENGTH;
}
