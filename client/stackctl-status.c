/* stackctl-status.c: "stackctl status": is stackwatchd up and scanning, what it watches and what it captured. */
#include <stdio.h>

#include "base/escape.h"
#include "base/json-util.h"
#include "base/log.h"
#include "base/time-util.h"
#include "serve/api.h"
#include "stackctl-args.h"
#include "stackctl-daemon.h"
#include "stackctl-fanout.h"
#include "stackctl-format.h"
#include "stackctl-output.h"
#include "stackctl-verbs.h"

/* The status of a daemon that is up and scanning, but whose last reload failed. */
#define STATUS_DEGRADED_RELOAD "degraded: the last reload failed"

/* "3 blocked, 20 running, …" in the daemon's order, which is the classes' own. */
static char *classes_line(json_object *by_class) {
        char *line = NULL;
        size_t len = 0;
        FILE *f;

        f = open_memstream(&line, &len);
        if (!f)
                return NULL;
        if (by_class) {
                json_object_object_foreach(by_class, key, val) {
                        _cleanup_free_ char *k = escape_string(key);
                        fprintf(f, "%s%llu %s", ftell(f) > 0 ? ", " : "",
                                (unsigned long long) (json_object_is_type(val, json_type_int) ?
                                                      json_object_get_uint64(val) : 0), k ?: "?");
                }
        }
        if (fclose(f) == EOF)
                return mfree(line);
        return line;
}

static int print_status(json_object *h) {
        json_object *scan = json_get_object(h, API_K_SCAN), *archive = json_get_object(h, API_K_ARCHIVE),
                    *config = json_get_object(h, API_K_CONFIG);
        _cleanup_free_ char *status = escape_string(json_get_string(h, API_K_STATUS) ?: "unknown"),
                            *version = escape_string(json_get_string(h, API_K_VERSION) ?: "?"),
                            *dir = escape_string(json_get_string(archive, API_K_DIRECTORY) ?: "-"),
                            *classes = classes_line(json_get_object(scan, API_K_BY_CLASS));
        char up[FORMAT_TIMESPAN_MAX], age[FORMAT_TIMESPAN_MAX], took[FORMAT_TIMESPAN_MAX],
                poll[FORMAT_TIMESPAN_MAX], size[FORMAT_BYTES_MAX], loaded[FORMAT_TIMESPAN_MAX],
                cpu[FORMAT_TIMESPAN_MAX];
        const char *source;

        bool reload_failed = config && streq_ptr(json_get_string(config, API_K_RELOAD), API_RELOAD_FAILED);

        if (!status || !version || !dir || !classes)
                return log_oom();
        /* The first line is the verdict: a daemon that runs on the configuration it was told to drop is not ok. */
        if (reload_failed && streq_ptr(json_get_string(h, API_K_STATUS), API_STATUS_OK))
                printf("stackwatchd %s: %s\n", version, STATUS_DEGRADED_RELOAD);
        else
                printf("stackwatchd %s: %s\n", version, status);
        printf("%12s: %llu, up %s, API %llu\n", "PID", (unsigned long long) json_get_u64(h, API_K_PID),
               format_timespan(up, sizeof up, json_get_u64(h, API_K_UPTIME_SEC) * USEC_PER_SEC),
               (unsigned long long) json_get_u64(h, API_K_API));
        printf("%12s: %llu threads in %llu processes\n", "Watching",
               (unsigned long long) json_get_u64(scan, API_K_THREADS),
               (unsigned long long) json_get_u64(scan, API_K_PROCESSES));
        printf("%12s: %s\n", "Classes", classes[0] ? classes : "-");
        /* Older daemons name no source: they scan /proc. */
        source = json_get_string(scan, API_K_SOURCE);
        if (source) {
                _cleanup_free_ char *why = escape_string(json_get_string(scan, API_K_SOURCE_WHY) ?: "");

                printf("%12s: %s%s%s%s\n", "Scan source", streq(source, "bpf") ? "BPF task iterator" : "/proc",
                       why && why[0] ? " (" : "", why ?: "", why && why[0] ? ")" : "");
        }
        if (json_get_u64(scan, API_K_SCANS) > 0)
                printf("%12s: #%llu, %s ago, took %s, %s of CPU (every %s)\n", "Last scan",
                       (unsigned long long) json_get_u64(scan, API_K_SCANS),
                       format_timespan(age, sizeof age, json_get_u64(scan, API_K_LAST_SCAN_AGE_MS) * USEC_PER_MSEC),
                       format_timespan(took, sizeof took, json_get_u64(scan, API_K_LAST_SCAN_DURATION_US)),
                       format_timespan(cpu, sizeof cpu, json_get_u64(scan, API_K_LAST_SCAN_CPU_US)),
                       format_timespan(poll, sizeof poll, json_get_u64(scan, API_K_POLL_INTERVAL_MS) * USEC_PER_MSEC));
        else
                printf("%12s: none yet (every %s)\n", "Last scan",
                       format_timespan(poll, sizeof poll, json_get_u64(scan, API_K_POLL_INTERVAL_MS) * USEC_PER_MSEC));
        printf("%12s: %llu written, %llu capture failures, %llu captures running\n", "Snapshots",
               (unsigned long long) json_get_u64(h, API_K_SNAPSHOTS_WRITTEN),
               (unsigned long long) json_get_u64(h, API_K_CAPTURE_FAILURES),
               (unsigned long long) json_get_u64(h, API_K_CAPTURES_RUNNING));
        printf("%12s: %s, %llu snapshots, %s\n", "Archive", dir,
               (unsigned long long) json_get_u64(archive, API_K_SNAPSHOTS),
               format_bytes(size, sizeof size, json_get_u64(archive, API_K_BYTES)));
        if (reload_failed) {
                _cleanup_free_ char *e = escape_string(json_get_string(config, API_K_ERROR) ?: "?");
                printf("%12s: RELOAD FAILED, running on the previous configuration: %s\n", "Config", e ?: "?");
        } else if (config)
                printf("%12s: loaded %s ago\n", "Config",
                       format_timespan(loaded, sizeof loaded,
                                       now_usec(CLOCK_REALTIME) - MIN(now_usec(CLOCK_REALTIME),
                                                                      json_get_u64(config, API_K_LOADED_USEC))));
        return 0;
}

/* status --host A --host B …: a line per host, those that did not answer too. */
static int fanout_status(void) {
        FanoutReply *rs = NULL;
        size_t n = 0;
        json_object *all = NULL;
        int r;

        if (fanout_get(API_ROUTE_HEALTHZ, DAEMON_TIMEOUT_USEC, 503, &rs, &n) != EXIT_OK)
                return EXIT_FAIL;
        if (arg.format == RENDER_JSON)
                all = json_object_new_object();
        else
                printf("%s%-20s %-8s %8s %9s %8s %10s %10s %s%s\n", ansi_bold(), "HOST", "STATUS", "THREADS",
                       "PROCESSES", "BLOCKED", "LAST SCAN", "SNAPSHOTS", "CONFIG", ansi_normal());
        for (size_t i = 0; i < n; i++) {
                _cleanup_(json_object_putp) json_object *doc = NULL;
                _cleanup_free_ char *host = escape_string(rs[i].host), *st = NULL;
                json_object *scan;
                const char *why = NULL;
                char age[FORMAT_TIMESPAN_MAX];
                bool reload_failed;

                if (rs[i].exit == EXIT_OK && json_parse_bounded(rs[i].body, rs[i].size, &doc, &why) < 0)
                        rs[i].exit = EXIT_FAIL;
                if (rs[i].exit != EXIT_OK) {
                        if (all)
                                json_object_object_add(all, rs[i].host, json_new_string_or_null(NULL));
                        else
                                printf("%-20s %-8s %s\n", host ?: "?", "-", rs[i].error ?: "no usable answer");
                        continue;
                }
                /* What a single-host status would exit with: a reply without details is a token refused (or none
                 * given), one that is not healthy a failure. */
                if (!json_object_object_get_ex(doc, API_K_PID, NULL))
                        rs[i].exit = EXIT_PERMISSION;
                else if (!streq_ptr(json_get_string(doc, API_K_STATUS), API_STATUS_OK) ||
                         streq_ptr(json_get_string(json_get_object(doc, API_K_CONFIG), API_K_RELOAD),
                                   API_RELOAD_FAILED))
                        rs[i].exit = EXIT_FAIL;
                if (all) {
                        json_object_object_add(all, rs[i].host, json_object_get(doc));
                        continue;
                }
                reload_failed = streq_ptr(json_get_string(json_get_object(doc, API_K_CONFIG), API_K_RELOAD),
                                          API_RELOAD_FAILED);
                /* As the single-host first line: up and scanning on the previous configuration is "degraded". */
                st = escape_string(reload_failed && streq_ptr(json_get_string(doc, API_K_STATUS), API_STATUS_OK)
                                           ? "degraded"
                                           : json_get_string(doc, API_K_STATUS) ?: "unknown");
                scan = json_get_object(doc, API_K_SCAN);
                if (rs[i].exit == EXIT_PERMISSION) {
                        printf("%-20s %-8s %s\n", host ?: "?", "-",
                               host_token_file(i) ? "up, but it refused the token: no details"
                                                    : "up; the details need the bearer token (--token-file)");
                        continue;
                }
                printf("%-20s %-8s %8llu %9llu %8llu %10s %10llu %s\n", host ?: "?", st ?: "?",
                       (unsigned long long) json_get_u64(scan, API_K_THREADS),
                       (unsigned long long) json_get_u64(scan, API_K_PROCESSES),
                       (unsigned long long) json_get_u64(json_get_object(scan, API_K_BY_CLASS), "blocked"),
                       format_timespan(age, sizeof age, json_get_u64(scan, API_K_LAST_SCAN_AGE_MS) * USEC_PER_MSEC),
                       (unsigned long long) json_get_u64(doc, API_K_SNAPSHOTS_WRITTEN),
                       reload_failed ? "RELOAD FAILED" : "ok");
        }
        if (all) {
                (void) json_print(all);
                json_object_put(all);
        }
        /* A host that did not answer, refused the token or is not healthy is a line, and in the exit status. */
        r = fanout_exit_status(rs, n);
        fanout_replies_free(rs, n);
        return r;
}

int verb_status(int argc, char **argv) {
        if (arg.n_hosts > 1)
                return fanout_status();
        _cleanup_(http_response_done) HttpResponse resp = {};
        _cleanup_(json_object_putp) json_object *doc = NULL;
        bool ok, reload_failed;
        int r;

        /* 503 is a stalled daemon's answer, still a status report; any other error is not. */
        r = daemon_get_json(API_ROUTE_HEALTHZ, 503, &resp, &doc);
        if (r != EXIT_OK)
                return r;
        if (resp.status == 503 && !json_get_string(doc, API_K_STATUS)) {
                _cleanup_free_ char *msg = escape_string(json_get_string(doc, API_K_ERROR) ?: "unavailable");
                log_error("stackwatchd: %s (HTTP 503)", msg ?: "unavailable");
                return EXIT_FAIL;
        }
        ok = resp.status == 200 && streq(json_get_string(doc, API_K_STATUS), API_STATUS_OK);
        /* Without the token, TCP's /healthz says only whether the daemon is up. */
        if (!json_object_object_get_ex(doc, API_K_PID, NULL)) {
                _cleanup_free_ char *st = escape_string(json_get_string(doc, API_K_STATUS) ?: "unknown");
                printf("stackwatchd: %s\n", st ?: "?");
                if (arg.host_token_file ?: arg.token_file)
                        log_error("The daemon refused the token in %s: it says only that it is up.",
                                  arg.host_token_file ?: arg.token_file);
                else
                        log_error("The details need the daemon's bearer token (--token-file).");
                return EXIT_PERMISSION;
        }
        reload_failed = streq_ptr(json_get_string(json_get_object(doc, API_K_CONFIG), API_K_RELOAD),
                                  API_RELOAD_FAILED);
        if (arg.format == RENDER_JSON)
                r = daemon_print_body(&resp);
        else
                r = print_status(doc) < 0 ? EXIT_FAIL : EXIT_OK;
        if (r != EXIT_OK)
                return r;
        if (ok && reload_failed) {
                log_error("stackwatchd's last reload failed; it runs on the previous configuration.");
                return EXIT_FAIL;
        }
        if (ok)
                return EXIT_OK;
        if (streq(json_get_string(doc, API_K_STATUS), API_STATUS_STALLED))
                log_error("stackwatchd is stalled: no scan in more than %d poll intervals.", API_STALLED_POLLS);
        else
                log_error("stackwatchd is not healthy (HTTP %ld).", resp.status);
        return EXIT_FAIL;
}
