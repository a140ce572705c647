/* test-stackctl-match.c: the matches of stackctl list, show and problems, and their -1/-n window. */
#include "unit.h"
#include <stdint.h>
#include <string.h>

#include "../../client/stackctl-args.h"
#include "../../client/stackctl-match.h"
#include "base/macro.h"
#include "base/time-util.h"

#define SIG "0123456789abcdef"
#define OTHER_SIG "fedcba9876543210"

static void args_reset(void) {
        arg = (StackctlArgs) {};
}

START_TEST(test_parse_table) {
        static const struct {
                const char *word;
                int ok;                 /* 0 or -EINVAL */
                MatchField field;
                const char *value;
                pid_t pid;
        } cases[] = {
                { "1234", 0, MATCH_PID, "1234", 1234 },
                { "PID=77", 0, MATCH_PID, "77", 77 },
                { "nginx", 0, MATCH_COMM, "nginx", 0 },
                { "COMM=py*", 0, MATCH_COMM, "py*", 0 },
                { "/usr/sbin/nginx", 0, MATCH_EXE, "/usr/sbin/nginx", 0 },
                { "UNIT=a.service", 0, MATCH_UNIT, "a.service", 0 },
                { "RULE=hang", 0, MATCH_RULE, "hang", 0 },
                { "CLASS=blocked", 0, MATCH_CLASS, "blocked", 0 },
                /* 16 lowercase hex digits: a signature, also when every digit is decimal (no pid is that long). */
                { SIG, 0, MATCH_SIGNATURE, SIG, 0 },
                { "1234567890123456", 0, MATCH_SIGNATURE, "1234567890123456", 0 },
                { "SIGNATURE=" SIG, 0, MATCH_SIGNATURE, SIG, 0 },
                /* Not one: upper case, 15 or 17 digits, a non-hex letter. Bare, they are process names. */
                { "0123456789ABCDEF", 0, MATCH_COMM, "0123456789ABCDEF", 0 },
                { "0123456789abcde", 0, MATCH_COMM, "0123456789abcde", 0 },
                { "0123456789abcdef0", 0, MATCH_COMM, "0123456789abcdef0", 0 },
                { "SIGNATURE=0123456789abcdeg", -EINVAL, 0, NULL, 0 },
                { "SIGNATURE=0123456789ABCDEF", -EINVAL, 0, NULL, 0 },
                { "SIGNATURE=", -EINVAL, 0, NULL, 0 },
                { "PID=abc", -EINVAL, 0, NULL, 0 },
                { "PID=", -EINVAL, 0, NULL, 0 },
                { "FOO=bar", -EINVAL, 0, NULL, 0 },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                char *argv[] = { (char *) cases[i].word };
                Match m[MATCHES_MAX];
                size_t n = 99;
                int r = match_parse(1, argv, m, &n);

                ck_assert_msg(r == cases[i].ok, "%s: %d", cases[i].word, r);
                if (r < 0)
                        continue;
                ck_assert_uint_eq(n, 1);
                ck_assert_msg(m[0].field == cases[i].field, "%s: field %d", cases[i].word, m[0].field);
                ck_assert_str_eq(m[0].value, cases[i].value);
                if (cases[i].field == MATCH_PID)
                        ck_assert_int_eq(m[0].pid, cases[i].pid);
        }
}
END_TEST

START_TEST(test_parse_too_many) {
        char *argv[MATCHES_MAX + 1];
        Match m[MATCHES_MAX];
        size_t n = 0;

        for (size_t i = 0; i < ELEMENTSOF(argv); i++)
                argv[i] = "x";
        ck_assert_int_eq(match_parse(MATCHES_MAX, argv, m, &n), 0);
        ck_assert_uint_eq(n, MATCHES_MAX);
        ck_assert_int_eq(match_parse(MATCHES_MAX + 1, argv, m, &n), -EINVAL);
}
END_TEST

static bool snapshot_matches(const ArchiveSummary *s, const char *word) {
        char *argv[] = { (char *) word };
        Match m[MATCHES_MAX];
        size_t n;

        ck_assert_int_eq(match_parse(1, argv, m, &n), 0);
        return match_snapshot(s, m, n);
}

START_TEST(test_snapshot_by_signature) {
        ArchiveSummary s = { .id = "20261129T053052.123456Z-42", .pid = 42, .comm = "pyd", .signature = SIG };
        ArchiveSummary old = { .id = "20261129T053052.123456Z-43", .pid = 43, .comm = "pyd" };

        args_reset();
        ck_assert(snapshot_matches(&s, SIG));
        ck_assert(snapshot_matches(&s, "SIGNATURE=" SIG));
        ck_assert(!snapshot_matches(&s, OTHER_SIG));
        /* A snapshot from before signatures has none: it matches no signature, and other matches as before. */
        ck_assert(!snapshot_matches(&old, SIG));
        ck_assert(snapshot_matches(&old, "43"));
        ck_assert(snapshot_matches(&old, "COMM=py?"));
}
END_TEST

static bool problem_matches(const Problem *p, const char *word) {
        char *argv[] = { (char *) word };
        Match m[MATCHES_MAX];
        size_t n;

        ck_assert_int_eq(match_parse(word ? 1 : 0, argv, m, &n), 0);
        ck_assert_int_eq(match_check_problem(m, n), 0);
        return match_problem(p, m, n);
}

START_TEST(test_problem) {
        ProblemProcess procs[] = {
                { .pid = 100, .comm = "pyd-dl" },
                { .pid = 101, .comm = "worker" },
        };
        Problem p = {
                .signature = SIG,
                .count = 3,
                .first_usec = 1000 * USEC_PER_SEC,
                .last_usec = 2000 * USEC_PER_SEC,
                .processes = procs,
                .n_processes = ELEMENTSOF(procs),
        };
        Problem none = { .signature = OTHER_SIG, .first_usec = 1, .last_usec = 2 };

        args_reset();
        ck_assert(problem_matches(&p, NULL));
        /* PID and COMM: any of its processes. */
        ck_assert(problem_matches(&p, "100"));
        ck_assert(problem_matches(&p, "PID=101"));
        ck_assert(!problem_matches(&p, "102"));
        ck_assert(problem_matches(&p, "worker"));
        ck_assert(problem_matches(&p, "COMM=pyd-*"));
        ck_assert(!problem_matches(&p, "nginx"));
        ck_assert(problem_matches(&p, SIG));
        ck_assert(!problem_matches(&p, OTHER_SIG));
        /* A problem that names no process matches none. */
        ck_assert(!problem_matches(&none, "100"));
        ck_assert(!problem_matches(&none, "COMM=*"));

        /* --pid as a PID; --since: seen since; --until: first seen before. */
        arg.filter_pid = 101;
        ck_assert(problem_matches(&p, NULL));
        arg.filter_pid = 7;
        ck_assert(!problem_matches(&p, NULL));
        args_reset();
        arg.since_usec = 2000 * USEC_PER_SEC;
        ck_assert(problem_matches(&p, NULL));
        arg.since_usec = 2000 * USEC_PER_SEC + 1;
        ck_assert(!problem_matches(&p, NULL));
        args_reset();
        arg.until_usec = 1000 * USEC_PER_SEC + 1;
        ck_assert(problem_matches(&p, NULL));
        arg.until_usec = 1000 * USEC_PER_SEC;
        ck_assert(!problem_matches(&p, NULL));
        args_reset();
}
END_TEST

START_TEST(test_problem_refuses_snapshot_fields) {
        static const char *const words[] = { "/usr/bin/python3", "EXE=/x", "UNIT=a.service", "RULE=r", "CLASS=blocked" };

        for (size_t i = 0; i < ELEMENTSOF(words); i++) {
                char *argv[] = { (char *) words[i] };
                Match m[MATCHES_MAX];
                size_t n;

                ck_assert_int_eq(match_parse(1, argv, m, &n), 0);
                ck_assert_msg(match_check_problem(m, n) == -EINVAL, "%s", words[i]);
        }
}
END_TEST

START_TEST(test_first_kept) {
        args_reset();
        ck_assert_uint_eq(match_first_kept(0), 0);
        ck_assert_uint_eq(match_first_kept(5), 0);
        arg.one = true;
        ck_assert_uint_eq(match_first_kept(0), 0);
        ck_assert_uint_eq(match_first_kept(5), 4);
        args_reset();
        arg.count = 2;
        ck_assert_uint_eq(match_first_kept(5), 3);
        ck_assert_uint_eq(match_first_kept(2), 0);
        ck_assert_uint_eq(match_first_kept(1), 0);
        args_reset();
}
END_TEST

UNIT_TEST_MAIN("stackctl-match", test_parse_table, test_parse_too_many, test_snapshot_by_signature, test_problem,
               test_problem_refuses_snapshot_fields, test_first_kept)
