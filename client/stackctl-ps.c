/* stackctl-ps.c: "stackctl ps": how stackwatchd classifies the threads it watches, as a table. */
#include <stdio.h>
#include <string.h>

#include "base/escape.h"
#include "base/json-util.h"
#include "base/log.h"
#include "serve/api.h"
#include "stackctl-args.h"
#include "stackctl-daemon.h"
#include "stackctl-fanout.h"
#include "stackctl-format.h"
#include "stackctl-output.h"
#include "stackctl-verbs.h"

/* The filters as query parameters; failures are logged. */
static int processes_path(char **ret) {
        _cleanup_free_ char *path = strdup(API_ROUTE_PROCESSES);
        int r;

        if (!path)
                return log_oom();
        if ((arg.all && (r = http_query_append(&path, API_Q_ALL, "1")) < 0) ||
            (arg.classes && (r = http_query_append(&path, API_Q_CLASS, arg.classes)) < 0) ||
            (arg.unit_glob && (r = http_query_append(&path, API_Q_UNIT, arg.unit_glob)) < 0) ||
            (arg.comm_glob && (r = http_query_append(&path, API_Q_COMM, arg.comm_glob)) < 0))
                return r;
        *ret = TAKE_PTR(path);
        return 0;
}

/* "read/pipe_read": the syscall the thread sits in and where the kernel has it wait, whichever are known. */
static char *where(json_object *t) {
        const char *sc = json_get_string(t, API_K_SYSCALL), *wc = json_get_string(t, API_K_WCHAN);
        _cleanup_free_ char *s = NULL;

        if (sc && wc && asprintf(&s, "%s/%s", sc, wc) < 0)
                return NULL;
        return escape_string(s ?: sc ?: wc ?: "-");
}

/* Whether S can go to a terminal as it is: well-formed UTF-8 without a control character. The daemon sends a Python
 * frame escaped already ("\\e" for an ESC in a file name); escaping it again would double its backslashes. */
static bool inert(const char *s) {
        size_t len = strlen(s);

        for (size_t i = 0, k; i < len; i += k) {
                uint32_t cp;

                k = utf8_sequence_len(s + i, len - i, &cp);
                if (k == 0 || unicode_is_control(cp))
                        return false;
        }
        return true;
}

static int print_thread(json_object *t, const char *host) {
        _cleanup_free_ char *comm = escape_string(json_get_string(t, API_K_COMM) ?: "-"),
                            *class = escape_string(json_get_string(t, API_K_CLASS) ?: "-"),
                            *state = escape_string(json_get_string(t, API_K_STATE) ?: "-"), *w = where(t);
        const char *py = json_get_string(t, API_K_PYTHON_FRAME);
        char span[FORMAT_TIMESPAN_MAX];
        json_object *fr;

        if (!comm || !class || !state || !w)
                return log_oom();
        if (host)
                printf("%-20s ", host);
        printf("%7llu %7llu %-16s %s%-12s%s %-5s %7s %5.1f %s\n", (unsigned long long) json_get_u64(t, API_K_PID),
               (unsigned long long) json_get_u64(t, API_K_TID), comm, ansi_class(json_get_string(t, API_K_CLASS)),
               class, ansi_normal(), state,
               format_timespan(span, sizeof span, json_get_u64(t, API_K_FOR_MS) * USEC_PER_MSEC),
               json_get_double(t, API_K_CPU_PERCENT), w);
        /* Where the thread is in Python code, as the daemon's latest snapshot of it caught it: a line of its own
         * under the row, so that the columns stay as scripts read them. */
        if (py) {
                _cleanup_free_ char *e = NULL;

                if (!inert(py) && !(e = escape_string(py)))
                        return log_oom();
                printf("%*s%16spython: %s\n", host ? 21 : 0, "", "", e ?: py);
        }
        /* Why nothing moves in it: its cgroup's freezer (a paused container), which its state does not say. */
        fr = json_get_object(t, API_K_FROZEN_BY);
        if (fr) {
                _cleanup_free_ char *cg = escape_string(json_get_string(fr, API_K_CGROUP) ?: "?");

                if (!cg)
                        return log_oom();
                printf("%*s%16sfrozen by cgroup %s (v%llu)\n", host ? 21 : 0, "", "", cg,
                       (unsigned long long) json_get_u64(fr, API_K_VERSION));
        }
        return 0;
}

/* ps --host A --host B …: one table, a HOST column first, a host that did not answer as a line of its own and in
 * the exit status. */
static int fanout_ps(void) {
        _cleanup_free_ char *path = NULL;
        FanoutReply *rs = NULL;
        size_t n = 0, rows = 0, answered = 0;
        json_object *all = NULL;
        int r;

        if (processes_path(&path) < 0 || fanout_get(path, DAEMON_TIMEOUT_USEC, 0, &rs, &n) != EXIT_OK)
                return EXIT_FAIL;
        if (arg.format == RENDER_JSON)
                all = json_object_new_object();
        else if (arg.legend)
                printf("%s%-20s %7s %7s %-16s %-12s %-5s %7s %5s %s%s\n", ansi_bold(), "HOST", "PID", "TID", "COMM",
                       "CLASS", "STATE", "FOR", "CPU%", "SYSCALL/WCHAN", ansi_normal());
        for (size_t i = 0; i < n; i++) {
                _cleanup_(json_object_putp) json_object *doc = NULL;
                _cleanup_free_ char *host = escape_string(rs[i].host);
                json_object *threads;
                const char *why = NULL;

                if (rs[i].exit == EXIT_OK && json_parse_bounded(rs[i].body, rs[i].size, &doc, &why) < 0)
                        rs[i].exit = EXIT_FAIL;
                if (rs[i].exit != EXIT_OK) {
                        if (all)
                                json_object_object_add(all, rs[i].host, json_new_string_or_null(NULL));
                        else
                                printf("%-20s %s\n", host ?: "?", rs[i].error ?: "no usable answer");
                        continue;
                }
                answered++;
                threads = json_get_array(doc, API_K_THREADS);
                if (all) {
                        json_object_object_add(all, rs[i].host, json_object_get(doc));
                        continue;
                }
                for (size_t k = 0; threads && k < json_object_array_length(threads); k++, rows++)
                        (void) print_thread(json_object_array_get_idx(threads, k), host ?: "?");
        }
        if (all) {
                (void) json_print(all);
                json_object_put(all);
        } else if (arg.legend)
                printf("\n%zu threads shown from %zu of %zu hosts.\n", rows, answered, n);
        /* Every host is in the table; one that did not answer properly is also in the exit status. */
        r = fanout_exit_status(rs, n);
        fanout_replies_free(rs, n);
        return r;
}

int verb_ps(int argc, char **argv) {
        if (arg.n_hosts > 1)
                return fanout_ps();
        _cleanup_(http_response_done) HttpResponse resp = {};
        _cleanup_(json_object_putp) json_object *doc = NULL;
        _cleanup_free_ char *path = NULL;
        json_object *scan, *threads;
        char span[FORMAT_TIMESPAN_MAX];
        size_t n;
        int r;

        if (processes_path(&path) < 0)
                return EXIT_FAIL;
        r = daemon_get_json(path, 0, &resp, &doc);
        if (r != EXIT_OK)
                return r;
        scan = json_get_object(doc, API_K_SCAN);
        threads = json_get_array(doc, API_K_THREADS);
        n = threads ? json_object_array_length(threads) : 0;

        if (arg.format == RENDER_JSON) {
                r = daemon_print_body(&resp);
                return r != EXIT_OK ? r : n > 0 ? EXIT_OK : EXIT_NOT_FOUND;
        }
        if (n == 0) {
                if (arg.classes || arg.unit_glob || arg.comm_glob)
                        log_error("No threads match (%llu watched).",
                                  (unsigned long long) json_get_u64(scan, API_K_THREADS));
                else
                        log_error("No %sthreads among the %llu watched%s.", arg.all ? "" : "unhealthy ",
                                  (unsigned long long) json_get_u64(scan, API_K_THREADS),
                                  arg.all ? "" : " (--all shows every one)");
                return EXIT_NOT_FOUND;
        }
        if (arg.legend)
                printf("%s%7s %7s %-16s %-12s %-5s %7s %5s %s%s\n", ansi_bold(), "PID", "TID", "COMM", "CLASS",
                       "STATE", "FOR", "CPU%", "SYSCALL/WCHAN", ansi_normal());
        for (size_t i = 0; i < n; i++) {
                r = print_thread(json_object_array_get_idx(threads, i), NULL);
                if (r < 0)
                        return EXIT_FAIL;
        }
        if (arg.legend)
                printf("\n%zu of %llu threads shown (scan %llu, %s ago).\n", n,
                       (unsigned long long) json_get_u64(scan, API_K_THREADS),
                       (unsigned long long) json_get_u64(scan, API_K_SCANS),
                       format_timespan(span, sizeof span, json_get_u64(scan, API_K_LAST_SCAN_AGE_MS) * USEC_PER_MSEC));
        return EXIT_OK;
}
