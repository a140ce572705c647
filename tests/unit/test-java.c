/* test-java.c: a real HotSpot 17 thread dump (jstack -l's text, as the attach protocol answers it) merged into a
 * snapshot: threads by nid, Java frames where the native stack enters the code cache, states, locks and their
 * owners, the JVM's own deadlock count; its deadlock report not taken for threads; the JSON form read back. */
#include "unit.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/macro.h"
#include "render/snapshot-json.h"
#include "runtime/java.h"

#define SYNC_A 0xb88
#define SYNC_B 0xb89
#define HOLDER 0xb8a
#define WAITER 0xb8b

static char *read_file(const char *name, size_t *ret_n) {
        const char *dir = getenv("srcdir") ?: ".";
        char path[4096], *buf;
        FILE *f;
        long n;

        snprintf(path, sizeof path, "%s/%s", dir, name);
        f = fopen(path, "re");
        ck_assert_msg(f, "%s", path);
        ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
        n = ftell(f);
        rewind(f);
        buf = calloc(1, (size_t) n + 1);
        ck_assert_uint_eq(fread(buf, 1, (size_t) n, f), (size_t) n);
        fclose(f);
        if (ret_n)
                *ret_n = (size_t) n;
        return buf;
}

static char *read_data(void) {
        return read_file("tests/unit/data/java-threaddump.txt", NULL);
}

static void add_native(ThreadSnapshot *t, uint64_t pc, int module, const char *function) {
        UserFrame *f = thread_add_frame(t);

        ck_assert_ptr_nonnull(f);
        f->pc = pc;
        f->module = module;
        f->function = function ? strdup(function) : NULL;
}

/* A JVM thread as the unwinder leaves it: libc and libjvm frames, then nameless code cache frames, then libjvm's
 * JavaCalls and the thread's start. */
static Snapshot *jvm_snapshot(void) {
        static const pid_t tids[] = { 0xb76, SYNC_A, SYNC_B, HOLDER, WAITER, 0x4242 };
        Snapshot *s = snapshot_new();
        ModuleInfo *m;

        ck_assert_ptr_nonnull(s);
        s->pid = 0xb75;
        m = snapshot_add_module(s);
        m->path = strdup("/usr/lib/jvm/java-17-openjdk-amd64/lib/server/libjvm.so");
        for (size_t i = 0; i < ELEMENTSOF(tids); i++) {
                ThreadSnapshot *t = snapshot_add_thread(s);

                t->tid = tids[i];
                add_native(t, 0x7f0000001000, 0, "ObjectMonitor::enter(JavaThread*)");
                add_native(t, 0x7f00449537ba, -1, NULL);
                add_native(t, 0x7f0044941260, -1, NULL);
                add_native(t, 0x7f0000002000, 0, "JavaCalls::call_helper");
        }
        ck_assert_ptr_nonnull(snapshot_add_runtime(s, RUNTIME_JAVA));
        return s;
}

static const ThreadSnapshot *thread(Snapshot *s, pid_t tid) {
        const ThreadSnapshot *t = snapshot_find_thread(s, tid);

        ck_assert_ptr_nonnull(t);
        return t;
}

/* What the JVM's dump said of T: an empty block when it said nothing. */
static const ThreadRuntime *java_of(const ThreadSnapshot *t) {
        static const ThreadRuntime none = {};
        return thread_runtime(t, RUNTIME_JAVA) ?: &none;
}

static const RuntimeLock *lock_of(const ThreadSnapshot *t, RuntimeLockKind kind) {
        for (size_t i = 0; i < java_of(t)->n_locks; i++)
                if (java_of(t)->locks[i].kind == kind)
                        return &java_of(t)->locks[i];
        return NULL;
}

static void check_merged(Snapshot *s) {
        const ThreadSnapshot *a = thread(s, SYNC_A), *w = thread(s, WAITER), *h = thread(s, HOLDER);
        const RuntimeLock *l;

        ck_assert_str_eq(snapshot_runtime(s, RUNTIME_JAVA)->version, "OpenJDK 64-Bit Server VM (17.0.15+6-Debian-1deb12u1 mixed mode, sharing)");
        ck_assert_uint_eq(snapshot_runtime(s, RUNTIME_JAVA)->deadlocks, 1);
        ck_assert_str_eq(java_of(a)->name, "sync-a");
        ck_assert_str_eq(java_of(a)->state, "BLOCKED (on object monitor)");
        /* The two code cache frames became the four Java ones, between libjvm's. */
        ck_assert_uint_eq(a->n_frames, 6);
        ck_assert_str_eq(a->frames[0].function, "ObjectMonitor::enter(JavaThread*)");
        ck_assert_int_eq(a->frames[1].kind, FRAME_KIND_JAVA);
        ck_assert_str_eq(a->frames[1].function, "Hung.ab");
        ck_assert_str_eq(a->frames[1].file, "Hung.java");
        ck_assert_uint_eq(a->frames[1].line, 5);
        ck_assert_str_eq(a->frames[3].function, "Hung$$Lambda$1/0x00007f56d8000a08.run");
        ck_assert_ptr_null(a->frames[3].file);
        /* A frame of a named module: its file without "java.base@17.0.15/". */
        ck_assert_str_eq(a->frames[4].function, "java.lang.Thread.run");
        ck_assert_str_eq(a->frames[4].file, "Thread.java");
        ck_assert_uint_eq(a->frames[4].line, 840);
        ck_assert_str_eq(a->frames[5].function, "JavaCalls::call_helper");
        /* sync-a waits for the monitor sync-b locked, and the other way round. */
        l = lock_of(a, RUNTIME_LOCK_WAITING_TO_LOCK);
        ck_assert_ptr_nonnull(l);
        ck_assert_uint_eq(l->address, 0x69ec193e0);
        ck_assert_str_eq(l->klass, "java.lang.Object");
        ck_assert_int_eq(l->owner, SYNC_B);
        ck_assert_int_eq(lock_of(thread(s, SYNC_B), RUNTIME_LOCK_WAITING_TO_LOCK)->owner, SYNC_A);
        ck_assert_int_eq(lock_of(a, RUNTIME_LOCK_LOCKED)->owner, 0);
        /* The ReentrantLock: parked for it, its owner named by the holder's ownable synchronizers. */
        l = lock_of(w, RUNTIME_LOCK_PARKING);
        ck_assert_ptr_nonnull(l);
        ck_assert_str_eq(l->klass, "java.util.concurrent.locks.ReentrantLock$NonfairSync");
        ck_assert_int_eq(l->owner, HOLDER);
        ck_assert_uint_eq(lock_of(h, RUNTIME_LOCK_OWNS)->address, l->address);
        ck_assert_str_eq(w->frames[1].function, "jdk.internal.misc.Unsafe.park");
        ck_assert_ptr_null(w->frames[1].file);
        /* A thread the dump does not list keeps its native frames. */
        ck_assert_ptr_null(java_of(thread(s, 0x4242))->name);
        ck_assert_uint_eq(thread(s, 0x4242)->n_frames, 4);
}

START_TEST(test_merge_real_dump) {
        _cleanup_free_ char *text = read_data();
        Snapshot *s = jvm_snapshot();

        ck_assert(java_is_jvm(s));
        ck_assert_int_eq(java_merge_threaddump(s, text, NULL), 0);
        check_merged(s);
        /* The deadlock report after the threads names sync-a again, with frames: not a second thread. */
        ck_assert_uint_eq(java_of(thread(s, SYNC_A))->n_locks, 2);
        snapshot_free(s);
}
END_TEST

START_TEST(test_json_round_trip) {
        _cleanup_free_ char *text = read_data();
        Snapshot *s = jvm_snapshot(), *back = NULL;
        json_object *j;

        ck_assert_int_eq(java_merge_threaddump(s, text, NULL), 0);
        snapshot_runtime(s, RUNTIME_JAVA)->pause_usec = 1234;
        j = snapshot_to_json(s);
        ck_assert_int_eq(snapshot_from_json(j, &back, NULL), 0);
        ck_assert_uint_eq(snapshot_runtime(back, RUNTIME_JAVA)->pause_usec, 1234);
        check_merged(back);
        json_object_put(j);
        snapshot_free(back);
        snapshot_free(s);
}
END_TEST

/* A JVM in a pid namespace of its own: the dump's nids are its TIDs there; merged into ours, owners too. */
START_TEST(test_pid_namespace) {
        _cleanup_free_ char *text = read_data();
        Snapshot *s = jvm_snapshot();
        pid_t ns[16];

        ck_assert_uint_le(s->n_threads, ELEMENTSOF(ns));
        for (size_t i = 0; i < s->n_threads; i++) {
                ns[i] = s->threads[i].tid;
                s->threads[i].tid = 90000 + (pid_t) i;
        }
        ck_assert_int_eq(java_merge_threaddump(s, text, ns), 0);
        for (size_t i = 0; i < s->n_threads; i++)
                if (ns[i] == SYNC_A) {
                        const ThreadSnapshot *a = &s->threads[i];

                        ck_assert_str_eq(java_of(a)->name, "sync-a");
                        ck_assert_int_eq(lock_of(a, RUNTIME_LOCK_WAITING_TO_LOCK)->owner, 90000 + (pid_t) i + 1);
                }
        /* Not one thread matched by its namespace TID as if it were ours. */
        ck_assert_ptr_null(snapshot_find_thread(s, SYNC_A));
        snapshot_free(s);
}
END_TEST

/* The JVM refusing the command (an error code and its message): no frames, the reason kept. */
START_TEST(test_refused) {
        Snapshot *s = jvm_snapshot();

        ck_assert_int_eq(java_merge_threaddump(s, "101\nProtocol mismatch\n", NULL), 0);
        ck_assert_ptr_null(snapshot_runtime(s, RUNTIME_JAVA)->version);
        ck_assert_str_eq(snapshot_runtime(s, RUNTIME_JAVA)->error, "the JVM refused the request: 101");
        ck_assert_ptr_null(java_of(thread(s, SYNC_A))->name);
        snapshot_free(s);
}
END_TEST

/* A JVM's performance data says whether it may be attached to, whatever set the flag (a flags file too); the seeds
 * of fuzz-java are real files (after their tag byte). */
START_TEST(test_perfdata) {
        size_t n_on, n_off;
        _cleanup_free_ char *on = read_file("fuzz/corpus/java/hsperfdata-attachable", &n_on);
        _cleanup_free_ char *off = read_file("fuzz/corpus/java/hsperfdata-disabled", &n_off);

        ck_assert_int_eq(java_perfdata_attachable((const uint8_t *) on + 1, n_on - 1), 1);
        ck_assert_int_eq(java_perfdata_attachable((const uint8_t *) off + 1, n_off - 1), 0);
        /* Cut short, or not HotSpot's: never a verdict. */
        ck_assert_int_lt(java_perfdata_attachable((const uint8_t *) on + 1, 200), 0);
        ck_assert_int_eq(java_perfdata_attachable((const uint8_t *) on + 2, n_on - 2), -EBADMSG);
}
END_TEST

UNIT_TEST_MAIN("java", test_merge_real_dump, test_json_round_trip, test_refused, test_perfdata, test_pid_namespace)
