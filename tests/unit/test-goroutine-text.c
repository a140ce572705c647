/* test-goroutine-text.c: goroutines as Go users read them: grouped (same stack, state, reason and creator), the
 * longest waiting group first, Go's header and frame lines, the shared wait and the creation site summed up, the
 * summary a firing carries, the folded lines, and the JSON form read back to the same text. */
#include "unit.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/macro.h"
#include "render/goroutine-text.h"
#include "render/snapshot-json.h"
#include "render/snapshot-text.h"

#define MINUTE INT64_C(60000000)

static void add_frame(GoStack *st, const char *function, const char *file, unsigned line, uint64_t off, bool inlined) {
        UserFrame *f;

        st->frames = realloc(st->frames, (st->n_frames + 1) * sizeof *st->frames);
        ck_assert_ptr_nonnull(st->frames);
        f = &st->frames[st->n_frames++];
        *f = (UserFrame) { .kind = FRAME_KIND_GO, .pc = 0x401000 + off, .module = -1, .function = strdup(function),
                           .file = strdup(file), .line = line, .function_offset = off, .inlined = inlined };
}

static Goroutine *add_g(GoRuntime *gr, uint64_t goid, const char *reason, int64_t wait, ssize_t stack,
                        const char *creator) {
        Goroutine *g = go_runtime_add(gr);

        ck_assert_ptr_nonnull(g);
        g->goid = goid;
        g->status = reason ? GO_STATUS_WAITING : GO_STATUS_RUNNABLE;
        g->wait_reason = reason ? strdup(reason) : NULL;
        g->wait_usec = wait;
        g->stack = stack;
        if (creator) {
                g->created_by = (UserFrame) { .kind = FRAME_KIND_GO, .module = -1, .function = strdup(creator),
                                              .file = strdup("/src/app/main.go"), .line = 40, .function_offset = 0x85 };
        }
        return g;
}

/* 40 idle workers on one channel for 2 to 3 minutes, one goroutine on a mutex for 7 minutes, goroutine 1 asleep. */
static Snapshot *make_snapshot(void) {
        Snapshot *s = snapshot_new();
        GoRuntime *gr;
        GoStack *idle, *mutex, *sleep;

        ck_assert_ptr_nonnull(s);
        s->pid = 4242;
        s->comm = strdup("server");
        gr = snapshot_add_go(s);
        ck_assert_ptr_nonnull(gr);
        gr->version = strdup("go1.19.8");
        gr->layout = strdup("dwarf");
        gr->total = 44;
        idle = go_runtime_add_stack(gr);
        add_frame(idle, "runtime.gopark", "/usr/lib/go/src/runtime/proc.go", 363, 0xd6, false);
        add_frame(idle, "runtime.chanrecv1", "/usr/lib/go/src/runtime/chan.go", 442, 0x18, false);
        add_frame(idle, "main.idleWorker", "/src/app/main.go", 19, 0x1b, false);
        mutex = go_runtime_add_stack(gr);
        add_frame(mutex, "runtime.gopark", "/usr/lib/go/src/runtime/proc.go", 363, 0xd6, false);
        add_frame(mutex, "sync.(*Mutex).Lock", "/usr/lib/go/src/sync/mutex.go", 90, 0, true);
        add_frame(mutex, "main.lockMutex", "/src/app/main.go", 16, 0x25, false);
        sleep = go_runtime_add_stack(gr);
        add_frame(sleep, "runtime.gopark", "/usr/lib/go/src/runtime/proc.go", 363, 0xd6, false);
        add_frame(sleep, "main.main", "/src/app/main.go", 44, 0x2b4, false);

        add_g(gr, 1, "sleep", 10 * MINUTE / 60, 2, NULL);
        for (uint64_t id = 10; id < 50; id++) {
                Goroutine *g = add_g(gr, id, "chan receive", id == 10 ? 3 * MINUTE : 2 * MINUTE, 0, "main.main");
                g->wait_kind = strdup("channel");
                g->wait_address = 0xc000012060;
        }
        Goroutine *m = add_g(gr, 7, "semacquire", 7 * MINUTE, 1, "main.main");
        m->wait_kind = strdup("sync.Mutex");
        m->wait_address = 0x5e4050;
        m->locked = true;
        /* Same stack as the idle ones, but runnable: its own group. */
        add_g(gr, 60, NULL, -1, 0, "main.main");
        return s;
}

static char *render(const Snapshot *s, bool folded) {
        char *buf = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&buf, &size);

        ck_assert_ptr_nonnull(f);
        if (folded)
                goroutines_print_folded(s, f);
        else
                goroutines_print_text(s, f);
        fclose(f);
        return buf;
}

START_TEST(test_groups_in_go_format) {
        Snapshot *s = make_snapshot();
        char *t = render(s, false), *mutex, *idle, *runnable, *main1;

        /* The header: how many, in how many groups. */
        ck_assert_msg(strstr(t, "GOROUTINES of go1.19.8: 43 in 4 groups\n"), "%s", t);
        /* Go's own header, ", N minutes" from one minute on, ", locked to thread"; its own frame lines. */
        mutex = strstr(t, "goroutine 7 [semacquire, 7 minutes, locked to thread]:\n");
        ck_assert_msg(mutex, "%s", t);
        ck_assert_msg(strstr(mutex, "\t(waits on sync.Mutex 0x5e4050)\nruntime.gopark(...)\n"
                                    "\t/usr/lib/go/src/runtime/proc.go:363 +0xd6\n"
                                    "sync.(*Mutex).Lock(...)\n\t/usr/lib/go/src/sync/mutex.go:90\n"
                                    "main.lockMutex(...)\n\t/src/app/main.go:16 +0x25\n"
                                    "created by main.main\n\t/src/app/main.go:40 +0x85\n"), "%s", t);
        /* 40 goroutines, one group: its count, the range of their waits, their ids (the first 16, then …). */
        idle = strstr(t, "40 goroutines [chan receive, 2~3 minutes]: 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 …\n"
                         "runtime.gopark(...)\n");
        ck_assert_msg(idle, "%s", t);
        /* A runnable goroutine with the same stack is not of their group. */
        runnable = strstr(t, "goroutine 60 [runnable]:\n");
        ck_assert_msg(runnable, "%s", t);
        /* Goroutine 1 has no "created by"; seconds are not minutes. */
        main1 = strstr(t, "goroutine 1 [sleep]:\nruntime.gopark(...)\n\t/usr/lib/go/src/runtime/proc.go:363 +0xd6\n"
                          "main.main(...)\n\t/src/app/main.go:44 +0x2b4\n\n");
        ck_assert_msg(main1, "%s", t);
        /* The longest waiting first, the unknown last. */
        ck_assert_msg(mutex < idle && idle < main1 && main1 < runnable, "%s", t);
        /* What they wait on together, and where they were created. */
        ck_assert_msg(strstr(t, "  40 goroutines wait on the same channel 0xc000012060, the oldest for 3 minutes\n"),
                      "%s", t);
        ck_assert_msg(!strstr(t, "goroutines wait on the same sync.Mutex"), "one waiter is not a crowd: %s", t);
        free(t);
        snapshot_free(s);
}
END_TEST

START_TEST(test_summary_and_folded) {
        Snapshot *s = make_snapshot();
        char *sum = NULL, *fo = render(s, true);
        size_t lines = 0;

        /* The largest group blocked a minute or more, at its own frame (not the runtime's). */
        ck_assert_int_eq(goroutines_summary(s, &sum), 0);
        ck_assert_str_eq(sum, "40 goroutines [chan receive, 3 minutes] in main.idleWorker (main.go:19)");
        free(sum);
        /* One folded line per goroutine, outermost first, prefixed by its reason. */
        for (char *p = fo; (p = strchr(p, '\n')); p++)
                lines++;
        ck_assert_uint_eq(lines, 43);
        ck_assert_msg(strstr(fo, "go:chan_receive;main.idleWorker;runtime.chanrecv1;runtime.gopark 1\n"), "%s", fo);
        ck_assert_msg(strstr(fo, "go:runnable;main.idleWorker;runtime.chanrecv1;runtime.gopark 1\n"), "%s", fo);
        free(fo);
        /* No goroutine waits: no summary. */
        for (size_t i = 0; i < snapshot_go(s)->n_goroutines; i++)
                snapshot_go(s)->goroutines[i].status = GO_STATUS_RUNNABLE;
        ck_assert_int_eq(goroutines_summary(s, &sum), 0);
        ck_assert_ptr_null(sum);
        snapshot_free(s);
}
END_TEST

START_TEST(test_json_round_trip) {
        Snapshot *s = make_snapshot(), *back = NULL;
        json_object *j = snapshot_to_json(s), *stacks, *gs, *g7 = NULL;
        char *t1 = render(s, false), *t2;
        const char *why = NULL;

        ck_assert_ptr_nonnull(j);
        ck_assert(json_object_object_get_ex(j, "goroutine_stacks", &stacks));
        ck_assert_uint_eq(json_object_array_length(stacks), 3);
        ck_assert(json_object_object_get_ex(j, "goroutines", &gs));
        ck_assert_uint_eq(json_object_array_length(gs), 43);
        for (size_t i = 0; i < json_object_array_length(gs); i++) {
                json_object *e = json_object_array_get_idx(gs, i), *id;

                if (json_object_object_get_ex(e, "goid", &id) && json_object_get_int64(id) == 7)
                        g7 = e;
        }
        ck_assert_ptr_nonnull(g7);
        ck_assert_str_eq(json_object_to_json_string_ext(g7, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE),
                         "{\"goid\":7,\"status\":\"waiting\",\"wait_reason\":\"semacquire\",\"wait_seconds\":420.0,"
                         "\"locked_to_thread\":true,\"stack\":1,\"created_by\":{\"function\":\"main.main\",\"file\":"
                         "\"/src/app/main.go\",\"line\":40,\"pc\":\"0x0\",\"offset\":133},\"wait_on\":{\"kind\":\"sync.Mutex\","
                         "\"address\":\"0x5e4050\"}}");
        ck_assert_int_eq(snapshot_from_json(j, &back, &why), 0);
        t2 = render(back, false);
        ck_assert_str_eq(t1, t2);
        free(t1);
        free(t2);
        json_object_put(j);
        snapshot_free(back);
        snapshot_free(s);
}
END_TEST

START_TEST(test_unreadable_and_hostile) {
        Snapshot *s = make_snapshot();
        json_object *j, *gs;
        Snapshot *back = NULL;
        char *t;

        /* A stored snapshot is untrusted: a stack index out of range is no stack, names are escaped. */
        j = snapshot_to_json(s);
        json_object_object_get_ex(j, "goroutines", &gs);
        json_object_object_add(json_object_array_get_idx(gs, 0), "stack", json_object_new_int(99));
        json_object_object_add(json_object_array_get_idx(gs, 0), "wait_reason", json_object_new_string("x\x1b[2Jy"));
        ck_assert_int_eq(snapshot_from_json(j, &back, NULL), 0);
        t = render(back, false);
        ck_assert_msg(strstr(t, "goroutine 1 [x\\e[2Jy]:\n\t(its stack was not read)\n"), "%s", t);
        free(t);
        snapshot_free(back);
        json_object_put(j);
        /* A program whose goroutines could not be read says why, and nothing else. */
        free(snapshot_go(s)->error);
        snapshot_go(s)->error = strdup("the binary is stripped of its symbols (-ldflags=-s)");
        t = render(s, false);
        ck_assert_str_eq(t, "GOROUTINES of go1.19.8: not read: the binary is stripped of its symbols (-ldflags=-s)\n");
        free(t);
        snapshot_free(s);
}
END_TEST

UNIT_TEST_MAIN("goroutine-text", test_groups_in_go_format, test_summary_and_folded, test_json_round_trip,
               test_unreadable_and_hostile)
