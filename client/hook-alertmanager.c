/* hook-alertmanager.c: the "alertmanager" alert hook. It turns the event stackwatchd hands a hook
 * (STACKWATCH_EVENT, see stackwatch.yaml(5)) into one alert of Alertmanager's API (POST /api/v2/alerts, a
 * PostableAlerts array) and sends it; a firing event raises the alert, a resolved one ends it.
 *
 *   alertmanager URL [--instance TEMPLATE] [--header 'NAME: VALUE']... [--label NAME=VALUE]... [--timeout SECONDS]
 *
 * URL is Alertmanager's base URL (http://alertmanager:9093), or its full /api/v2/alerts URL. The alert's "instance"
 * label matches Prometheus's for the same host only when it is the scrape target's (--instance "%H:9177", %H the
 * host name): then Prometheus's alert for the hang and this one group and inhibit each other; the label "host" is
 * the host name. Exit status: 0 when Alertmanager accepted the alert, 1 when it did not (the reason on stderr, which
 * stackwatchd logs), 2 for a usage error or an event that is not one. */
#include <curl/curl.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <json-c/json.h>

#include "base/json-util.h"
#include "base/macro.h"
#include "base/strv.h"

#define ALERTNAME "StackwatchHang"
#define API_PATH "/api/v2/alerts"
#define TIMEOUT_DEFAULT_SEC 10L

static char **arg_headers, **arg_labels;
static const char *arg_instance;        /* the instance label, %H the event's host; NULL: the host name */
static long arg_timeout = TIMEOUT_DEFAULT_SEC;

static int usage(const char *why) {
        if (why)
                fprintf(stderr, "alertmanager: %s\n", why);
        fprintf(stderr, "usage: alertmanager URL [--instance TEMPLATE] [--header 'NAME: VALUE']... "
                        "[--label NAME=VALUE]... [--timeout SECONDS]\n"
                        "  --instance TEMPLATE  the alert's instance label: Prometheus's scrape target for this host,\n"
                        "                       so that its alerts and these group and inhibit each other; %%H is the\n"
                        "                       host name, %%%% a %%: \"%%H:9177\" (default: the host name alone)\n");
        return 2;
}

/* CLOCK_REALTIME microseconds as RFC 3339, the form Alertmanager's startsAt and endsAt take. */
static void rfc3339(uint64_t usec, char buf[static 40]) {
        time_t t = (time_t) (usec / 1000000);
        struct tm tm;
        char date[32];

        gmtime_r(&t, &tm);
        strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S", &tm);
        snprintf(buf, 40, "%s.%06uZ", date, (unsigned) (usec % 1000000));
}

/* Add KEY: VALUE to labels or annotations when VALUE is a non-empty string. */
static int add_nonempty(json_object *o, const char *key, const char *value) {
        return value && value[0] ? json_add_string(o, key, value) : 0;
}

static int add_time(json_object *o, const char *key, uint64_t usec) {
        char buf[40];

        if (usec == 0)
                return 0;
        rfc3339(usec, buf);
        return json_add_string(o, key, buf);
}

/* The lines of array KEY of EV joined with newlines; NULL when there are none. */
static char *join_lines(json_object *ev, const char *key, const char *sep) {
        json_object *a = json_get_array(ev, key);
        char *buf = NULL;
        size_t size = 0;
        FILE *f;

        if (!a || json_object_array_length(a) == 0)
                return NULL;
        f = open_memstream(&buf, &size);
        if (!f)
                return NULL;
        for (size_t i = 0; i < json_object_array_length(a); i++) {
                json_object *e = json_object_array_get_idx(a, i);
                if (json_object_is_type(e, json_type_string))
                        fprintf(f, "%s%s", i ? sep : "", json_object_get_string(e));
        }
        if (fclose(f) != 0) {
                free(buf);
                return NULL;
        }
        return buf;
}

/* A deadlock's Python threads (the event's python_cycle), one line each: "pid 1300 thread 1301: serve (peer.py:8)";
 * NULL when there are none. */
static char *cycle_lines(json_object *ev) {
        json_object *a = json_get_array(ev, "python_cycle");
        char *buf = NULL;
        size_t size = 0, n = 0;
        FILE *f;

        if (!a || json_object_array_length(a) == 0)
                return NULL;
        f = open_memstream(&buf, &size);
        if (!f)
                return NULL;
        for (size_t i = 0; i < json_object_array_length(a); i++) {
                json_object *e = json_object_array_get_idx(a, i);
                const char *frame = json_get_string(e, "frame");

                if (frame)
                        fprintf(f, "%spid %llu thread %llu: %s", n++ ? "\n" : "",
                                (unsigned long long) json_get_u64(e, "pid"),
                                (unsigned long long) json_get_u64(e, "tid"), frame);
        }
        if (fclose(f) != 0 || n == 0) {
                free(buf);
                return NULL;
        }
        return buf;
}

/* TEMPLATE with %H replaced by HOST and %% by %; NULL on OOM or on another % (checked when the option is parsed). */
static char *instance_expand(const char *template, const char *host) {
        char *buf = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&buf, &size);

        if (!f)
                return NULL;
        for (const char *p = template; *p; p++) {
                if (*p != '%') {
                        fputc(*p, f);
                        continue;
                }
                p++;
                if (*p == 'H')
                        fputs(host ?: "", f);
                else if (*p == '%')
                        fputc('%', f);
                else {
                        fclose(f);
                        free(buf);
                        return NULL;
                }
        }
        if (fclose(f) != 0) {
                free(buf);
                return NULL;
        }
        return buf;
}

/* The PostableAlerts array for EV, or NULL with a message on stderr. */
static json_object *alert_from_event(json_object *ev) {
        _cleanup_(json_object_putp) json_object *alerts = json_object_new_array(), *alert = json_object_new_object(),
                                                *labels = json_object_new_object(),
                                                *ann = json_object_new_object();
        _cleanup_free_ char *stack = join_lines(ev, "frames", "\n"), *cmdline = join_lines(ev, "cmdline", " "),
                            *cycle = cycle_lines(ev), *howto = NULL, *pid = NULL, *instance = NULL, *count = NULL;
        const char *state = json_get_string(ev, "state"), *rule = json_get_string(ev, "rule"),
                   *id = json_get_string(ev, "snapshot_id");
        bool resolved = state && streq(state, "resolved");

        if (!alerts || !alert || !labels || !ann)
                return NULL;
        if (!rule || !json_get_u64(ev, "pid")) {
                fprintf(stderr, "alertmanager: STACKWATCH_EVENT has no rule or pid: not an event of stackwatchd\n");
                return NULL;
        }
        if (asprintf(&pid, "%llu", (unsigned long long) json_get_u64(ev, "pid")) < 0)
                return NULL;
        /* An annotation, not a label: a label that changes makes another alert. */
        if (json_get_u64(ev, "count") > 0 &&
            asprintf(&count, "%llu", (unsigned long long) json_get_u64(ev, "count")) < 0)
                return NULL;
        /* Prometheus's instance is its scrape target, host:port; the hostname alone matches none of its alerts. */
        if (arg_instance && !(instance = instance_expand(arg_instance, json_get_string(ev, "host"))))
                return NULL;
        if (id && asprintf(&howto, "stackctl show %s, or GET /snapshots/%s from stackwatchd", id, id) < 0)
                return NULL;
        /* The labels say which alert it is: the same ones for its firing, its repeats and its end. */
        if (json_add_string(labels, "alertname", ALERTNAME) < 0 || json_add_string(labels, "rule", rule) < 0 ||
            add_nonempty(labels, "class", json_get_string(ev, "class")) < 0 ||
            add_nonempty(labels, "comm", json_get_string(ev, "comm")) < 0 ||
            add_nonempty(labels, "unit", json_get_string(ev, "unit")) < 0 ||
            add_nonempty(labels, "instance", instance ?: json_get_string(ev, "host")) < 0 ||
            add_nonempty(labels, "host", json_get_string(ev, "host")) < 0 ||
            add_nonempty(labels, "severity", json_get_string(ev, "severity")) < 0 ||
            json_add_string(labels, "pid", pid) < 0 ||
            /* One problem across hosts: what a route's group_by names to make it one notification. */
            add_nonempty(labels, "signature", json_get_string(ev, "signature")) < 0 ||
            add_nonempty(labels, "title", json_get_string(ev, "title")) < 0)
                return NULL;
        for (char **l = arg_labels; l && *l; l++) {
                char *eq = strchr(*l, '=');
                *eq = 0;
                if (json_add_string(labels, *l, eq + 1) < 0)
                        return NULL;
                *eq = '=';
        }
        /* Where a Python program's own code is: what its author reads first (the summary says it too). */
        if (add_nonempty(ann, "summary", json_get_string(ev, "summary")) < 0 ||
            add_nonempty(ann, "python_frame", json_get_string(ev, "python_frame")) < 0 ||
            add_nonempty(ann, "python_cycle", cycle) < 0 ||
            add_nonempty(ann, "stack", stack) < 0 || add_nonempty(ann, "exe", json_get_string(ev, "exe")) < 0 ||
            add_nonempty(ann, "cmdline", cmdline) < 0 || add_nonempty(ann, "snapshot_id", id) < 0 ||
            add_nonempty(ann, "snapshot_page", json_get_string(ev, "page_url")) < 0 ||
            add_nonempty(ann, "snapshot_fetch", howto) < 0 ||
            add_nonempty(ann, "snapshot_error", json_get_string(ev, "error")) < 0 ||
            add_nonempty(ann, "cgroup", json_get_string(ev, "cgroup")) < 0 ||
            add_nonempty(ann, "count", count) < 0)
                return NULL;
        if (json_add(alert, "labels", TAKE_PTR(labels)) < 0 || json_add(alert, "annotations", TAKE_PTR(ann)) < 0 ||
            add_time(alert, "startsAt", json_get_u64(ev, "since_usec") ?: json_get_u64(ev, "timestamp_usec")) < 0 ||
            add_time(alert, "endsAt", json_get_u64(ev, resolved ? "timestamp_usec" : "expires_usec")) < 0 ||
            json_object_array_add(alerts, TAKE_PTR(alert)) < 0)
                return NULL;
        return TAKE_PTR(alerts);
}

static size_t collect(char *data, size_t size, size_t n, void *userdata) {
        FILE *f = userdata;
        return fwrite(data, size, n, f) * size;
}

static int post(const char *url, const char *body) {
        _cleanup_free_ char *reply = NULL;
        struct curl_slist *headers = NULL;
        size_t reply_size = 0;
        FILE *rf = open_memstream(&reply, &reply_size);
        long code = 0;
        CURLcode c;
        CURL *h;

        if (!rf || curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK || !(h = curl_easy_init())) {
                fprintf(stderr, "alertmanager: cannot set up libcurl\n");
                return 1;
        }
        headers = curl_slist_append(headers, "Content-Type: application/json");
        for (char **l = arg_headers; l && *l; l++)
                headers = curl_slist_append(headers, *l);
        curl_easy_setopt(h, CURLOPT_URL, url);
        curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
        curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_TIMEOUT, arg_timeout);
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, collect);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, rf);
        c = curl_easy_perform(h);
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
        curl_easy_cleanup(h);
        curl_slist_free_all(headers);
        fclose(rf);
        if (c != CURLE_OK) {
                fprintf(stderr, "alertmanager: POST %s: %s\n", url, curl_easy_strerror(c));
                return 1;
        }
        if (code < 200 || code > 299) {
                fprintf(stderr, "alertmanager: POST %s: HTTP %ld: %.300s\n", url, code, reply ?: "");
                return 1;
        }
        return 0;
}

int main(int argc, char **argv) {
        static const struct option options[] = {
                { "header", required_argument, NULL, 'H' },
                { "label", required_argument, NULL, 'l' },
                { "timeout", required_argument, NULL, 't' },
                { "instance", required_argument, NULL, 'i' },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        _cleanup_(json_object_putp) json_object *ev = NULL, *alerts = NULL;
        _cleanup_free_ char *url = NULL, *body = NULL;
        const char *event = getenv("STACKWATCH_EVENT"), *base;
        size_t len;
        char *end;
        int c, r;

        while ((c = getopt_long(argc, argv, "H:l:t:i:h", options, NULL)) >= 0)
                switch (c) {
                case 'H':
                        if (!strchr(optarg, ':'))
                                return usage("a header is NAME: VALUE");
                        if (strv_extend(&arg_headers, optarg) < 0)
                                return 1;
                        break;
                case 'l':
                        if (!strchr(optarg, '=') || optarg[0] == '=')
                                return usage("a label is NAME=VALUE");
                        if (strv_extend(&arg_labels, optarg) < 0)
                                return 1;
                        break;
                case 't':
                        errno = 0;
                        arg_timeout = strtol(optarg, &end, 10);
                        if (errno || *end || arg_timeout < 1 || arg_timeout > 300)
                                return usage("--timeout takes 1..300 seconds");
                        break;
                case 'i': {
                        _cleanup_free_ char *check = instance_expand(optarg, "");

                        if (!optarg[0] || !check)
                                return usage("--instance takes text with %H (the host name) and %% (a %), e.g. "
                                             "\"%H:9177\"");
                        arg_instance = optarg;
                        break;
                }
                case 'h':
                        usage(NULL);
                        return 0;
                default:
                        return usage(NULL);
                }
        if (argc - optind != 1)
                return usage("one URL, please");
        base = argv[optind];
        if (strncmp(base, "http://", 7) != 0 && strncmp(base, "https://", 8) != 0)
                return usage("not an http:// or https:// URL");
        if (!event) {
                fprintf(stderr, "alertmanager: STACKWATCH_EVENT is not set; stackwatchd runs this with the event "
                                "in it\n");
                return 2;
        }
        ev = json_tokener_parse(event);
        if (!ev || !json_object_is_type(ev, json_type_object)) {
                fprintf(stderr, "alertmanager: STACKWATCH_EVENT is not a JSON object\n");
                return 2;
        }
        alerts = alert_from_event(ev);
        if (!alerts)
                return 2;
        len = strlen(base);
        while (len > 0 && base[len - 1] == '/')
                len--;
        if (asprintf(&url, "%.*s%s", (int) len,
                     base, len >= strlen(API_PATH) && strncmp(base + len - strlen(API_PATH), API_PATH,
                                                              strlen(API_PATH)) == 0 ? "" : API_PATH) < 0)
                return 1;
        if (json_to_text(alerts, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &body, NULL) < 0)
                return 1;
        r = post(url, body);
        strv_free(arg_headers);
        strv_free(arg_labels);
        return r;
}
