/* test-signature.c: what makes two snapshots one problem (render/signature.h): no address, pid or line in the key,
 * the skip list, names normalized, both sides of a deadlock alike; and a stored snapshot without a signature gets
 * it on read. The suite's real fixtures are signed by the daemon in tests/integration/test_problems.py. */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>

#include "base/macro.h"
#include "render/signature.h"
#include "render/snapshot-json.h"

static int module_of(Snapshot *s, const char *path, uint64_t start) {
        ModuleInfo *m = snapshot_add_module(s);

        ck_assert_ptr_nonnull(m);
        m->path = strdup(path);
        m->start = start;
        m->end = start + 0x100000;
        m->bias = start;
        return (int) s->n_modules - 1;
}

static void native(ThreadSnapshot *t, int module, uint64_t pc, const char *function, unsigned line) {
        UserFrame *f = thread_add_frame(t);

        ck_assert_ptr_nonnull(f);
        *f = (UserFrame) { .kind = FRAME_KIND_NATIVE, .pc = pc, .module = module, .function = strdup(function),
                           .function_offset = pc & 0xff, .file = strdup("app.c"), .line = line };
}

static void python(ThreadSnapshot *t, const char *function, const char *file, unsigned line) {
        UserFrame *f = thread_add_frame(t);

        ck_assert_ptr_nonnull(f);
        *f = (UserFrame) { .kind = FRAME_KIND_PYTHON, .module = -1, .function = strdup(function),
                           .file = strdup(file), .line = line };
}

static ThreadSnapshot *thread(Snapshot *s, pid_t tid, int64_t syscall) {
        ThreadSnapshot *t = snapshot_add_thread(s);

        ck_assert_ptr_nonnull(t);
        t->tid = tid;
        t->comm = strdup(s->comm);
        t->state = 'S';
        t->syscall = (ProcSyscall) { .kind = syscall >= 0 ? PROC_SYSCALL_BLOCKED : PROC_SYSCALL_RUNNING,
                                     .nr = syscall };
        return t;
}

static void trigger(Snapshot *s, pid_t tid, const char *klass, int64_t syscall) {
        s->trigger = calloc(1, sizeof *s->trigger);
        ck_assert_ptr_nonnull(s->trigger);
        *s->trigger = (SnapshotTrigger) { .rule = strdup("r"), .klass = strdup(klass), .tid = tid,
                                          .syscall_nr = syscall, .probe_nr = -1 };
}

/* A C program (named COMM, pid PID, its binary and libc at BASE) blocked in read: main -> serve -> poll_once ->
 * (recursion) -> read. */
static Snapshot *blocked_c(const char *comm, pid_t pid, uint64_t base, unsigned line) {
        Snapshot *s = snapshot_new();
        int app, libc;
        ThreadSnapshot *t;

        ck_assert_ptr_nonnull(s);
        s->pid = pid;
        s->comm = strdup(comm);
        app = module_of(s, "/usr/bin/app", base);
        libc = module_of(s, "/lib/x86_64-linux-gnu/libc.so.6", base + 0x7000000);
        t = thread(s, pid, SYS_read);
        native(t, libc, base + 0x7000123, "__GI___libc_read", 26);
        native(t, libc, base + 0x7000456, "read", 0);
        native(t, app, base + 0x1100, "poll_once(int, std::vector<int, std::allocator<int> > const&)", line);
        native(t, app, base + 0x1180, "poll_once(int, std::vector<int, std::allocator<int> > const&)", line + 1);
        native(t, app, base + 0x1200, "serve", line + 10);
        native(t, app, base + 0x1300, "main", line + 20);
        trigger(s, pid, "blocked", SYS_read);
        return s;
}

static void signature_of(const Snapshot *s, SnapshotSignature *sig) {
        ck_assert_int_eq(snapshot_signature(s, sig), 0);
        ck_assert(signature_is_valid(sig->key));
}

START_TEST(test_no_address_pid_or_line) {
        _cleanup_snapshot_free_ Snapshot *a = blocked_c("app", 100, 0x555500000000, 10);
        _cleanup_snapshot_free_ Snapshot *b = blocked_c("app", 2345, 0x5612340000, 99);
        SnapshotSignature x, y;

        signature_of(a, &x);
        signature_of(b, &y);
        ck_assert_str_eq(x.key, y.key);
        ck_assert_str_eq(x.title, y.title);
        /* libc skipped, the argument list gone, templates as <T>, recursion once. */
        ck_assert_str_eq(x.proto, "blocked: app[read: app!poll_once | app!serve | app!main]");
        ck_assert_str_eq(x.title, "app blocked in read ← app!poll_once");
        snapshot_signature_done(&x);
        snapshot_signature_done(&y);
}
END_TEST

START_TEST(test_another_bug_another_key) {
        _cleanup_snapshot_free_ Snapshot *a = blocked_c("app", 100, 0x555500000000, 10);
        _cleanup_snapshot_free_ Snapshot *b = blocked_c("app", 100, 0x555500000000, 10);
        _cleanup_snapshot_free_ Snapshot *c = blocked_c("app", 100, 0x555500000000, 10);
        SnapshotSignature x, y, z;

        free(b->threads[0].frames[4].function);
        b->threads[0].frames[4].function = strdup("serve_admin");
        free(c->trigger->klass);
        c->trigger->klass = strdup("busy-loop");
        signature_of(a, &x);
        signature_of(b, &y);
        signature_of(c, &z);
        ck_assert_str_ne(x.key, y.key);
        ck_assert_str_ne(x.key, z.key);
        ck_assert_str_eq(z.title, "app busy-loop ← app!poll_once");
        snapshot_signature_done(&x);
        snapshot_signature_done(&y);
        snapshot_signature_done(&z);
}
END_TEST

START_TEST(test_names_normalized) {
        static const struct {
                const char *function, *name;
        } cases[] = {
                { "std::map<int, std::string>::at(int const&) const", "app!std::map<T>::at" },
                { "core::ptr::drop_in_place<foo::Bar>::h0123456789abcdef", "app!core::ptr::drop_in_place<T>" },
                { "operator<(A const&, A const&)", "app!operator<" },
                { "(anonymous namespace)::worker(void*)", "app!(anonymous namespace)::worker" },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_snapshot_free_ Snapshot *s = blocked_c("app", 100, 0x555500000000, 10);
                SnapshotSignature sig;
                char *want;

                for (size_t k = 2; k <= 3; k++) {
                        free(s->threads[0].frames[k].function);
                        s->threads[0].frames[k].function = strdup(cases[i].function);
                }
                signature_of(s, &sig);
                ck_assert_int_ge(asprintf(&want, "blocked: app[read: %s | app!serve | app!main]", cases[i].name), 0);
                ck_assert_str_eq(sig.proto, want);
                free(want);
                snapshot_signature_done(&sig);
        }
}
END_TEST

/* Python's own frames first, threading.py's machinery left out. */
START_TEST(test_runtime_frames_first) {
        _cleanup_snapshot_free_ Snapshot *s = blocked_c("python3", 100, 0x555500000000, 10);
        ThreadSnapshot *t = &s->threads[0];
        SnapshotSignature sig;
        UserFrame *f;

        python(t, "wait", "/usr/lib/python3.11/threading.py", 320);
        python(t, "fetch", "/srv/app/worker.py", 12);
        python(t, "Worker.run", "/srv/app/worker.py", 40);
        python(t, "_bootstrap_inner", "/usr/lib/python3.11/threading.py", 1038);
        /* The interpreter's native frame, which the Python frames before it stand for. */
        f = thread_add_frame(t);
        *f = (UserFrame) { .kind = FRAME_KIND_NATIVE, .interpreter = true, .module = 0,
                           .function = strdup("_PyEval_EvalFrameDefault") };
        signature_of(s, &sig);
        ck_assert_str_eq(sig.proto, "blocked: python3[read: worker.py:fetch | worker.py:Worker.run]");
        ck_assert_str_eq(sig.title, "python3 blocked in read ← worker.py:fetch");
        snapshot_signature_done(&sig);
}
END_TEST

/* Process A (pid APID) waits on B through a pipe and B on A: the snapshot as rooted at A. */
static Snapshot *pipe_deadlock(pid_t apid, pid_t bpid, bool root_a, bool same) {
        Snapshot *a = blocked_c("worker", apid, 0x555500000000, 10), *b = blocked_c("worker", bpid, 0x56000000, 10);
        Snapshot *root = root_a ? a : b, *peer = root_a ? b : a;
        WaitEdge *e;

        if (!same) {
                free(b->threads[0].frames[4].function);
                b->threads[0].frames[4].function = strdup("reply");
        }
        free(peer->trigger->rule);
        free(peer->trigger->klass);
        free(peer->trigger);
        peer->trigger = NULL;
        root->wait_chain = calloc(1, sizeof *root->wait_chain);
        root->wait_chain->deadlock = true;
        for (int i = 0; i < 2; i++) {
                pid_t from = (i == 0) == root_a ? apid : bpid, to = from == apid ? bpid : apid;

                e = wait_chain_add_edge(root->wait_chain);
                *e = (WaitEdge) { .pid = from, .tid = from, .syscall = strdup("read"), .kind = WAIT_KIND_PIPE,
                                  .fd = 3, .peer_pid = to, .peer_fd = 4 };
        }
        root->peers = calloc(1, sizeof *root->peers);
        root->peers[root->n_peers++] = peer;
        return root;
}

START_TEST(test_both_sides_of_a_deadlock_are_one_key) {
        _cleanup_snapshot_free_ Snapshot *from_a = pipe_deadlock(100, 200, true, false);
        _cleanup_snapshot_free_ Snapshot *from_b = pipe_deadlock(300, 400, false, false);
        SnapshotSignature x, y;

        signature_of(from_a, &x);
        signature_of(from_b, &y);
        ck_assert_str_eq(x.key, y.key);
        ck_assert_str_eq(x.title, y.title);
        ck_assert_str_eq(x.proto, "blocked deadlock: worker[read pipe: app!poll_once | app!reply | app!main] ⇄ "
                                  "worker[read pipe: app!poll_once | app!serve | app!main]");
        ck_assert_str_eq(x.title, "worker blocked in read ← app!poll_once ⇄ worker (deadlock)");
        snapshot_signature_done(&x);
        snapshot_signature_done(&y);
}
END_TEST

/* Two copies of one program deadlocked on each other: two processes in the key and the title, not one. */
START_TEST(test_two_copies_are_two_processes) {
        _cleanup_snapshot_free_ Snapshot *s = pipe_deadlock(100, 200, true, true);
        SnapshotSignature sig;

        signature_of(s, &sig);
        ck_assert_str_eq(sig.proto, "blocked deadlock: worker[read pipe: app!poll_once | app!serve | app!main] ⇄ "
                                    "worker[read pipe: app!poll_once | app!serve | app!main]");
        ck_assert_str_eq(sig.title, "worker blocked in read ← app!poll_once ⇄ worker (deadlock)");
        snapshot_signature_done(&sig);
}
END_TEST

/* A document written before signatures: read back, it has one, the same as the capture would have given. */
START_TEST(test_signed_on_read) {
        _cleanup_snapshot_free_ Snapshot *s = blocked_c("app", 100, 0x555500000000, 10), *back = NULL, *again = NULL;
        json_object *j = snapshot_to_json(s), *k;
        SnapshotSignature sig;

        ck_assert_ptr_nonnull(j);
        ck_assert(!json_object_object_get_ex(j, "signature", NULL));
        ck_assert_int_eq(snapshot_from_json(j, &back, NULL), 0);
        signature_of(s, &sig);
        ck_assert_pstr_eq(back->signature, sig.key);
        ck_assert_pstr_eq(back->title, sig.title);
        json_object_put(j);
        /* Written with it, read back as written, even when the frames no longer give it. */
        k = snapshot_to_json(back);
        json_object_object_add(k, "signature", json_object_new_string("0123456789abcdef"));
        ck_assert_int_eq(snapshot_from_json(k, &again, NULL), 0);
        ck_assert_str_eq(again->signature, "0123456789abcdef");
        json_object_put(k);
        snapshot_signature_done(&sig);
}
END_TEST

START_TEST(test_a_dump_has_none) {
        _cleanup_snapshot_free_ Snapshot *s = blocked_c("app", 100, 0x555500000000, 10);
        SnapshotSignature sig;

        free(s->trigger->rule);
        free(s->trigger->klass);
        free(s->trigger);
        s->trigger = NULL;
        ck_assert_int_eq(snapshot_signature(s, &sig), -ENODATA);
        ck_assert_int_eq(snapshot_sign(s), 0);
        ck_assert_ptr_null(s->signature);
        ck_assert(!signature_is_valid("0123456789ABCDEF"));
        ck_assert(!signature_is_valid("0123456789abcde"));
}
END_TEST

static Suite *signature_suite(void) {
        Suite *s = suite_create("signature");
        TCase *tc = tcase_create("core");

        tcase_add_test(tc, test_no_address_pid_or_line);
        tcase_add_test(tc, test_another_bug_another_key);
        tcase_add_test(tc, test_names_normalized);
        tcase_add_test(tc, test_runtime_frames_first);
        tcase_add_test(tc, test_both_sides_of_a_deadlock_are_one_key);
        tcase_add_test(tc, test_two_copies_are_two_processes);
        tcase_add_test(tc, test_signed_on_read);
        tcase_add_test(tc, test_a_dump_has_none);
        suite_add_tcase(s, tc);
        return s;
}

int main(void) {
        SRunner *sr = srunner_create(signature_suite());
        int failed;

        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
