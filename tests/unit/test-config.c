/* test-config.c: the configuration: defaults, every key, drop-ins, auto poll interval, the value parsers with
 * hostile input, error collection, and files that are not files. */
#include "unit.h"
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/strv.h"
#include "config/config-load.h"

#define SEC USEC_PER_SEC
#define MSEC USEC_PER_MSEC
#define MIN_ (60 * SEC)

/* ---- helpers: a scratch directory per test ---- */

static char *scratch_new(void) {
        char *d = strdup("/tmp/test-config.XXXXXX");

        ck_assert_ptr_nonnull(d);
        ck_assert_ptr_nonnull(mkdtemp(d));
        return d;
}

static int rm_one(const char *path, _unused_ const struct stat *st, _unused_ int flag, _unused_ struct FTW *ftw) {
        return remove(path);
}

static void scratch_free(char *d) {
        if (d)
                ck_assert_int_eq(nftw(d, rm_one, 16, FTW_DEPTH | FTW_PHYS), 0);
        free(d);
}

/* Write CONTENT to DIR/NAME; returns the malloc'd path. */
static char *write_file(const char *dir, const char *name, const char *content) {
        char *path;
        FILE *f;

        ck_assert_int_ge(asprintf(&path, "%s/%s", dir, name), 0);
        f = fopen(path, "we");
        ck_assert_ptr_nonnull(f);
        ck_assert_int_eq(fputs(content, f) >= 0, 1);
        ck_assert_int_eq(fclose(f), 0);
        return path;
}

static char *path_in(const char *dir, const char *name) {
        char *path;

        ck_assert_int_ge(asprintf(&path, "%s/%s", dir, name), 0);
        return path;
}

/* Whether some error has a message containing NEEDLE (and, when LINE > 0, sits on that line). */
static bool has_error(const ConfigErrors *e, unsigned line, const char *needle) {
        for (size_t i = 0; i < e->n; i++)
                if (strstr(e->errors[i].message, needle) && (line == 0 || e->errors[i].line == line))
                        return true;
        return false;
}

static void dump_errors(const ConfigErrors *e) {
        config_errors_print(e, stderr);
}

/* Load expecting success. */
static Config *load_ok(const char *main_path, const char *dropin_dir) {
        ConfigErrors errs = {};
        Config *c = NULL;
        int r;

        r = config_load(main_path, dropin_dir, &c, &errs);
        if (r < 0)
                dump_errors(&errs);
        ck_assert_int_eq(r, 0);
        ck_assert_uint_eq(errs.n, 0);
        ck_assert_ptr_nonnull(c);
        config_errors_done(&errs);
        return c;
}

/* Load expecting failure: *ret must stay untouched. */
static void load_fail(const char *main_path, const char *dropin_dir, ConfigErrors *errs) {
        Config *sentinel = (Config *) (uintptr_t) 0x5a5a, *c = sentinel;

        ck_assert_int_eq(config_load(main_path, dropin_dir, &c, errs), -EINVAL);
        ck_assert_ptr_eq(c, sentinel);
        ck_assert_uint_gt(errs->n, 0);
}

static const Rule *find_rule(const Config *c, const char *name) {
        for (size_t i = 0; i < c->n_rules; i++)
                if (streq(c->rules[i].name, name))
                        return &c->rules[i];
        return NULL;
}

/* ---- defaults ---- */

static void check_defaults(const Config *c) {
        static const struct {
                const char *name;
                ThreadClass class;
                const char *states;
                uint64_t for_usec;
                RuleSeverity severity;
        } builtin[] = {
                { "hung-task", THREAD_CLASS_BLOCKED, "D", 120 * SEC, RULE_SEVERITY_CRITICAL },
                { "deadlock", THREAD_CLASS_BLOCKED, NULL, 10 * SEC, RULE_SEVERITY_CRITICAL },
                { "blocked", THREAD_CLASS_BLOCKED, "S", 120 * SEC, RULE_SEVERITY_CRITICAL },
                { "busy-loop", THREAD_CLASS_BUSY_LOOP, NULL, 60 * SEC, RULE_SEVERITY_WARNING },
                { "syscall-spin", THREAD_CLASS_SYSCALL_SPIN, NULL, 60 * SEC, RULE_SEVERITY_WARNING },
        };

        ck_assert(c->poll_interval_auto);
        ck_assert_uint_eq(c->poll_interval_usec, 1 * SEC); /* shortest for: 10 s (deadlock) / 10 */
        ck_assert_str_eq(c->archive_dir, "/var/lib/stackwatch");
        ck_assert_uint_eq(c->max_snapshots, 1000);
        ck_assert_uint_eq(c->max_size, 512ULL << 20);
        ck_assert_uint_eq(c->max_age_usec, 30ULL * 24 * 3600 * SEC);
        ck_assert_uint_eq(c->keep_free, 1ULL << 30);
        ck_assert_int_eq(c->journal, CONFIG_JOURNAL_SUMMARY);
        ck_assert_uint_eq(c->journal_max_size, 8ULL << 20);
        ck_assert(!c->every_firing);
        ck_assert_ptr_null(c->symbols_cache_dir); /* the default: settled by the daemon (symcache_default_dir()) */
        ck_assert(!c->symbols_cache_off);
        ck_assert_uint_eq(c->symbols_cache_max_size, 1ULL << 30);
        ck_assert_ptr_null(c->symbols_debuginfod); /* the environment's DEBUGINFOD_URLS */
        ck_assert(!c->symbols_debuginfod_off);
        ck_assert_uint_eq(c->max_per_minute, 6);
        ck_assert_int_eq(c->method, CAPTURE_METHOD_AUTO);
        ck_assert_int_eq(c->unwinder, UNWINDER_LIBDW);
        ck_assert_uint_eq(c->max_frames, 256);
        ck_assert_uint_eq(c->stack_bytes, 256 * 1024);
        ck_assert_uint_eq(c->time_budget_usec, 10 * SEC);
        ck_assert(c->kernel);

        ck_assert_uint_eq(c->n_rules, ELEMENTSOF(builtin));
        for (size_t i = 0; i < ELEMENTSOF(builtin); i++) {
                const Rule *r = &c->rules[i];

                ck_assert_str_eq(r->name, builtin[i].name);
                ck_assert_str_eq(r->file, "<built-in>");
                ck_assert_uint_eq(r->line, 0);
                ck_assert_uint_eq(r->classes, 1U << builtin[i].class);
                ck_assert_uint_eq(r->for_usec, builtin[i].for_usec);
                ck_assert_int_eq(r->severity, builtin[i].severity);
                if (builtin[i].states)
                        ck_assert_str_eq(r->states, builtin[i].states);
                else
                        ck_assert_ptr_null(r->states);
                ck_assert_uint_eq(r->actions, RULE_ACTION_SNAPSHOT | RULE_ACTION_LOG);
                ck_assert_uint_eq(r->peers, 1);
                ck_assert_uint_eq(r->cooldown_usec, 10 * MIN_);
                ck_assert(r->cpu_min < 0);
                ck_assert(!r->has_user);
                ck_assert_ptr_null(r->comm);
                ck_assert_ptr_null(r->syscalls);
        }
}

START_TEST(test_defaults_without_files) {
        _cleanup_(config_freep) Config *d = NULL, *c = NULL, *e = NULL;
        char *dir = scratch_new(), *missing = path_in(dir, "nope.yaml"), *nodir = path_in(dir, "rules.d");

        ck_assert_int_eq(config_new_default(&d), 0);
        check_defaults(d);
        c = load_ok(missing, nodir);
        check_defaults(c);
        e = load_ok(NULL, NULL);
        check_defaults(e);
        free(missing);
        free(nodir);
        scratch_free(dir);
        ck_assert_ptr_null(config_free(NULL));
}
END_TEST

START_TEST(test_empty_documents) {
        static const char *const docs[] = { "", "\n", "# only a comment\n", "---\n", "~\n", "--- ~\n...\n",
                                            "archive:\ncapture: ~\n" };
        char *dir = scratch_new();

        for (size_t i = 0; i < ELEMENTSOF(docs); i++) {
                char *p = write_file(dir, "main.yaml", docs[i]);
                Config *c = load_ok(p, NULL);
                check_defaults(c);
                config_free(c);
                free(p);
        }
        scratch_free(dir);
}
END_TEST

/* ---- a file with every key ---- */

static const char full_file[] =
        "# every key, none at its default\n"
        "poll_interval: 2s\n"
        "archive:\n"
        "  directory: /srv/stackwatch\n"
        "  max_snapshots: 50\n"
        "  max_size: 2G\n"
        "  max_age: 7d\n"
        "  keep_free: 512M\n"
        "  journal: full\n"
        "  journal_max_size: 2M\n"
        "  every_firing: true\n"
        "capture:\n"
        "  max_per_minute: 12\n"
        "  method: ptrace\n"
        "  unwinder: fp\n"
        "  max_frames: 64\n"
        "  stack_bytes: 1M\n"
        "  time_budget: 1.5s\n"
        "  kernel: no\n"
        "http:\n"
        "  socket: /run/sw/api.sock\n"
        "  socket_mode: 0600\n"
        "  socket_group: 0\n"
        "  listen: \"[::1]:9177\"\n"
        "  token_file: /etc/stackwatch/token\n"
        "  max_connections: 8\n"
        "  timeout: 2s\n"
        "hooks:\n"
        "  command: /usr/local/bin/page-someone\n"
        "  timeout: 5s\n"
        "  max_running: 2\n"
        "  repeat_interval: 90s\n"
        "rules:\n"
        "  - name: nginx-stuck\n"
        "    class: [blocked, waiting]\n"
        "    for: 30s\n"
        "    state: [D, S, D]\n"
        "    comm: \"nginx*\"\n"
        "    exe: [\"/usr/sbin/*\", \"/opt/*/bin/*\"]\n"
        "    unit: nginx.service\n"
        "    cgroup: \"/system.slice/*\"\n"
        "    user: root\n"
        "    syscall: [read, futex]\n"
        "    wchan: \"pipe_*\"\n"
        "    cpu_min: 12.5\n"
        "    actions: [snapshot, hook]\n"
        "    hook: [/usr/local/bin/alert, --rule, nginx]\n"
        "    severity: critical\n"
        "    peers: 3\n"
        "    cooldown: 1h\n"
        "  - name: spin\n"
        "    class: syscall-spin\n"
        "    user: 1000\n"
        "    actions: log\n"
        "    peers: 0\n"
        "    cooldown: 0\n"
        "symbols:\n"
        "  cache_dir: /var/tmp/sw-symbols\n"
        "  cache_max_size: 200M\n"
        "  debuginfod: \"https://debuginfod.debian.net http://127.0.0.1:8002\"\n";

START_TEST(test_full_file) {
        _cleanup_(config_freep) Config *c = NULL;
        char *dir = scratch_new(), *p = write_file(dir, "stackwatch.yaml", full_file);
        const Rule *r;

        c = load_ok(p, NULL);
        ck_assert(!c->poll_interval_auto);
        ck_assert_uint_eq(c->poll_interval_usec, 2 * SEC);
        ck_assert_str_eq(c->archive_dir, "/srv/stackwatch");
        ck_assert_uint_eq(c->max_snapshots, 50);
        ck_assert_uint_eq(c->max_size, 2ULL << 30);
        ck_assert_uint_eq(c->max_age_usec, 7ULL * 24 * 3600 * SEC);
        ck_assert_uint_eq(c->keep_free, 512ULL << 20);
        ck_assert_int_eq(c->journal, CONFIG_JOURNAL_FULL);
        ck_assert_uint_eq(c->journal_max_size, 2ULL << 20);
        ck_assert(c->every_firing);
        ck_assert_uint_eq(c->max_per_minute, 12);
        ck_assert_int_eq(c->method, CAPTURE_METHOD_PTRACE);
        ck_assert_int_eq(c->unwinder, UNWINDER_FP);
        ck_assert_uint_eq(c->max_frames, 64);
        ck_assert_uint_eq(c->stack_bytes, 1 << 20);
        ck_assert_uint_eq(c->time_budget_usec, 1500 * MSEC);
        ck_assert(!c->kernel);
        ck_assert_str_eq(c->http_socket, "/run/sw/api.sock");
        ck_assert_uint_eq(c->http_socket_mode, 0600);
        ck_assert(c->has_http_socket_group);
        ck_assert_uint_eq(c->http_socket_gid, 0);
        ck_assert_str_eq(c->http_listen, "[::1]:9177");
        ck_assert_str_eq(c->http_token_file, "/etc/stackwatch/token");
        ck_assert_uint_eq(c->http_max_connections, 8);
        ck_assert_uint_eq(c->http_timeout_usec, 2 * SEC);
        ck_assert_uint_eq(strv_length(c->hook_command), 1);
        ck_assert_str_eq(c->hook_command[0], "/usr/local/bin/page-someone");
        ck_assert_uint_eq(c->hook_timeout_usec, 5 * SEC);
        ck_assert_uint_eq(c->hook_max_running, 2);
        ck_assert_uint_eq(c->hook_repeat_usec, 90 * SEC);
        ck_assert_str_eq(c->symbols_cache_dir, "/var/tmp/sw-symbols");
        ck_assert(!c->symbols_cache_off);
        ck_assert_uint_eq(c->symbols_cache_max_size, 200ULL << 20);
        ck_assert_str_eq(c->symbols_debuginfod, "https://debuginfod.debian.net http://127.0.0.1:8002");
        ck_assert(!c->symbols_debuginfod_off);
        {
                /* "off" turns either off, whatever the environment or the default says. */
                _cleanup_(config_freep) Config *o = NULL;
                char *q = write_file(dir, "off.yaml", "symbols:\n  cache_dir: \"off\"\n  debuginfod: \"off\"\n");
                o = load_ok(q, NULL);
                ck_assert(o->symbols_cache_off && !o->symbols_cache_dir);
                ck_assert(o->symbols_debuginfod_off && !o->symbols_debuginfod);
                free(q);
        }

        /* rules: in the main file replaces the built-in rules. */
        ck_assert_uint_eq(c->n_rules, 2);
        ck_assert_ptr_null(find_rule(c, "hung-task"));
        r = &c->rules[0];
        ck_assert_str_eq(r->name, "nginx-stuck");
        ck_assert_str_eq(r->file, p);
        ck_assert_uint_eq(r->line, 34);
        ck_assert_uint_eq(r->column, 11);
        ck_assert_uint_eq(r->classes, (1U << THREAD_CLASS_BLOCKED) | (1U << THREAD_CLASS_WAITING));
        ck_assert_uint_eq(r->for_usec, 30 * SEC);
        ck_assert_str_eq(r->states, "DS");
        ck_assert_uint_eq(strv_length(r->comm), 1);
        ck_assert_str_eq(r->comm[0], "nginx*");
        ck_assert_uint_eq(strv_length(r->exe), 2);
        ck_assert_str_eq(r->exe[1], "/opt/*/bin/*");
        ck_assert_str_eq(r->unit[0], "nginx.service");
        ck_assert_str_eq(r->cgroup[0], "/system.slice/*");
        ck_assert_str_eq(r->wchan[0], "pipe_*");
        ck_assert(r->has_user);
        ck_assert_uint_eq(r->user, 0);
        ck_assert_uint_eq(r->n_syscalls, 2);
        ck_assert_int_eq(r->syscalls[0], __NR_read);
        ck_assert_int_eq(r->syscalls[1], __NR_futex);
        ck_assert_double_eq(r->cpu_min, 12.5);
        ck_assert_uint_eq(r->actions, RULE_ACTION_SNAPSHOT | RULE_ACTION_HOOK);
        ck_assert_uint_eq(strv_length(r->hook), 3);
        ck_assert_str_eq(r->hook[0], "/usr/local/bin/alert");
        ck_assert_str_eq(r->hook[2], "nginx");
        ck_assert_uint_eq(r->peers, 3);
        ck_assert_uint_eq(r->cooldown_usec, 3600 * SEC);
        ck_assert_int_eq(r->severity, RULE_SEVERITY_CRITICAL);

        r = &c->rules[1];
        ck_assert_str_eq(r->name, "spin");
        ck_assert_uint_eq(r->classes, 1U << THREAD_CLASS_SYSCALL_SPIN);
        ck_assert_uint_eq(r->for_usec, 0);
        ck_assert(r->has_user);
        ck_assert_uint_eq(r->user, 1000);
        ck_assert_uint_eq(r->actions, RULE_ACTION_LOG);
        ck_assert_uint_eq(r->peers, 0);
        ck_assert_uint_eq(r->cooldown_usec, 0);
        ck_assert_int_eq(r->severity, RULE_SEVERITY_WARNING);
        ck_assert_ptr_null(r->states);
        ck_assert(r->cpu_min < 0);

        free(p);
        scratch_free(dir);
}
END_TEST

/* ---- drop-ins ---- */

START_TEST(test_dropins_in_name_order) {
        _cleanup_(config_freep) Config *c = NULL;
        char *dir = scratch_new(), *rules = path_in(dir, "rules.d"), *p;
        static const char *const expected[] = { "hung-task", "deadlock", "blocked", "busy-loop", "syscall-spin",
                                                "a1", "a2", "b1", "c1" };

        ck_assert_int_eq(mkdir(rules, 0755), 0);
        free(write_file(dir, "main.yaml", "capture:\n  max_frames: 32\n"));
        free(write_file(rules, "20-b.yaml", "rules:\n  - {name: b1, class: blocked}\n"));
        free(write_file(rules, "10-a.yaml",
                        "rules:\n  - {name: a1, class: blocked}\n  - {name: a2, class: zombie}\n"));
        free(write_file(rules, "30-c.yaml", "rules:\n  - name: c1\n    class: stopped\n"));
        /* Not drop-ins: hidden, other suffixes, and an empty one that holds nothing at all. */
        free(write_file(rules, ".00-hidden.yaml", "rules:\n  - {name: hidden, class: blocked}\n"));
        free(write_file(rules, "40-d.yml", "rules:\n  - {name: yml, class: blocked}\n"));
        free(write_file(rules, "README", "not yaml: [\n"));
        free(write_file(rules, "25-empty.yaml", "# nothing yet\n"));

        p = path_in(dir, "main.yaml");
        c = load_ok(p, rules);
        ck_assert_uint_eq(c->max_frames, 32);
        ck_assert_uint_eq(c->n_rules, ELEMENTSOF(expected));
        for (size_t i = 0; i < ELEMENTSOF(expected); i++)
                ck_assert_str_eq(c->rules[i].name, expected[i]);
        ck_assert(strstr(c->rules[5].file, "rules.d/10-a.yaml"));
        ck_assert_uint_eq(c->rules[6].line, 3);
        ck_assert_uint_eq(c->rules[6].classes, 1U << THREAD_CLASS_ZOMBIE);

        free(p);
        free(rules);
        scratch_free(dir);
}
END_TEST

START_TEST(test_main_rules_replace_defaults) {
        char *dir = scratch_new(), *rules = path_in(dir, "rules.d"), *p;
        Config *c;

        ck_assert_int_eq(mkdir(rules, 0755), 0);
        free(write_file(rules, "50-x.yaml", "rules:\n  - {name: x, class: blocked}\n"));

        p = write_file(dir, "main.yaml", "rules:\n  - {name: mine, class: busy-loop, for: 5s}\n");
        c = load_ok(p, rules);
        ck_assert_uint_eq(c->n_rules, 2);
        ck_assert_str_eq(c->rules[0].name, "mine");
        ck_assert_str_eq(c->rules[1].name, "x");
        config_free(c);
        free(p);

        /* An empty list switches the built-in rules off; drop-ins still come in. */
        p = write_file(dir, "main.yaml", "rules: []\n");
        c = load_ok(p, rules);
        ck_assert_uint_eq(c->n_rules, 1);
        ck_assert_str_eq(c->rules[0].name, "x");
        config_free(c);
        c = load_ok(p, NULL);
        ck_assert_uint_eq(c->n_rules, 0);
        ck_assert_uint_eq(c->poll_interval_usec, 10 * SEC);
        config_free(c);
        free(p);

        free(rules);
        scratch_free(dir);
}
END_TEST

START_TEST(test_dropin_restrictions) {
        ConfigErrors errs = {};
        char *dir = scratch_new(), *rules = path_in(dir, "rules.d"), *p;

        ck_assert_int_eq(mkdir(rules, 0755), 0);
        p = write_file(dir, "main.yaml", "rules:\n  - {name: a, class: blocked}\n");
        free(write_file(rules, "10-settings.yaml", "poll_interval: 1s\nrules: []\n"));
        free(write_file(rules, "20-dup.yaml", "rules:\n  - {name: a, class: waiting}\n"));
        load_fail(p, rules, &errs);
        ck_assert(has_error(&errs, 1, "unknown key \"poll_interval\" in a drop-in (expected one of: rules)"));
        ck_assert(has_error(&errs, 2, "duplicate rule name \"a\" (first defined at "));
        ck_assert_uint_eq(errs.n, 2);
        ck_assert(strstr(errs.errors[0].file, "10-settings.yaml"));
        ck_assert(strstr(errs.errors[1].file, "20-dup.yaml"));
        config_errors_done(&errs);
        free(p);

        /* A drop-in may not reuse a built-in name: the main file's rules: is the place to change those. */
        p = write_file(dir, "main.yaml", "");
        free(write_file(rules, "10-settings.yaml", ""));
        free(write_file(rules, "20-dup.yaml", ""));
        free(write_file(rules, "30-hung.yaml", "rules:\n  - {name: hung-task, class: blocked}\n"));
        load_fail(p, rules, &errs);
        ck_assert(has_error(&errs, 2, "a built-in rule has that name"));
        config_errors_done(&errs);
        free(p);

        free(rules);
        scratch_free(dir);
}
END_TEST

/* ---- poll interval ---- */

START_TEST(test_poll_interval_auto) {
        static const struct {
                const char *file;
                bool ok, is_auto;
                uint64_t usec;
        } cases[] = {
                { "", true, true, 1 * SEC },
                { "poll_interval: auto\n", true, true, 1 * SEC },
                { "rules: []\n", true, true, 10 * SEC },
                { "rules: [{name: a, class: blocked, for: 120s}]\n", true, true, 10 * SEC },
                { "rules: [{name: a, class: blocked, for: 50s}]\n", true, true, 5 * SEC },
                { "rules: [{name: a, class: blocked, for: 5s}, {name: b, class: blocked, for: 1h}]\n", true, true,
                  500 * MSEC },
                { "rules: [{name: a, class: blocked, for: 1s}]\n", true, true, 250 * MSEC },
                { "rules: [{name: a, class: blocked}]\n", true, true, 250 * MSEC },
                { "poll_interval: 2s\nrules: [{name: a, class: blocked, for: 1s}]\n", true, false, 2 * SEC },
                { "poll_interval: 50ms\n", true, false, 50 * MSEC },
                { "poll_interval: 1h\n", true, false, 3600 * SEC },
                { "poll_interval: 49ms\n", false, false, 0 },
                { "poll_interval: 61m\n", false, false, 0 },
                { "poll_interval: 0\n", false, false, 0 },
                { "poll_interval: sometimes\n", false, false, 0 },
        };
        char *dir = scratch_new();

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                char *p = write_file(dir, "main.yaml", cases[i].file);
                ConfigErrors errs = {};
                Config *c = NULL;
                int r = config_load(p, NULL, &c, &errs);

                ck_assert_msg((r == 0) == cases[i].ok, "case %zu: %d", i, r);
                if (r == 0) {
                        ck_assert_msg(c->poll_interval_auto == cases[i].is_auto, "case %zu", i);
                        ck_assert_msg(c->poll_interval_usec == cases[i].usec, "case %zu: %llu", i,
                                      (unsigned long long) c->poll_interval_usec);
                } else
                        ck_assert(has_error(&errs, 1, "poll_interval") || has_error(&errs, 1, "\"auto\" or"));
                config_free(c);
                config_errors_done(&errs);
                free(p);
        }
        scratch_free(dir);
}
END_TEST

/* ---- value parsers ---- */

START_TEST(test_parse_duration) {
        static const struct {
                const char *in;
                int ret;
                uint64_t usec;
        } cases[] = {
                { "120s", 0, 120 * SEC },
                { "1.5s", 0, 1500 * MSEC },
                { "100ms", 0, 100 * MSEC },
                { "250us", 0, 250 },
                { "2h", 0, 7200 * SEC },
                { "5m", 0, 300 * SEC },
                { "1d", 0, 86400 * SEC },
                { "0.5h", 0, 1800 * SEC },
                { "10", 0, 10 * SEC },
                { "0", 0, 0 },
                { "0.5", 0, 500 * MSEC },
                { "007s", 0, 7 * SEC },
                { "1.0000000000000000000000s", 0, SEC },
                { "0.000001s", 0, 1 },
                { "18446744073709551615us", 0, UINT64_MAX },
                { "213503982d", 0, 213503982ULL * 86400 * SEC },
                { "213503983d", -ERANGE, 0 },
                { "18446744073709551616us", -ERANGE, 0 },
                { "99999999999999999999d", -ERANGE, 0 },
                { "99999999999999999999", -ERANGE, 0 },
                { "", -EINVAL, 0 },
                { "-1s", -EINVAL, 0 },
                { "+1s", -EINVAL, 0 },
                { "1.5.5s", -EINVAL, 0 },
                { "s", -EINVAL, 0 },
                { ".5s", -EINVAL, 0 },
                { "5.s", -EINVAL, 0 },
                { "5 s", -EINVAL, 0 },
                { " 5s", -EINVAL, 0 },
                { "5s ", -EINVAL, 0 },
                { "5S", -EINVAL, 0 },
                { "5sec", -EINVAL, 0 },
                { "5ms5", -EINVAL, 0 },
                { "1e3s", -EINVAL, 0 },
                { "0x10s", -EINVAL, 0 },
                { "1.5us", -EINVAL, 0 },       /* a fraction of a microsecond */
                { "0.0000001s", -EINVAL, 0 },
                { "1.0000000000000000001s", -EINVAL, 0 },
                { "soon", -EINVAL, 0 },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                uint64_t v = 7;
                int r = config_parse_duration(cases[i].in, &v);
                ck_assert_msg(r == cases[i].ret, "'%s': %d != %d", cases[i].in, r, cases[i].ret);
                ck_assert_msg(v == (r == 0 ? cases[i].usec : 7), "'%s': %llu", cases[i].in, (unsigned long long) v);
        }
        ck_assert_int_eq(config_parse_duration(NULL, &(uint64_t) { 0 }), -EINVAL);
}
END_TEST

START_TEST(test_parse_size) {
        static const struct {
                const char *in;
                int ret;
                uint64_t bytes;
        } cases[] = {
                { "0", 0, 0 },
                { "4096", 0, 4096 },
                { "4K", 0, 4096 },
                { "4k", 0, 4096 },
                { "512M", 0, 512ULL << 20 },
                { "1G", 0, 1ULL << 30 },
                { "2T", 0, 2ULL << 40 },
                { "16777215T", 0, 16777215ULL << 40 },
                { "16777216T", -ERANGE, 0 },
                { "18446744073709551615", 0, UINT64_MAX },
                { "18446744073709551616", -ERANGE, 0 },
                { "99999999999999999999G", -ERANGE, 0 },
                { "1.5G", -EINVAL, 0 },
                { "-1", -EINVAL, 0 },
                { "", -EINVAL, 0 },
                { "K", -EINVAL, 0 },
                { "1KB", -EINVAL, 0 },
                { "1KiB", -EINVAL, 0 },
                { "1P", -EINVAL, 0 },
                { " 1K", -EINVAL, 0 },
                { "1K ", -EINVAL, 0 },
                { "1 K", -EINVAL, 0 },
                { "lots", -EINVAL, 0 },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                uint64_t v = 7;
                int r = config_parse_size(cases[i].in, &v);
                ck_assert_msg(r == cases[i].ret, "'%s': %d != %d", cases[i].in, r, cases[i].ret);
                ck_assert_msg(v == (r == 0 ? cases[i].bytes : 7), "'%s'", cases[i].in);
        }
}
END_TEST

START_TEST(test_parse_bool_and_decimal) {
        static const struct {
                const char *in;
                int ret;
                bool val;
        } bools[] = {
                { "true", 0, true }, { "yes", 0, true }, { "on", 0, true }, { "True", 0, true },
                { "TRUE", 0, true }, { "false", 0, false }, { "no", 0, false }, { "off", 0, false },
                { "OFF", 0, false }, { "1", -EINVAL, false }, { "0", -EINVAL, false }, { "", -EINVAL, false },
                { "y", -EINVAL, false }, { "truee", -EINVAL, false }, { " true", -EINVAL, false },
        };
        static const struct {
                const char *in;
                int ret;
                double val;
        } decimals[] = {
                { "50", 0, 50 }, { "12.5", 0, 12.5 }, { "0", 0, 0 }, { "0.25", 0, 0.25 }, { "800", 0, 800 },
                { "-5", -EINVAL, 0 }, { "1e2", -EINVAL, 0 }, { "", -EINVAL, 0 }, { "1.", -EINVAL, 0 },
                { ".5", -EINVAL, 0 }, { "1.2.3", -EINVAL, 0 }, { "nan", -EINVAL, 0 }, { "inf", -EINVAL, 0 },
                { "99999999999999999999", -ERANGE, 0 },
        };

        for (size_t i = 0; i < ELEMENTSOF(bools); i++) {
                bool v = !bools[i].val;
                int r = config_parse_bool(bools[i].in, &v);
                ck_assert_msg(r == bools[i].ret, "'%s'", bools[i].in);
                if (r == 0)
                        ck_assert_msg(v == bools[i].val, "'%s'", bools[i].in);
        }
        for (size_t i = 0; i < ELEMENTSOF(decimals); i++) {
                double v = -1;
                int r = config_parse_decimal(decimals[i].in, &v);
                ck_assert_msg(r == decimals[i].ret, "'%s': %d", decimals[i].in, r);
                if (r == 0)
                        ck_assert_double_eq(v, decimals[i].val);
                else
                        ck_assert_double_eq(v, -1);
        }
}
END_TEST

START_TEST(test_parse_listen_and_mode) {
        static const struct {
                const char *in;
                int family;
                const char *addr;
                unsigned port;
        } good[] = {
                { "9177", AF_INET, "127.0.0.1", 9177 }, { "0.0.0.0:80", AF_INET, "0.0.0.0", 80 },
                { "[::1]:0", AF_INET6, "::1", 0 }, { "10.1.2.3:65535", AF_INET, "10.1.2.3", 65535 },
        };
        static const char *const bad[] = { "", ":", "65536", "-1", "host:80", "1.2.3.4:", "[::1]", "[::1]80",
                                           "::1:80", "1.2.3.4:80x", "[zz]:80", "127.0.0.1:99999" };
        static const struct {
                const char *in;
                int ret;
                unsigned mode;
        } modes[] = {
                { "0660", 0, 0660 }, { "660", 0, 0660 }, { "0", 0, 0 }, { "777", 0, 0777 }, { "1777", -EINVAL, 0 },
                { "0999", -EINVAL, 0 }, { "", -EINVAL, 0 }, { "rw-rw----", -EINVAL, 0 }, { "06600", -EINVAL, 0 },
        };

        for (size_t i = 0; i < ELEMENTSOF(good); i++) {
                struct sockaddr_storage ss;
                socklen_t len = 0;
                char buf[INET6_ADDRSTRLEN];
                const void *a;
                unsigned port;

                ck_assert_int_eq(config_parse_listen(good[i].in, &ss, &len), 0);
                ck_assert_int_eq(ss.ss_family, good[i].family);
                if (ss.ss_family == AF_INET) {
                        a = &((struct sockaddr_in *) &ss)->sin_addr;
                        port = ntohs(((struct sockaddr_in *) &ss)->sin_port);
                        ck_assert_uint_eq(len, sizeof(struct sockaddr_in));
                } else {
                        a = &((struct sockaddr_in6 *) &ss)->sin6_addr;
                        port = ntohs(((struct sockaddr_in6 *) &ss)->sin6_port);
                        ck_assert_uint_eq(len, sizeof(struct sockaddr_in6));
                }
                ck_assert_str_eq(inet_ntop(ss.ss_family, a, buf, sizeof buf), good[i].addr);
                ck_assert_uint_eq(port, good[i].port);
        }
        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                ck_assert_msg(config_parse_listen(bad[i], NULL, NULL) == -EINVAL, "'%s'", bad[i]);
        for (size_t i = 0; i < ELEMENTSOF(modes); i++) {
                unsigned m = 12345;
                int r = config_parse_mode(modes[i].in, &m);

                ck_assert_msg(r == modes[i].ret, "'%s': %d", modes[i].in, r);
                ck_assert_uint_eq(m, r == 0 ? modes[i].mode : 12345);
        }
}
END_TEST

START_TEST(test_format) {
        static const struct {
                uint64_t usec;
                const char *out;
        } durations[] = {
                { 0, "0" }, { 1, "1us" }, { 1500 * MSEC, "1500ms" }, { 100 * MSEC, "100ms" }, { 10 * MIN_, "10m" },
                { 3600 * SEC, "1h" }, { 30ULL * 86400 * SEC, "30d" }, { 90 * SEC, "90s" },
        };
        static const struct {
                uint64_t bytes;
                const char *out;
        } sizes[] = {
                { 0, "0" }, { 1000, "1000" }, { 4096, "4K" }, { 1 << 20, "1M" }, { 512ULL << 20, "512M" },
                { 1ULL << 30, "1G" }, { 1ULL << 50, "1024T" }, { (1 << 20) + 1, "1048577" },
        };
        char buf[CONFIG_FORMAT_MAX];

        for (size_t i = 0; i < ELEMENTSOF(durations); i++)
                ck_assert_str_eq(config_format_duration(buf, sizeof buf, durations[i].usec), durations[i].out);
        for (size_t i = 0; i < ELEMENTSOF(sizes); i++)
                ck_assert_str_eq(config_format_size(buf, sizeof buf, sizes[i].bytes), sizes[i].out);
}
END_TEST

/* ---- errors ---- */

START_TEST(test_multiple_errors_collected) {
        static const char file[] =
                "poll_interval: soon\n"                 /* 1 */
                "archive:\n"                            /* 2 */
                "  max_size: 12\n"                      /* 3 */
                "  max_age: 99999999999999999999d\n"    /* 4 */
                "capture:\n"                            /* 5 */
                "  kernel: maybe\n"                     /* 6 */
                "  max_per_minute: 601\n"               /* 7 */
                "  max_frames: [1]\n"                   /* 8 */
                "rules:\n"                              /* 9 */
                "  - name: a\n"                         /* 10 */
                "    clss: blocked\n"                   /* 11 */
                "  - name: b\n"                         /* 12 */
                "    class: blocked\n"                  /* 13 */
                "    syscall: [read, reed]\n"           /* 14 */
                "    user: no-such-user-here\n"         /* 15 */
                "  - class: blocked\n"                  /* 16 */
                "  - name: b\n"                         /* 17 */
                "    class: zombie\n";                  /* 18 */
        static const struct {
                unsigned line, column;
                const char *message;
        } expected[] = {
                { 1, 16, "expected \"auto\" or a duration like 120s, 5m or 1.5h, got \"soon\"" },
                { 3, 13, "\"max_size\" must be between 1M and 1024T, got \"12\"" },
                { 4, 12, "\"max_age\" must be between 1m and 3650d, got \"99999999999999999999d\"" },
                { 6, 11, "expected a boolean (true/false, yes/no, on/off), got \"maybe\"" },
                { 7, 19, "\"max_per_minute\" must be between 1 and 600, got \"601\"" },
                { 8, 15, "expected a single value for \"max_frames\", got a list" },
                { 10, 5, "rule \"a\" has no \"class\"" },
                { 11, 5, "unknown key \"clss\" in a rule (expected one of: name, class, for, state, comm, exe, unit, "
                         "cgroup, user, syscall, wchan, cpu_min, deadlock, lock_holder, actions, peers, cooldown, probe, hook, severity)" },
                { 14, 21, "unknown syscall \"reed\"" },
                { 15, 11, "unknown user \"no-such-user-here\"" },
                { 16, 5, "rule without a name" },
                { 17, 11, "duplicate rule name \"b\" (first defined at " },
        };
        char *dir = scratch_new(), *p = write_file(dir, "main.yaml", file);
        ConfigErrors errs = {};

        load_fail(p, NULL, &errs);
        if (errs.n != ELEMENTSOF(expected))
                dump_errors(&errs);
        ck_assert_uint_eq(errs.n, ELEMENTSOF(expected));
        for (size_t i = 0; i < ELEMENTSOF(expected); i++) {
                ck_assert_str_eq(errs.errors[i].file, p);
                ck_assert_msg(errs.errors[i].line == expected[i].line && errs.errors[i].column == expected[i].column,
                              "error %zu at %u:%u, expected %u:%u", i, errs.errors[i].line, errs.errors[i].column,
                              expected[i].line, expected[i].column);
                ck_assert_msg(strstr(errs.errors[i].message, expected[i].message), "error %zu: '%s'", i,
                              errs.errors[i].message);
        }
        config_errors_done(&errs);
        ck_assert_uint_eq(errs.n, 0);
        ck_assert_ptr_null(errs.errors);
        free(p);
        scratch_free(dir);
}
END_TEST

START_TEST(test_value_errors) {
        /* One bad value per document: the error names what was expected. */
        static const struct {
                const char *file;
                unsigned line;
                const char *message;
        } cases[] = {
                { "archive:\n  directory: relative/dir\n", 2, "expected an absolute path" },
                { "archive:\n  max_snapshots: 0\n", 2, "between 1 and 1000000" },
                { "archive:\n  max_snapshots: -1\n", 2, "expected a whole number, got \"-1\"" },
                { "archive:\n  keep_free: lots\n", 2, "expected a size like 512M, 1G or 4096, got \"lots\"" },
                { "archive:\n  journal: everything\n", 2,
                  "unknown journal mode \"everything\" (expected one of: off, summary, full)" },
                { "archive:\n  journal_max_size: 512\n", 2, "\"journal_max_size\" must be between" },
                { "archive: []\n", 1, "expected a mapping for \"archive\", got a list" },
                { "archive: 5\n", 1, "expected a mapping for \"archive\", got \"5\"" },
                { "capture:\n  method: none\n", 2, "unknown capture method \"none\" (expected one of: auto, passive, "
                                                   "ptrace)" },
                { "capture:\n  unwinder: gdb\n", 2, "unknown unwinder \"gdb\" (expected one of: libdw, libunwind, "
                                                    "fp)" },
                { "capture:\n  stack_bytes: 1K\n", 2, "\"stack_bytes\" must be between 4K and 64M" },
                { "capture:\n  time_budget: 20m\n", 2, "\"time_budget\" must be between 100ms and 10m, got \"20m\"" },
                { "capture:\n  max_frames: 4097\n", 2, "between 1 and 4096" },
                { "capture:\n  max_frames:\n", 2, "expected a whole number, got an empty value" },
                { "rules: {name: a}\n", 1, "expected a list for \"rules\", got a mapping" },
                { "rules:\n", 1, "expected a list for \"rules\", got an empty value" },
                { "rules:\n  - 5\n", 2, "expected a rule (a mapping with name, class, ...), got \"5\"" },
                { "rules:\n  - {name: \"bad name\", class: blocked}\n", 2, "invalid rule name \"bad name\"" },
                { "rules:\n  - {name: a, class: []}\n", 2, "expected at least one value for \"class\"" },
                { "rules:\n  - {name: a, class: [blocked, {x: 1}]}\n", 2,
                  "expected a string in the list for \"class\", got a mapping" },
                { "rules:\n  - {name: a, class: hung}\n", 2,
                  "unknown thread class \"hung\" (expected one of: running, waiting, blocked, busy-loop, "
                  "syscall-spin, stopped, zombie, frozen, lock-retry)" },
                { "rules:\n  - {name: a, class: blocked, state: DS}\n", 2, "unknown thread state \"DS\"" },
                { "rules:\n  - {name: a, class: blocked, comm: \"\"}\n", 2, "expected a glob pattern, got an empty "
                                                                            "value" },
                { "rules:\n  - {name: a, class: blocked, user: 4294967295}\n", 2, "invalid uid \"4294967295\"" },
                { "rules:\n  - {name: a, class: blocked, user: 99999999999}\n", 2, "invalid uid" },
                { "rules:\n  - {name: a, class: blocked, cpu_min: lots}\n", 2, "expected a CPU percentage like 50 "
                                                                               "or 12.5, got \"lots\"" },
                { "rules:\n  - {name: a, class: blocked, cpu_min: 99999999}\n", 2, "\"cpu_min\" must be between 0 "
                                                                                   "and " },
                { "rules:\n  - {name: a, class: blocked, actions: [log, mail]}\n", 2, "unknown action \"mail\"" },
                { "rules:\n  - {name: a, class: blocked, severity: page}\n", 2,
                  "unknown severity \"page\" (expected one of: warning, critical, info)" },
                { "hooks:\n  repeat_interval: 100ms\n", 2, "\"repeat_interval\" must be between 1s and 1d" },
                { "symbols:\n  cache_dir: cache\n", 2, "expected an absolute path or \"off\", got \"cache\"" },
                { "symbols:\n  cache_max_size: 1M\n", 2, "\"cache_max_size\" must be between 16M and" },
                { "symbols:\n  debuginfod: ftp://x\n", 2, "expected debuginfod URLs (http://, https:// or file://)" },
                { "symbols:\n  debuginfod: \"http://a  gopher://b\"\n", 2, "got \"http://a  gopher://b\"" },
                { "symbols:\n  debuginfod: \" \"\n", 2, "expected at least one debuginfod URL, or \"off\"" },
                { "symbols:\n  cache: /x\n", 2, "unknown key \"cache\" in \"symbols\"" },
                { "rules:\n  - {name: a, class: blocked, peers: 9}\n", 2, "\"peers\" must be between 0 and 8" },
                { "rules:\n  - {name: a, class: blocked, cooldown: -1m}\n", 2, "expected a duration like" },
                { "rules:\n  - {name: a, class: blocked, for: 400d}\n", 2, "\"for\" must be between 0 and 365d" },
                { "rules:\n  - {name: a, class: blocked, for: 1s, for: 2s}\n", 2, "duplicate key \"for\" (first set "
                                                                                 "at line 2, column 31)" },
                { "[1, 2]\n", 1, "expected a mapping of settings, got a list" },
                { "? [a, b]\n: c\n", 1, "expected a key name, got a list" },
                { "archive:\n  directory: \"/a\\0b\"\n", 2, "unexpected NUL byte in a value" },
                { "poll_interval: 1s\n---\npoll_interval: 2s\n", 3, "only one YAML document is allowed per file" },
                { "archive:\n  directory: /x\n max_size: 1G\n", 3, "syntax error: did not find expected key (while "
                                                                   "parsing a block mapping at line 1, column 1)" },
                { "rules:\n\t- name: x\n", 2, "tabs are not allowed for indentation" },
                { "a: \xff\n", 1, "syntax error: invalid leading UTF-8 octet (byte 0xFF)" },
                { "rules: *nope\n", 1, "syntax error: found undefined alias" },
                { "poll_interval: \"\\e[31mred\"\n", 1, "got \"\\e[31mred\"" }, /* escaped, not sent raw */
        };
        char *dir = scratch_new();

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                char *p = write_file(dir, "main.yaml", cases[i].file);
                ConfigErrors errs = {};

                load_fail(p, NULL, &errs);
                if (!has_error(&errs, cases[i].line, cases[i].message)) {
                        dump_errors(&errs);
                        ck_abort_msg("case %zu: no error '%s' on line %u", i, cases[i].message, cases[i].line);
                }
                config_errors_done(&errs);
                free(p);
        }
        scratch_free(dir);
}
END_TEST

START_TEST(test_errors_print) {
        ConfigErrors errs = {};
        char *buf = NULL;
        size_t size = 0;
        FILE *f;

        ck_assert_int_eq(config_errors_add(&errs, "a.yaml", 4, 12, "expected %s, got \"%s\"", "x", "y"), 0);
        ck_assert_int_eq(config_errors_add(&errs, "b.yaml", 0, 0, "is a directory"), 0);
        f = open_memstream(&buf, &size);
        ck_assert_ptr_nonnull(f);
        config_errors_print(&errs, f);
        ck_assert_int_eq(fclose(f), 0);
        ck_assert_str_eq(buf, "a.yaml:4:12: expected x, got \"y\"\nb.yaml: is a directory\n");
        free(buf);

        /* Past CONFIG_ERRORS_MAX errors are counted, not kept. */
        for (unsigned i = 0; i < CONFIG_ERRORS_MAX + 5; i++)
                ck_assert_int_eq(config_errors_add(&errs, "c.yaml", i + 1, 1, "error %u", i), 0);
        ck_assert_uint_eq(errs.n, CONFIG_ERRORS_MAX);
        ck_assert_uint_eq(errs.n_dropped, 7);
        buf = NULL;
        f = open_memstream(&buf, &size);
        config_errors_print(&errs, f);
        ck_assert_int_eq(fclose(f), 0);
        ck_assert(strstr(buf, "(7 more error(s) not shown)\n"));
        free(buf);
        config_errors_done(&errs);
        config_errors_done(&errs);
}
END_TEST

/* ---- files that are not what they should be ---- */

START_TEST(test_not_a_file) {
        char *dir = scratch_new(), *sub = path_in(dir, "sub"), *fifo = path_in(dir, "fifo.yaml"),
             *rules = path_in(dir, "rules.d"), *plain = write_file(dir, "plain.yaml", "");
        ConfigErrors errs = {};

        ck_assert_int_eq(mkdir(sub, 0755), 0);
        load_fail(sub, NULL, &errs);
        ck_assert_uint_eq(errs.n, 1);
        ck_assert_uint_eq(errs.errors[0].line, 0);
        ck_assert_str_eq(errs.errors[0].message, "is a directory, expected a YAML file");
        config_errors_done(&errs);

        /* A FIFO must not block the load. */
        ck_assert_int_eq(mkfifo(fifo, 0600), 0);
        load_fail(fifo, NULL, &errs);
        ck_assert_str_eq(errs.errors[0].message, "is not a regular file");
        config_errors_done(&errs);

        /* A file that opens but cannot be read. */
        load_fail("/proc/self/mem", NULL, &errs);
        ck_assert(has_error(&errs, 0, "cannot read: "));
        config_errors_done(&errs);

        /* Permissions do not stop root, so this part needs an unprivileged run. */
        if (geteuid() != 0) {
                ck_assert_int_eq(chmod(plain, 0), 0);
                load_fail(plain, NULL, &errs);
                ck_assert(has_error(&errs, 0, "cannot open: Permission denied"));
                config_errors_done(&errs);
        }

        /* The rules directory is a file; a drop-in is a directory; a main path through a file. */
        load_fail(NULL, plain, &errs);
        ck_assert(has_error(&errs, 0, "cannot open the rules directory: Not a directory"));
        config_errors_done(&errs);
        ck_assert_int_eq(mkdir(rules, 0755), 0);
        free(sub);
        sub = path_in(rules, "10-dir.yaml");
        ck_assert_int_eq(mkdir(sub, 0755), 0);
        load_fail(NULL, rules, &errs);
        ck_assert(strstr(errs.errors[0].file, "rules.d/10-dir.yaml"));
        ck_assert_str_eq(errs.errors[0].message, "is a directory, expected a YAML file");
        config_errors_done(&errs);
        free(sub);
        sub = path_in(plain, "x.yaml");
        load_fail(sub, NULL, &errs);
        ck_assert(has_error(&errs, 0, "cannot open: Not a directory"));
        config_errors_done(&errs);

        free(sub);
        free(fifo);
        free(rules);
        free(plain);
        scratch_free(dir);
}
END_TEST

#define HUGE_LINE "# a comment line, many times over ........................................\n"

START_TEST(test_huge_file) {
        char *dir = scratch_new(), *p = path_in(dir, "huge.yaml"), *q;
        ConfigErrors errs = {};
        Config *c;
        FILE *f;

        /* Just over the limit: refused before libyaml sees it. */
        f = fopen(p, "we");
        ck_assert_ptr_nonnull(f);
        for (size_t n = 0; n <= CONFIG_FILE_SIZE_MAX; n += strlen(HUGE_LINE))
                fputs(HUGE_LINE, f);
        ck_assert_int_eq(fclose(f), 0);
        load_fail(p, NULL, &errs);
        ck_assert_uint_eq(errs.n, 1);
        ck_assert_str_eq(errs.errors[0].message, "file is too large (the limit is 1M)");
        config_errors_done(&errs);

        /* Under the limit but with more rules than the daemon evaluates: one error, at the first rule too many. */
        f = fopen(p, "we");
        ck_assert_ptr_nonnull(f);
        fputs("rules:\n", f);
        for (unsigned i = 0; i < CONFIG_RULES_MAX + 10; i++)
                fprintf(f, "  - {name: r%u, class: blocked, for: %us}\n", i, i + 1);
        ck_assert_int_eq(fclose(f), 0);
        load_fail(p, NULL, &errs);
        ck_assert_uint_eq(errs.n, 1);
        ck_assert_uint_eq(errs.errors[0].line, CONFIG_RULES_MAX + 2);
        ck_assert(has_error(&errs, 0, "too many rules (at most 1024)"));
        config_errors_done(&errs);

        /* The most rules allowed, in a large file: fine. */
        q = path_in(dir, "many.yaml");
        f = fopen(q, "we");
        ck_assert_ptr_nonnull(f);
        fputs("rules:\n", f);
        for (unsigned i = 0; i < CONFIG_RULES_MAX; i++)
                fprintf(f, "  # rule %u\n  - {name: r%u, class: [blocked, waiting], for: %us, comm: [a*, b*]}\n", i,
                        i, i + 1);
        ck_assert_int_eq(fclose(f), 0);
        c = load_ok(q, NULL);
        ck_assert_uint_eq(c->n_rules, CONFIG_RULES_MAX);
        ck_assert_uint_eq(c->poll_interval_usec, 250 * MSEC);
        config_free(c);

        free(q);
        free(p);
        scratch_free(dir);
}
END_TEST

START_TEST(test_alias_bomb) {
        /* The walk follows the schema, so aliases can only multiply at two levels: a rule aliased many times,
         * whose lists are long. 1000 × 1000 items from a 10 KB file must stop at the visit budget. */
        static const char fine[] =
                "rules:\n"
                "  - &base {name: x, class: &cls [blocked, waiting], for: 30s}\n"
                "  - {name: y, class: *cls}\n";
        char *dir = scratch_new(), *p = path_in(dir, "bomb.yaml");
        ConfigErrors errs = {};
        Config *c;
        FILE *f;

        f = fopen(p, "we");
        ck_assert_ptr_nonnull(f);
        fputs("rules:\n  - &r {name: r, class: blocked, comm: [", f);
        for (unsigned i = 0; i < 1000; i++)
                fputs(i ? ",a" : "a", f);
        fputs("]}\n", f);
        for (unsigned i = 0; i < 1000; i++)
                fputs("  - *r\n", f);
        ck_assert_int_eq(fclose(f), 0);

        load_fail(p, NULL, &errs);
        /* The bound is relative to the document: its 1,010 nodes (the 1,000 list items, the rule's keys and values,
         * the top) may be walked 10 times over, plus 10,000: the walk stops at 20,100 visits, not at 1,000,000. */
        ck_assert(has_error(&errs, 0, "document too complex: more than 20100 nodes to walk"));
        config_errors_done(&errs);
        free(p);

        /* Aliases as such are fine. */
        p = write_file(dir, "fine.yaml", fine);
        c = load_ok(p, NULL);
        ck_assert_uint_eq(c->n_rules, 2);
        ck_assert_uint_eq(c->rules[1].classes, c->rules[0].classes);
        config_free(c);
        free(p);
        scratch_free(dir);
}
END_TEST

/* ---- the shipped files ---- */

/* A file of the source tree: under $STACKWATCH_SRCDIR (set by "make check"), else relative to the current dir. */
static char *srcdir_path(const char *rel) {
        const char *top = getenv("STACKWATCH_SRCDIR");
        char *p;

        ck_assert_int_ge(asprintf(&p, "%s/%s", top ?: ".", rel), 0);
        ck_assert_msg(access(p, R_OK) == 0, "%s not found: set STACKWATCH_SRCDIR to the source tree", p);
        return p;
}

/* Whether line L is a commented-out setting of conf/stackwatch.yaml: "#key:" at any indentation, or a line of
 * the commented rules list ("#  - name: …", "#    class: …"). Prose comments have a space after "#". */
static bool is_commented_setting(const char *l) {
        const char *s = l + strspn(l, " ");

        if (s[0] != '#')
                return false;
        if (s[1] >= 'a' && s[1] <= 'z') {
                size_t n = strspn(s + 1, "abcdefghijklmnopqrstuvwxyz_");
                return s[1 + n] == ':';
        }
        return s == l && (startswith(s, "#  - ") ||
                          (startswith(s, "#    ") && s[5] >= 'a' && s[5] <= 'z' && strchr(s, ':')));
}

static bool rules_equal(const Rule *a, const Rule *b) {
        return streq(a->name, b->name) && a->classes == b->classes && a->for_usec == b->for_usec &&
               ((!a->states && !b->states) || streq(a->states, b->states)) && a->actions == b->actions &&
               a->peers == b->peers && a->cooldown_usec == b->cooldown_usec && a->cpu_min == b->cpu_min &&
               a->has_user == b->has_user && !a->comm && !b->comm && !a->syscalls && !b->syscalls;
}

static void check_same_config(const Config *a, const Config *b) {
        ck_assert_uint_eq(a->poll_interval_usec, b->poll_interval_usec);
        ck_assert_int_eq(a->poll_interval_auto, b->poll_interval_auto);
        ck_assert_str_eq(a->archive_dir, b->archive_dir);
        ck_assert_uint_eq(a->max_snapshots, b->max_snapshots);
        ck_assert_uint_eq(a->max_size, b->max_size);
        ck_assert_uint_eq(a->max_age_usec, b->max_age_usec);
        ck_assert_uint_eq(a->keep_free, b->keep_free);
        ck_assert_int_eq(a->journal, b->journal);
        ck_assert_uint_eq(a->journal_max_size, b->journal_max_size);
        ck_assert_int_eq(a->every_firing, b->every_firing);
        ck_assert_uint_eq(a->max_per_minute, b->max_per_minute);
        ck_assert_int_eq(a->method, b->method);
        ck_assert_int_eq(a->unwinder, b->unwinder);
        ck_assert_uint_eq(a->max_frames, b->max_frames);
        ck_assert_uint_eq(a->stack_bytes, b->stack_bytes);
        ck_assert_uint_eq(a->time_budget_usec, b->time_budget_usec);
        ck_assert_int_eq(a->kernel, b->kernel);
        ck_assert_str_eq(a->http_socket, b->http_socket);
        ck_assert_uint_eq(a->http_socket_mode, b->http_socket_mode);
        ck_assert_int_eq(a->has_http_socket_group, b->has_http_socket_group);
        ck_assert_ptr_eq(a->http_listen, b->http_listen); /* both NULL: off */
        ck_assert_ptr_eq(a->http_token_file, b->http_token_file);
        ck_assert_uint_eq(a->http_max_connections, b->http_max_connections);
        ck_assert_uint_eq(a->http_timeout_usec, b->http_timeout_usec);
        ck_assert_ptr_eq(a->hook_command, b->hook_command); /* both NULL: no default command */
        ck_assert_uint_eq(a->hook_timeout_usec, b->hook_timeout_usec);
        ck_assert_uint_eq(a->hook_max_running, b->hook_max_running);
        ck_assert_uint_eq(a->n_rules, b->n_rules);
        for (size_t i = 0; i < a->n_rules; i++)
                ck_assert_msg(rules_equal(&a->rules[i], &b->rules[i]), "rule %zu differs", i);
}

START_TEST(test_shipped_config) {
        _cleanup_(config_freep) Config *d = NULL, *c = NULL, *u = NULL, *e = NULL;
        char *conf = srcdir_path("conf/stackwatch.yaml"), *examples = srcdir_path("conf/rules.d/examples"),
             *dir = scratch_new(), *uncommented = path_in(dir, "uncommented.yaml"), *line = NULL;
        unsigned n_settings = 0;
        size_t size = 0;
        FILE *in, *out;

        /* As shipped, with everything commented out: the compiled defaults. */
        ck_assert_int_eq(config_new_default(&d), 0);
        c = load_ok(conf, NULL);
        check_same_config(c, d);

        /* With every setting uncommented: still the compiled defaults, so the comments cannot drift from them. */
        in = fopen(conf, "re");
        out = fopen(uncommented, "we");
        ck_assert_ptr_nonnull(in);
        ck_assert_ptr_nonnull(out);
        while (getline(&line, &size, in) > 0) {
                if (is_commented_setting(line)) {
                        char *hash = strchr(line, '#');
                        memmove(hash, hash + 1, strlen(hash));
                        n_settings++;
                }
                fputs(line, out);
        }
        free(line);
        fclose(in);
        ck_assert_int_eq(fclose(out), 0);
        ck_assert_uint_ge(n_settings, 1 + 5 + 7 + 1 + 10); /* every key, and the built-in rules */
        u = load_ok(uncommented, NULL);
        check_same_config(u, d);

        /* The example drop-ins load, after the built-in rules. */
        e = load_ok(conf, examples);
        ck_assert_uint_ge(e->n_rules, 3 + 3);
        ck_assert_str_eq(e->rules[0].name, "hung-task");
        ck_assert_ptr_nonnull(find_rule(e, "nginx-blocked"));

        free(uncommented);
        free(conf);
        free(examples);
        scratch_free(dir);
}
END_TEST

UNIT_TEST_MAIN("config", test_defaults_without_files, test_empty_documents, test_full_file, test_dropins_in_name_order,
               test_main_rules_replace_defaults, test_dropin_restrictions, test_poll_interval_auto,
               test_parse_duration, test_parse_size, test_parse_bool_and_decimal, test_parse_listen_and_mode, test_format,
               test_multiple_errors_collected, test_value_errors, test_errors_print, test_not_a_file, test_huge_file,
               test_alias_bomb, test_shipped_config)
