/* fuzz-http-admit.c: the HTTP API's connection policy as a state machine. An input is a script of connection events
 * in the order libmicrohttpd would report them (connect, head complete, reply sent, close, reap, time passing), from
 * a few peers; after every reap the harness checks what http-admit.h promises: no live connection has waited past
 * the head deadline, no peer is over its share and the table is not over its size while a connection old enough to
 * cut still waits for a head, the live count is right, and the next wakeup lies ahead. The module is included for
 * its struct, as its unit test does. */
#include "../daemon/http-admit.c"
#include "fuzz.h"

#define CONNS_MAX 64U

/* A cut connection is shut down; libmicrohttpd then sees the hangup and reports the close. */
static int cut_fds[CONNS_MAX];
static size_t n_cut_fds;

static void record_cut(int fd) {
        if (n_cut_fds >= CONNS_MAX)
                abort(); /* a connection cut twice, or one we never had */
        cut_fds[n_cut_fds++] = fd;
}

static bool waits_for_head(const HttpAdmitConn *c) {
        return !c->cut && c->waiting_since != 0;
}

static void check(const HttpAdmit *a, uint64_t now, uint64_t next) {
        unsigned live = 0;

        for (const HttpAdmitConn *c = a->conns; c; c = c->next) {
                bool old_enough = waits_for_head(c) && waited(c, now) >= a->limits.min_age_usec;

                live += !c->cut;
                if (waits_for_head(c) && waited(c, now) >= a->limits.head_deadline_usec)
                        abort(); /* past its head deadline, still there */
                if (old_enough && live_of_peer(a, &c->peer) > a->limits.per_peer)
                        abort(); /* its peer is over its share, and it could have been cut */
                if (old_enough && a->n_live > a->limits.max_connections)
                        abort(); /* the table is over its size, and it could have been cut */
                if (waits_for_head(c) && next <= now)
                        abort(); /* a wakeup in the past: a busy loop */
        }
        if (live != a->n_live)
                abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        HttpAdmitConn *conns[CONNS_MAX] = {};
        uint64_t now = USEC_PER_SEC;
        HttpAdmit a;
        int next_fd = 3;

        if (size < 4)
                return 0;
        /* The limits: the first four bytes, within the ranges the configuration allows. */
        http_admit_init(&a, &(HttpAdmitLimits) {
                                    .max_connections = 1 + data[0] % 16,
                                    .per_peer = 1 + data[1] % 8,
                                    .head_deadline_usec = (1 + data[2] % 50) * 100 * USEC_PER_MSEC,
                                    .min_age_usec = (data[3] % 10) * 50 * USEC_PER_MSEC,
                            });
        a.cut_fd = record_cut;
        n_cut_fds = 0;

        for (size_t i = 4; i + 1 < size; i += 2) {
                uint8_t op = data[i], arg = data[i + 1];
                size_t k = arg % CONNS_MAX;

                switch (op % 6) {
                case 0: /* a client connects: one of four peers, two on TCP and two on the unix socket */
                        if (!conns[k]) {
                                HttpPeer peer = { .family = arg & 0x40 ? AF_UNIX : AF_INET, .addr = { arg >> 6 } };
                                conns[k] = http_admit_add(&a, next_fd++, &peer, now);
                                if (!conns[k])
                                        abort();
                        }
                        break;
                case 1: /* its head is in */
                        http_admit_head_done(conns[k]);
                        break;
                case 2: /* its reply went out */
                        http_admit_waiting(conns[k], now);
                        break;
                case 3: /* it hung up */
                        http_admit_remove(&a, conns[k]);
                        conns[k] = NULL;
                        break;
                case 4: /* time passes */
                        now += (uint64_t) arg * 10 * USEC_PER_MSEC;
                        break;
                case 5: { /* the server reaps, and closes what was cut */
                        uint64_t next = http_admit_reap(&a, now);

                        check(&a, now, next);
                        for (size_t j = 0; j < CONNS_MAX; j++)
                                for (size_t f = 0; conns[j] && f < n_cut_fds; f++)
                                        if (conns[j]->fd == cut_fds[f]) {
                                                http_admit_remove(&a, conns[j]);
                                                conns[j] = NULL;
                                        }
                        n_cut_fds = 0;
                        break;
                }
                }
        }
        http_admit_done(&a);
        return 0;
}
