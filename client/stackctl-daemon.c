/* stackctl-daemon.c: asking stackwatchd: where it listens and with which token, its replies as exit codes, and
 * "dump --via-daemon". */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc-util.h"
#include "base/escape.h"
#include "base/json-util.h"
#include "base/log.h"
#include "serve/api.h"
#include "serve/token-file.h"
#include "stackctl-args.h"
#include "stackctl-daemon.h"
#include "stackctl-output.h"

/* --host: "http://HOST:PORT" or "HOST:PORT" (http is implied), without a trailing slash; libcurl checks the rest. */
int parse_host(const char *s) {
        static char url[API_URL_MAX];
        size_t len;

        for (const char *p = s; *p; p++)
                if ((unsigned char) *p <= ' ' || *p == 0x7f) {
                        log_error("Invalid --host: a URL has no spaces or control characters.");
                        return -EINVAL;
                }
        if (snprintf(url, sizeof url, "%s%s", strstr(s, "://") ? "" : "http://", s) >= (int) sizeof url) {
                log_error("Invalid --host: longer than %d bytes.", API_URL_MAX);
                return -EINVAL;
        }
        len = strlen(url);
        while (len > 0 && url[len - 1] == '/')
                url[--len] = 0;
        if (!startswith(url, "http://") && !startswith(url, "https://")) {
                log_error("Invalid --host '%s': expected http://HOST:PORT.", s);
                return -EINVAL;
        }
        arg.host = url;
        return 0;
}

static int read_token(const char *path, char **ret) {
        int r = token_file_read(path, ret);

        if (r == -ENOMEM)
                return log_oom();
        if (token_file_strerror(r))
                return log_error_errno(r, "The token file '%s' is not usable: %s.", path, token_file_strerror(r));
        if (r < 0)
                return log_error_errno(r, "Failed to read the token file '%s': %m", path);
        return 0;
}

static void erase_freep(char **p) {
        if (*p) {
                explicit_bzero(*p, strlen(*p));
                free(*p);
        }
}

/* A reply that is not 2xx, in the daemon's words when it sent an error document. */
static int report_status(const HttpTarget *t, const HttpResponse *r) {
        _cleanup_(json_object_putp) json_object *j = NULL;
        _cleanup_free_ char *msg = NULL;
        const char *e = NULL;

        if (r->content_type && startswith(r->content_type, API_CONTENT_JSON)) {
                if (json_parse_bounded(r->body, r->size, &j, &(const char *) { NULL }) >= 0)
                        e = json_get_string(j, API_K_ERROR);
        }
        if (!e) {
                /* Not stackwatchd's error document: whatever answered at --host, or a proxy. */
                msg = escape_cstring(r->body, strcspn(r->body, "\r\n"));
                if (!msg)
                        return log_oom(), EXIT_FAIL;
                log_error("%s answered HTTP %ld%s%s", http_target_name(t), r->status, msg[0] ? ": " : "", msg);
                return r->status == 401 || r->status == 403 ? EXIT_PERMISSION :
                       r->status == 404 ? EXIT_NOT_FOUND : EXIT_FAIL;
        }
        msg = escape_string(e);
        if (!msg)
                return log_oom(), EXIT_FAIL;
        switch (r->status) {
        case 401:
                if (arg.token_file)
                        log_error("The daemon refused the token in %s (%s, HTTP 401).", arg.token_file, msg);
                else
                        log_error("The daemon refused the request: %s wants a token, pass --token-file FILE (%s, "
                                  "HTTP 401).", http_target_name(t), msg);
                return EXIT_PERMISSION;
        case 403:
                log_error("stackwatchd: %s (HTTP 403)", msg);
                return EXIT_PERMISSION;
        case 404:
                log_error("stackwatchd: %s (HTTP 404)", msg);
                return EXIT_NOT_FOUND;
        default:
                /* 429 (the capture budget is spent) and 503 say when to come back. */
                if (r->retry_after_sec > 0)
                        log_error("stackwatchd: %s (HTTP %ld); try again in %llu s.", msg, r->status,
                                  (unsigned long long) r->retry_after_sec);
                else
                        log_error("stackwatchd: %s (HTTP %ld)", msg, r->status);
                return EXIT_FAIL;
        }
}

int daemon_get(const char *path_and_query, uint64_t default_timeout_usec, long also_ok, HttpResponse *ret) {
        _cleanup_(erase_freep) char *token = NULL;
        _cleanup_(http_response_done) HttpResponse resp = {};
        HttpTarget t = {
                .socket_path = arg.socket_path,
                .base_url = arg.host,
                .cacert = arg.cacert,
                .timeout_usec = arg.timeout_usec ?: default_timeout_usec,
        };
        int r;

        if (arg.token_file) {
                r = read_token(arg.token_file, &token);
                if (r < 0)
                        return r == -EACCES || r == -EPERM ? EXIT_PERMISSION : EXIT_FAIL;
                t.token = token;
        }
        r = http_get(&t, path_and_query, &resp);
        switch (r) {
        case 0:
                break;
        case -ECONNREFUSED:
                return EXIT_NO_DAEMON;
        case -EACCES:
                return EXIT_PERMISSION;
        case -E2BIG:
        case -EINVAL:
                return EXIT_USAGE;
        default:
                return EXIT_FAIL;
        }
        if ((resp.status < 200 || resp.status > 299) && resp.status != also_ok)
                return report_status(&t, &resp);
        *ret = resp;
        resp = (HttpResponse) {};
        return EXIT_OK;
}

int daemon_get_json(const char *path_and_query, long also_ok, HttpResponse *ret, json_object **ret_json) {
        _cleanup_(http_response_done) HttpResponse resp = {};
        json_object *j;
        int r;

        r = daemon_get(path_and_query, DAEMON_TIMEOUT_USEC, also_ok, &resp);
        if (r != EXIT_OK)
                return r;
        if (json_parse_bounded(resp.body, resp.size, &j, &(const char *) { NULL }) < 0)
                j = NULL;
        if (!json_object_is_type(j, json_type_object)) {
                json_object_put(j);
                log_error("The reply to %s is not a JSON object (%s).", path_and_query, strna(resp.content_type));
                return EXIT_FAIL;
        }
        *ret = resp;
        resp = (HttpResponse) {};
        *ret_json = j;
        return EXIT_OK;
}

int daemon_print_body(const HttpResponse *r) {
        /* --json=pretty: the daemon's JSON written out again, indented. */
        if (arg.format == OUTPUT_JSON && (arg.json_flags & JSON_C_TO_STRING_PRETTY)) {
                _cleanup_(json_object_putp) json_object *o = NULL;
                const char *why = NULL;

                if (json_parse_bounded(r->body, r->size, &o, &why) >= 0)
                        return json_print(o);
        }
        if (fwrite(r->body, 1, r->size, stdout) != r->size ||
            (r->size > 0 && r->body[r->size - 1] != '\n' && putchar('\n') == EOF) || fflush(stdout) == EOF) {
                log_error_errno(errno, "Failed to write the reply: %m");
                return EXIT_FAIL;
        }
        return EXIT_OK;
}

int dump_via_daemon(pid_t pid) {
        _cleanup_(http_response_done) HttpResponse resp = {};
        _cleanup_free_ char *path = NULL;
        const char *format = arg.format == OUTPUT_JSON ? API_FORMAT_JSON :
                             arg.format == OUTPUT_FOLDED ? API_FORMAT_FOLDED : API_FORMAT_TEXT;
        char tid[16];
        int r;

        if (asprintf(&path, API_ROUTE_STACKS "%d", (int) pid) < 0)
                return log_oom(), EXIT_FAIL;
        if (http_query_append(&path, API_Q_FORMAT, format) < 0)
                return EXIT_FAIL;
        if (arg.capture.tid > 0) {
                snprintf(tid, sizeof tid, "%d", (int) arg.capture.tid);
                if (http_query_append(&path, API_Q_TID, tid) < 0)
                        return EXIT_FAIL;
        }
        if (arg.peers > 0) {
                snprintf(tid, sizeof tid, "%u", arg.peers);
                if (http_query_append(&path, API_Q_PEERS, tid) < 0)
                        return EXIT_FAIL;
        }
        r = daemon_get(path, DAEMON_CAPTURE_TIMEOUT_USEC, 0, &resp);
        if (r != EXIT_OK)
                return r;
        return daemon_print_body(&resp);
}

char *json_join_strings(json_object *array) {
        _cleanup_free_ char *joined = NULL;
        size_t n = array ? json_object_array_length(array) : 0, len = 0, allocated = 0;

        for (size_t i = 0; i < n; i++) {
                json_object *e = json_object_array_get_idx(array, i);
                const char *s = json_object_is_type(e, json_type_string) ? json_object_get_string(e) : "?";
                size_t l = strlen(s);

                if (!GREEDY_REALLOC(joined, allocated, len + l + 2))
                        return NULL;
                if (len > 0)
                        joined[len++] = ',';
                memcpy(joined + len, s, l + 1);
                len += l;
        }
        return escape_string(joined ?: "-");
}
