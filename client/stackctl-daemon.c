/* stackctl-daemon.c: asking stackwatchd: where it listens and with which token, its replies as exit codes, and
 * "dump --via-daemon". */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc-util.h"
#include "base/escape.h"
#include "base/io-util.h"
#include "base/json-util.h"
#include "base/log.h"
#include "render/snapshot-svg.h"
#include "serve/api.h"
#include "serve/token-file.h"
#include "stackctl-args.h"
#include "stackctl-daemon.h"
#include "stackctl-output.h"

/* "http://HOST:PORT" from S ("HOST:PORT": http is implied), without a trailing slash, into URL; libcurl checks the
 * rest. -EINVAL with *RET_WHY saying what is wrong. */
static int host_url_normalize(const char *s, char url[static API_URL_MAX], const char **ret_why) {
        size_t len;

        for (const char *p = s; *p; p++)
                if ((unsigned char) *p <= ' ' || *p == 0x7f) {
                        *ret_why = "a URL has no spaces or control characters";
                        return -EINVAL;
                }
        if (snprintf(url, API_URL_MAX, "%s%s", strstr(s, "://") ? "" : "http://", s) >= API_URL_MAX) {
                *ret_why = "too long for a URL";
                return -EINVAL;
        }
        len = strlen(url);
        while (len > 0 && url[len - 1] == '/')
                url[--len] = 0;
        if (!startswith(url, "http://") && !startswith(url, "https://")) {
                *ret_why = "expected http://HOST:PORT or https://HOST:PORT";
                return -EINVAL;
        }
        return 0;
}

int parse_host(const char *s) {
        static char url[API_URL_MAX];
        const char *why = NULL;

        if (host_url_normalize(s, url, &why) < 0) {
                log_error("Invalid --host '%s': %s.", s, why);
                return -EINVAL;
        }
        arg.host = url;
        return 0;
}

/* The host part of URL (normalized): what journald records as _HOSTNAME for that machine, as far as a URL says. */
static char *url_host_part(const char *url) {
        const char *h = strstr(url, "://") + 3, *end, *at;
        size_t len = strcspn(h, "/?#");

        at = memchr(h, '@', len);
        if (at) {
                len -= (size_t) (at + 1 - h);
                h = at + 1;
        }
        if (h[0] == '[') {
                end = memchr(h, ']', len);
                return end ? strndup(h + 1, (size_t) (end - h - 1)) : strndup(h, len);
        }
        end = memchr(h, ':', len);
        return strndup(h, end ? (size_t) (end - h) : len);
}

static int hosts_append(const char *name, const char *match_name, const char *token_file) {
        HostArg *nw, *h;

        if (arg.n_hosts >= HOSTS_MAX)
                return -E2BIG;
        nw = reallocarray(arg.hosts, arg.n_hosts + 1, sizeof *arg.hosts);
        if (!nw)
                return -ENOMEM;
        arg.hosts = nw;
        h = &arg.hosts[arg.n_hosts];
        *h = (HostArg) { .name = strdup(name), .match_name = strdup(match_name) };
        if (!h->name || !h->match_name || (token_file && !(h->token_file = strdup(token_file)))) {
                free(h->name);
                free(h->match_name);
                return -ENOMEM;
        }
        arg.n_hosts++;
        return 0;
}

int hosts_add(const char *s) {
        int r;

        /* ps, rules, status, dump --via-daemon, list, show: a daemon's URL; list, show --journal: a host name. */
        if (parse_host(s) < 0)
                return -EINVAL;
        r = hosts_append(s, s, NULL);
        if (r == -E2BIG)
                return log_error_errno(r, "At most %d hosts at once.", HOSTS_MAX);
        if (r < 0)
                return log_oom();
        return 0;
}

/* One line of a hosts file: "URL [TOKEN-FILE]" and a "#" comment; blank lines and comments are skipped. A relative
 * token file is relative to the hosts file's directory. Errors are logged as FILE:LINE:COLUMN. */
static int hosts_parse_line(const char *path, unsigned line, char *l) {
        _cleanup_free_ char *match = NULL, *token = NULL;
        char url[API_URL_MAX], *words[3] = {}, *save = NULL;
        const char *why = NULL, *slash;
        size_t n = 0;
        int r;

        for (char *w = strtok_r(l, " \t\r", &save); w && w[0] != '#'; w = strtok_r(NULL, " \t\r", &save)) {
                if (n == ELEMENTSOF(words) - 1) {
                        log_error("%s:%u:%zu: unexpected '%s' after the token file: a line is a daemon's URL and "
                                  "optionally a token file.", path, line, (size_t) (w - l) + 1, w);
                        return -EINVAL;
                }
                words[n++] = w;
        }
        if (n == 0)
                return 0;
        if (host_url_normalize(words[0], url, &why) < 0) {
                log_error("%s:%u:%zu: invalid daemon URL '%s': %s.", path, line, (size_t) (words[0] - l) + 1,
                          words[0], why);
                return -EINVAL;
        }
        for (size_t i = 0; i < arg.n_hosts; i++)
                if (streq(arg.hosts[i].name, words[0])) {
                        log_error("%s:%u:%zu: '%s' is named twice.", path, line, (size_t) (words[0] - l) + 1,
                                  words[0]);
                        return -EINVAL;
                }
        match = url_host_part(url);
        if (!match)
                return log_oom();
        if (words[1] && words[1][0] != '/' && (slash = strrchr(path, '/'))) {
                if (asprintf(&token, "%.*s/%s", (int) (slash - path), path, words[1]) < 0)
                        return log_oom();
        } else if (words[1] && !(token = strdup(words[1])))
                return log_oom();
        r = hosts_append(words[0], match, token);
        if (r == -E2BIG)
                return log_error_errno(r, "%s:%u: more than %d hosts.", path, line, HOSTS_MAX);
        if (r < 0)
                return log_oom();
        return parse_host(words[0]);
}

int hosts_load(const char *path) {
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ char *text = NULL;
        size_t size = 0, before = arg.n_hosts;
        unsigned line = 0;
        char *save = NULL;
        int r;

        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return log_error_errno(errno, "Failed to open the hosts file '%s': %m", path);
        r = read_full_fd(fd, HOSTS_FILE_MAX, &text, &size);
        if (r == -EFBIG)
                return log_error_errno(r, "The hosts file '%s' is larger than %u bytes.", path, HOSTS_FILE_MAX);
        if (r < 0)
                return log_error_errno(r, "Failed to read the hosts file '%s': %m", path);
        if (memchr(text, 0, size))
                return log_error_errno(SYNTHETIC_ERRNO(EINVAL), "The hosts file '%s' has a NUL byte: not a text file.",
                                       path);
        /* Line by line with strchr: strtok would skip the empty lines, and the line numbers with them. */
        for (char *l = text; l; l = save) {
                save = strchr(l, '\n');
                if (save)
                        *save++ = 0;
                line++;
                r = hosts_parse_line(path, line, l);
                if (r < 0)
                        return r;
        }
        if (arg.n_hosts == before)
                return log_error_errno(SYNTHETIC_ERRNO(EINVAL), "%s: no hosts in it (a line is a daemon's URL and "
                                       "optionally a token file).", path);
        return 0;
}

int host_select(size_t i) {
        if (i >= arg.n_hosts)
                return -EINVAL;
        arg.host_token_file = arg.hosts[i].token_file;
        return parse_host(arg.hosts[i].name);
}

int host_select_name(const char *name) {
        for (size_t i = 0; i < arg.n_hosts; i++)
                if (streq(arg.hosts[i].name, name))
                        return host_select(i);
        arg.host_token_file = NULL;
        return parse_host(name);
}

const char *host_token_file(size_t i) {
        return i < arg.n_hosts && arg.hosts[i].token_file ? arg.hosts[i].token_file : arg.token_file;
}

void hosts_done(void) {
        for (size_t i = 0; i < arg.n_hosts; i++) {
                free(arg.hosts[i].name);
                free(arg.hosts[i].match_name);
                free(arg.hosts[i].token_file);
        }
        arg.hosts = mfree(arg.hosts);
        arg.n_hosts = 0;
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
                if (arg.host_token_file ?: arg.token_file)
                        log_error("The daemon refused the token in %s (%s, HTTP 401).",
                                  arg.host_token_file ?: arg.token_file, msg);
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

        if (arg.host_token_file ?: arg.token_file) {
                r = read_token(arg.host_token_file ?: arg.token_file, &token);
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
        if (arg.format == RENDER_JSON && (arg.json_flags & JSON_C_TO_STRING_PRETTY)) {
                _cleanup_(json_object_putp) json_object *o = NULL;
                const char *why = NULL;

                if (json_parse_bounded(r->body, r->size, &o, &why) >= 0)
                        return json_print(o);
        }
        if (fwrite(r->body, 1, r->size, stdout) != r->size ||
            (arg.format != RENDER_PPROF && r->size > 0 && r->body[r->size - 1] != '\n' && putchar('\n') == EOF) ||
            fflush(stdout) == EOF) {
                log_error_errno(errno, "Failed to write the reply: %m");
                return EXIT_FAIL;
        }
        return EXIT_OK;
}

int stacks_path(pid_t pid, char **ret) {
        _cleanup_free_ char *path = NULL;
        const char *format = render_format_to_string(arg.format);
        char num[16];
        int r;

        if (asprintf(&path, API_ROUTE_STACKS "%d", (int) pid) < 0)
                return log_oom();
        r = http_query_append(&path, API_Q_FORMAT, format);
        if (r < 0)
                return r;
        if (arg.format == RENDER_SVG) {
                r = http_query_append(&path, API_Q_PICTURE, svg_picture_to_string(arg.svg_picture));
                if (r < 0)
                        return r;
        }
        if (arg.capture.tid > 0) {
                snprintf(num, sizeof num, "%d", (int) arg.capture.tid);
                r = http_query_append(&path, API_Q_TID, num);
                if (r < 0)
                        return r;
        }
        if (arg.peers > 0) {
                snprintf(num, sizeof num, "%u", arg.peers);
                r = http_query_append(&path, API_Q_PEERS, num);
                if (r < 0)
                        return r;
        }
        *ret = TAKE_PTR(path);
        return 0;
}

int dump_via_daemon(pid_t pid) {
        _cleanup_(http_response_done) HttpResponse resp = {};
        _cleanup_free_ char *path = NULL;
        int r;

        if (stacks_path(pid, &path) < 0)
                return EXIT_FAIL;
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
