/* test-hooks.c: alert hooks against real programs on a real sd-event loop: the environment, hostile values, stdin
 * and output, timeouts, exec failures, the concurrency cap and its queue, teardown, and conf/hooks/post-json. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <json-c/json.h>

#include "unit.h"

#include "../../daemon/hooks.h"
#include "base/macro.h"
#include "base/time-util.h"

/* Every wait has a deadline well inside Check's 4 s per test; valgrind (CK_FORK=no) has none. */
#define DEADLINE_USEC (3 * USEC_PER_SEC)

typedef struct Fixture {
        sd_event *event;
        Hooks *hooks;
        char *dir;
        char *log;                      /* stderr goes here: journal_event() and log_*() write to it */
        int saved_stderr;
        unsigned max_running_seen;
} Fixture;

static int rm_one(const char *path, _unused_ const struct stat *st, _unused_ int flag, _unused_ struct FTW *ftw) {
        return remove(path);
}

static char *path_in(const char *dir, const char *name) {
        char *p;

        ck_assert_int_ge(asprintf(&p, "%s/%s", dir, name), 0);
        return p;
}

static void fixture_init(Fixture *f) {
        sigset_t ss;
        int fd;

        *f = (Fixture) { .saved_stderr = -EBADF };
        /* As in the daemon: SIGCHLD blocked, so that sd_event_add_child() can watch the hooks. */
        sigemptyset(&ss);
        sigaddset(&ss, SIGCHLD);
        ck_assert_int_eq(sigprocmask(SIG_BLOCK, &ss, NULL), 0);
        ck_assert_int_ge(sd_event_new(&f->event), 0);
        ck_assert_int_eq(hooks_new(f->event, &f->hooks), 0);
        f->dir = strdup("/tmp/test-hooks.XXXXXX");
        ck_assert_ptr_nonnull(f->dir);
        ck_assert_ptr_nonnull(mkdtemp(f->dir));
        f->log = path_in(f->dir, "log");
        fd = open(f->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
        ck_assert_int_ge(fd, 0);
        fflush(stderr);
        f->saved_stderr = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
        ck_assert_int_ge(f->saved_stderr, 0);
        ck_assert_int_eq(dup2(fd, STDERR_FILENO), STDERR_FILENO);
        close(fd);
}

static void fixture_done(Fixture *f) {
        hooks_free(f->hooks);
        sd_event_unref(f->event);
        fflush(stderr);
        dup2(f->saved_stderr, STDERR_FILENO);
        close(f->saved_stderr);
        ck_assert_int_eq(nftw(f->dir, rm_one, 16, FTW_DEPTH | FTW_PHYS), 0);
        free(f->dir);
        free(f->log);
}

/* The whole of PATH (NUL-terminated; *RET_SIZE bytes without it); NULL when it cannot be read. */
static char *read_file(const char *path, size_t *ret_size) {
        char *buf = NULL;
        size_t size = 0;
        FILE *m, *in = fopen(path, "re");
        int c;

        if (!in)
                return NULL;
        m = open_memstream(&buf, &size);
        ck_assert_ptr_nonnull(m);
        while ((c = fgetc(in)) != EOF)
                fputc(c, m);
        fclose(in);
        ck_assert_int_eq(fclose(m), 0);
        if (ret_size)
                *ret_size = size;
        return buf;
}

static char *read_log(Fixture *f) {
        char *s = read_file(f->log, NULL);

        ck_assert_ptr_nonnull(s);
        return s;
}

static void assert_logged(Fixture *f, const char *what) {
        _cleanup_free_ char *log = read_log(f);

        ck_assert_msg(strstr(log, what), "not in the log: \"%s\"; the log:\n%s", what, log);
}

/* Write an executable (MODE) script NAME into the fixture's directory; returns its path. */
static char *write_script(Fixture *f, const char *name, const char *body, mode_t mode) {
        char *p = path_in(f->dir, name);
        FILE *out = fopen(p, "we");

        ck_assert_ptr_nonnull(out);
        fputs(body, out);
        ck_assert_int_eq(fclose(out), 0);
        ck_assert_int_eq(chmod(p, mode), 0);
        return p;
}

/* One turn of the loop, noting the most hooks ever seen running at once. */
static void turn(Fixture *f) {
        ck_assert_int_ge(sd_event_run(f->event, 20 * USEC_PER_MSEC), 0);
        f->max_running_seen = MAX(f->max_running_seen, hooks_running(f->hooks));
}

/* Run the loop until N hooks have ended (succeeded or failed) and none runs or waits, or the deadline. */
static void wait_ended(Fixture *f, uint64_t n) {
        uint64_t deadline = now_usec(CLOCK_MONOTONIC) + DEADLINE_USEC;
        const HookStats *st = hooks_stats(f->hooks);

        while (!(st->succeeded + st->failed >= n && hooks_running(f->hooks) == 0 && hooks_queued(f->hooks) == 0)) {
                ck_assert_msg(now_usec(CLOCK_MONOTONIC) < deadline,
                              "deadline: %llu of %llu hooks ended, %u running, %u queued",
                              (unsigned long long) (st->succeeded + st->failed), (unsigned long long) n,
                              hooks_running(f->hooks), hooks_queued(f->hooks));
                turn(f);
        }
}

/* Run the loop until PATH holds a line; returns its number. */
static pid_t wait_pid_file(Fixture *f, const char *path) {
        uint64_t deadline = now_usec(CLOCK_MONOTONIC) + DEADLINE_USEC;

        for (;;) {
                _cleanup_free_ char *s = read_file(path, NULL);
                int pid;

                if (s && strchr(s, '\n') && sscanf(s, "%d", &pid) == 1 && pid > 0)
                        return pid;
                ck_assert_msg(now_usec(CLOCK_MONOTONIC) < deadline, "deadline: %s never written", path);
                turn(f);
        }
}

/* Gone, or a zombie: dead either way (an orphan's zombie is for init to reap, not us). */
static bool process_dead(pid_t pid) {
        char path[64], buf[512], *p;
        FILE *in;
        size_t n;

        snprintf(path, sizeof path, "/proc/%d/stat", (int) pid);
        in = fopen(path, "re");
        if (!in)
                return true;
        n = fread(buf, 1, sizeof buf - 1, in);
        fclose(in);
        buf[n] = '\0';
        p = strrchr(buf, ')');
        return !p || p[1] != ' ' || p[2] == 'Z' || p[2] == 'X';
}

static void wait_dead(pid_t pid) {
        uint64_t deadline = now_usec(CLOCK_MONOTONIC) + DEADLINE_USEC;

        while (!process_dead(pid)) {
                ck_assert_msg(now_usec(CLOCK_MONOTONIC) < deadline, "pid %d still alive", (int) pid);
                nanosleep(&(struct timespec) { .tv_nsec = 10 * 1000 * 1000 }, NULL);
        }
}

/* Under valgrind, posix_spawn's CLONE_VM|CLONE_VFORK child runs as a plain fork: an exec error then shows as an
 * exit status 127 rather than as posix_spawn's return value. */
static bool under_valgrind(void) {
        const char *p = getenv("LD_PRELOAD");

        return p && strstr(p, "vgpreload");
}

static const HookPythonFrame python_cycle[] = {
        { .pid = 1234, .tid = 1240, .frame = (char *) "Worker.inner (app.py:12)" },
        { .pid = 1300, .tid = 1301, .frame = (char *) "wait_for (\\e[2J\"peer\".py:7)" },
};

static const HookEvent full_event = {
        .rule = "nginx-blocked",
        .pid = 1234,
        .tid = 1240,
        .comm = "nginx",
        .klass = "blocked",
        .snapshot_id = "20260105T101500.123456Z-1234",
        .snapshot_path = "/var/lib/stackwatch/20260105T101500.123456Z-1234.json.zst",
        .summary = "pid 1234 (nginx) thread 1240 blocked for 125.0 s in read, in Worker.inner (app.py:12)",
        .timestamp_usec = 1767608100123456ULL,
        .python_frame = "Worker.inner (app.py:12)",
        .python_cycle = python_cycle,
        .n_python_cycle = ELEMENTSOF(python_cycle),
        .signature = "d00b3d3f55661023",
        .title = "nginx blocked in read ← nginx!worker",
        .count = 3,
};

/* ---- the environment ---- */

typedef struct EnvCheck {
        const char *key;
        const char *value;              /* NULL: must be absent */
} EnvCheck;

/* ENV is "env -0" output (SIZE bytes): exactly the variables WANT lists with a value, plus the PWD=/ dash adds. */
static void check_env(const char *env, size_t size, const EnvCheck *want, size_t n_want) {
        bool seen[32] = {};

        ck_assert_uint_le(n_want, ELEMENTSOF(seen));
        for (const char *e = env; e < env + size; e += strlen(e) + 1) {
                const char *eq = strchr(e, '=');
                bool known = false;

                ck_assert_ptr_nonnull(eq);
                if (streq(e, "PWD=/"))
                        continue;
                for (size_t i = 0; i < n_want; i++)
                        if (strncmp(e, want[i].key, (size_t) (eq - e)) == 0 && want[i].key[eq - e] == '\0') {
                                ck_assert_msg(want[i].value, "%s must not be set, got \"%s\"", want[i].key, e);
                                ck_assert_str_eq(eq + 1, want[i].value);
                                seen[i] = known = true;
                        }
                ck_assert_msg(known, "unexpected variable in the hook's environment: %s", e);
        }
        for (size_t i = 0; i < n_want; i++)
                ck_assert_msg(seen[i] || !want[i].value, "%s missing from the hook's environment", want[i].key);
}

static const char *json_str(json_object *o, const char *key) {
        json_object *v;

        ck_assert_msg(json_object_object_get_ex(o, key, &v), "no key \"%s\"", key);
        return v ? json_object_get_string(v) : NULL;
}

static int64_t json_int(json_object *o, const char *key) {
        json_object *v;

        ck_assert_msg(json_object_object_get_ex(o, key, &v) && v, "no key \"%s\"", key);
        ck_assert(json_object_is_type(v, json_type_int));
        return json_object_get_int64(v);
}

/* STACKWATCH_EVENT parses, carries every key, and says what the variables say. */
static void check_event_json(const char *s, const HookEvent *ev) {
        json_object *j = json_tokener_parse(s), *cycle;

        ck_assert_msg(j, "STACKWATCH_EVENT is not JSON: %s", s);
        ck_assert_int_eq(json_object_object_length(j), 29);
        ck_assert_str_eq(json_str(j, "schema"), HOOK_EVENT_SCHEMA);
        ck_assert_pstr_eq(json_str(j, "signature"), ev->signature);
        ck_assert_pstr_eq(json_str(j, "title"), ev->title);
        ck_assert_pstr_eq(json_str(j, "page_url"), ev->page_url);
        ck_assert_str_eq(json_str(j, "rule"), ev->rule);
        ck_assert_int_eq(json_int(j, "pid"), ev->pid);
        ck_assert_int_eq(json_int(j, "tid"), ev->tid);
        ck_assert_str_eq(json_str(j, "comm"), ev->comm);
        ck_assert_str_eq(json_str(j, "class"), ev->klass);
        ck_assert_pstr_eq(json_str(j, "snapshot_id"), ev->snapshot_id);
        ck_assert_pstr_eq(json_str(j, "snapshot"), ev->snapshot_path);
        ck_assert_str_eq(json_str(j, "summary"), ev->summary);
        ck_assert_pstr_eq(json_str(j, "error"), ev->error);
        ck_assert_uint_eq((uint64_t) json_int(j, "timestamp_usec"), ev->timestamp_usec);
        ck_assert_pstr_eq(json_str(j, "state"), ev->state);
        ck_assert_pstr_eq(json_str(j, "severity"), ev->severity);
        ck_assert_pstr_eq(json_str(j, "host"), ev->host);
        ck_assert_pstr_eq(json_str(j, "exe"), ev->exe);
        ck_assert_pstr_eq(json_str(j, "python_frame"), ev->python_frame);
        ck_assert_msg(json_object_object_get_ex(j, "python_cycle", &cycle), "no key \"python_cycle\"");
        if (ev->n_python_cycle == 0)
                ck_assert_ptr_null(cycle);
        else {
                ck_assert(json_object_is_type(cycle, json_type_array));
                ck_assert_uint_eq(json_object_array_length(cycle), ev->n_python_cycle);
                for (size_t i = 0; i < ev->n_python_cycle; i++) {
                        json_object *e = json_object_array_get_idx(cycle, i);

                        ck_assert_int_eq(json_int(e, "pid"), ev->python_cycle[i].pid);
                        ck_assert_int_eq(json_int(e, "tid"), ev->python_cycle[i].tid);
                        ck_assert_str_eq(json_str(e, "frame"), ev->python_cycle[i].frame);
                }
        }
        json_object_put(j);
}

static const char env_script[] = "#!/bin/sh\nexec /usr/bin/env -0 >\"$1\"\n";

/* Run the env script for EV and check every variable, and that nothing of the daemon's leaks. */
static void run_env_check(Fixture *f, const HookEvent *ev, uint64_t n_before) {
        _cleanup_free_ char *script = write_script(f, "env.sh", env_script, 0755), *out = path_in(f->dir, "env"),
                            *env = NULL, *json = NULL;
        char pid[16], tid[16], ts[32], count[32];
        json_object *j = hooks_event_to_json(ev);
        size_t size;

        ck_assert_ptr_nonnull(j);
        json = strdup(json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
        json_object_put(j);
        snprintf(pid, sizeof pid, "%d", (int) ev->pid);
        snprintf(tid, sizeof tid, "%d", (int) ev->tid);
        snprintf(ts, sizeof ts, "%llu", (unsigned long long) ev->timestamp_usec);
        snprintf(count, sizeof count, "%llu", (unsigned long long) ev->count);
        const EnvCheck want[] = {
                { "PATH", HOOKS_PATH },
                { "STACKWATCH_RULE", ev->rule },
                { "STACKWATCH_PID", pid },
                { "STACKWATCH_TID", tid },
                { "STACKWATCH_COMM", ev->comm },
                { "STACKWATCH_CLASS", ev->klass },
                { "STACKWATCH_SNAPSHOT", ev->snapshot_path },
                { "STACKWATCH_SNAPSHOT_ID", ev->snapshot_id },
                { "STACKWATCH_SUMMARY", ev->summary },
                { "STACKWATCH_ERROR", ev->error },
                { "STACKWATCH_TIMESTAMP", ts },
                { "STACKWATCH_PYTHON_FRAME", ev->python_frame },
                { "STACKWATCH_SIGNATURE", ev->signature },
                { "STACKWATCH_TITLE", ev->title },
                { "STACKWATCH_PROBLEM_COUNT", ev->count ? count : NULL },
                { "STACKWATCH_EVENT", json },
                /* Set in this process's environment below: a hook must not see them. */
                { "STACKWATCH_TEST_LEAK", NULL },
                { "HOME", NULL },
                { "LD_PRELOAD", NULL },
        };

        ck_assert_int_eq(hooks_run(f->hooks, (char *[]) { script, out, NULL }, ev), 0);
        wait_ended(f, n_before + 1);
        ck_assert_uint_eq(hooks_stats(f->hooks)->succeeded, n_before + 1);
        env = read_file(out, &size);
        ck_assert_ptr_nonnull(env);
        check_env(env, size, want, ELEMENTSOF(want));
        for (const char *e = env; e < env + size; e += strlen(e) + 1)
                if (startswith(e, "STACKWATCH_EVENT="))
                        check_event_json(e + strlen("STACKWATCH_EVENT="), ev);
        ck_assert_int_eq(unlink(out), 0);
}

START_TEST(test_environment) {
        Fixture f;
        HookEvent no_snapshot = full_event;

        fixture_init(&f);
        ck_assert_int_eq(setenv("STACKWATCH_TEST_LEAK", "from the daemon", 1), 0);
        ck_assert_int_eq(setenv("HOME", "/root", 1), 0);
        /* With a snapshot: STACKWATCH_SNAPSHOT and _ID, no STACKWATCH_ERROR (even if the daemon had one). */
        ck_assert_int_eq(setenv("STACKWATCH_ERROR", "from the daemon", 1), 0);
        run_env_check(&f, &full_event, 0);
        /* Without: STACKWATCH_ERROR, and null for the snapshot in the JSON; and no Python frame: no
         * STACKWATCH_PYTHON_FRAME, null for both keys. */
        no_snapshot.snapshot_id = no_snapshot.snapshot_path = NULL;
        no_snapshot.error = "capture budget spent (6 per minute)";
        no_snapshot.python_frame = NULL;
        no_snapshot.python_cycle = NULL;
        no_snapshot.n_python_cycle = 0;
        run_env_check(&f, &no_snapshot, 1);
        assert_logged(&f, "started for rule \"nginx-blocked\", pid 1234");
        assert_logged(&f, "for rule \"nginx-blocked\" succeeded");
        /* An alert's hook says in every line whether it was told of the firing or of the recovery. */
        no_snapshot.state = "resolved";
        ck_assert_int_eq(hooks_run(f.hooks, (char *[]) { (char *) "/bin/true", NULL }, &no_snapshot), 0);
        wait_ended(&f, 3);
        assert_logged(&f, "started for rule \"nginx-blocked\" (resolved), pid 1234");
        assert_logged(&f, "for rule \"nginx-blocked\" (resolved) succeeded");
        ck_assert_uint_eq(hooks_stats(f.hooks)->started, 3);
        ck_assert_uint_eq(hooks_stats(f.hooks)->failed, 0);
        unsetenv("STACKWATCH_TEST_LEAK");
        unsetenv("STACKWATCH_ERROR");
        fixture_done(&f);
}
END_TEST

/* A comm (and an argument) full of shell syntax arrives byte for byte and nothing runs it. */
START_TEST(test_hostile_values) {
        static const char script_text[] = "#!/bin/sh\n"
                                          "printf '%s' \"$STACKWATCH_COMM\" >\"$1.comm\"\n"
                                          "printf '%s' \"$2\" >\"$1.arg\"\n"
                                          "exec /usr/bin/env -0 >\"$1.env\"\n";
        _cleanup_free_ char *script = NULL, *out = NULL, *pwned = NULL, *comm = NULL, *got_comm = NULL,
                            *got_arg = NULL, *env = NULL, *p = NULL;
        HookEvent ev = full_event;
        size_t size;
        Fixture f;

        fixture_init(&f);
        script = write_script(&f, "echo.sh", script_text, 0755);
        out = path_in(f.dir, "out");
        pwned = path_in(f.dir, "pwned");
        ck_assert_int_ge(asprintf(&comm, "$(touch %s);`touch %s`|&>*\n'\"\\ \033[2J${IFS}x", pwned, pwned), 0);
        ev.comm = comm;
        ev.summary = comm;
        ck_assert_int_eq(hooks_run(f.hooks, (char *[]) { script, out, comm, NULL }, &ev), 0);
        wait_ended(&f, 1);
        ck_assert_uint_eq(hooks_stats(f.hooks)->succeeded, 1);

        p = path_in(f.dir, "out.comm");
        got_comm = read_file(p, NULL);
        ck_assert_ptr_nonnull(got_comm);
        ck_assert_str_eq(got_comm, comm);
        free(p);
        p = path_in(f.dir, "out.arg");
        got_arg = read_file(p, NULL);
        ck_assert_ptr_nonnull(got_arg);
        ck_assert_str_eq(got_arg, comm);
        free(p);
        p = path_in(f.dir, "out.env");
        env = read_file(p, &size);
        ck_assert_ptr_nonnull(env);
        for (const char *e = env; e < env + size; e += strlen(e) + 1)
                if (startswith(e, "STACKWATCH_EVENT="))
                        check_event_json(e + strlen("STACKWATCH_EVENT="), &ev);
        ck_assert_msg(access(pwned, F_OK) < 0 && errno == ENOENT, "the comm was run by a shell");
        fixture_done(&f);
}
END_TEST

/* ---- stdin, stdout, stderr ---- */

START_TEST(test_stdin_and_output) {
        static const char script_text[] = "#!/bin/sh\n"
                                          "n=$(cat | wc -c)\n"
                                          "echo \"stdin bytes: $n\"\n"
                                          "echo 'to stderr' >&2\n"
                                          "printf 'bell\\007 and clear\\033[2J\\n'\n"
                                          "printf 'no newline at the end'\n";
        _cleanup_free_ char *script = NULL;
        int p[2], saved_stdin;
        Fixture f;

        fixture_init(&f);
        /* Our own stdin is a pipe nobody closes: a hook that inherited it would block in cat until its timeout. */
        ck_assert_int_eq(pipe(p), 0);
        saved_stdin = fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 3);
        ck_assert_int_eq(dup2(p[0], STDIN_FILENO), STDIN_FILENO);
        hooks_set_limits(f.hooks, 2 * USEC_PER_SEC, 4);
        script = write_script(&f, "io.sh", script_text, 0755);
        ck_assert_int_eq(hooks_run(f.hooks, (char *[]) { script, NULL }, &full_event), 0);
        wait_ended(&f, 1);
        /* Not killed at its timeout: cat saw EOF at once. */
        ck_assert_uint_eq(hooks_stats(f.hooks)->succeeded, 1);
        ck_assert_uint_eq(hooks_stats(f.hooks)->timed_out, 0);
        assert_logged(&f, "(rule \"nginx-blocked\"): stdin bytes: 0\n");
        assert_logged(&f, "(rule \"nginx-blocked\"): to stderr\n");
        assert_logged(&f, "(rule \"nginx-blocked\"): bell\\x07 and clear\\e[2J\n");
        assert_logged(&f, "(rule \"nginx-blocked\"): no newline at the end\n");
        dup2(saved_stdin, STDIN_FILENO);
        close(saved_stdin);
        close(p[0]);
        close(p[1]);
        fixture_done(&f);
}
END_TEST

/* A long line is cut; a chatty hook fills the log only so far, and is not blocked by a full pipe. */
START_TEST(test_output_bounds) {
        static const char script_text[] = "#!/bin/sh\n"
                                          "head -c 5000 /dev/zero | tr '\\0' a; echo\n"
                                          "yes 'chatty line' | head -c 1000000\n"
                                          "echo 'after the flood' >&2\n";
        _cleanup_free_ char *script = NULL, *log = NULL, *cut = NULL, *longer = NULL;
        size_t lines = 0;
        Fixture f;

        fixture_init(&f);
        script = write_script(&f, "chatty.sh", script_text, 0755);
        ck_assert_int_eq(hooks_run(f.hooks, (char *[]) { script, NULL }, &full_event), 0);
        wait_ended(&f, 1);
        ck_assert_uint_eq(hooks_stats(f.hooks)->succeeded, 1);

        log = read_log(&f);
        cut = malloc(1024 + sizeof "…\n");
        longer = malloc(1025 + 1);
        ck_assert(cut && longer);
        memset(cut, 'a', 1024);
        strcpy(cut + 1024, "…\n");
        memset(longer, 'a', 1025);
        longer[1025] = '\0';
        ck_assert_msg(strstr(log, cut), "the long line was not cut at 1024 bytes");
        ck_assert_msg(!strstr(log, longer), "more than 1024 bytes of one line logged");
        for (const char *s = log; (s = strstr(s, ": chatty line\n")); s++)
                lines++;
        /* 16 KiB of 12-byte lines, give or take the long line. */
        ck_assert_uint_gt(lines, 1000);
        ck_assert_uint_lt(lines, 1400);
        ck_assert_uint_lt(strlen(log), 200 * 1024);
        ck_assert_msg(!strstr(log, "after the flood"), "output logged beyond the budget");
        assert_logged(&f, "more bytes of output not logged");
        fixture_done(&f);
}
END_TEST

/* ---- timeout, exec failures ---- */

START_TEST(test_timeout_kills_group) {
        static const char script_text[] = "#!/bin/sh\n"
                                          "echo $$ >\"$1.self\"\n"
                                          "sleep 1000 &\n"
                                          "echo $! >\"$1.child\"\n"
                                          "wait\n";
        _cleanup_free_ char *script = NULL, *out = NULL, *self = NULL, *child = NULL;
        const HookStats *st;
        pid_t self_pid, child_pid;
        uint64_t start;
        Fixture f;

        fixture_init(&f);
        hooks_set_limits(f.hooks, 300 * USEC_PER_MSEC, 4);
        script = write_script(&f, "forever.sh", script_text, 0755);
        out = path_in(f.dir, "out");
        self = path_in(f.dir, "out.self");
        child = path_in(f.dir, "out.child");
        start = now_usec(CLOCK_MONOTONIC);
        ck_assert_int_eq(hooks_run(f.hooks, (char *[]) { script, out, NULL }, &full_event), 0);
        self_pid = wait_pid_file(&f, self);
        child_pid = wait_pid_file(&f, child);
        wait_ended(&f, 1);
        ck_assert_uint_ge(now_usec(CLOCK_MONOTONIC) - start, 300 * USEC_PER_MSEC);
        st = hooks_stats(f.hooks);
        ck_assert_uint_eq(st->timed_out, 1);
        ck_assert_uint_eq(st->failed, 1);
        ck_assert_uint_eq(st->succeeded, 0);
        /* The hook is reaped (not even a zombie of ours), and the child it left in its group is dead. */
        ck_assert_msg(kill(self_pid, 0) < 0 && errno == ESRCH, "hook %d not reaped", (int) self_pid);
        wait_dead(child_pid);
        assert_logged(&f, "for rule \"nginx-blocked\" timed out after 0.3 s; killed");
        assert_logged(&f, "was killed at its timeout with SIGKILL");
        fixture_done(&f);
}
END_TEST

START_TEST(test_exec_failures) {
        _cleanup_free_ char *not_exec = NULL, *no_shebang = NULL, *pwned = NULL, *body = NULL, *missing = NULL;
        const HookStats *st;
        Fixture f;
        int r;

        fixture_init(&f);
        missing = path_in(f.dir, "no-such-hook");
        not_exec = write_script(&f, "not-executable", "#!/bin/sh\nexit 0\n", 0644);
        pwned = path_in(f.dir, "pwned");
        ck_assert_int_ge(asprintf(&body, "touch %s\n", pwned), 0);
        /* Executable but no "#!": execve says ENOEXEC; a shell would have run it. */
        no_shebang = write_script(&f, "no-shebang", body, 0755);
        st = hooks_stats(f.hooks);

        r = hooks_run(f.hooks, (char *[]) { missing, NULL }, &full_event);
        ck_assert_int_eq(r, under_valgrind() ? 0 : -ENOENT);
        r = hooks_run(f.hooks, (char *[]) { not_exec, NULL }, &full_event);
        ck_assert_int_eq(r, under_valgrind() ? 0 : -EACCES);
        r = hooks_run(f.hooks, (char *[]) { no_shebang, NULL }, &full_event);
        ck_assert_int_eq(r, under_valgrind() ? 0 : -ENOEXEC);
        /* Not absolute: refused before anything runs, and nothing looks it up in $PATH. */
        ck_assert_int_eq(hooks_run(f.hooks, (char *[]) { "true", NULL }, &full_event), -EINVAL);
        ck_assert_int_eq(hooks_run(f.hooks, (char *[]) { NULL }, &full_event), -EINVAL);
        /* The daemon goes on: a good hook still runs. */
        ck_assert_int_eq(hooks_run(f.hooks, (char *[]) { "/bin/true", NULL }, &full_event), 0);
        wait_ended(&f, 4);
        ck_assert_uint_eq(st->failed, 3);
        ck_assert_uint_eq(st->succeeded, 1);
        ck_assert_uint_eq(st->started, under_valgrind() ? 4 : 1);
        ck_assert_msg(access(pwned, F_OK) < 0 && errno == ENOENT, "a file without #! was run by a shell");
        if (!under_valgrind()) {
                char *msg;

                ck_assert_int_ge(asprintf(&msg, "Failed to execute hook '%s' for rule \"nginx-blocked\": %s", missing,
                                          strerror(ENOENT)), 0);
                assert_logged(&f, msg);
                free(msg);
                ck_assert_int_ge(asprintf(&msg, "Failed to execute hook '%s' for rule \"nginx-blocked\": %s",
                                          not_exec, strerror(EACCES)), 0);
                assert_logged(&f, msg);
                free(msg);
        }
        assert_logged(&f, "Hook for rule \"nginx-blocked\" is not an absolute path ('true')");
        fixture_done(&f);
}
END_TEST

/* ---- the cap and the queue ---- */

START_TEST(test_max_running) {
        /* mkdir is atomic: a second hook inside the critical section would find the lock taken. */
        static const char script_text[] = "#!/bin/sh\n"
                                          "mkdir \"$1/lock\" || { echo \"overlap $2\" >>\"$1/overlap\"; exit 1; }\n"
                                          "echo \"start $2\" >>\"$1/order\"\n"
                                          "sleep 0.1\n"
                                          "echo \"end $2\" >>\"$1/order\"\n"
                                          "rmdir \"$1/lock\"\n";
        _cleanup_free_ char *script = NULL, *overlap = NULL, *order_path = NULL, *order = NULL;
        Fixture f;

        fixture_init(&f);
        hooks_set_limits(f.hooks, 2 * USEC_PER_SEC, 1);
        script = write_script(&f, "serial.sh", script_text, 0755);
        ck_assert_int_eq(hooks_run(f.hooks, (char *[]) { script, f.dir, "1", NULL }, &full_event), 0);
        ck_assert_int_eq(hooks_run(f.hooks, (char *[]) { script, f.dir, "2", NULL }, &full_event), 0);
        ck_assert_int_eq(hooks_run(f.hooks, (char *[]) { script, f.dir, "3", NULL }, &full_event), 0);
        ck_assert_uint_eq(hooks_running(f.hooks), 1);
        ck_assert_uint_eq(hooks_queued(f.hooks), 2);
        wait_ended(&f, 3);
        ck_assert_uint_eq(f.max_running_seen, 1);
        ck_assert_uint_eq(hooks_stats(f.hooks)->succeeded, 3);
        overlap = path_in(f.dir, "overlap");
        ck_assert_msg(access(overlap, F_OK) < 0, "two hooks ran at once");
        order_path = path_in(f.dir, "order");
        order = read_file(order_path, NULL);
        ck_assert_ptr_nonnull(order);
        ck_assert_str_eq(order, "start 1\nend 1\nstart 2\nend 2\nstart 3\nend 3\n");
        fixture_done(&f);
}
END_TEST

START_TEST(test_queue_full) {
        char *sleeper[] = { "/bin/sleep", "1000", NULL };
        Fixture f;

        fixture_init(&f);
        hooks_set_limits(f.hooks, 10 * USEC_PER_SEC, 1);
        for (unsigned i = 0; i < 1 + HOOKS_QUEUE_MAX; i++)
                ck_assert_int_eq(hooks_run(f.hooks, sleeper, &full_event), 0);
        ck_assert_uint_eq(hooks_running(f.hooks), 1);
        ck_assert_uint_eq(hooks_queued(f.hooks), HOOKS_QUEUE_MAX);
        ck_assert_int_eq(hooks_run(f.hooks, sleeper, &full_event), -ENOBUFS);
        ck_assert_uint_eq(hooks_stats(f.hooks)->dropped, 1);
        assert_logged(&f, "Too many hooks waiting (1 running, 64 queued); not running hook '/bin/sleep'");
        /* A higher cap starts queued hooks at once. */
        hooks_set_limits(f.hooks, 10 * USEC_PER_SEC, 3);
        ck_assert_uint_eq(hooks_running(f.hooks), 3);
        ck_assert_uint_eq(hooks_queued(f.hooks), HOOKS_QUEUE_MAX - 2);
        ck_assert_uint_eq(hooks_stats(f.hooks)->started, 3);
        /* fixture_done() frees the hooks: the three are killed, the queued ones never run. */
        fixture_done(&f);
}
END_TEST

START_TEST(test_free_kills_running) {
        static const char script_text[] = "#!/bin/sh\n"
                                          "echo $$ >\"$1.self\"\n"
                                          "sleep 1000 &\n"
                                          "echo $! >\"$1.child\"\n"
                                          "wait\n";
        _cleanup_free_ char *script = NULL, *out = NULL, *self = NULL, *child = NULL;
        pid_t self_pid, child_pid;
        Fixture f;

        fixture_init(&f);
        script = write_script(&f, "forever.sh", script_text, 0755);
        out = path_in(f.dir, "out");
        self = path_in(f.dir, "out.self");
        child = path_in(f.dir, "out.child");
        ck_assert_int_eq(hooks_run(f.hooks, (char *[]) { script, out, NULL }, &full_event), 0);
        self_pid = wait_pid_file(&f, self);
        child_pid = wait_pid_file(&f, child);
        ck_assert_uint_eq(hooks_running(f.hooks), 1);
        f.hooks = hooks_free(f.hooks);
        /* Reaped by hooks_free() itself: no zombie left. */
        ck_assert_msg(kill(self_pid, 0) < 0 && errno == ESRCH, "hook %d still there", (int) self_pid);
        wait_dead(child_pid);
        assert_logged(&f, "still running at stop; killed");
        fixture_done(&f);
}
END_TEST

/* ---- conf/hooks/post-json against a one-shot HTTP server on loopback ---- */

typedef struct Server {
        int listen_fd, conn_fd;
        sd_event_source *listen_source, *conn_source;
        char request[16384];
        size_t len;
        bool done;                      /* the whole request is in, the reply sent */
        const char *reply;
} Server;

/* Whether the request is complete: headers, then Content-Length bytes of body. */
static bool request_complete(Server *s) {
        const char *end = memmem(s->request, s->len, "\r\n\r\n", 4), *cl;
        size_t body;

        if (!end)
                return false;
        cl = strcasestr(s->request, "\r\ncontent-length:");
        if (!cl || cl > end || sscanf(cl + strlen("\r\ncontent-length:"), "%zu", &body) != 1)
                return true;
        return s->len >= (size_t) (end + 4 - s->request) + body;
}

static int on_conn(sd_event_source *src, int fd, uint32_t revents, void *userdata) {
        Server *s = userdata;
        ssize_t n = read(fd, s->request + s->len, sizeof s->request - 1 - s->len);

        if (n < 0 && errno == EAGAIN)
                return 0;
        ck_assert_int_gt(n, 0);
        s->len += (size_t) n;
        s->request[s->len] = '\0';
        if (!request_complete(s))
                return 0;
        ck_assert_int_eq(write(fd, s->reply, strlen(s->reply)), (ssize_t) strlen(s->reply));
        s->conn_source = sd_event_source_disable_unref(s->conn_source);
        s->conn_fd = safe_close(s->conn_fd);
        s->done = true;
        return 0;
}

static int on_accept(sd_event_source *src, int fd, uint32_t revents, void *userdata) {
        Server *s = userdata;

        s->conn_fd = accept4(fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        ck_assert_int_ge(s->conn_fd, 0);
        ck_assert_int_ge(sd_event_add_io(sd_event_source_get_event(src), &s->conn_source, s->conn_fd, EPOLLIN,
                                         on_conn, s), 0);
        s->listen_source = sd_event_source_disable_unref(s->listen_source);
        return 0;
}

/* Listen on 127.0.0.1 (a port the kernel picks) for one request, answered with REPLY; returns the port. */
static int server_start(Fixture *f, Server *s, const char *reply) {
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t len = sizeof a;

        *s = (Server) { .conn_fd = -EBADF, .reply = reply };
        s->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        ck_assert_int_ge(s->listen_fd, 0);
        ck_assert_int_eq(bind(s->listen_fd, (struct sockaddr *) &a, sizeof a), 0);
        ck_assert_int_eq(listen(s->listen_fd, 1), 0);
        ck_assert_int_eq(getsockname(s->listen_fd, (struct sockaddr *) &a, &len), 0);
        ck_assert_int_ge(sd_event_add_io(f->event, &s->listen_source, s->listen_fd, EPOLLIN, on_accept, s), 0);
        return ntohs(a.sin_port);
}

static void server_stop(Server *s) {
        sd_event_source_disable_unref(s->listen_source);
        sd_event_source_disable_unref(s->conn_source);
        safe_close(s->listen_fd);
        safe_close(s->conn_fd);
}

static char *post_json_path(void) {
        const char *top = getenv("STACKWATCH_SRCDIR");
        char *p;

        ck_assert_int_ge(asprintf(&p, "%s/conf/hooks/post-json", top ?: "."), 0);
        ck_assert_msg(access(p, X_OK) == 0, "%s not found or not executable: set STACKWATCH_SRCDIR", p);
        return p;
}

START_TEST(test_post_json) {
        static const char ok[] = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
        static const char error[] = "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
        _cleanup_free_ char *hook = NULL, *url = NULL, *expect = NULL, *comm = NULL;
        HookEvent ev = full_event;
        const char *body;
        json_object *j;
        Server s;
        Fixture f;

        if (access("/usr/bin/curl", X_OK) < 0) {
                fprintf(stdout, "post-json: no /usr/bin/curl, skipped\n");
                return;
        }
        fixture_init(&f);
        hooks_set_limits(f.hooks, 3 * USEC_PER_SEC, 4);
        hook = post_json_path();
        /* A comm that would break a body built by hand in sh. */
        ck_assert_int_ge(asprintf(&comm, "a\"b'c$(x)\\\n%s", "é"), 0);
        ev.comm = comm;
        j = hooks_event_to_json(&ev);
        ck_assert_ptr_nonnull(j);
        expect = strdup(json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
        json_object_put(j);

        /* 200: the body is STACKWATCH_EVENT byte for byte, with the headers asked for; the hook succeeds. */
        ck_assert_int_ge(asprintf(&url, "http://127.0.0.1:%d/alert", server_start(&f, &s, ok)), 0);
        ck_assert_int_eq(hooks_run(f.hooks,
                                   (char *[]) { hook, url, "--header", "Authorization: Bearer s3cret", NULL }, &ev),
                         0);
        wait_ended(&f, 1);
        ck_assert(s.done);
        ck_assert_uint_eq(hooks_stats(f.hooks)->succeeded, 1);
        ck_assert_msg(startswith(s.request, "POST /alert HTTP/1.1\r\n"), "request: %s", s.request);
        ck_assert_ptr_nonnull(strstr(s.request, "\r\nContent-Type: application/json\r\n"));
        ck_assert_ptr_nonnull(strstr(s.request, "\r\nAuthorization: Bearer s3cret\r\n"));
        body = strstr(s.request, "\r\n\r\n") + 4;
        ck_assert_str_eq(body, expect);
        server_stop(&s);
        free(url);

        /* 500: curl --fail exits 22 and says why on stderr, into the log; the hook failed. */
        ck_assert_int_ge(asprintf(&url, "http://127.0.0.1:%d/alert", server_start(&f, &s, error)), 0);
        ck_assert_int_eq(hooks_run(f.hooks, (char *[]) { hook, url, NULL }, &ev), 0);
        wait_ended(&f, 2);
        ck_assert(s.done);
        ck_assert_uint_eq(hooks_stats(f.hooks)->failed, 1);
        assert_logged(&f, "failed with exit status 22");
        assert_logged(&f, "returned error: 500");
        server_stop(&s);

        /* Usage errors: no URL, not http(s), an argument it does not know. */
        ck_assert_int_eq(hooks_run(f.hooks, (char *[]) { hook, NULL }, &ev), 0);
        ck_assert_int_eq(hooks_run(f.hooks, (char *[]) { hook, "file:///etc/shadow", NULL }, &ev), 0);
        ck_assert_int_eq(hooks_run(f.hooks, (char *[]) { hook, url, "--data", "x", NULL }, &ev), 0);
        wait_ended(&f, 5);
        ck_assert_uint_eq(hooks_stats(f.hooks)->failed, 4);
        assert_logged(&f, "usage: post-json URL");
        fixture_done(&f);
}
END_TEST

UNIT_TEST_MAIN("hooks", test_environment, test_hostile_values, test_stdin_and_output, test_output_bounds,
               test_timeout_kills_group, test_exec_failures, test_max_running, test_queue_full, test_free_kills_running,
               test_post_json)
