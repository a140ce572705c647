/* http.h: the HTTP API (libmicrohttpd in epoll mode, driven by the daemon's sd-event loop): listeners (a unix
 * socket by default, optional TCP with a bearer token, or sockets passed by systemd), limits, and the replies a
 * handler builds. The routes are not known here: the manager hands their handler (http-routes.h) to http_new(). */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include <json-c/json.h>
#include <microhttpd.h>
#include <sys/types.h>

#include <systemd/sd-event.h>

#include "base/macro.h"
#include "daemon-view.h"
#include "http-tls.h"
#include "metrics.h"

typedef struct Http Http;
typedef struct HttpListener HttpListener;

/* Bytes MHD may use per connection (request line and headers included): a longer request gets 414/431. */
#define HTTP_CONNECTION_MEMORY (32U * 1024U)
/* Connections one peer keeps while it waits for heads: a TCP address, or a uid on the unix socket (http-admit.h). */
#define HTTP_PER_PEER_CONNECTIONS 16U
/* Connections libmicrohttpd may hold past http.max_connections: room for newcomers while the longest waits are
 * cut, who would otherwise wait in the listen backlog. */
#define HTTP_RESERVE_CONNECTIONS 8U
/* The longest a request head may take, from the connection's start or its previous reply, whatever its pace
 * (http.timeout, when shorter). A connection over a limit is cut once it waited HTTP_CUT_MIN_AGE_USEC for a head:
 * a good client's head is in by then. */
#define HTTP_HEAD_DEADLINE_USEC (5ULL * USEC_PER_SEC)
#define HTTP_CUT_MIN_AGE_USEC (250ULL * USEC_PER_MSEC)

/* What the transport hands every request to: the route table (http-routes.h), wired by the manager. The transport
 * knows no route; it checks the head, the token and the scope, then asks these. */
typedef struct HttpHandler {
        void *userdata;
        /* Answer one request (method and path already checked for length and, on TCP, the token). *CON_CLS is
         * MHD's per-request pointer: a handler that suspends the connection stores its request's state there. */
        enum MHD_Result (*dispatch)(void *userdata, Http *h, struct MHD_Connection *c, const char *url,
                                    const char *method, void **con_cls);
        /* Called again for a request the handler suspended, once it was resumed (REQUEST: its *CON_CLS). */
        enum MHD_Result (*resumed)(void *userdata, Http *h, struct MHD_Connection *c, void *request);
        /* GET /healthz for a client without the token (a load balancer, an uptime check): only {"status"}. */
        enum MHD_Result (*health_public)(void *userdata, Http *h, struct MHD_Connection *c);
        /* MHD is done with a request whose state the handler kept. */
        void (*request_done)(void *userdata, void *request);
        /* At shutdown: mark every suspended request cancelled and resume its connection (MHD wants them resumed
         * before it stops). */
        void (*cancel_all)(void *userdata);
} HttpHandler;

/* What the transport reads of the daemon, handed over by the manager at http_new(). */
typedef struct HttpDaemon {
        sd_event *event;
        Metrics *metrics;               /* every reply is counted here */
        void *userdata;                 /* for view() */
        /* The daemon's state now (valid until the event loop runs again): the configuration of the listeners. */
        void (*view)(void *userdata, DaemonView *ret);
        HttpHandler handler;
} HttpDaemon;

/* Open the listeners the configuration asks for (or the sockets systemd passed) and hook them into D's loop. */
int http_new(const HttpDaemon *d, Http **ret);
/* Close the listeners (answering any request still waiting for a capture with 503) and free; NULL-safe. */
Http *http_free(Http *h);
DEFINE_TRIVIAL_CLEANUP_FUNC(Http *, http_free);
/* The HTTPS pair C names (http.tls_cert, http.tls_key), read and checked (http-tls.h), the error logged (and, with
 * RET_ERROR, handed over: the reload reports it): *RET is NULL without TLS. At start, at reload before the new
 * configuration is taken (a bad pair refuses the reload), and by --check-config. */
int http_tls_load(const Config *c, HttpTls **ret, char **ret_error);
/* After a reload: read the token files again; a new certificate and key (TLS, from http_tls_load(), taken over) go
 * to new connections at once (each HTTPS listener's socket moves to a server with the new pair, the old one ends
 * with its last connection); other listener changes need a restart (logged). */
int http_reload(Http *h, const Config *old, const Config *new, HttpTls *tls);

/* ---- for the handler ---- */

/* Queue replies. Every reply is counted in the metrics; errors are {"error": …, "status": …}. */
enum MHD_Result http_reply(Http *h, struct MHD_Connection *c, unsigned status, const char *content_type,
                           const char *body, size_t len);
enum MHD_Result http_reply_json(Http *h, struct MHD_Connection *c, unsigned status, json_object *j);
enum MHD_Result http_reply_error(Http *h, struct MHD_Connection *c, unsigned status, const char *fmt, ...)
        _printf_(4, 5);
/* 429 with Retry-After (whole seconds, rounded up). */
enum MHD_Result http_reply_retry(Http *h, struct MHD_Connection *c, uint64_t retry_usec, const char *fmt, ...)
        _printf_(4, 5);

/* A connection the handler suspended was resumed: run MHD soon. */
void http_kick(Http *h);
