/* test-snapshot-json.c: a snapshot survives JSON and back; foreign documents are refused; text escapes. */
#include "unit.h"
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>

#include "base/macro.h"
#include "base/strv.h"
#include "render/snapshot-json.h"
#include "render/snapshot-text.h"

static Snapshot *make_snapshot(void) {
        Snapshot *s = snapshot_new();
        ThreadSnapshot *t;
        UserFrame *f;
        KernelFrame *k;
        ModuleInfo *m;

        s->pid = 4242;
        s->ppid = 1;
        s->uid = 1000;
        s->state = 'S';
        s->timestamp_usec = 1795000000123456ULL;
        s->comm = strdup("\033[2Jevil;name");
        s->exe = strdup("/usr/bin/x");
        s->cmdline = calloc(3, sizeof(char *));
        s->cmdline[0] = strdup("x");
        s->cmdline[1] = strdup("--flag");
        s->unit = strdup("x.service");
        s->unwinder = strdup("libdw");
        s->method_requested = CAPTURE_METHOD_AUTO;
        s->max_pause_us = 12.5;
        s->threads_total = 1;
        snapshot_add_error(s, "thread budget: captured 1 of 2 threads");

        m = snapshot_add_module(s);
        m->path = strdup("/usr/bin/x");
        m->build_id = strdup("f7111e59829e598dcb1bdb2e60db7945f0795b1d");
        m->start = 0x555500000000ULL;
        m->end = 0x555500004000ULL;
        m->bias = 0x555500000000ULL;
        m->debuginfo = true;

        t = snapshot_add_thread(s);
        t->tid = 4243;
        t->comm = strdup("worker\n1");
        t->state = 'D';
        t->syscall = (ProcSyscall) { .kind = PROC_SYSCALL_BLOCKED, .nr = __NR_read, .args = { 3, 0xffffffffffffffffULL },
                                     .sp = 0x7ffd00001000ULL, .pc = 0x7f0000001234ULL };
        t->wchan = strdup("anon_pipe_read");
        t->method = CAPTURE_METHOD_PTRACE;
        t->pause_us = 12.5;
        t->stack_bytes = 4096;
        t->unwind_end = strdup("end of stack");
        t->tracer_pid = 99;
        k = thread_add_kframe(t);
        k->function = strdup("anon_pipe_read");
        k->offset = 0x366;
        k->size = 0x4a0;
        f = thread_add_frame(t);
        f->pc = 0xfffffffffffff000ULL; /* above 2^53: must not lose precision */
        f->activation = true;
        f->method = FRAME_METHOD_INITIAL;
        f->module = 0;
        f->function = strdup("br_level_20");
        f->function_offset = 0x52;
        f->file = strdup("block-read.c");
        f->line = 192;
        f->column = 13;
        f = thread_add_frame(t);
        f->pc = 0x1234;
        f->method = FRAME_METHOD_SCAN;
        f->module = -1;
        return s;
}

START_TEST(test_round_trip) {
        _cleanup_snapshot_free_ Snapshot *s = make_snapshot(), *back = NULL;
        json_object *j = snapshot_to_json(s), *j2;
        const char *err = NULL;

        ck_assert_ptr_nonnull(j);
        ck_assert_int_eq(snapshot_from_json(j, &back, &err), 0);
        ck_assert_int_eq(back->pid, 4242);
        ck_assert_uint_eq(back->timestamp_usec, 1795000000123456ULL);
        ck_assert_str_eq(back->comm, "\033[2Jevil;name");
        ck_assert_uint_eq(strv_length(back->cmdline), 2);
        ck_assert_str_eq(back->cmdline[1], "--flag");
        ck_assert_str_eq(back->unit, "x.service");
        ck_assert(back->partial);
        ck_assert_str_eq(back->errors[0], "thread budget: captured 1 of 2 threads");
        ck_assert_uint_eq(back->n_modules, 1);
        ck_assert_str_eq(back->modules[0].build_id, "f7111e59829e598dcb1bdb2e60db7945f0795b1d");
        ck_assert_uint_eq(back->modules[0].start, 0x555500000000ULL);
        ck_assert_uint_eq(back->n_threads, 1);
        ThreadSnapshot *t = &back->threads[0];
        ck_assert_int_eq(t->state, 'D');
        ck_assert_str_eq(t->comm, "worker\n1");
        ck_assert_int_eq(t->syscall.kind, PROC_SYSCALL_BLOCKED);
        ck_assert_uint_eq(t->syscall.args[1], 0xffffffffffffffffULL);
        ck_assert_uint_eq(t->syscall.sp, 0x7ffd00001000ULL);
        ck_assert_int_eq(t->method, CAPTURE_METHOD_PTRACE);
        ck_assert_double_eq_tol(t->pause_us, 12.5, 1e-9);
        ck_assert_int_eq(t->tracer_pid, 99);
        ck_assert_uint_eq(t->n_kframes, 1);
        ck_assert_uint_eq(t->kframes[0].offset, 0x366);
        ck_assert_uint_eq(t->n_frames, 2);
        ck_assert_uint_eq(t->frames[0].pc, 0xfffffffffffff000ULL);
        ck_assert(t->frames[0].activation);
        ck_assert_str_eq(t->frames[0].function, "br_level_20");
        ck_assert_uint_eq(t->frames[0].line, 192);
        ck_assert_int_eq(t->frames[1].method, FRAME_METHOD_SCAN);
        ck_assert_int_eq(t->frames[1].module, -1);
        ck_assert_ptr_null(t->frames[1].function);

        /* And the re-serialised document is identical. */
        j2 = snapshot_to_json(back);
        ck_assert_str_eq(json_object_to_json_string(j), json_object_to_json_string(j2));
        json_object_put(j);
        json_object_put(j2);
}
END_TEST

START_TEST(test_reject_foreign) {
        static const char *docs[] = {
                "{}",
                "{\"schema\": \"stackwatch.snapshot/2\", \"process\": {\"pid\": 1}}",
                "{\"schema\": \"stackwatch.snapshot/1\"}",
                "{\"schema\": \"stackwatch.snapshot/1\", \"process\": {\"pid\": \"1\"}}",
                "[1, 2, 3]",
        };
        for (size_t i = 0; i < sizeof docs / sizeof docs[0]; i++) {
                json_object *j = json_tokener_parse(docs[i]);
                Snapshot *s = NULL;
                const char *err = NULL;
                ck_assert_int_eq(snapshot_from_json(j, &s, &err), -EINVAL);
                ck_assert_ptr_nonnull(err);
                ck_assert_ptr_null(s);
                json_object_put(j);
        }
}
END_TEST

START_TEST(test_hostile_values) {
        /* Wrong types and out-of-range module indexes are tolerated, never trusted. */
        const char *doc = "{\"schema\":\"stackwatch.snapshot/1\",\"process\":{\"pid\":5,\"comm\":7},"
                          "\"threads\":[{\"tid\":6,\"frames\":[{\"pc\":\"0xzz\",\"module\":99},{\"module\":-7}]},"
                          "\"junk\"],\"modules\":[]}";
        json_object *j = json_tokener_parse(doc);
        _cleanup_snapshot_free_ Snapshot *s = NULL;

        ck_assert_int_eq(snapshot_from_json(j, &s, NULL), 0);
        ck_assert_ptr_null(s->comm);
        ck_assert_uint_eq(s->n_threads, 1);
        ck_assert_int_eq(s->threads[0].frames[0].module, -1);
        ck_assert_int_eq(s->threads[0].frames[1].module, -1);
        json_object_put(j);
}
END_TEST

START_TEST(test_text_escapes) {
        _cleanup_snapshot_free_ Snapshot *s = make_snapshot();
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);

        ck_assert_int_eq(snapshot_print_text(s, &(TextOptions) { .kernel = true }, f), 0);
        ck_assert_int_eq(snapshot_print_folded(s, true, f), 0);
        fclose(f);
        ck_assert_ptr_null(memchr(buf, '\033', len));
        ck_assert_ptr_nonnull(strstr(buf, "PID 4242 - \\e[2Jevil;name"));
        ck_assert_ptr_nonnull(strstr(buf, "TID 4243: \"worker\\n1\" D (disk sleep) in read(0x3"));
        ck_assert_ptr_nonnull(strstr(buf, "[k] anon_pipe_read+0x366"));
        ck_assert_ptr_nonnull(strstr(buf, "#0  0xfffffffffffff000 br_level_20+0x52 - /usr/bin/x"));
        ck_assert_ptr_nonnull(strstr(buf, "    block-read.c:192:13"));
        ck_assert_ptr_nonnull(strstr(buf, "#1  0x0000000000001234 ?? [scan]"));
        /* Folded: outermost first, kernel frames last, ';' in names cannot split frames. */
        ck_assert_ptr_nonnull(strstr(buf, "worker\\n1;0x1234;br_level_20;anon_pipe_read_[k] 1\n"));
        free(buf);
}
END_TEST

/* A mutex edge and an in-process lock cycle survive JSON and back, and print as a person would say them; a stored
 * "deadlock" with no cycle at all (a hostile file) prints no cycle rather than dividing by zero. */
START_TEST(test_lock_cycle) {
        _cleanup_snapshot_free_ Snapshot *s = make_snapshot(), *back = NULL;
        json_object *j, *j2;
        const char *err = NULL;
        WaitEdge *e;
        char *buf = NULL;
        size_t len = 0;
        FILE *f;

        s->wait_chain = calloc(1, sizeof *s->wait_chain);
        e = wait_chain_add_edge(s->wait_chain);
        *e = (WaitEdge) { .pid = 4242, .tid = 4243, .kind = WAIT_KIND_MUTEX, .fd = -1, .peer_pid = 4242,
                          .peer_tid = 4243, .peer_fd = -1, .syscall = strdup("futex"),
                          .object = strdup("mutex 0x5555000010c0"), .address = 0x5555000010c0ULL };
        s->wait_chain->lock_pid = 4242;
        s->wait_chain->lock_cycle = calloc(1, sizeof(pid_t));
        s->wait_chain->lock_cycle[0] = 4243;
        s->wait_chain->n_lock_cycle = 1;
        j = snapshot_to_json(s);
        ck_assert_int_eq(snapshot_from_json(j, &back, &err), 0);
        ck_assert_int_eq(back->wait_chain->edges[0].kind, WAIT_KIND_MUTEX);
        ck_assert_int_eq(back->wait_chain->edges[0].peer_tid, 4243);
        ck_assert_uint_eq(back->wait_chain->edges[0].address, 0x5555000010c0ULL);
        ck_assert_int_eq(back->wait_chain->lock_pid, 4242);
        ck_assert_uint_eq(back->wait_chain->n_lock_cycle, 1);
        j2 = snapshot_to_json(back);
        ck_assert_str_eq(json_object_to_json_string(j), json_object_to_json_string(j2));
        json_object_put(j);
        json_object_put(j2);

        back->wait_chain->deadlock = true; /* and no process cycle */
        f = open_memstream(&buf, &len);
        ck_assert_int_eq(snapshot_print_text(back, &(TextOptions) { .kernel = true }, f), 0);
        fclose(f);
        ck_assert_ptr_nonnull(strstr(buf, "4242 (\\e[2Jevil;name) thread 4243 (worker\\n1) futex → mutex 0x5555000010c0 → "
                                          "4242 (\\e[2Jevil;name) thread 4243 (worker\\n1) in read\n"));
        ck_assert_ptr_nonnull(strstr(buf, "DEADLOCK in 4242 (\\e[2Jevil;name): thread 4243 (worker\\n1) → thread 4243 "
                                          "(worker\\n1) waits for a mutex it holds itself\n"));
        ck_assert_ptr_null(strstr(buf, "wait only on each other"));
        free(buf);
}
END_TEST

/* The threads of a deadlock, in wait order: a lock cycle's as the chain names them; for a cycle of processes, the
 * thread of each whose edge leads to the next process (not another edge of the same process); none without one. */
START_TEST(test_deadlock_threads) {
        _cleanup_snapshot_free_ Snapshot *s = make_snapshot();
        static const struct { pid_t pid, tid, peer; } edges[] = {
                { 4242, 4244, 7000 }, { 4242, 4243, 5000 }, { 5000, 5001, 4242 },
        };
        pid_t pids[4], tids[4];
        WaitChain *c;

        ck_assert_uint_eq(snapshot_deadlock_threads(s, pids, tids, 4), 0);
        c = s->wait_chain = calloc(1, sizeof *s->wait_chain);
        for (size_t i = 0; i < ELEMENTSOF(edges); i++)
                *wait_chain_add_edge(c) = (WaitEdge) { .pid = edges[i].pid, .tid = edges[i].tid, .fd = 3,
                                                       .peer_pid = edges[i].peer, .peer_fd = 4 };
        c->cycle = calloc(2, sizeof(pid_t));
        c->cycle[0] = 4242;
        c->cycle[1] = 5000;
        c->n_cycle = 2;
        /* A cycle that is no knot is no deadlock. */
        ck_assert_uint_eq(snapshot_deadlock_threads(s, pids, tids, 4), 0);
        c->deadlock = true;
        ck_assert_uint_eq(snapshot_deadlock_threads(s, pids, tids, 4), 2);
        ck_assert_int_eq(pids[0], 4242);
        ck_assert_int_eq(tids[0], 4243);
        ck_assert_int_eq(pids[1], 5000);
        ck_assert_int_eq(tids[1], 5001);
        ck_assert_uint_eq(snapshot_deadlock_threads(s, pids, tids, 1), 1);

        c->lock_pid = 4242;
        c->lock_cycle = calloc(3, sizeof(pid_t));
        c->lock_cycle[0] = 4245;
        c->lock_cycle[1] = 4246;
        c->lock_cycle[2] = 4247;
        c->n_lock_cycle = 3;
        ck_assert_uint_eq(snapshot_deadlock_threads(s, pids, tids, 2), 2);
        ck_assert_int_eq(pids[1], 4242);
        ck_assert_int_eq(tids[0], 4245);
        ck_assert_int_eq(tids[1], 4246);
        ck_assert_ptr_eq(snapshot_process_of(s, 4242), s);
        ck_assert_ptr_null(snapshot_process_of(s, 5000));
}
END_TEST

/* What a firing reports of a Python thread: its innermost Python frame as "function (file:line)", escaped; and the
 * top frames numbered as the dump numbers them (the interpreter's frame not shown), a Python frame's place once. */
START_TEST(test_top_frames_of_a_python_thread) {
        _cleanup_snapshot_free_ Snapshot *s = make_snapshot();
        _cleanup_strv_free_ char **top = NULL;
        _cleanup_free_ char *py = NULL;
        ThreadSnapshot *t = snapshot_add_thread(s);
        static const struct { FrameKind kind; const char *function, *file; unsigned line; bool interpreter; } frames[] = {
                { FRAME_KIND_PYTHON, "Worker.spin\x1b", "/srv/app/app.py", 3, false },
                { FRAME_KIND_PYTHON, "inner", "app.py", 12, false },
                { FRAME_KIND_NATIVE, "_PyEval_EvalFrameDefault", NULL, 0, true },
                { FRAME_KIND_NATIVE, "main", "main.c", 5, false },
        };

        t->tid = 4250;
        for (size_t i = 0; i < ELEMENTSOF(frames); i++) {
                UserFrame *f = thread_add_frame(t);

                f->kind = frames[i].kind;
                f->module = -1;
                f->interpreter = frames[i].interpreter;
                f->function = strdup(frames[i].function);
                f->file = frames[i].file ? strdup(frames[i].file) : NULL;
                f->line = frames[i].line;
                f->function_offset = f->kind == FRAME_KIND_NATIVE ? 0x10 : 0;
        }
        ck_assert_int_eq(snapshot_top_runtime_frame(s, 4250, &py), 0);
        ck_assert_str_eq(py, "Worker.spin\\e (app.py:3)");
        ck_assert_int_eq(snapshot_top_frames(s, 4250, 8, &top), 0);
        ck_assert_uint_eq(strv_length(top), 3);
        ck_assert_str_eq(top[0], "#0  Worker.spin\\e (app.py:3)");
        ck_assert_str_eq(top[1], "#1  inner (app.py:12)");
        ck_assert_str_eq(top[2], "#2  main+0x10 at main.c:5");
        /* A thread without Python frames has none to name. */
        py = mfree(py);
        ck_assert_int_eq(snapshot_top_runtime_frame(s, 4243, &py), 0);
        ck_assert_ptr_null(py);
}
END_TEST

/* A snapshot from another architecture numbers its syscalls its own way: the name stored beside the number decides,
 * and a call this architecture lacks reads as unknown rather than as whatever this one numbers so. */
START_TEST(test_syscalls_of_another_architecture) {
        const char *doc = "{\"schema\":\"stackwatch.snapshot/1\",\"process\":{\"pid\":5},\"threads\":["
                          "{\"tid\":6,\"syscall\":{\"state\":\"blocked\",\"nr\":63,\"name\":\"read\"}},"
                          "{\"tid\":7,\"syscall\":{\"state\":\"blocked\",\"nr\":7,\"name\":\"poll\"}},"
                          "{\"tid\":8,\"syscall\":{\"state\":\"blocked\",\"nr\":98,\"name\":null}}],"
                          "\"trigger\":{\"tid\":6,\"syscall\":\"futex\",\"syscall_nr\":98,"
                          "\"probe\":{\"syscall\":\"fcntl\",\"syscall_nr\":25}},\"modules\":[]}";
        json_object *j = json_tokener_parse(doc);
        _cleanup_snapshot_free_ Snapshot *s = NULL;

        ck_assert_int_eq(snapshot_from_json(j, &s, NULL), 0);
        ck_assert_uint_eq(s->n_threads, 3);
        ck_assert_int_eq(s->threads[0].syscall.nr, __NR_read);
#ifdef __NR_poll
        ck_assert_int_eq(s->threads[1].syscall.nr, __NR_poll);
#else
        ck_assert_int_eq(s->threads[1].syscall.nr, -1);
#endif
        ck_assert_int_eq(s->threads[2].syscall.nr, 98);         /* no name: the number is all there is */
        ck_assert_ptr_nonnull(s->trigger);
        ck_assert_int_eq(s->trigger->syscall_nr, __NR_futex);
        ck_assert_int_eq(s->trigger->probe_nr, __NR_fcntl);
        json_object_put(j);
}
END_TEST

UNIT_TEST_MAIN("snapshot-json", test_round_trip, test_reject_foreign, test_hostile_values, test_text_escapes,
               test_lock_cycle, test_deadlock_threads, test_top_frames_of_a_python_thread,
               test_syscalls_of_another_architecture)
