/* metrics.c: counters kept by the daemon and the Prometheus text exposition built from them and the Manager. */
#include <dirent.h>
#include <stdio.h>
#include <sys/resource.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc-util.h"
#include "base/escape.h"
#include "base/macro.h"
#include "base/string-table.h"
#include "base/time-util.h"
#include "metrics.h"

static const char *const capture_outcome_table[_CAPTURE_OUTCOME_MAX] = {
        [CAPTURE_OUTCOME_OK] = "ok",
        [CAPTURE_OUTCOME_GONE] = "gone",
        [CAPTURE_OUTCOME_FAILED] = "failed",
        [CAPTURE_OUTCOME_CRASHED] = "crashed",
        [CAPTURE_OUTCOME_TIMEOUT] = "timeout",
};
DEFINE_STRING_TABLE_LOOKUP(capture_outcome, CaptureOutcome);

CaptureOutcome capture_outcome_from_error(int error) {
        switch (error) {
        case 0:
                return CAPTURE_OUTCOME_OK;
        case -ESRCH:
                return CAPTURE_OUTCOME_GONE;
        case -ECHILD:
                return CAPTURE_OUTCOME_CRASHED;
        case -ETIME:
                return CAPTURE_OUTCOME_TIMEOUT;
        default:
                return CAPTURE_OUTCOME_FAILED;
        }
}

static const char *const http_auth_failure_table[_HTTP_AUTH_FAILURE_MAX] = {
        [HTTP_AUTH_FAILURE_MISSING] = "missing",
        [HTTP_AUTH_FAILURE_WRONG] = "wrong",
        [HTTP_AUTH_FAILURE_SCOPE] = "scope",
};

DEFINE_STRING_TABLE_LOOKUP(http_auth_failure, HttpAuthFailure);

void metrics_done(Metrics *m) {
        for (size_t i = 0; i < m->n_rules; i++)
                free(m->rules[i].rule);
        free(m->rules);
        free(m->http);
        *m = (Metrics) {};
}

static MetricsRule *metrics_rule(Metrics *m, const char *rule) {
        MetricsRule *n;

        for (size_t i = 0; i < m->n_rules; i++)
                if (streq(m->rules[i].rule, rule))
                        return &m->rules[i];
        if (!GREEDY_REALLOC(m->rules, m->n_rules_allocated, m->n_rules + 1))
                return NULL;
        n = &m->rules[m->n_rules];
        *n = (MetricsRule) { .rule = strdup(rule) };
        if (!n->rule)
                return NULL;
        m->n_rules++;
        return n;
}

void metrics_count_capture(Metrics *m, const char *rule, CaptureOutcome o, double max_pause_us, uint64_t duration_usec,
                           unsigned fallback_stops) {
        MetricsRule *r = metrics_rule(m, rule);

        if (r)
                r->captures[o]++;
        if (o != CAPTURE_OUTCOME_OK)
                return;
        m->pause_seconds_sum += max_pause_us / 1e6;
        m->pause_seconds_max = MAX(m->pause_seconds_max, max_pause_us / 1e6);
        m->pause_count++;
        m->fallback_stops += fallback_stops;
        m->capture_seconds_sum += (double) duration_usec / 1e6;
        m->capture_count++;
}

void metrics_count_http(Metrics *m, unsigned code) {
        for (size_t i = 0; i < m->n_http; i++)
                if (m->http[i].code == code) {
                        m->http[i].count++;
                        return;
                }
        if (!GREEDY_REALLOC(m->http, m->n_http_allocated, m->n_http + 1))
                return;
        m->http[m->n_http++] = (MetricsHttp) { .code = code, .count = 1 };
}

void metrics_count_scan(Metrics *m, uint64_t duration_usec) {
        m->scan_seconds_sum += (double) duration_usec / 1e6;
}

static void header(FILE *f, const char *name, const char *type, const char *help) {
        fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

char *metrics_label_escape(const char *s) {
        /* First as text output shows it (printable UTF-8 kept, the rest C escapes), then the exposition format's
         * own escapes for backslash and quote: a label says what `stackctl ps` says. */
        _cleanup_free_ char *text = escape_string(s);
        char *e, *p;

        if (!text)
                return NULL;
        e = p = malloc(strlen(text) * 2 + 1);
        if (!e)
                return NULL;
        for (const char *c = text; *c; c++) {
                if (*c == '\\' || *c == '"')
                        *p++ = '\\';
                *p++ = *c;
        }
        *p = 0;
        return e;
}

static bool class_is_problem(int c) {
        return c == THREAD_CLASS_BLOCKED || c == THREAD_CLASS_BUSY_LOOP || c == THREAD_CLASS_SYSCALL_SPIN ||
               c == THREAD_CLASS_LOCK_RETRY;
}

typedef struct ProblemGroup {
        int klass;
        const char *unit, *comm;        /* the scanner's: valid while the render runs */
        unsigned threads;
        uint64_t longest_usec;          /* the longest any of them has been in the class */
} ProblemGroup;

/* Which units and processes have threads in a problem class now, and for how long: what an alert rule needs to
 * name the hung service, not just the host. */
static void render_problems(Metrics *mt, const DaemonView *v, uint64_t now, FILE *f) {
        ProblemGroup groups[METRICS_PROBLEM_SERIES_MAX];
        size_t n = 0;
        Scanner *s = v->scanner;

        for (size_t i = 0; i < s->threads.size; i++) {
                ThreadEntry *t;
                ProblemGroup *g = NULL;

                if (s->threads.keys[i] <= 0)
                        continue;
                t = s->threads.values[i];
                if (!class_is_problem(t->cls.class) || !t->process)
                        continue;
                (void) scanner_load_identity(s, t->process);
                for (size_t k = 0; k < n && !g; k++)
                        if (groups[k].klass == t->cls.class && streq(groups[k].comm, t->process->comm) &&
                            streq_ptr(groups[k].unit, t->process->unit))
                                g = &groups[k];
                if (!g) {
                        if (n == ELEMENTSOF(groups)) {
                                mt->problem_threads_dropped++;
                                continue;
                        }
                        g = &groups[n++];
                        *g = (ProblemGroup) {
                                .klass = t->cls.class, .unit = t->process->unit, .comm = t->process->comm,
                        };
                }
                g->threads++;
                g->longest_usec = MAX(g->longest_usec, now - MIN(now, t->cls.since_usec));
        }
        char help[160];

        snprintf(help, sizeof help, "Threads in a problem class now, by class, systemd unit and process name (at most "
                 "%d series).", METRICS_PROBLEM_SERIES_MAX);
        header(f, "stackwatch_problem_threads", "gauge", help);
        for (size_t k = 0; k < n; k++) {
                _cleanup_free_ char *unit = metrics_label_escape(groups[k].unit ?: ""),
                                    *comm = metrics_label_escape(groups[k].comm);
                if (unit && comm)
                        fprintf(f, "stackwatch_problem_threads{class=\"%s\",unit=\"%s\",comm=\"%s\"} %u\n",
                                thread_class_to_string(groups[k].klass), unit, comm, groups[k].threads);
        }
        header(f, "stackwatch_problem_seconds", "gauge",
               "The longest time one of those threads has been in its class, by class, unit and process name.");
        for (size_t k = 0; k < n; k++) {
                _cleanup_free_ char *unit = metrics_label_escape(groups[k].unit ?: ""),
                                    *comm = metrics_label_escape(groups[k].comm);
                if (unit && comm)
                        fprintf(f, "stackwatch_problem_seconds{class=\"%s\",unit=\"%s\",comm=\"%s\"} %.3f\n",
                                thread_class_to_string(groups[k].klass), unit, comm,
                                (double) groups[k].longest_usec / 1e6);
        }
        header(f, "stackwatch_problem_threads_dropped_total", "counter",
               "Problem threads left out of stackwatch_problem_threads by its series cap, summed over scrapes.");
        fprintf(f, "stackwatch_problem_threads_dropped_total %llu\n",
                (unsigned long long) mt->problem_threads_dropped);
}

/* The process_* metrics every Prometheus client library exports about its own process. */
static void render_process(const DaemonView *v, uint64_t now_mono, uint64_t now_real, FILE *f) {
        unsigned long long size = 0, resident = 0;
        struct rusage ru = {};
        struct rlimit rl = {};
        long page = sysconf(_SC_PAGESIZE);
        _cleanup_fclose_ FILE *statm = fopen("/proc/self/statm", "re");
        _cleanup_closedir_ DIR *fds = opendir("/proc/self/fd");
        unsigned n_fds = 0;

        (void) getrusage(RUSAGE_SELF, &ru);
        (void) getrlimit(RLIMIT_NOFILE, &rl);
        if (!statm || fscanf(statm, "%llu %llu", &size, &resident) != 2)
                size = resident = 0;
        for (struct dirent *de; fds && (de = readdir(fds));)
                if (de->d_name[0] != '.')
                        n_fds++;
        header(f, "process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.");
        fprintf(f, "process_cpu_seconds_total %.6f\n",
                (double) (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                        (double) (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6);
        header(f, "process_resident_memory_bytes", "gauge", "Resident memory size in bytes.");
        fprintf(f, "process_resident_memory_bytes %llu\n", resident * (unsigned long long) page);
        header(f, "process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.");
        fprintf(f, "process_virtual_memory_bytes %llu\n", size * (unsigned long long) page);
        header(f, "process_open_fds", "gauge", "Number of open file descriptors.");
        fprintf(f, "process_open_fds %u\n", n_fds > 0 ? n_fds - 1 : 0); /* not the one reading the directory */
        header(f, "process_max_fds", "gauge", "Maximum number of open file descriptors.");
        fprintf(f, "process_max_fds %llu\n", (unsigned long long) rl.rlim_cur);
        header(f, "process_start_time_seconds", "gauge", "Start time of the process since unix epoch in seconds.");
        fprintf(f, "process_start_time_seconds %.3f\n", (double) (now_real - (now_mono - v->start_usec)) / 1e6);
}

/* Rule names are [A-Za-z0-9_.-] (checked at load), so they need no escaping as label values. */
int metrics_render(Metrics *mt, const DaemonView *m, char **ret, size_t *ret_len) {
        _cleanup_free_ char *buf = NULL;
        const ScanStats *st = &m->scanner->stats;
        uint64_t now = now_usec(CLOCK_MONOTONIC), now_real = now_usec(CLOCK_REALTIME);
        size_t len = 0;
        FILE *f;

        f = open_memstream(&buf, &len);
        if (!f)
                return -ENOMEM;

        header(f, "stackwatch_build_info", "gauge", "The running stackwatchd's version.");
        fprintf(f, "stackwatch_build_info{version=\"%s\"} 1\n", PACKAGE_VERSION);
        /* The host as the daemon knows it, in one info gauge to join on ("* on (instance) group_left (host)
         * stackwatch_info"), the way node_uname_info carries the node's name: a host label on every series would
         * fight the instance label the scrape configuration sets, and repeat on every sample. */
        char host[256] = "";
        (void) gethostname(host, sizeof host - 1);
        _cleanup_free_ char *host_label = metrics_label_escape(host);
        if (!host_label) {
                fclose(f);
                return -ENOMEM;
        }
        header(f, "stackwatch_info", "gauge", "The host this stackwatchd watches, and its version.");
        fprintf(f, "stackwatch_info{host=\"%s\",version=\"%s\"} 1\n", host_label, PACKAGE_VERSION);
        header(f, "stackwatch_threads", "gauge", "Threads watched, by their current class.");
        for (ThreadClass c = 0; c < _THREAD_CLASS_MAX; c++)
                fprintf(f, "stackwatch_threads{class=\"%s\"} %u\n", thread_class_to_string(c), st->by_class[c]);
        header(f, "stackwatch_processes", "gauge", "Processes watched.");
        fprintf(f, "stackwatch_processes %u\n", st->processes);
        header(f, "stackwatch_scan_source", "gauge", "Where the scans read every thread's state: 1 for the source in use.");
        for (ScanSource src = 0; src < _SCAN_SOURCE_MAX; src++)
                fprintf(f, "stackwatch_scan_source{source=\"%s\"} %d\n", scan_source_to_string(src),
                        m->scanner->source == src);
        header(f, "stackwatch_scans_total", "counter", "Scans since start.");
        fprintf(f, "stackwatch_scans_total %llu\n", (unsigned long long) st->scans);
        header(f, "stackwatch_scan_cpu_seconds_total", "counter", "CPU time the daemon spent in scans since start.");
        fprintf(f, "stackwatch_scan_cpu_seconds_total %.6f\n", (double) st->cpu_usec / 1e6);
        header(f, "stackwatch_last_scan_cpu_seconds", "gauge", "CPU time of the latest scan.");
        fprintf(f, "stackwatch_last_scan_cpu_seconds %.6f\n", (double) st->last_cpu_usec / 1e6);
        header(f, "stackwatch_poll_interval_seconds", "gauge",
               "The poll interval in force (auto: the rules' shortest for: / 10, stretched by the scan's cost).");
        fprintf(f, "stackwatch_poll_interval_seconds %.3f\n", (double) m->poll_interval_usec / 1e6);
        header(f, "stackwatch_scan_duration_seconds", "summary", "Time spent in scans.");
        fprintf(f, "stackwatch_scan_duration_seconds_sum %.6f\n", mt->scan_seconds_sum);
        fprintf(f, "stackwatch_scan_duration_seconds_count %llu\n", (unsigned long long) st->scans);
        header(f, "stackwatch_last_scan_duration_seconds", "gauge", "Duration of the latest scan.");
        fprintf(f, "stackwatch_last_scan_duration_seconds %.6f\n", (double) st->last_duration_usec / 1e6);
        header(f, "stackwatch_last_scan_age_seconds", "gauge", "Time since the latest scan ended.");
        fprintf(f, "stackwatch_last_scan_age_seconds %.3f\n",
                st->scans > 0 ? (double) (now - st->last_scan_usec) / 1e6 : 0.0);
        header(f, "stackwatch_last_scan_timestamp_seconds", "gauge", "When the latest scan ended, since the epoch.");
        fprintf(f, "stackwatch_last_scan_timestamp_seconds %.3f\n",
                st->scans > 0 ? (double) (now_real - (now - st->last_scan_usec)) / 1e6 : 0.0);
        render_problems(mt, m, now, f);
        header(f, "stackwatch_config_last_reload_successful", "gauge",
               "Whether the latest configuration load (at start, or on SIGHUP) succeeded.");
        fprintf(f, "stackwatch_config_last_reload_successful %d\n", m->reload_failed ? 0 : 1);
        header(f, "stackwatch_config_last_reload_success_timestamp_seconds", "gauge",
               "When the configuration in force was loaded, since the epoch.");
        fprintf(f, "stackwatch_config_last_reload_success_timestamp_seconds %.3f\n",
                (double) m->reload_success_usec / 1e6);
        header(f, "stackwatch_config_reload_failures_total", "counter", "Reloads refused since start.");
        fprintf(f, "stackwatch_config_reload_failures_total %llu\n", (unsigned long long) m->reload_failures);
        header(f, "stackwatch_deep_reads_total", "counter", "Deep /proc reads (syscall, schedstat, io, wchan).");
        fprintf(f, "stackwatch_deep_reads_total %llu\n", (unsigned long long) st->deep_reads);
        header(f, "stackwatch_scan_records_total", "counter",
               "BPF scan records read: whole for threads that moved, a bare tid for those that did not.");
        fprintf(f, "stackwatch_scan_records_total{kind=\"whole\"} %llu\n", (unsigned long long) st->records);
        fprintf(f, "stackwatch_scan_records_total{kind=\"same\"} %llu\n", (unsigned long long) st->same_records);
        header(f, "stackwatch_threads_classed_total", "counter",
               "Threads classed by the scans: those that moved, and those whose class may follow from time alone.");
        fprintf(f, "stackwatch_threads_classed_total %llu\n", (unsigned long long) st->reclassed);
        header(f, "stackwatch_owed_walks_total", "counter",
               "Wait-chain walks that judged whether parked waits are owed (blocked), done when something moved.");
        fprintf(f, "stackwatch_owed_walks_total %llu\n", (unsigned long long) m->owed->walks);
        header(f, "stackwatch_owed_walk_seconds_total", "counter", "Time the event loop spent in those walks");
        fprintf(f, "stackwatch_owed_walk_seconds_total %.6f\n", (double) m->owed->walk_usec / 1e6);

        header(f, "stackwatch_rule_firings_total", "counter", "Times each rule fired.");
        for (size_t i = 0; i < m->config->n_rules; i++) {
                const RuleStats *rs = trigger_rule_stats(m->trigger, m->config->rules[i].name);
                fprintf(f, "stackwatch_rule_firings_total{rule=\"%s\"} %llu\n", m->config->rules[i].name,
                        (unsigned long long) (rs ? rs->fired : 0));
        }
        header(f, "stackwatch_captures_total", "counter",
               "Captures by rule (\"" METRICS_RULE_API "\" for GET /stacks) and outcome.");
        for (size_t i = 0; i < mt->n_rules; i++)
                for (CaptureOutcome o = 0; o < _CAPTURE_OUTCOME_MAX; o++)
                        fprintf(f, "stackwatch_captures_total{rule=\"%s\",outcome=\"%s\"} %llu\n", mt->rules[i].rule,
                                capture_outcome_to_string(o), (unsigned long long) mt->rules[i].captures[o]);
        header(f, "stackwatch_captures_refused_total", "counter",
               "Captures not started: the per-minute budget was spent or too many were in flight.");
        fprintf(f, "stackwatch_captures_refused_total %llu\n",
                (unsigned long long) (mt->captures_refused + m->trigger->budget_skipped));
        header(f, "stackwatch_firings_deferred_total", "counter",
               "Firings put off to the next poll because every capture slot was busy (no cooldown started).");
        fprintf(f, "stackwatch_firings_deferred_total %llu\n", (unsigned long long) m->trigger->deferred);
        header(f, "stackwatch_deadlock_walks_total", "counter",
               "Wait-chain walks done for rules with deadlock: true");
        fprintf(f, "stackwatch_deadlock_walks_total %llu\n", (unsigned long long) m->trigger->deadlock_walks);
        header(f, "stackwatch_deadlock_walk_seconds_total", "counter", "Time the event loop spent in those walks");
        fprintf(f, "stackwatch_deadlock_walk_seconds_total %.6f\n", (double) m->trigger->deadlock_walk_usec / 1e6);
        header(f, "stackwatch_lock_edges_total", "counter",
               "Mutex waits those walks met, by whether the holder was named (found) or not (gone, or no known lock)");
        fprintf(f, "stackwatch_lock_edges_total{owner=\"found\"} %llu\n",
                (unsigned long long) m->trigger->lock_edges_found);
        fprintf(f, "stackwatch_lock_edges_total{owner=\"unknown\"} %llu\n",
                (unsigned long long) m->trigger->lock_edges_unknown);
        header(f, "stackwatch_captures_running", "gauge", "Captures in flight.");
        fprintf(f, "stackwatch_captures_running %zu\n", m->captures_running);
        header(f, "stackwatch_capture_pause_seconds", "summary",
               "The longest time a thread of the target was held stopped, per successful capture.");
        fprintf(f, "stackwatch_capture_pause_seconds_sum %.6f\n", mt->pause_seconds_sum);
        fprintf(f, "stackwatch_capture_pause_seconds_count %llu\n", (unsigned long long) mt->pause_count);
        header(f, "stackwatch_capture_pause_max_seconds", "gauge", "The longest pause of any capture since start.");
        fprintf(f, "stackwatch_capture_pause_max_seconds %.6f\n", mt->pause_seconds_max);
        header(f, "stackwatch_capture_fallback_stops_total", "counter",
               "Threads the auto capture method stopped with ptrace, the passive capture not having them.");
        fprintf(f, "stackwatch_capture_fallback_stops_total %llu\n", (unsigned long long) mt->fallback_stops);
        header(f, "stackwatch_capture_duration_seconds", "summary", "Wall time of successful captures.");
        fprintf(f, "stackwatch_capture_duration_seconds_sum %.6f\n", mt->capture_seconds_sum);
        fprintf(f, "stackwatch_capture_duration_seconds_count %llu\n", (unsigned long long) mt->capture_count);

        header(f, "stackwatch_lock_probes_total", "counter",
               "Threads traced briefly to tell whether they poll for a lock, by what the trace saw.");
        for (LockProbeVerdict v = LOCK_PROBE_RETRYING; v < _LOCK_PROBE_VERDICT_MAX; v++)
                fprintf(f, "stackwatch_lock_probes_total{verdict=\"%s\"} %llu\n", lock_probe_verdict_to_string(v),
                        (unsigned long long) mt->lock_probes[v]);

        header(f, "stackwatch_archive_snapshots", "gauge", "Snapshots in the archive.");
        fprintf(f, "stackwatch_archive_snapshots %llu\n", (unsigned long long) m->archive_snapshots);
        header(f, "stackwatch_archive_bytes", "gauge", "Bytes on disk of the snapshots in the archive.");
        fprintf(f, "stackwatch_archive_bytes %llu\n", (unsigned long long) m->archive_bytes);
        header(f, "stackwatch_archive_tmp_removed_total", "counter",
               "Temporary files of killed archive writes removed by the sweep at start and at rotation.");
        fprintf(f, "stackwatch_archive_tmp_removed_total %llu\n", (unsigned long long) m->archive_tmp_removed);

        if (m->hooks) {
                const HookStats *hs = hooks_stats(m->hooks);

                header(f, "stackwatch_hook_runs_total", "counter", "Hook processes started.");
                fprintf(f, "stackwatch_hook_runs_total %llu\n", (unsigned long long) hs->started);
                header(f, "stackwatch_hook_failures_total", "counter",
                       "Hooks that failed: non-zero exit, killed, timed out, or not executable.");
                fprintf(f, "stackwatch_hook_failures_total %llu\n", (unsigned long long) hs->failed);
                header(f, "stackwatch_hook_timeouts_total", "counter", "Hooks killed at their timeout.");
                fprintf(f, "stackwatch_hook_timeouts_total %llu\n", (unsigned long long) hs->timed_out);
                header(f, "stackwatch_hooks_dropped_total", "counter", "Hooks not run: too many were waiting.");
                fprintf(f, "stackwatch_hooks_dropped_total %llu\n", (unsigned long long) hs->dropped);
                header(f, "stackwatch_hooks_running", "gauge", "Hooks running now.");
                fprintf(f, "stackwatch_hooks_running %u\n", hooks_running(m->hooks));
        }
        if (m->alerts) {
                header(f, "stackwatch_alerts_active", "gauge", "Firings whose hook keeps an alert active now.");
                fprintf(f, "stackwatch_alerts_active %zu\n", m->alerts->n_active);
                header(f, "stackwatch_alerts_resolved_total", "counter",
                       "Alerts resolved: the thread recovered or exited.");
                fprintf(f, "stackwatch_alerts_resolved_total %llu\n", (unsigned long long) m->alerts->resolved);
        }

        header(f, "stackwatch_http_requests_total", "counter", "HTTP requests answered, by status code.");
        for (size_t i = 0; i < mt->n_http; i++)
                fprintf(f, "stackwatch_http_requests_total{code=\"%u\"} %llu\n", mt->http[i].code,
                        (unsigned long long) mt->http[i].count);
        header(f, "stackwatch_http_connections_cut_total", "counter",
               "HTTP connections cut by the daemon: a request head past its deadline, or room made for a newcomer.");
        fprintf(f, "stackwatch_http_connections_cut_total{reason=\"head_deadline\"} %llu\n",
                (unsigned long long) mt->http_cut_head_deadline);
        fprintf(f, "stackwatch_http_connections_cut_total{reason=\"room\"} %llu\n",
                (unsigned long long) mt->http_cut_room);
        header(f, "stackwatch_http_auth_failures_total", "counter",
               "HTTP requests refused for their bearer token: missing, wrong, or a read token on /stacks (scope).");
        for (HttpAuthFailure a = 0; a < _HTTP_AUTH_FAILURE_MAX; a++)
                fprintf(f, "stackwatch_http_auth_failures_total{reason=\"%s\"} %llu\n",
                        http_auth_failure_to_string(a), (unsigned long long) mt->http_auth_failures[a]);

        render_process(m, now, now_real, f);

        if (fclose(f) != 0)
                return -ENOMEM;
        *ret_len = len;
        *ret = TAKE_PTR(buf);
        return 0;
}
