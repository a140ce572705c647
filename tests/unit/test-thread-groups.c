/* test-thread-groups.c: threads alike are one group (state, frames, wait), the interesting groups first; a
 * 2,000-thread snapshot of 3 stacks reads as 3 groups, in text and JSON. */
#include "unit.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/macro.h"
#include "render/snapshot-json.h"
#include "render/snapshot-text.h"
#include "render/thread-groups.h"

static void add_frames(ThreadSnapshot *t, const uint64_t *pcs, size_t n) {
        for (size_t i = 0; i < n; i++) {
                UserFrame *f = thread_add_frame(t);

                ck_assert_ptr_nonnull(f);
                f->pc = pcs[i];
                f->function = strdup(i == 0 ? "read" : "worker");
        }
}

static ThreadSnapshot *add(Snapshot *s, pid_t tid, char state, const uint64_t *pcs, size_t n) {
        ThreadSnapshot *t = snapshot_add_thread(s);

        ck_assert_ptr_nonnull(t);
        t->tid = tid;
        t->state = state;
        t->comm = strdup("srv");
        add_frames(t, pcs, n);
        return t;
}

static const uint64_t READ[] = { 0x7f0000001000, 0x401000, 0x402000 };
static const uint64_t POLL[] = { 0x7f0000002000, 0x401100, 0x402000 };
static const uint64_t FUTEX[] = { 0x7f0000003000, 0x401200, 0x402000 };

/* 1,500 readers, 400 pollers, 100 in a futex (one of them the rule's thread), one reader in D. */
static Snapshot *server(void) {
        Snapshot *s = snapshot_new();
        pid_t tid = 1000;

        s->pid = 1000;
        for (int i = 0; i < 1500; i++)
                add(s, tid++, 'S', READ, ELEMENTSOF(READ));
        for (int i = 0; i < 400; i++)
                add(s, tid++, 'S', POLL, ELEMENTSOF(POLL));
        for (int i = 0; i < 100; i++)
                add(s, tid++, 'S', FUTEX, ELEMENTSOF(FUTEX));
        add(s, tid++, 'D', READ, ELEMENTSOF(READ));
        s->trigger = calloc(1, sizeof *s->trigger);
        s->trigger->tid = 2950;
        return s;
}

START_TEST(test_groups_and_order) {
        Snapshot *s = server();
        ThreadGroup *g;
        size_t n;

        ck_assert_int_eq(snapshot_group_threads(s, &g, &n), 0);
        ck_assert_uint_eq(n, 4);
        /* The reader in D first, then the culprit's futex group, then by size. */
        ck_assert(g[0].problem);
        ck_assert_uint_eq(g[0].n, 1);
        ck_assert_int_eq(s->threads[g[0].threads[0]].tid, 3000);
        ck_assert(g[1].culprit);
        ck_assert_uint_eq(g[1].n, 100);
        ck_assert_uint_eq(g[2].n, 1500);
        ck_assert_uint_eq(g[3].n, 400);
        /* Members in the snapshot's order. */
        for (size_t i = 1; i < g[2].n; i++)
                ck_assert_uint_lt(g[2].threads[i - 1], g[2].threads[i]);
        thread_groups_free(g, n);
        snapshot_free(s);
}
END_TEST

/* Threads a budget left unread have no stack to show: however many, their group comes after every group with one. */
START_TEST(test_unread_threads_last) {
        Snapshot *s = server();
        ThreadGroup *g;
        size_t n;

        for (pid_t tid = 4000; tid < 6000; tid++) {
                ThreadSnapshot *t = add(s, tid, 'S', NULL, 0);

                t->error = strdup("skipped: capture time budget (40 ms) exhausted");
        }
        ck_assert_int_eq(snapshot_group_threads(s, &g, &n), 0);
        ck_assert_uint_eq(n, 5);
        ck_assert(!g[3].stackless);
        ck_assert_uint_eq(g[3].n, 400);
        ck_assert(g[4].stackless);
        ck_assert_uint_eq(g[4].n, 2000);
        thread_groups_free(g, n);
        snapshot_free(s);
}
END_TEST

/* The same frames waiting for different Java locks, or an inlined name apart: not alike. */
START_TEST(test_what_tells_threads_apart) {
        Snapshot *s = snapshot_new();
        ThreadSnapshot *a = add(s, 1, 'S', READ, ELEMENTSOF(READ)), *b = add(s, 2, 'S', READ, ELEMENTSOF(READ));
        RuntimeLock *l;

        ck_assert(snapshot_threads_alike(a, b));
        l = thread_runtime_add_lock(thread_runtime_add(b, RUNTIME_JAVA));
        *l = (RuntimeLock) { .kind = RUNTIME_LOCK_WAITING_TO_LOCK, .address = 0x6a0, .owner = 7 };
        ck_assert(!snapshot_threads_alike(a, b));
        l = thread_runtime_add_lock(thread_runtime_add(a, RUNTIME_JAVA));
        *l = (RuntimeLock) { .kind = RUNTIME_LOCK_WAITING_TO_LOCK, .address = 0x6a0, .owner = 7 };
        ck_assert(snapshot_threads_alike(a, b));
        thread_runtime(a, RUNTIME_JAVA)->locks[0].owner = 8;
        ck_assert(!snapshot_threads_alike(a, b));
        thread_runtime(a, RUNTIME_JAVA)->locks[0].owner = 7;
        free(b->frames[1].function);
        b->frames[1].function = strdup("other");
        ck_assert(!snapshot_threads_alike(a, b));
        snapshot_free(s);
}
END_TEST

START_TEST(test_text_and_json) {
        Snapshot *s = server();
        char *buf = NULL, *one = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&buf, &size);
        json_object *j, *groups;

        ck_assert_int_eq(snapshot_print_text(s, &(TextOptions) {}, f), 0);
        fclose(f);
        /* Each group once, its TIDs as ranges. */
        ck_assert_ptr_nonnull(strstr(buf, "\nTID 3000: \"srv\" D (disk sleep)"));
        ck_assert_ptr_nonnull(strstr(buf, "\n100 threads (TIDs 2900-2999): \"srv\" S (sleeping) on CPU [auto]\n"));
        ck_assert_ptr_nonnull(strstr(buf, "\n1500 threads (TIDs 1000-2499): \"srv\" S (sleeping) on CPU [auto]\n"));
        ck_assert(strstr(buf, "100 threads") < strstr(buf, "1500 threads"));
        ck_assert_ptr_null(strstr(buf, "TID 1001:"));
        free(buf);
        /* --no-group: every thread. */
        buf = NULL;
        f = open_memstream(&buf, &size);
        ck_assert_int_eq(snapshot_print_text(s, &(TextOptions) { .no_group = true }, f), 0);
        fclose(f);
        ck_assert_ptr_nonnull(strstr(buf, "\nTID 1001: \"srv\" S (sleeping)"));
        ck_assert_ptr_null(strstr(buf, "threads (TIDs"));
        free(buf);

        j = snapshot_to_json(s);
        groups = json_object_object_get(j, "thread_groups");
        ck_assert_uint_eq(json_object_array_length(groups), 4);
        one = strdup(json_object_to_json_string(json_object_array_get_idx(groups, 1)));
        ck_assert_ptr_nonnull(strstr(one, "\"count\": 100"));
        ck_assert_ptr_nonnull(strstr(one, "\"culprit\": true"));
        free(one);
        json_object_put(j);
        snapshot_free(s);
}
END_TEST

UNIT_TEST_MAIN("thread-groups", test_groups_and_order, test_unread_threads_last, test_what_tells_threads_apart, test_text_and_json)
