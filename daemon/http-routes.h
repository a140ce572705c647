/* http-routes.h: the route table and its handlers: /stacks/<pid> (a live capture through the rules' budget, the
 * connection suspended meanwhile), /processes, /snapshots[/<id>], /rules, /metrics, /healthz. The manager wires
 * them to the transport (http.h) with http_routes_handler(). */
#pragma once

#include <sys/types.h>

#include <systemd/sd-event.h>

#include "base/macro.h"
#include "capture-job.h"
#include "daemon-view.h"
#include "http.h"
#include "metrics.h"

typedef struct HttpRoutes HttpRoutes;

/* What the routes read of the daemon and the one thing they ask of it, handed over by the manager. */
typedef struct HttpRoutesDaemon {
        sd_event *event;                /* for the render children of /snapshots/ID */
        Metrics *metrics;               /* replies the routes queue themselves are counted here */
        void *userdata;                 /* for the two functions below */
        /* The daemon's state now (valid until the event loop runs again). */
        void (*view)(void *userdata, DaemonView *ret);
        /* A live capture for a request: PID (TID only, when > 0; with its wait chain PEERS hops deep, and the
         * peers' stacks, when PEERS > 0) rendered in FORMAT (an SVG: PICTURE) into OUTPUT_FD, not archived, through
         * the same budget
         * as the rules. DONE runs when it ended. -EAGAIN: the per-minute budget is spent (*RET_RETRY_USEC says for
         * how long); -EBUSY: too many captures in flight; -ESHUTDOWN: stopping. */
        int (*capture_live)(void *userdata, pid_t pid, pid_t tid, unsigned peers, int output_fd,
                            RenderFormat format, SvgPicture picture, CaptureJobDone done, void *done_userdata,
                            uint64_t *ret_retry_usec);
        unsigned captures_max;          /* in flight at once, for the 429 message */
} HttpRoutesDaemon;

int http_routes_new(const HttpRoutesDaemon *d, HttpRoutes **ret);
/* Free the requests still held (after http_free(), which resumed and answered them) and the caches; NULL-safe. */
HttpRoutes *http_routes_free(HttpRoutes *rt);
DEFINE_TRIVIAL_CLEANUP_FUNC(HttpRoutes *, http_routes_free);
/* The handler to give http_new(): every request that passed the transport's checks is answered here. */
HttpHandler http_routes_handler(HttpRoutes *rt);
