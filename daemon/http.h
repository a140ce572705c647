/* http.h: the HTTP API (libmicrohttpd in epoll mode, driven by the daemon's sd-event loop): listeners (a unix
 * socket by default, optional TCP with a bearer token, or sockets passed by systemd), limits, and the replies the
 * routes in http-routes.c build. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include <json-c/json.h>
#include <microhttpd.h>
#include <sys/types.h>

#include <systemd/sd-event.h>

#include "capture-job.h"
#include "daemon-view.h"
#include "base/macro.h"
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

/* What the API reads of the daemon and the one thing it asks of it, handed over by the manager at http_new(). */
typedef struct HttpDaemon {
        sd_event *event;
        Metrics *metrics;               /* every reply is counted here */
        void *userdata;                 /* for the two functions below */
        /* The daemon's state now (valid until the event loop runs again). */
        void (*view)(void *userdata, DaemonView *ret);
        /* A live capture for a request: PID (TID only, when > 0; with its wait chain PEERS hops deep, and the
         * peers' stacks, when PEERS > 0) rendered in FORMAT into OUTPUT_FD, not archived, through the same budget
         * as the rules. DONE runs when it ended. -EAGAIN: the per-minute budget is spent (*RET_RETRY_USEC says for
         * how long); -EBUSY: too many captures in flight; -ESHUTDOWN: stopping. */
        int (*capture_live)(void *userdata, pid_t pid, pid_t tid, unsigned peers, int output_fd,
                            CaptureJobFormat format, CaptureJobDone done, void *done_userdata,
                            uint64_t *ret_retry_usec);
        unsigned captures_max;          /* in flight at once, for the 429 message */
} HttpDaemon;

/* Open the listeners the configuration asks for (or the sockets systemd passed) and hook them into D's loop. */
int http_new(const HttpDaemon *d, Http **ret);
/* Close the listeners (answering any request still waiting for a capture with 503) and free; NULL-safe. */
Http *http_free(Http *h);
DEFINE_TRIVIAL_CLEANUP_FUNC(Http *, http_free);
/* After a reload: read the token file again; listener changes need a restart (logged). */
int http_reload(Http *h, const Config *old, const Config *new);

/* ---- for http-routes.c ---- */

/* A request waiting on a live capture (its connection is suspended until the capture ends). */
typedef struct HttpPending HttpPending;

/* A reply body kept until the next scan. */
typedef struct HttpCachedBody {
        char *body;
        size_t len;
        uint64_t scan;                  /* ScanStats.scans when it was built */
} HttpCachedBody;

struct Http {
        HttpDaemon daemon;
        HttpListener **listeners;
        size_t n_listeners, n_listeners_allocated;
        char *token;                    /* for TCP listeners, the capture scope (every route); NULL: none */
        char *read_token;               /* the read scope: every route but /stacks; NULL: none */
        char *tls_cert, *tls_key;       /* PEM, read at start: HTTPS on TCP listeners; NULL: plain */
        char *socket_path;              /* the unix socket we bound, removed at exit */
        HttpPending *pending;           /* suspended requests, a list */
        /* /processes without filters, default and ?all=1, serialized once per scan: at 5k threads a body is
         * ~1 MB and ~40 ms of json-c, which many clients must not multiply. */
        HttpCachedBody processes_cache[2];
};

/* Queue replies. Every reply is counted in the metrics; errors are {"error": …, "status": …}. */
enum MHD_Result http_reply(Http *h, struct MHD_Connection *c, unsigned status, const char *content_type,
                           const char *body, size_t len);
enum MHD_Result http_reply_json(Http *h, struct MHD_Connection *c, unsigned status, json_object *j);
enum MHD_Result http_reply_error(Http *h, struct MHD_Connection *c, unsigned status, const char *fmt, ...)
        _printf_(4, 5);
/* 429 with Retry-After (whole seconds, rounded up). */
enum MHD_Result http_reply_retry(Http *h, struct MHD_Connection *c, uint64_t retry_usec, const char *fmt, ...)
        _printf_(4, 5);

/* The daemon's state now, from HttpDaemon.view. */
DaemonView http_view(Http *h);

/* The value of MHD's per-request pointer for a request that holds no state of a route. */
extern int http_request_seen;

/* Answer one request (method and path already checked for length and, on TCP, the token). *CON_CLS is MHD's
 * per-request pointer: a route that suspends the connection stores its state there. */
enum MHD_Result http_routes_dispatch(Http *h, struct MHD_Connection *c, const char *url, const char *method,
                                     void **con_cls);
/* Called again for a request a route suspended, once it was resumed; and when MHD is done with it. */
enum MHD_Result http_routes_resumed(Http *h, struct MHD_Connection *c, HttpPending *p);
/* GET /healthz for a client without the token (a load balancer, an uptime check): only {"status"}, 200 or 503. */
enum MHD_Result http_routes_health_public(Http *h, struct MHD_Connection *c);
void http_pending_free(Http *h, HttpPending *p);
/* At shutdown: mark every waiting request cancelled and resume its connection. */
void http_routes_cancel_all(Http *h);
/* The connection of P was resumed: run MHD soon. */
void http_kick(Http *h);
