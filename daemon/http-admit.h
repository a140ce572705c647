/* http-admit.h: which connections the HTTP API keeps. libmicrohttpd's own limits let a few slow clients deny it to
 * everyone: its idle timeout restarts with every byte, and a full connection table turns every newcomer away. Here a
 * request head has a deadline as a whole, one peer (a TCP address, a local uid) keeps at most a share of the table,
 * and room is made by cutting the connections that have waited longest for a head that never came, never a request
 * in progress. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

/* Who is at the other end: an IP address (AF_INET, AF_INET6) or, on the unix socket, a uid (AF_UNIX). */
typedef struct HttpPeer {
        int family;
        uint8_t addr[16];
} HttpPeer;

typedef struct HttpAdmitLimits {
        unsigned max_connections;       /* past this the longest waits for a head are cut */
        unsigned per_peer;              /* past this the peer's own longest waits for a head are cut */
        uint64_t head_deadline_usec;    /* from the connection's start (or its previous reply) to a whole head */
        uint64_t min_age_usec;          /* a connection younger than this is not cut to make room: its head may be
                                         * in the socket buffer, not yet read. Until then the server holds it in
                                         * the reserve it keeps above max_connections. */
} HttpAdmitLimits;

/* Why a connection was cut. */
typedef enum HttpCut {
        HTTP_CUT_HEAD_DEADLINE,         /* its request head took longer than head_deadline_usec */
        HTTP_CUT_ROOM,                  /* cut to bring its peer back to its share, or the table to its size */
        _HTTP_CUT_MAX,
} HttpCut;

typedef struct HttpAdmitConn HttpAdmitConn;

typedef struct HttpAdmit {
        HttpAdmitLimits limits;
        HttpAdmitConn *conns;           /* a list, newest first */
        unsigned n_live;                /* not cut yet */
        uint64_t cut[_HTTP_CUT_MAX];
        /* Ends a connection: by default shutdown(2), which the server then sees as the client hanging up. */
        void (*cut_fd)(int fd);
} HttpAdmit;

void http_admit_init(HttpAdmit *a, const HttpAdmitLimits *limits);
/* Forget every connection (the server closes them). */
void http_admit_done(HttpAdmit *a);

/* A new connection on FD from PEER, waiting for its first head from NOW. It is never cut at once: a newcomer is
 * as likely to be the good client as the flood, and its head comes first. NULL on OOM (then not tracked). */
HttpAdmitConn *http_admit_add(HttpAdmit *a, int fd, const HttpPeer *peer, uint64_t now);
void http_admit_remove(HttpAdmit *a, HttpAdmitConn *c);
/* The head of a request arrived whole: no deadline, and not cut to make room, until its reply went out. */
void http_admit_head_done(HttpAdmitConn *c);
/* The reply went out; the connection waits for its next head from NOW. */
void http_admit_waiting(HttpAdmitConn *c, uint64_t now);
/* Cut every connection whose head is past its deadline at NOW, then, while a peer is over its share or the table
 * over its size, the longest waits for a head (of that peer) that are at least min_age_usec old. The time to call
 * again (CLOCK_MONOTONIC: the next deadline, or when a young one may go), or UINT64_MAX when none is waiting. */
uint64_t http_admit_reap(HttpAdmit *a, uint64_t now);
