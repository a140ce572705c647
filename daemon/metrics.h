/* metrics.h: the daemon's counters and their Prometheus text exposition (GET /metrics). */
#pragma once

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon-view.h"


/* How a capture ended, one counter per rule and outcome. */
typedef enum CaptureOutcome {
        CAPTURE_OUTCOME_OK,
        CAPTURE_OUTCOME_GONE,           /* the process exited first */
        CAPTURE_OUTCOME_FAILED,
        CAPTURE_OUTCOME_CRASHED,        /* the capture child died of a signal */
        CAPTURE_OUTCOME_TIMEOUT,
        _CAPTURE_OUTCOME_MAX,
        _CAPTURE_OUTCOME_INVALID = -EINVAL,
} CaptureOutcome;

const char *capture_outcome_to_string(CaptureOutcome o);
CaptureOutcome capture_outcome_from_string(const char *s);
/* The outcome an error from a capture job stands for (0: ok). */
CaptureOutcome capture_outcome_from_error(int error);

/* The label captures requested over HTTP are counted under, in place of a rule name. */
#define METRICS_RULE_API "api"

typedef struct MetricsRule {
        char *rule;
        uint64_t captures[_CAPTURE_OUTCOME_MAX];
} MetricsRule;

/* Why a request on a TCP listener was refused (401, 403): the label of stackwatch_http_auth_failures_total. */
typedef enum HttpAuthFailure {
        HTTP_AUTH_FAILURE_MISSING,      /* no bearer token: 401 */
        HTTP_AUTH_FAILURE_WRONG,        /* a token that is none of the configured ones: 401 */
        HTTP_AUTH_FAILURE_SCOPE,        /* a read token on /stacks: 403 */
        _HTTP_AUTH_FAILURE_MAX,
        _HTTP_AUTH_FAILURE_INVALID = -EINVAL,
} HttpAuthFailure;

const char *http_auth_failure_to_string(HttpAuthFailure f);
HttpAuthFailure http_auth_failure_from_string(const char *s);

typedef struct MetricsHttp {
        unsigned code;
        uint64_t count;
} MetricsHttp;

typedef struct Metrics {
        MetricsRule *rules;
        size_t n_rules, n_rules_allocated;
        double pause_seconds_sum;       /* the longest pause of each successful capture, summed */
        double pause_seconds_max;
        uint64_t pause_count;
        uint64_t fallback_stops;        /* threads the auto method stopped (snapshot_fallback_stops()), summed */
        double capture_seconds_sum;
        uint64_t capture_count;
        uint64_t captures_refused;      /* budget spent or too many in flight (rules and HTTP) */
        double scan_seconds_sum;
        MetricsHttp *http;
        size_t n_http, n_http_allocated;
        uint64_t http_cut_head_deadline; /* connections cut: a request head past its deadline */
        uint64_t http_cut_room;         /* connections cut to make room (or refused) */
        uint64_t http_auth_failures[_HTTP_AUTH_FAILURE_MAX]; /* requests refused for their token, by reason */
        uint64_t problem_threads_dropped; /* problem threads left out of stackwatch_problem_threads by the cap */
        uint64_t lock_probes[_LOCK_PROBE_VERDICT_MAX]; /* lock probes (lock-probe.h) ended, by verdict */
} Metrics;

/* stackwatch_problem_threads{class,unit,comm}: one series per class, unit and process name that has threads in a
 * problem class now (blocked, busy-loop, syscall-spin, lock-retry), at most this many; the threads of further
 * groups are counted in stackwatch_problem_threads_dropped_total. */
#define METRICS_PROBLEM_SERIES_MAX 100

void metrics_done(Metrics *m);
/* Count one finished capture for RULE (METRICS_RULE_API for HTTP) with its outcome and, when it succeeded, its
 * longest pause, duration and the threads its auto method stopped. Out of memory only loses the count. */
void metrics_count_capture(Metrics *m, const char *rule, CaptureOutcome o, double max_pause_us, uint64_t duration_usec,
                           unsigned fallback_stops);
void metrics_count_http(Metrics *m, unsigned code);
void metrics_count_scan(Metrics *m, uint64_t duration_usec);

/* The whole exposition (text format 0.0.4): the counters of MT and the daemon's state V; -ENOMEM. */
int metrics_render(Metrics *mt, const DaemonView *v, char **ret, size_t *ret_len);

/* S as a Prometheus label value, valid UTF-8 whatever S holds: as text output writes it (printable UTF-8 kept,
 * control characters, backslash and bytes that are not UTF-8 as C escapes: \n, \e, \\, \xNN), then \ and "
 * escaped for the exposition format; NULL on OOM. */
char *metrics_label_escape(const char *s);
