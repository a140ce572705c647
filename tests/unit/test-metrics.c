/* test-metrics.c: the /metrics exposition rendered from a synthetic daemon state, line by line. */
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "unit.h"

#include "../../daemon/metrics.h"
#include "base/macro.h"
#include "base/time-util.h"
#include "config/config.h"

static bool has_line(const char *text, const char *line) {
        size_t n = strlen(line);

        for (const char *p = text; (p = strstr(p, line)); p += n)
                if ((p == text || p[-1] == '\n') && p[n] == '\n')
                        return true;
        return false;
}

START_TEST(test_render) {
        _cleanup_(config_freep) Config *c = NULL;
        _cleanup_(metrics_done) Metrics mt = {};
        _cleanup_free_ char *text = NULL;
        Trigger tr = {};
        Owed ow = { .walks = 8 };
        Scanner sc = {};
        RuleStats rs = { .rule = (char *) "busy-loop", .fired = 3 };
        DaemonView v;
        size_t len = 0;
        regex_t sample;

        ck_assert_int_eq(config_new_default(&c), 0);
        sc.stats = (ScanStats) { .scans = 42, .last_scan_usec = now_usec(CLOCK_MONOTONIC), .processes = 7,
                                 .deep_reads = 9, .records = 12, .same_records = 9988, .reclassed = 40 };
        sc.stats.by_class[THREAD_CLASS_BLOCKED] = 2;
        sc.stats.by_class[THREAD_CLASS_WAITING] = 30;
        tr.stats = &rs;
        tr.n_stats = 1;
        tr.budget_skipped = 4;
        tr.deadlock_walks = 5;
        tr.deferred = 6;
        v = (DaemonView) { .config = c, .scanner = &sc, .trigger = &tr, .owed = &ow, .captures_running = 2,
                           .archive_snapshots = 11, .archive_bytes = 123456 };

        metrics_count_capture(&mt, "busy-loop", CAPTURE_OUTCOME_OK, 250.0, 40000, 1);
        metrics_count_capture(&mt, "busy-loop", CAPTURE_OUTCOME_OK, 750.0, 60000, 2);
        metrics_count_capture(&mt, METRICS_RULE_API, CAPTURE_OUTCOME_GONE, 0, 0, 5);
        mt.captures_refused = 1;
        for (int i = 0; i < 3; i++)
                metrics_count_http(&mt, 200);
        metrics_count_http(&mt, 404);
        mt.http_auth_failures[HTTP_AUTH_FAILURE_WRONG] = 7;
        mt.http_auth_failures[HTTP_AUTH_FAILURE_SCOPE] = 1;

        ck_assert_int_eq(metrics_render(&mt, &v, &text, &len), 0);
        ck_assert_uint_eq(strlen(text), len);
        ck_assert(has_line(text, "stackwatch_threads{class=\"blocked\"} 2"));
        ck_assert(has_line(text, "stackwatch_threads{class=\"waiting\"} 30"));
        ck_assert(has_line(text, "stackwatch_processes 7"));
        ck_assert(has_line(text, "stackwatch_scans_total 42"));
        ck_assert(has_line(text, "stackwatch_deep_reads_total 9"));
        ck_assert(has_line(text, "stackwatch_scan_records_total{kind=\"whole\"} 12"));
        ck_assert(has_line(text, "stackwatch_scan_records_total{kind=\"same\"} 9988"));
        ck_assert(has_line(text, "stackwatch_threads_classed_total 40"));
        ck_assert(has_line(text, "stackwatch_owed_walks_total 8"));
        /* Every rule of the config, fired or not. */
        ck_assert(has_line(text, "stackwatch_rule_firings_total{rule=\"busy-loop\"} 3"));
        ck_assert(has_line(text, "stackwatch_rule_firings_total{rule=\"hung-task\"} 0"));
        ck_assert(has_line(text, "stackwatch_captures_total{rule=\"busy-loop\",outcome=\"ok\"} 2"));
        ck_assert(has_line(text, "stackwatch_captures_total{rule=\"api\",outcome=\"gone\"} 1"));
        ck_assert(has_line(text, "stackwatch_captures_total{rule=\"api\",outcome=\"ok\"} 0"));
        /* Refused by the trigger's budget and by the capture slots, together. */
        ck_assert(has_line(text, "stackwatch_captures_refused_total 5"));
        ck_assert(has_line(text, "stackwatch_deadlock_walks_total 5"));
        ck_assert(has_line(text, "stackwatch_firings_deferred_total 6"));
        ck_assert(has_line(text, "stackwatch_captures_running 2"));
        ck_assert(has_line(text, "stackwatch_capture_pause_seconds_sum 0.001000"));
        ck_assert(has_line(text, "stackwatch_capture_pause_seconds_count 2"));
        ck_assert(has_line(text, "stackwatch_capture_pause_max_seconds 0.000750"));
        ck_assert(has_line(text, "stackwatch_capture_duration_seconds_sum 0.100000"));
        /* The threads the fall-back stopped, of the captures that succeeded. */
        ck_assert(has_line(text, "stackwatch_capture_fallback_stops_total 3"));
        ck_assert(has_line(text, "stackwatch_archive_snapshots 11"));
        ck_assert(has_line(text, "stackwatch_archive_bytes 123456"));
        ck_assert(has_line(text, "stackwatch_http_requests_total{code=\"200\"} 3"));
        ck_assert(has_line(text, "stackwatch_http_requests_total{code=\"404\"} 1"));
        /* Every reason, refused or not. */
        ck_assert(has_line(text, "stackwatch_http_auth_failures_total{reason=\"missing\"} 0"));
        ck_assert(has_line(text, "stackwatch_http_auth_failures_total{reason=\"wrong\"} 7"));
        ck_assert(has_line(text, "stackwatch_http_auth_failures_total{reason=\"scope\"} 1"));
        /* The host, once, to join on. */
        {
                char host[256] = "", line[512];

                (void) gethostname(host, sizeof host - 1);
                snprintf(line, sizeof line, "stackwatch_info{host=\"%s\",version=\"%s\"} 1", host, PACKAGE_VERSION);
                ck_assert(has_line(text, line));
        }
        /* No hooks configured: no hook series at all. */
        ck_assert_ptr_null(strstr(text, "stackwatch_hook"));

        /* The text format: every line a # HELP/# TYPE comment or "name{labels} value". */
        ck_assert_int_eq(regcomp(&sample,
                                 "^(# (HELP|TYPE) [a-z_]+ .+|[a-z_]+(\\{[a-z_]+=\"[^\"\\\\\n]*\"(,[a-z_]+=\"[^\"\\\\\n]*\")*\\})? "
                                 "-?[0-9]+(\\.[0-9]+)?)$",
                                 REG_EXTENDED | REG_NOSUB),
                         0);
        for (char *line = text, *eol; *line; line = eol + 1) {
                eol = strchr(line, '\n');
                ck_assert_ptr_nonnull(eol);
                *eol = 0;
                ck_assert_msg(regexec(&sample, line, 0, NULL, 0) == 0, "not Prometheus text: %s", line);
        }
        regfree(&sample);
}
END_TEST

UNIT_TEST_MAIN("metrics", test_render)
