/* test-rules.c: the rule matcher's truth table, filter by filter, including unknown (NULL) facts. */
#include "unit.h"
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/macro.h"
#include "config/rules.h"

/* The tables below start from a base rule and base facts and override a field or two with designated
 * initializers: that is the point, so the "overridden initializer" warning is off for this file. */
#pragma GCC diagnostic ignored "-Woverride-init"

#define BLOCKED (1U << THREAD_CLASS_BLOCKED)
#define BUSY (1U << THREAD_CLASS_BUSY_LOOP)
#define SEC 1000000ULL

/* A rule that only asks for "blocked", and a blocked nginx thread in read() for 200 s that satisfies all filters. */
#define R(...) ((Rule) { .classes = BLOCKED, .cpu_min = -1, __VA_ARGS__ })
#define F(...)                                                                                  \
        ((ThreadFacts) {                                                                        \
                .class = THREAD_CLASS_BLOCKED,                                                  \
                .class_usec = 200 * SEC,                                                        \
                .state = 'D',                                                                   \
                .comm = "nginx",                                                                \
                .exe = "/usr/sbin/nginx",                                                       \
                .unit = "nginx.service",                                                        \
                .cgroup = "/system.slice/nginx.service",                                        \
                .wchan = "pipe_read",                                                           \
                .uid = 33,                                                                      \
                .syscall_nr = 0,                                                                \
                .cpu_percent = 5.0,                                                             \
                __VA_ARGS__                                                                     \
        })
#define GLOBS(...) ((char *[]) { __VA_ARGS__, NULL })
#define NRS(...) ((int64_t[]) { __VA_ARGS__ })

typedef struct Case {
        const char *what;
        Rule rule;
        ThreadFacts facts;
        bool match;
} Case;

static void run_cases(const Case *cases, size_t n) {
        for (size_t i = 0; i < n; i++)
                ck_assert_msg(rule_matches(&cases[i].rule, &cases[i].facts) == cases[i].match, "%s: expected %s",
                              cases[i].what, cases[i].match ? "a match" : "no match");
}

START_TEST(test_class_and_for) {
        const Case cases[] = {
                { "class in mask", R(), F(), true },
                { "class not in mask", R(.classes = BUSY), F(), false },
                { "one of two classes", R(.classes = BUSY | BLOCKED), F(), true },
                { "empty class mask", R(.classes = 0), F(), false },
                { "busy-loop thread, busy rule", R(.classes = BUSY), F(.class = THREAD_CLASS_BUSY_LOOP), true },
                { "invalid class", R(.classes = ~0U), F(.class = _THREAD_CLASS_INVALID), false },
                { "class past the end", R(.classes = ~0U), F(.class = _THREAD_CLASS_MAX), false },
                { "for below", R(.for_usec = 120 * SEC), F(), true },
                { "for equal", R(.for_usec = 200 * SEC), F(), true },
                { "for one microsecond short", R(.for_usec = 200 * SEC + 1), F(), false },
                { "for 0, class just began", R(.for_usec = 0), F(.class_usec = 0), true },
        };
        run_cases(cases, ELEMENTSOF(cases));
}
END_TEST

START_TEST(test_state) {
        const Case cases[] = {
                { "any state", R(), F(.state = 'S'), true },
                { "D allowed", R(.states = (char *) "D"), F(), true },
                { "S or D allowed", R(.states = (char *) "SD"), F(), true },
                { "only R allowed", R(.states = (char *) "R"), F(), false },
                { "t is not T", R(.states = (char *) "T"), F(.state = 't'), false },
                { "unknown state, filter set", R(.states = (char *) "D"), F(.state = 0), false },
                { "unknown state, no filter", R(), F(.state = 0), true },
        };
        run_cases(cases, ELEMENTSOF(cases));
}
END_TEST

START_TEST(test_globs) {
        const Case cases[] = {
                { "comm glob", R(.comm = GLOBS("nginx*")), F(), true },
                { "comm second glob", R(.comm = GLOBS("apache2", "ngin?")), F(), true },
                { "comm no glob", R(.comm = GLOBS("apache2", "httpd*")), F(), false },
                { "comm exact", R(.comm = GLOBS("nginx")), F(), true },
                { "comm unknown", R(.comm = GLOBS("*")), F(.comm = NULL), false },
                { "comm unknown, no filter", R(), F(.comm = NULL, .exe = NULL, .unit = NULL, .cgroup = NULL,
                                                    .wchan = NULL), true },
                { "exe dir glob", R(.exe = GLOBS("/usr/sbin/*")), F(), true },
                { "exe other dir", R(.exe = GLOBS("/usr/bin/*")), F(), false },
                { "exe unknown", R(.exe = GLOBS("/usr/sbin/*")), F(.exe = NULL), false },
                { "unit", R(.unit = GLOBS("*.service")), F(), true },
                { "unit scope", R(.unit = GLOBS("*.scope")), F(), false },
                { "unit unknown", R(.unit = GLOBS("*")), F(.unit = NULL), false },
                { "cgroup subtree", R(.cgroup = GLOBS("/system.slice/*")), F(.cgroup = "/system.slice/a/b.scope"),
                  true },
                { "cgroup other slice", R(.cgroup = GLOBS("/user.slice/*")), F(), false },
                { "cgroup unknown", R(.cgroup = GLOBS("/*")), F(.cgroup = NULL), false },
                { "wchan", R(.wchan = GLOBS("pipe_*")), F(), true },
                { "wchan other", R(.wchan = GLOBS("futex_*")), F(), false },
                { "wchan unknown", R(.wchan = GLOBS("*")), F(.wchan = NULL), false },
                { "bracket glob", R(.comm = GLOBS("[mn]ginx")), F(), true },
                { "all filters at once", R(.comm = GLOBS("nginx"), .exe = GLOBS("*"), .unit = GLOBS("nginx.*"),
                                           .cgroup = GLOBS("*nginx*"), .wchan = GLOBS("pipe_read")), F(), true },
                { "all but one", R(.comm = GLOBS("nginx"), .exe = GLOBS("*"), .unit = GLOBS("nginx.*"),
                                   .cgroup = GLOBS("*nginx*"), .wchan = GLOBS("pipe_write")), F(), false },
        };
        run_cases(cases, ELEMENTSOF(cases));
}
END_TEST

START_TEST(test_user_syscall_cpu) {
        const Case cases[] = {
                { "user matches", R(.has_user = true, .user = 33), F(), true },
                { "user differs", R(.has_user = true, .user = 0), F(), false },
                { "root rule, root thread", R(.has_user = true, .user = 0), F(.uid = 0), true },
                { "user unknown", R(.has_user = true, .user = 33), F(.uid = (uid_t) -1), false },
                { "no user filter", R(), F(.uid = (uid_t) -1), true },
                { "syscall read", R(.syscalls = NRS(0), .n_syscalls = 1), F(), true },
                { "syscall futex only", R(.syscalls = NRS(202), .n_syscalls = 1), F(), false },
                { "syscall futex or read", R(.syscalls = NRS(202, 0), .n_syscalls = 2), F(), true },
                { "not in a syscall", R(.syscalls = NRS(0), .n_syscalls = 1), F(.syscall_nr = -1), false },
                { "no syscall filter", R(), F(.syscall_nr = -1), true },
                { "cpu above", R(.cpu_min = 4.5), F(), true },
                { "cpu equal", R(.cpu_min = 5.0), F(), true },
                { "cpu below", R(.cpu_min = 5.1), F(), false },
                { "cpu_min 0", R(.cpu_min = 0), F(.cpu_percent = 0), true },
                { "cpu unknown, filter set", R(.cpu_min = 0), F(.cpu_percent = NAN), false },
                { "cpu unknown, no filter", R(), F(.cpu_percent = NAN), true },
                { "multi-core cpu", R(.cpu_min = 150), F(.cpu_percent = 199.5), true },
        };
        run_cases(cases, ELEMENTSOF(cases));
}
END_TEST

START_TEST(test_null_arguments) {
        Rule r = R();
        ThreadFacts f = F();

        ck_assert(rule_matches(&r, &f));
        ck_assert(!rule_matches(NULL, &f));
        ck_assert(!rule_matches(&r, NULL));
}
END_TEST

START_TEST(test_actions_and_names) {
        static const struct {
                const char *s;
                bool valid;
        } names[] = {
                { "hung-task", true },
                { "a", true },
                { "A_b.c-9", true },
                { "", false },
                { "has space", false },
                { "slash/", false },
                { "ümlaut", false },
                { "1234567890123456789012345678901234567890123456789012345678901234", true },
                { "12345678901234567890123456789012345678901234567890123456789012345", false },
        };

        for (size_t i = 0; i < ELEMENTSOF(names); i++)
                ck_assert_msg(rule_name_is_valid(names[i].s) == names[i].valid, "'%s'", names[i].s);
        ck_assert(!rule_name_is_valid(NULL));

        ck_assert_str_eq(rule_action_type_to_string(RULE_ACTION_TYPE_HOOK), "hook");
        ck_assert_int_eq(rule_action_type_from_string("snapshot"), RULE_ACTION_TYPE_SNAPSHOT);
        ck_assert_int_eq(rule_action_type_from_string("log"), RULE_ACTION_TYPE_LOG);
        ck_assert_int_eq(rule_action_type_from_string("mail"), _RULE_ACTION_TYPE_INVALID);
        ck_assert_int_eq(RULE_ACTION_LOG, 1 << RULE_ACTION_TYPE_LOG);
        ck_assert_ptr_null(rule_action_type_to_string(_RULE_ACTION_TYPE_MAX));
}
END_TEST

START_TEST(test_rule_done) {
        Rule r = RULE_DEFAULTS;

        /* A half-built rule is freed and zeroed; done twice is harmless. */
        r.name = strdup("x");
        r.comm = calloc(2, sizeof(char *));
        ck_assert_ptr_nonnull(r.name);
        ck_assert_ptr_nonnull(r.comm);
        r.comm[0] = strdup("nginx");
        rule_done(&r);
        ck_assert_ptr_null(r.name);
        ck_assert_ptr_null(r.comm);
        rule_done(&r);
        rule_done(NULL);
}
END_TEST

UNIT_TEST_MAIN("rules", test_class_and_for, test_state, test_globs, test_user_syscall_cpu, test_null_arguments,
               test_actions_and_names, test_rule_done)
