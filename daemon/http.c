/* http.c: libmicrohttpd in epoll mode inside the sd-event loop (its epoll fd is an io source, its timeout a timer
 * re-armed after every MHD_run()), the listeners, the token check and the reply helpers. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <systemd/sd-daemon.h>
#include <systemd/sd-event.h>

#include "base/alloc-util.h"
#include "base/escape.h"
#include "base/io-util.h"
#include "base/json-util.h"
#include "base/log.h"
#include "base/time-util.h"
#include "serve/api.h"
#include "serve/token-file.h"
#include "http-admit.h"
#include "http-tls.h"
#include "page-link.h"
#include "web-assets.h"
#include "http.h"

/* Refused requests (401, 403) logged: at most this many lines per interval, then one line with how many more. */
#define HTTP_AUTH_LOG_BURST 5U
#define HTTP_AUTH_LOG_INTERVAL_USEC (10ULL * USEC_PER_SEC)

struct Http {
        HttpDaemon daemon;
        HttpListener **listeners;
        size_t n_listeners, n_listeners_allocated;
        /* For TCP listeners, the capture scope (every route) and the read scope (every route but /stacks): each the
         * tokens of its file, two while one is rotated; none: NULL. */
        char *token[TOKEN_FILE_TOKENS_MAX];
        char *read_token[TOKEN_FILE_TOKENS_MAX];
        HttpTls *tls;                   /* PEM, read at start and reload: HTTPS on TCP listeners; NULL: plain */
        char *socket_path;              /* the unix socket we bound, removed at exit */
        /* The log of refused requests, rate-limited: lines written in the interval that began at auth_log_start,
         * and those left out, reported by auth_log_timer at the interval's end. */
        uint64_t auth_log_start;
        unsigned auth_logged, auth_suppressed;
        sd_event_source *auth_log_timer;
};

struct HttpListener {
        Http *http;
        struct MHD_Daemon *mhd;
        sd_event_source *io, *timer;
        sd_event_source *reaper;        /* at the next request head's deadline */
        bool tcp;                       /* requires the bearer token */
        bool tls;                       /* HTTPS, with the certificate of the latest load */
        bool draining;                  /* replaced by a listener with a new certificate: answers the connections it
                                         * has, takes no new one, and is freed once they are gone */
        unsigned max_connections;       /* MHD_OPTION_CONNECTION_LIMIT: http.max_connections and the reserve */
        HttpAdmit admit;
        char name[128];                 /* for the log: "/run/…/stackwatch.sock" or "http://127.0.0.1:9177" */
};

static HttpListener *listener_free(HttpListener *l) {
        if (!l)
                return NULL;
        sd_event_source_disable_unref(l->io);
        sd_event_source_disable_unref(l->timer);
        sd_event_source_disable_unref(l->reaper);
        if (l->mhd)
                MHD_stop_daemon(l->mhd); /* a drained one gave its socket to its successor: it closes no socket */
        http_admit_done(&l->admit);
        free(l);
        return NULL;
}

/* ---- the event loop side ---- */

static unsigned listener_connections(HttpListener *l) {
        const union MHD_DaemonInfo *info = MHD_get_daemon_info(l->mhd, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);

        return info ? info->num_connections : 0;
}

/* Cut the connections whose request head is past its deadline, count the cuts, and wake up at the next deadline.
 * A cut connection is shut down: MHD sees it hang up in this run or the next, which its epoll fd wakes. */
static void listener_reap(HttpListener *l) {
        Metrics *m = l->http->daemon.metrics;
        uint64_t next = http_admit_reap(&l->admit, now_usec(CLOCK_MONOTONIC));

        m->http_cut_head_deadline += l->admit.cut[HTTP_CUT_HEAD_DEADLINE];
        m->http_cut_room += l->admit.cut[HTTP_CUT_ROOM];
        memset(l->admit.cut, 0, sizeof l->admit.cut);
        if (next == UINT64_MAX) {
                (void) sd_event_source_set_enabled(l->reaper, SD_EVENT_OFF);
                return;
        }
        (void) sd_event_source_set_time(l->reaper, next);
        (void) sd_event_source_set_enabled(l->reaper, SD_EVENT_ONESHOT);
}

/* A draining listener whose last connection is gone leaves the table. */
static void listener_drop(HttpListener *l) {
        Http *h = l->http;

        for (size_t i = 0; i < h->n_listeners; i++)
                if (h->listeners[i] == l) {
                        memmove(h->listeners + i, h->listeners + i + 1,
                                (h->n_listeners - i - 1) * sizeof *h->listeners);
                        h->n_listeners--;
                        break;
                }
        log_debug("The HTTP server on %s with the previous certificate has no connection left; stopped", l->name);
        listener_free(l);
}

static void listener_run(HttpListener *l) {
        MHD_UNSIGNED_LONG_LONG ms;
        bool at_limit = listener_connections(l) >= l->max_connections;

        (void) MHD_run(l->mhd);
        listener_reap(l);
        if (l->draining && listener_connections(l) == 0) {
                listener_drop(l);
                return;
        }
        /* At the connection limit MHD takes its listening socket out of its epoll set, and puts it back only at the
         * start of a later run. When this run freed a slot, that run must come now: nothing else would wake us for
         * the clients waiting in the backlog (after a flood of 200 connections, the socket stayed deaf for good). */
        if (at_limit && listener_connections(l) < l->max_connections)
                ms = 0;
        else if (MHD_get_timeout(l->mhd, &ms) != MHD_YES)
                ms = UINT64_MAX;
        /* MHD_get_timeout() is relative, in milliseconds; MHD_NO means "no timeout needed". */
        if (ms != UINT64_MAX) {
                (void) sd_event_source_set_time_relative(l->timer, MIN(ms, (MHD_UNSIGNED_LONG_LONG) 3600000) * 1000);
                (void) sd_event_source_set_enabled(l->timer, SD_EVENT_ONESHOT);
        } else
                (void) sd_event_source_set_enabled(l->timer, SD_EVENT_OFF);
}

static int on_io(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        listener_run(userdata);
        return 0;
}

static int on_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        listener_run(userdata);
        return 0;
}

static int on_reaper(sd_event_source *s, uint64_t usec, void *userdata) {
        listener_run(userdata); /* reaps after its run */
        return 0;
}

void http_kick(Http *h) {
        /* A resumed connection is processed by the next MHD_run(); MHD's own wakeup makes its epoll fd readable,
         * and the timer at 0 makes sure of it. */
        for (size_t i = 0; i < h->n_listeners; i++) {
                (void) sd_event_source_set_time_relative(h->listeners[i]->timer, 0);
                (void) sd_event_source_set_enabled(h->listeners[i]->timer, SD_EVENT_ONESHOT);
        }
}

/* ---- replies ---- */

enum MHD_Result http_reply(Http *h, struct MHD_Connection *c, unsigned status, const char *content_type,
                           const char *body, size_t len) {
        struct MHD_Response *resp;
        enum MHD_Result r;

        resp = MHD_create_response_from_buffer(len, (void *) body, MHD_RESPMEM_MUST_COPY);
        if (!resp)
                return MHD_NO;
        (void) MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
        (void) MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
        (void) MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
        if (status == MHD_HTTP_UNAUTHORIZED)
                (void) MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer realm=\"stackwatch\"");
        if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
                (void) MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
        r = MHD_queue_response(c, status, resp);
        MHD_destroy_response(resp);
        metrics_count_http(h->daemon.metrics, status);
        return r;
}

enum MHD_Result http_reply_json(Http *h, struct MHD_Connection *c, unsigned status, json_object *j) {
        _cleanup_free_ char *s = NULL;
        size_t len;
        enum MHD_Result r;

        if (!j)
                return http_reply_error(h, c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
        r = json_to_text(j, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &s, &len) >= 0
                    ? http_reply(h, c, status, API_CONTENT_JSON, s, len)
                    : http_reply_error(h, c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
        json_object_put(j);
        return r;
}

static enum MHD_Result reply_errorv(Http *h, struct MHD_Connection *c, unsigned status, const char *fmt, va_list ap) {
        char msg[512];
        json_object *j;

        vsnprintf(msg, sizeof msg, fmt, ap);
        j = json_object_new_object();
        if (j) {
                json_object_object_add(j, API_K_ERROR, json_object_new_string(msg));
                json_object_object_add(j, API_K_STATUS, json_object_new_int((int) status));
        }
        if (!j) {
                static const char oom[] = "{\"error\":\"out of memory\",\"status\":500}";
                return http_reply(h, c, MHD_HTTP_INTERNAL_SERVER_ERROR, API_CONTENT_JSON, oom, sizeof oom - 1);
        }
        return http_reply_json(h, c, status, j);
}

enum MHD_Result http_reply_error(Http *h, struct MHD_Connection *c, unsigned status, const char *fmt, ...) {
        enum MHD_Result r;
        va_list ap;

        va_start(ap, fmt);
        r = reply_errorv(h, c, status, fmt, ap);
        va_end(ap);
        return r;
}

enum MHD_Result http_reply_retry(Http *h, struct MHD_Connection *c, uint64_t retry_usec, const char *fmt, ...) {
        char msg[512], secs[24];
        struct MHD_Response *resp;
        json_object *j;
        _cleanup_free_ char *s = NULL;
        enum MHD_Result r;
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        j = json_object_new_object();
        if (!j)
                return http_reply_error(h, c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
        json_object_object_add(j, API_K_ERROR, json_object_new_string(msg));
        json_object_object_add(j, API_K_STATUS, json_object_new_int(MHD_HTTP_TOO_MANY_REQUESTS));
        resp = json_to_text(j, JSON_C_TO_STRING_PLAIN, &s, NULL) >= 0
                       ? MHD_create_response_from_buffer(strlen(s), s, MHD_RESPMEM_MUST_COPY)
                       : NULL;
        json_object_put(j);
        if (!resp)
                return MHD_NO;
        snprintf(secs, sizeof secs, "%llu", (unsigned long long) MAX(DIV_ROUND_UP(retry_usec, USEC_PER_SEC), 1ULL));
        (void) MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, API_CONTENT_JSON);
        (void) MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, secs);
        r = MHD_queue_response(c, MHD_HTTP_TOO_MANY_REQUESTS, resp);
        MHD_destroy_response(resp);
        metrics_count_http(h->daemon.metrics, MHD_HTTP_TOO_MANY_REQUESTS);
        return r;
}

/* ---- requests ---- */

/* MHD's per-request pointer while a request is between its first and second call. */
static int http_request_seen;

/* Constant time in the length of the expected token: a wrong token reveals nothing through timing. */
static bool token_matches(const char *expected, const char *given) {
        size_t n = strlen(expected), m = strlen(given);
        unsigned char diff = n != m;

        for (size_t i = 0; i < n; i++)
                diff |= (unsigned char) expected[i] ^ (unsigned char) (i < m ? given[i] : 0);
        return diff == 0;
}

/* A header name no client can send (a control character): set on a connection whose path or query decoded
 * to a NUL byte, so that the request is refused instead of being served as what comes before the NUL. */
#define HTTP_NUL_MARK "\001nul"

/* MHD_OPTION_UNESCAPE_CALLBACK: MHD's own %XX decoding, and a mark when the result holds a NUL. */
static size_t on_unescape(void *cls, struct MHD_Connection *c, char *s) {
        size_t n = MHD_http_unescape(s);

        if (memchr(s, 0, n))
                (void) MHD_set_connection_value(c, MHD_HEADER_KIND, HTTP_NUL_MARK, "1");
        return n;
}

static enum MHD_Result find_nul(void *cls, enum MHD_ValueKind kind, const char *key, size_t key_size,
                                const char *value, size_t value_size) {
        bool *found = cls;

        if ((key && memchr(key, 0, key_size)) || (value && memchr(value, 0, value_size))) {
                *found = true;
                return MHD_NO;
        }
        return MHD_YES;
}

/* Whether the request's path, query or headers hold a NUL byte: C strings would see only what precedes it
 * ("/stacks/1%00" as "/stacks/1"), so such a request is refused whole. A raw NUL inside the request line or a
 * header line is cut by libmicrohttpd 0.9.75 itself before any of this sees it: head_is_whole() finds those. */
static bool request_has_nul(struct MHD_Connection *c) {
        bool found = false;

        if (MHD_lookup_connection_value(c, MHD_HEADER_KIND, HTTP_NUL_MARK))
                return true;
        (void) MHD_get_connection_values_n(c, MHD_HEADER_KIND | MHD_GET_ARGUMENT_KIND, find_nul, &found);
        return found;
}

/* What a request may do: nothing (no token, or a wrong one), read (metrics, processes, rules, snapshots), or also
 * capture (/stacks/PID, which stops threads of the target). */
typedef enum HttpScope {
        HTTP_SCOPE_NONE,
        HTTP_SCOPE_READ,
        HTTP_SCOPE_CAPTURE,
} HttpScope;

/* Whether GIVEN is one of TOKENS (every one compared, whichever matches). */
static bool tokens_match(char *const tokens[static TOKEN_FILE_TOKENS_MAX], const char *given) {
        bool match = false;

        for (size_t i = 0; i < TOKEN_FILE_TOKENS_MAX; i++)
                if (tokens[i])
                        match |= token_matches(tokens[i], given);
        return match;
}

static HttpScope authorized(const HttpListener *l, struct MHD_Connection *c, bool *ret_missing) {
        const char *v;

        *ret_missing = false;
        if (!l->tcp)
                return HTTP_SCOPE_CAPTURE; /* the unix socket's mode and group are the access control */
        v = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
        if (!v || strncasecmp(v, "Bearer ", 7) != 0) {
                *ret_missing = true;
                return HTTP_SCOPE_NONE;
        }
        v += 7;
        while (*v == ' ')
                v++;
        /* Both scopes compared, whichever matches, so that the timing says nothing about which one is configured. */
        bool capture = tokens_match(l->http->token, v);
        bool read = tokens_match(l->http->read_token, v);
        return capture ? HTTP_SCOPE_CAPTURE : read ? HTTP_SCOPE_READ : HTTP_SCOPE_NONE;
}

/* ---- refused requests: counted, and logged with the peer at most HTTP_AUTH_LOG_BURST times an interval ---- */

static const char *const auth_failure_what[_HTTP_AUTH_FAILURE_MAX] = {
        [HTTP_AUTH_FAILURE_MISSING] = "no bearer token",
        [HTTP_AUTH_FAILURE_WRONG] = "a wrong bearer token",
        [HTTP_AUTH_FAILURE_SCOPE] = "a read token on a capture route",
};

static int on_auth_log_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        Http *h = userdata;

        if (h->auth_suppressed > 0)
                log_warning("… %u more refused HTTP request(s) suppressed in the last %llu s", h->auth_suppressed,
                            (unsigned long long) (HTTP_AUTH_LOG_INTERVAL_USEC / USEC_PER_SEC));
        h->auth_suppressed = 0;
        h->auth_logged = 0;
        h->auth_log_start = 0;
        return 0;
}

/* The peer as the log shows it: "192.0.2.1 port 4711", "[2001:db8::1] port 4711". */
static void format_peer(struct MHD_Connection *c, char *buf, size_t size) {
        const union MHD_ConnectionInfo *info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        char addr[INET6_ADDRSTRLEN] = "?";

        snprintf(buf, size, "an unknown peer");
        if (!info || !info->client_addr)
                return;
        if (info->client_addr->sa_family == AF_INET) {
                const struct sockaddr_in *in = (const struct sockaddr_in *) info->client_addr;
                inet_ntop(AF_INET, &in->sin_addr, addr, sizeof addr);
                snprintf(buf, size, "%s port %u", addr, ntohs(in->sin_port));
        } else if (info->client_addr->sa_family == AF_INET6) {
                const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *) info->client_addr;
                inet_ntop(AF_INET6, &in6->sin6_addr, addr, sizeof addr);
                snprintf(buf, size, "[%s] port %u", addr, ntohs(in6->sin6_port));
        }
}

/* Count a refused request and log it, unless this interval's lines are spent: then the timer at the interval's end
 * says how many were left out. A client guessing tokens cannot flood the journal, and is still seen. */
static void auth_failed(HttpListener *l, struct MHD_Connection *c, HttpAuthFailure why, const char *url,
                        unsigned status) {
        Http *h = l->http;
        uint64_t now = now_usec(CLOCK_MONOTONIC);
        char peer[INET6_ADDRSTRLEN + 32];
        _cleanup_free_ char *u = NULL;

        h->daemon.metrics->http_auth_failures[why]++;
        if (h->auth_log_start == 0) {
                h->auth_log_start = now;
                if (h->auth_log_timer) {
                        (void) sd_event_source_set_time(h->auth_log_timer, now + HTTP_AUTH_LOG_INTERVAL_USEC);
                        (void) sd_event_source_set_enabled(h->auth_log_timer, SD_EVENT_ONESHOT);
                }
        }
        if (h->auth_logged >= HTTP_AUTH_LOG_BURST) {
                h->auth_suppressed++;
                return;
        }
        h->auth_logged++;
        format_peer(c, peer, sizeof peer);
        u = escape_string(url);
        log_warning("Refused HTTP request from %s for \"%s\" on %s: %s (%u)", peer, u ?: "?", l->name,
                    auth_failure_what[why], status);
}

/* What we keep per connection (MHD's socket context). */
typedef struct HttpConn {
        HttpAdmitConn *admit;
        size_t uri_len;                 /* of the current request's raw URI, as MHD cut it (at a NUL, if any) */
} HttpConn;

static HttpConn *connection_get(struct MHD_Connection *c) {
        const union MHD_ConnectionInfo *info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

        return info ? info->socket_context : NULL;
}

static HttpAdmitConn *connection_admit(struct MHD_Connection *c) {
        HttpConn *hc = connection_get(c);

        return hc ? hc->admit : NULL;
}

/* Who is at the other end of C: its IP address, or on the unix socket its uid. */
static void connection_peer(const HttpListener *l, struct MHD_Connection *c, int fd, HttpPeer *ret) {
        const union MHD_ConnectionInfo *info;
        struct ucred cred;
        socklen_t len = sizeof cred;

        *ret = (HttpPeer) { .family = AF_UNSPEC };
        if (!l->tcp) {
                if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) {
                        ret->family = AF_UNIX;
                        memcpy(ret->addr, &cred.uid, sizeof cred.uid);
                }
                return;
        }
        info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        if (!info || !info->client_addr)
                return;
        ret->family = info->client_addr->sa_family;
        if (ret->family == AF_INET)
                memcpy(ret->addr, &((const struct sockaddr_in *) info->client_addr)->sin_addr, 4);
        else if (ret->family == AF_INET6)
                memcpy(ret->addr, &((const struct sockaddr_in6 *) info->client_addr)->sin6_addr, 16);
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code) {
        HttpListener *l = cls;
        const union MHD_ConnectionInfo *info;
        HttpConn *hc = *socket_context;
        HttpPeer peer;

        if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
                if (hc)
                        http_admit_remove(&l->admit, hc->admit);
                free(hc);
                *socket_context = NULL;
                return;
        }
        info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        hc = calloc(1, sizeof *hc);
        if (!info || !hc) {
                free(hc);
                return;
        }
        connection_peer(l, c, info->connect_fd, &peer);
        hc->admit = http_admit_add(&l->admit, info->connect_fd, &peer, now_usec(CLOCK_MONOTONIC));
        *socket_context = hc;
}

/* MHD_OPTION_URI_LOG_CALLBACK: the raw URI's length, for head_is_whole(). */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *c) {
        HttpConn *hc = connection_get(c);

        if (hc)
                hc->uri_len = strlen(uri);
        return NULL;
}

static enum MHD_Result add_header_size(void *cls, enum MHD_ValueKind kind, const char *key, size_t key_size,
                                       const char *value, size_t value_size) {
        size_t *sum = cls;

        if (!streq(key, HTTP_NUL_MARK))
                *sum += key_size + 2 + value_size + 2; /* "Key: value\r\n" */
        return MHD_YES;
}

/* Whether the head MHD parsed accounts for every byte it read. libmicrohttpd 0.9.75 cuts a request line or a
 * header value at a raw NUL byte and carries on with what precedes it ("Bearer TOKEN\0x" as "Bearer TOKEN"); the
 * bytes it dropped show as a head longer than "METHOD URI VERSION\r\n", "Key: value\r\n"... and "\r\n". Extra
 * whitespace around a value shows the same way, and is refused with it: every client we serve (libcurl, Go,
 * Python) writes one space. */
static bool head_is_whole(struct MHD_Connection *c, const char *method, const char *version) {
        const union MHD_ConnectionInfo *info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);
        HttpConn *hc = connection_get(c);
        size_t sum;

        if (!info || !hc)
                return true; /* cannot tell */
        sum = strlen(method) + 1 + hc->uri_len + 1 + strlen(version) + 2 + 2;
        (void) MHD_get_connection_values_n(c, MHD_HEADER_KIND, add_header_size, &sum);
        return info->header_size <= sum;
}

/* ---- the web page: a static shell, served to anyone who reaches the listener ---- */

/* The shell holds no data: every piece of it comes from the JSON API, which checks the token the page's script
 * sends. So "/" and "/ui/ASSET" need no token: a browser cannot send a bearer header on navigation. */
#define WEB_CSP "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " \
        "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

static const char *web_content_type(const char *name) {
        const char *dot = strrchr(name, '.');

        if (dot && streq(dot, ".html"))
                return "text/html; charset=utf-8";
        if (dot && streq(dot, ".js"))
                return "text/javascript; charset=utf-8";
        if (dot && streq(dot, ".css"))
                return "text/css; charset=utf-8";
        return "application/octet-stream";
}

static const WebAsset *web_asset_for(const char *url) {
        const char *name;

        if (streq(url, "/"))
                name = "index.html";
        else if (startswith(url, "/ui/"))
                name = url + 4;
        else
                return NULL;
        for (const WebAsset *a = web_assets; a->name; a++)
                if (streq(a->name, name))
                        return a;
        return NULL;
}

static enum MHD_Result web_reply(Http *h, struct MHD_Connection *c, const WebAsset *a) {
        struct MHD_Response *resp;
        enum MHD_Result r;

        resp = MHD_create_response_from_buffer(a->size, (void *) a->data, MHD_RESPMEM_PERSISTENT);
        if (!resp)
                return MHD_NO;
        (void) MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, web_content_type(a->name));
        (void) MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
        /* Revalidated every time: a daemon upgraded under an open tab serves its new script on the next load. */
        (void) MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
        (void) MHD_add_response_header(resp, "Content-Security-Policy", WEB_CSP);
        (void) MHD_add_response_header(resp, "X-Frame-Options", "DENY");
        (void) MHD_add_response_header(resp, "Referrer-Policy", "no-referrer");
        r = MHD_queue_response(c, MHD_HTTP_OK, resp);
        MHD_destroy_response(resp);
        metrics_count_http(h->daemon.metrics, MHD_HTTP_OK);
        return r;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_data_size,
                                  void **con_cls) {
        HttpListener *l = cls;
        Http *h = l->http;

        /* Answering on the first call makes MHD close the connection after the reply; the second call keeps it
         * alive for the next request. A client without the token is answered, and let go, as soon as its head is
         * in: it holds no connection while it sends a body. */
        if (!*con_cls) {
                *con_cls = &http_request_seen;
                if (!head_is_whole(c, method, version))
                        return http_reply_error(h, c, MHD_HTTP_BAD_REQUEST,
                                                "a NUL byte (or whitespace other than one space after a colon) in "
                                                "the request line or headers");
                const WebAsset *asset = web_asset_for(url);
                if (asset && (streq(method, MHD_HTTP_METHOD_GET) || streq(method, MHD_HTTP_METHOD_HEAD)))
                        return web_reply(h, c, asset);

                bool missing;
                HttpScope scope = authorized(l, c, &missing);

                if (scope == HTTP_SCOPE_NONE && streq(url, API_ROUTE_HEALTHZ) &&
                    (streq(method, MHD_HTTP_METHOD_GET) || streq(method, MHD_HTTP_METHOD_HEAD)))
                        return h->daemon.handler.health_public(h->daemon.handler.userdata, h, c); /* whether it is up reveals nothing */
                if (scope == HTTP_SCOPE_NONE) {
                        auth_failed(l, c, missing ? HTTP_AUTH_FAILURE_MISSING : HTTP_AUTH_FAILURE_WRONG, url,
                                    MHD_HTTP_UNAUTHORIZED);
                        return http_reply_error(h, c, MHD_HTTP_UNAUTHORIZED,
                                                l->http->token[0] || l->http->read_token[0]
                                                        ? "missing or wrong bearer token"
                                                        : "no token configured: this listener serves nothing");
                }
                /* A read token (a Prometheus credential) never stops a thread. */
                if (scope < HTTP_SCOPE_CAPTURE && startswith(url, API_ROUTE_STACKS)) {
                        auth_failed(l, c, HTTP_AUTH_FAILURE_SCOPE, url, MHD_HTTP_FORBIDDEN);
                        return http_reply_error(h, c, MHD_HTTP_FORBIDDEN,
                                                "this token may read, not capture: /stacks needs the capture token "
                                                "(http.token_file)");
                }
                return MHD_YES;
        }
        if (*con_cls != &http_request_seen)
                return h->daemon.handler.resumed(h->daemon.handler.userdata, h, c, *con_cls);
        if (*upload_data_size > 0) {
                *upload_data_size = 0; /* a body is never read (every route is a GET), but it counts against the
                                        * head's deadline: the request is whole only once it is all in */
                return MHD_YES;
        }
        http_admit_head_done(connection_admit(c));
        if (strlen(url) > API_URL_MAX)
                return http_reply_error(h, c, MHD_HTTP_URI_TOO_LONG, "request URL longer than %d bytes", API_URL_MAX);
        if (request_has_nul(c))
                return http_reply_error(h, c, MHD_HTTP_BAD_REQUEST, "a NUL byte in the request's path, query or headers");
        return h->daemon.handler.dispatch(h->daemon.handler.userdata, h, c, url, method, con_cls);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
        HttpListener *l = cls;

        http_admit_waiting(connection_admit(c), now_usec(CLOCK_MONOTONIC));
        if (*con_cls && *con_cls != &http_request_seen) {
                l->http->daemon.handler.request_done(l->http->daemon.handler.userdata, *con_cls);
                *con_cls = NULL;
        }
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap) {
        char msg[512];
        size_t n;

        vsnprintf(msg, sizeof msg, fmt, ap);
        n = strlen(msg);
        while (n > 0 && msg[n - 1] == '\n')
                msg[--n] = 0;
        log_debug("libmicrohttpd: %s", msg);
}

static DaemonView http_view(Http *h) {
        DaemonView v;

        h->daemon.view(h->daemon.userdata, &v);
        return v;
}

static const Config *http_config(Http *h) {
        return http_view(h).config;
}

/* ---- listeners ---- */

static int listener_add(Http *h, int fd, bool tcp, const char *name) {
        _cleanup_close_ int sfd = fd;
        const Config *c = http_config(h);
        HttpListener *l;
        const union MHD_DaemonInfo *info;
        int r;

        if (fcntl(sfd, F_SETFL, fcntl(sfd, F_GETFL) | O_NONBLOCK) < 0)
                return log_error_errno(errno, "Failed to make %s non-blocking: %m", name);
        if (!GREEDY_REALLOC(h->listeners, h->n_listeners_allocated, h->n_listeners + 1))
                return log_oom();
        l = calloc(1, sizeof *l);
        if (!l)
                return log_oom();
        l->http = h;
        l->tcp = tcp;
        l->max_connections = c->http_max_connections + HTTP_RESERVE_CONNECTIONS;
        http_admit_init(&l->admit, &(HttpAdmitLimits) {
                .max_connections = c->http_max_connections,
                .per_peer = HTTP_PER_PEER_CONNECTIONS,
                .head_deadline_usec = MIN(HTTP_HEAD_DEADLINE_USEC, c->http_timeout_usec),
                .min_age_usec = HTTP_CUT_MIN_AGE_USEC,
        });
        snprintf(l->name, sizeof l->name, "%s", name);
        h->listeners[h->n_listeners++] = l;

        bool tls = tcp && h->tls;
        l->tls = tls;
        /* HTTPS with the PEM files of the latest load, checked by http_tls_read() (GnuTLS, in libmicrohttpd, which
         * reads them into its credentials at start). Without TLS the list ends at once: libmicrohttpd logs every
         * HTTPS option it is given for a plain listener. */
        struct MHD_OptionItem tls_options[] = {
                { tls ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, 0, tls ? h->tls->cert_pem : NULL },
                { MHD_OPTION_HTTPS_MEM_KEY, 0, tls ? h->tls->key_pem : NULL },
                { MHD_OPTION_END, 0, NULL },
        };

        /* The logger first, so that libmicrohttpd's messages about the other options reach it too. */
        l->mhd = MHD_start_daemon(
                MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG | (tls ? MHD_USE_TLS : 0), 0, NULL, NULL,
                on_request, l,
                MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, NULL,
                MHD_OPTION_ARRAY, tls_options,
                MHD_OPTION_LISTEN_SOCKET, sfd,
                MHD_OPTION_CONNECTION_LIMIT, l->max_connections,
                MHD_OPTION_CONNECTION_TIMEOUT, (unsigned) DIV_ROUND_UP(c->http_timeout_usec, USEC_PER_SEC),
                MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t) HTTP_CONNECTION_MEMORY,
                MHD_OPTION_NOTIFY_CONNECTION, on_connection, l,
                MHD_OPTION_URI_LOG_CALLBACK, on_uri, NULL,
                MHD_OPTION_NOTIFY_COMPLETED, on_completed, l,
                MHD_OPTION_UNESCAPE_CALLBACK, on_unescape, NULL,
                MHD_OPTION_END);
        if (!l->mhd)
                return log_error_errno(SYNTHETIC_ERRNO(EINVAL), "Failed to start the HTTP server on %s", name);
        TAKE_FD(sfd); /* MHD closes it */
        info = MHD_get_daemon_info(l->mhd, MHD_DAEMON_INFO_EPOLL_FD);
        if (!info)
                return log_error_errno(SYNTHETIC_ERRNO(EINVAL), "libmicrohttpd has no epoll fd for %s", name);
        r = sd_event_add_io(h->daemon.event, &l->io, info->epoll_fd, EPOLLIN, on_io, l);
        if (r >= 0)
                /* Accuracy 1 us, not sd-event's default of 250 ms: http_kick() sets this timer to answer a request
                 * whose capture just ended, and the default let that answer wait up to 250 ms. */
                r = sd_event_add_time(h->daemon.event, &l->timer, CLOCK_MONOTONIC, UINT64_MAX, 1, on_timer, l);
        if (r >= 0)
                r = sd_event_source_set_enabled(l->timer, SD_EVENT_OFF);
        if (r >= 0)
                r = sd_event_add_time(h->daemon.event, &l->reaper, CLOCK_MONOTONIC, UINT64_MAX, 0, on_reaper, l);
        if (r >= 0)
                r = sd_event_source_set_enabled(l->reaper, SD_EVENT_OFF);
        if (r < 0)
                return log_error_errno(r, "Failed to add the HTTP server on %s to the event loop: %m", name);
        if (tcp && startswith(name, "http://"))
                page_link_set_base(name + strlen("http://"), tls);
        if (tls && startswith(name, "http://"))
                log_info("Listening on https://%s (TLS; bearer token required)", name + strlen("http://"));
        else
                log_info("Listening on %s%s", name, tcp ? " (bearer token required)" : "");
        return 0;
}

/* Whether something answers on the unix socket PATH (another daemon): then we must not take it over. */
static bool unix_socket_alive(const struct sockaddr_un *sa) {
        _cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

        return fd >= 0 && connect(fd, (const struct sockaddr *) sa, sizeof *sa) == 0;
}

static int mkdir_parents(const char *path, mode_t mode) {
        char buf[sizeof ((struct sockaddr_un *) NULL)->sun_path];

        snprintf(buf, sizeof buf, "%s", path);
        for (char *p = buf + 1; (p = strchr(p, '/')); p++) {
                *p = 0;
                if (mkdir(buf, mode) < 0 && errno != EEXIST)
                        return -errno;
                *p = '/';
        }
        return 0;
}

static int listen_unix(Http *h) {
        const Config *c = http_config(h);
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        _cleanup_close_ int fd = -EBADF;
        struct stat st;
        mode_t old;
        int r;

        if (strlen(c->http_socket) >= sizeof sa.sun_path)
                return log_error_errno(SYNTHETIC_ERRNO(ENAMETOOLONG), "Socket path '%s' is too long", c->http_socket);
        memcpy(sa.sun_path, c->http_socket, strlen(c->http_socket));
        r = mkdir_parents(c->http_socket, 0755);
        if (r < 0)
                return log_error_errno(r, "Failed to create the directory of '%s': %m", c->http_socket);
        if (lstat(c->http_socket, &st) == 0) {
                if (!S_ISSOCK(st.st_mode))
                        return log_error_errno(SYNTHETIC_ERRNO(EEXIST), "'%s' exists and is not a socket; not "
                                               "replacing it", c->http_socket);
                if (unix_socket_alive(&sa))
                        return log_error_errno(SYNTHETIC_ERRNO(EADDRINUSE), "Another server is listening on '%s' "
                                               "(is stackwatchd already running?)", c->http_socket);
                (void) unlink(c->http_socket); /* stale, from a daemon that died */
        }
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return log_error_errno(errno, "Failed to create a unix socket: %m");
        /* Born with no more than the configured mode: no window in which others may connect. */
        old = umask(0777 & ~(mode_t) c->http_socket_mode);
        r = bind(fd, (struct sockaddr *) &sa, sizeof sa);
        umask(old);
        if (r < 0)
                return log_error_errno(errno, "Failed to bind '%s': %m", c->http_socket);
        h->socket_path = strdup(c->http_socket);
        if (!h->socket_path)
                return log_oom();
        if (chmod(c->http_socket, c->http_socket_mode) < 0)
                return log_error_errno(errno, "Failed to set the mode of '%s': %m", c->http_socket);
        if (c->has_http_socket_group && chown(c->http_socket, (uid_t) -1, c->http_socket_gid) < 0)
                return log_error_errno(errno, "Failed to give '%s' to group %u: %m", c->http_socket,
                                       (unsigned) c->http_socket_gid);
        if (listen(fd, SOMAXCONN) < 0)
                return log_error_errno(errno, "Failed to listen on '%s': %m", c->http_socket);
        return listener_add(h, TAKE_FD(fd), false, c->http_socket);
}

static void format_inet(const struct sockaddr_storage *ss, char *buf, size_t size) {
        char addr[INET6_ADDRSTRLEN] = "?";

        if (ss->ss_family == AF_INET6) {
                const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *) ss;
                inet_ntop(AF_INET6, &in6->sin6_addr, addr, sizeof addr);
                snprintf(buf, size, "http://[%s]:%u", addr, ntohs(in6->sin6_port));
        } else {
                const struct sockaddr_in *in = (const struct sockaddr_in *) ss;
                inet_ntop(AF_INET, &in->sin_addr, addr, sizeof addr);
                snprintf(buf, size, "http://%s:%u", addr, ntohs(in->sin_port));
        }
}

static int listen_tcp(Http *h) {
        const Config *c = http_config(h);
        struct sockaddr_storage ss;
        socklen_t len;
        _cleanup_close_ int fd = -EBADF;
        char name[128];
        int one = 1;

        if (config_parse_listen(c->http_listen, &ss, &len) < 0)
                return log_error_errno(SYNTHETIC_ERRNO(EINVAL), "Invalid listen address '%s'", c->http_listen);
        fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return log_error_errno(errno, "Failed to create a TCP socket: %m");
        (void) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, (struct sockaddr *) &ss, len) < 0)
                return log_error_errno(errno, "Failed to bind %s: %m", c->http_listen);
        if (listen(fd, SOMAXCONN) < 0)
                return log_error_errno(errno, "Failed to listen on %s: %m", c->http_listen);
        len = sizeof ss;
        if (getsockname(fd, (struct sockaddr *) &ss, &len) < 0)
                return log_error_errno(errno, "Failed to get the address of %s: %m", c->http_listen);
        format_inet(&ss, name, sizeof name);
        return listener_add(h, TAKE_FD(fd), true, name);
}

static void tokens_free(char *tokens[static TOKEN_FILE_TOKENS_MAX]) {
        for (size_t i = 0; i < TOKEN_FILE_TOKENS_MAX; i++)
                if (tokens[i]) {
                        explicit_bzero(tokens[i], strlen(tokens[i]));
                        tokens[i] = mfree(tokens[i]);
                }
}

/* The tokens: a line each of a file only root (or the daemon's user) should read, two while one is rotated. */
static int read_tokens(const char *path, char *ret[static TOKEN_FILE_TOKENS_MAX]) {
        struct stat st;
        size_t n;
        int r;

        if (stat(path, &st) == 0 && (st.st_mode & 0004))
                log_warning("Token file '%s' is readable by everyone; anyone on this machine can use the API", path);
        r = token_file_read_all(path, ret, &n);
        if (r == -ENOMEM)
                return log_oom();
        if (token_file_strerror(r))
                return log_error_errno(r, "Token file '%s' is not usable: %s", path, token_file_strerror(r));
        if (r < 0)
                return log_error_errno(r, "Failed to read the token file '%s': %m", path);
        if (n > 1)
                log_info("Token file '%s' holds %zu tokens: each is accepted (a rotation; remove the old one when "
                         "every client has the new one)", path, n);
        return 0;
}

int http_tls_load(const Config *c, HttpTls **ret, char **ret_error) {
        _cleanup_free_ char *error = NULL;
        int r;

        *ret = NULL;
        if (!c->http_tls_cert)
                return 0;
        r = http_tls_read(c->http_tls_cert, c->http_tls_key, ret, &error);
        if (r == -ENOMEM || (r < 0 && !error))
                return log_oom();
        if (r < 0) {
                log_error("%s", error);
                if (ret_error)
                        *ret_error = TAKE_PTR(error);
                return r;
        }
        return 0;
}

int http_new(const HttpDaemon *d, Http **ret) {
        _cleanup_(http_freep) Http *h = NULL;
        const Config *c;
        int n, r;

        h = calloc(1, sizeof *h);
        if (!h)
                return log_oom();
        h->daemon = *d;
        c = http_config(h);
        if (c->http_token_file) {
                r = read_tokens(c->http_token_file, h->token);
                if (r < 0)
                        return r;
        }
        if (c->http_read_token_file) {
                r = read_tokens(c->http_read_token_file, h->read_token);
                if (r < 0)
                        return r;
        }
        r = http_tls_load(c, &h->tls, /* ret_error= */ NULL);
        if (r < 0)
                return r;
        r = sd_event_add_time(h->daemon.event, &h->auth_log_timer, CLOCK_MONOTONIC, UINT64_MAX, USEC_PER_SEC,
                              on_auth_log_timer, h);
        if (r >= 0)
                r = sd_event_source_set_enabled(h->auth_log_timer, SD_EVENT_OFF);
        if (r < 0)
                return log_error_errno(r, "Failed to add a timer to the event loop: %m");

        /* Sockets passed by systemd (stackwatchd.socket) replace the configured ones. */
        n = sd_listen_fds(true);
        if (n < 0)
                return log_error_errno(n, "Failed to read the sockets passed by systemd: %m");
        for (int i = 0; i < n; i++) {
                int fd = SD_LISTEN_FDS_START + i;
                char name[128];

                if (sd_is_socket_unix(fd, SOCK_STREAM, 1, NULL, 0) > 0) {
                        snprintf(name, sizeof name, "a unix socket passed by systemd (fd %d)", fd);
                        r = listener_add(h, fd, false, name);
                } else if (sd_is_socket_inet(fd, AF_UNSPEC, SOCK_STREAM, 1, 0) > 0) {
                        struct sockaddr_storage ss;
                        socklen_t len = sizeof ss;

                        if (getsockname(fd, (struct sockaddr *) &ss, &len) < 0)
                                return log_error_errno(errno, "Failed to get the address of fd %d: %m", fd);
                        format_inet(&ss, name, sizeof name);
                        if (!h->token[0])
                                log_warning("%s was passed by systemd but http.token_file is not set: every request "
                                            "on it gets 401", name);
                        r = listener_add(h, fd, true, name);
                } else {
                        log_warning("Ignoring fd %d passed by systemd: not a listening stream socket", fd);
                        (void) close(fd);
                        continue;
                }
                if (r < 0)
                        return r;
        }
        if (n == 0) {
                if (c->http_socket) {
                        r = listen_unix(h);
                        if (r < 0)
                                return r;
                }
                if (c->http_listen) {
                        r = listen_tcp(h);
                        if (r < 0)
                                return r;
                }
        }
        *ret = TAKE_PTR(h);
        return 0;
}

Http *http_free(Http *h) {
        if (!h)
                return NULL;
        /* MHD wants suspended connections resumed before it stops; they are answered 503 or dropped. */
        h->daemon.handler.cancel_all(h->daemon.handler.userdata);
        for (size_t i = 0; i < h->n_listeners; i++)
                listener_free(h->listeners[i]);
        free(h->listeners);
        if (h->socket_path)
                (void) unlink(h->socket_path);
        free(h->socket_path);
        tokens_free(h->token);
        tokens_free(h->read_token);
        http_tls_free(h->tls);
        sd_event_source_disable_unref(h->auth_log_timer);
        free(h);
        return NULL;
}

/* A token file read again on reload: new tokens, none when the key is gone, the previous ones when unreadable. */
static int reload_tokens(const char *path, char *tokens[static TOKEN_FILE_TOKENS_MAX]) {
        char *t[TOKEN_FILE_TOKENS_MAX] = {};
        int r;

        if (!path) {
                tokens_free(tokens);
                return 0;
        }
        r = read_tokens(path, t);
        if (r < 0) {
                log_warning("Keeping the previous token(s) of '%s'", path);
                return r;
        }
        tokens_free(tokens);
        memcpy(tokens, t, sizeof t);
        return 0;
}

static bool tls_same(const HttpTls *a, const HttpTls *b) {
        if (!a || !b)
                return a == b;
        return streq(a->cert_pem, b->cert_pem) && streq(a->key_pem, b->key_pem);
}

/* Give the HTTPS listeners the new certificate: libmicrohttpd reads it only when a server starts, so each one hands
 * its listening socket to a new server with the new pair, and answers the connections it has until they end. New
 * connections get the new certificate at once, and none is dropped. */
static int restart_tls_listeners(Http *h) {
        size_t n = h->n_listeners;
        int ret = 0;

        for (size_t i = 0; i < n; i++) {
                HttpListener *old = h->listeners[i];
                MHD_socket fd;
                char name[sizeof old->name];
                int r;

                if (!old->tls || old->draining)
                        continue;
                fd = MHD_quiesce_daemon(old->mhd);
                if (fd == MHD_INVALID_SOCKET) {
                        log_error("Failed to take the listening socket of %s back from libmicrohttpd; it keeps the "
                                  "previous certificate", old->name);
                        ret = -EIO;
                        continue;
                }
                old->draining = true;
                snprintf(name, sizeof name, "%s", old->name);
                r = listener_add(h, fd, true, name);
                if (r < 0)
                        ret = r; /* logged; the socket is closed, and the old server answers what it has */
                else
                        log_info("%s: new TLS certificate in use for new connections", name);
        }
        /* The drained ones without a connection go now: nothing else would wake them. */
        for (size_t i = 0; i < h->n_listeners;) {
                HttpListener *l = h->listeners[i];

                if (l->draining && listener_connections(l) == 0)
                        listener_drop(l);
                else
                        i++;
        }
        return ret;
}

int http_reload(Http *h, const Config *old, const Config *new, HttpTls *tls) {
        _cleanup_(http_tls_freep) HttpTls *t = tls;
        int r, ret = 0;

        if (!streq_ptr(old->http_socket, new->http_socket) || !streq_ptr(old->http_listen, new->http_listen) ||
            old->http_socket_mode != new->http_socket_mode || old->http_max_connections != new->http_max_connections ||
            old->http_timeout_usec != new->http_timeout_usec)
                log_warning("The http section changed; listeners keep their old settings until stackwatchd restarts");
        if (!h->tls != !t)
                log_warning("TLS was turned %s; listeners keep their old settings until stackwatchd restarts",
                            t ? "on" : "off");
        else if (t && !tls_same(h->tls, t)) {
                http_tls_free(h->tls);
                h->tls = TAKE_PTR(t);
                ret = restart_tls_listeners(h);
        }
        r = reload_tokens(new->http_token_file, h->token);
        if (r < 0 && ret >= 0)
                ret = r;
        r = reload_tokens(new->http_read_token_file, h->read_token);
        if (r < 0 && ret >= 0)
                ret = r;
        return ret;
}
