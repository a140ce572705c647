/* http-admit.c: the connection table's policy (see http-admit.h); http.c feeds it libmicrohttpd's connection
 * events. Tables are small (http.max_connections, 64 by default), so every decision is a walk of the list. */
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "base/macro.h"
#include "http-admit.h"

struct HttpAdmitConn {
        HttpAdmitConn *next, *prev;
        int fd;
        HttpPeer peer;
        uint64_t waiting_since;         /* waiting for a head since (CLOCK_MONOTONIC); 0: a request is in progress */
        bool cut;
};

static void cut_by_shutdown(int fd) {
        (void) shutdown(fd, SHUT_RDWR);
}

void http_admit_init(HttpAdmit *a, const HttpAdmitLimits *limits) {
        *a = (HttpAdmit) { .limits = *limits, .cut_fd = cut_by_shutdown };
}

void http_admit_done(HttpAdmit *a) {
        while (a->conns)
                http_admit_remove(a, a->conns);
}

static bool same_peer(const HttpPeer *x, const HttpPeer *y) {
        return x->family == y->family && memcmp(x->addr, y->addr, sizeof x->addr) == 0;
}

/* How long C has waited for a head at NOW (0 for a clock that went back: young, never cut for its age). */
static uint64_t waited(const HttpAdmitConn *c, uint64_t now) {
        return now > c->waiting_since ? now - c->waiting_since : 0;
}

static void cut(HttpAdmit *a, HttpAdmitConn *c, HttpCut why) {
        c->cut = true;
        a->n_live--;
        a->cut[why]++;
        a->cut_fd(c->fd);
}

/* The connection that has waited longest for a head, at least min_age_usec; of PEER only, when given. */
static HttpAdmitConn *oldest_waiting(HttpAdmit *a, const HttpPeer *peer, uint64_t now) {
        HttpAdmitConn *best = NULL;

        for (HttpAdmitConn *c = a->conns; c; c = c->next) {
                if (c->cut || c->waiting_since == 0 || (peer && !same_peer(&c->peer, peer)))
                        continue;
                if (waited(c, now) < a->limits.min_age_usec)
                        continue;
                if (!best || c->waiting_since < best->waiting_since)
                        best = c;
        }
        return best;
}

HttpAdmitConn *http_admit_add(HttpAdmit *a, int fd, const HttpPeer *peer, uint64_t now) {
        HttpAdmitConn *c = calloc(1, sizeof *c);

        if (!c)
                return NULL;
        *c = (HttpAdmitConn) { .fd = fd, .peer = *peer, .waiting_since = MAX(now, 1U), .next = a->conns };
        if (a->conns)
                a->conns->prev = c;
        a->conns = c;
        a->n_live++;
        return c;
}

void http_admit_remove(HttpAdmit *a, HttpAdmitConn *c) {
        if (!c)
                return;
        if (c->prev)
                c->prev->next = c->next;
        else
                a->conns = c->next;
        if (c->next)
                c->next->prev = c->prev;
        if (!c->cut)
                a->n_live--;
        free(c);
}

void http_admit_head_done(HttpAdmitConn *c) {
        if (c)
                c->waiting_since = 0;
}

void http_admit_waiting(HttpAdmitConn *c, uint64_t now) {
        if (c)
                c->waiting_since = MAX(now, 1U);
}

static unsigned live_of_peer(const HttpAdmit *a, const HttpPeer *peer) {
        unsigned n = 0;

        for (const HttpAdmitConn *c = a->conns; c; c = c->next)
                n += !c->cut && same_peer(&c->peer, peer);
        return n;
}

/* Bring every peer back to its share, and the table back to max_connections, by cutting the longest waits for a
 * head among the connections at least min_age_usec old. Whether anything is still over a limit. */
static bool enforce_limits(HttpAdmit *a, uint64_t now) {
        bool over = false;
        HttpAdmitConn *victim;

        /* This runs after every libmicrohttpd run: with no more connections than one peer may hold, no peer is
         * over its share, and the walk of every peer is skipped. */
        for (HttpAdmitConn *c = a->n_live > a->limits.per_peer ? a->conns : NULL; c; c = c->next) {
                if (c->cut)
                        continue;
                for (unsigned n = live_of_peer(a, &c->peer); n > a->limits.per_peer; n--) {
                        victim = oldest_waiting(a, &c->peer, now);
                        if (!victim) {
                                over = true;
                                break;
                        }
                        cut(a, victim, HTTP_CUT_ROOM);
                }
        }
        while (a->n_live > a->limits.max_connections) {
                victim = oldest_waiting(a, NULL, now);
                if (!victim)
                        return true;
                cut(a, victim, HTTP_CUT_ROOM);
        }
        return over;
}

uint64_t http_admit_reap(HttpAdmit *a, uint64_t now) {
        uint64_t next = UINT64_MAX;
        bool over;

        for (HttpAdmitConn *c = a->conns; c; c = c->next)
                if (!c->cut && c->waiting_since != 0 && waited(c, now) >= a->limits.head_deadline_usec)
                        cut(a, c, HTTP_CUT_HEAD_DEADLINE);
        over = enforce_limits(a, now);

        for (HttpAdmitConn *c = a->conns; c; c = c->next) {
                if (c->cut || c->waiting_since == 0)
                        continue;
                next = MIN(next, c->waiting_since + a->limits.head_deadline_usec);
                /* Over a limit, the young ones become fair game at min_age_usec. */
                if (over && waited(c, now) < a->limits.min_age_usec)
                        next = MIN(next, c->waiting_since + a->limits.min_age_usec);
        }
        return next;
}
