/* test-http-admit.c: which connections the HTTP API keeps under a flood of slow clients (daemon/http-admit.c), with
 * a recording cut instead of shutdown(2). */
#include <string.h>
#include <sys/socket.h>

#include "unit.h"

#include "../../daemon/http-admit.h"

#define MS UINT64_C(1000)
#define SEC UINT64_C(1000000)

static int cuts[256];
static size_t n_cuts;

static void record_cut(int fd) {
        ck_assert_uint_lt(n_cuts, sizeof cuts / sizeof cuts[0]);
        cuts[n_cuts++] = fd;
}

static bool was_cut(int fd) {
        for (size_t i = 0; i < n_cuts; i++)
                if (cuts[i] == fd)
                        return true;
        return false;
}

static HttpPeer ipv4(uint8_t last) {
        HttpPeer p = { .family = AF_INET, .addr = { 127, 0, 0, last } };
        return p;
}

static HttpPeer uid(uint32_t u) {
        HttpPeer p = { .family = AF_UNIX };
        memcpy(p.addr, &u, sizeof u);
        return p;
}

static HttpAdmitConn *add(HttpAdmit *a, int fd, HttpPeer peer, uint64_t now) {
        return http_admit_add(a, fd, &peer, now);
}

static void setup(HttpAdmit *a, unsigned max, unsigned per_peer) {
        http_admit_init(a, &(HttpAdmitLimits) {
                .max_connections = max, .per_peer = per_peer,
                .head_deadline_usec = 5 * SEC, .min_age_usec = 250 * MS,
        });
        a->cut_fd = record_cut;
        n_cuts = 0;
}

START_TEST(test_head_deadline_is_whole) {
        HttpAdmit a;
        HttpAdmitConn *slow, *quick;

        setup(&a, 64, 16);
        slow = add(&a, 10, ipv4(1), 1 * SEC);
        quick = add(&a, 11, ipv4(2), 1 * SEC);
        ck_assert_ptr_nonnull(slow);
        ck_assert_ptr_nonnull(quick);

        /* A byte a second resets nothing here: only a whole head stops the clock. */
        ck_assert_uint_eq(http_admit_reap(&a, 2 * SEC), 6 * SEC);
        http_admit_head_done(quick);
        ck_assert_uint_eq(http_admit_reap(&a, 5 * SEC), 6 * SEC);
        ck_assert_uint_eq(n_cuts, 0);
        ck_assert_uint_eq(http_admit_reap(&a, 6 * SEC), UINT64_MAX);
        ck_assert_uint_eq(n_cuts, 1);
        ck_assert_int_eq(cuts[0], 10);
        ck_assert_uint_eq(a.cut[HTTP_CUT_HEAD_DEADLINE], 1);

        /* A request in progress has no deadline; after its reply the next head has a fresh one. */
        ck_assert_uint_eq(http_admit_reap(&a, 60 * SEC), UINT64_MAX);
        http_admit_waiting(quick, 60 * SEC);
        ck_assert_uint_eq(http_admit_reap(&a, 61 * SEC), 65 * SEC);
        http_admit_reap(&a, 65 * SEC);
        ck_assert(was_cut(11));
        ck_assert_uint_eq(a.n_live, 0);
        http_admit_done(&a);
}
END_TEST

START_TEST(test_one_peer_keeps_to_its_share) {
        HttpAdmit a;

        setup(&a, 64, 16);
        /* 40 slow connections from one address, 1 ms apart: none is cut as it comes ... */
        for (int i = 0; i < 40; i++)
                add(&a, 100 + i, ipv4(9), 1 * SEC + (uint64_t) i * MS);
        ck_assert_uint_eq(n_cuts, 0);
        /* ... nor while every one is young: its head may not have been read yet ... */
        ck_assert_uint_eq(http_admit_reap(&a, 1 * SEC + 200 * MS), 1 * SEC + 250 * MS);
        ck_assert_uint_eq(n_cuts, 0);
        /* ... then the peer's 24 longest waits go, and it keeps its 16 newest. */
        ck_assert_uint_eq(http_admit_reap(&a, 2 * SEC), 6 * SEC + 24 * MS);
        ck_assert_uint_eq(a.n_live, 16);
        ck_assert_uint_eq(a.cut[HTTP_CUT_ROOM], 24);
        for (int i = 0; i < 24; i++)
                ck_assert_msg(was_cut(100 + i), "the oldest connection %d stayed", 100 + i);

        /* Another peer is not touched by the flood. */
        add(&a, 7, ipv4(1), 2 * SEC);
        http_admit_reap(&a, 3 * SEC);
        ck_assert(!was_cut(7));
        ck_assert_uint_eq(a.n_live, 17);
        http_admit_done(&a);
}
END_TEST

START_TEST(test_same_uid_good_client_outlasts_the_flood) {
        HttpAdmit a;
        HttpAdmitConn *good;

        /* On the unix socket every client may be root, good or not. The flood keeps reconnecting, so its
         * connections are always young; the good client's head comes at once, and a request in progress is
         * never cut. */
        setup(&a, 64, 16);
        for (int i = 0; i < 16; i++)
                add(&a, 100 + i, uid(0), 0);
        good = add(&a, 7, uid(0), 1 * SEC);
        for (int i = 0; i < 16; i++)
                add(&a, 200 + i, uid(0), 1 * SEC);
        http_admit_head_done(good);
        http_admit_reap(&a, 1 * SEC);
        ck_assert_uint_eq(n_cuts, 16);
        ck_assert(!was_cut(7));
        for (int i = 0; i < 16; i++)
                ck_assert(was_cut(100 + i));
        /* The young ones beyond the share go once they are old enough. */
        ck_assert_uint_eq(http_admit_reap(&a, 1 * SEC + 100 * MS), 1 * SEC + 250 * MS);
        http_admit_reap(&a, 1 * SEC + 250 * MS);
        ck_assert_uint_eq(a.n_live, 16);
        ck_assert(!was_cut(7));

        /* A different uid is another peer. */
        add(&a, 8, uid(1000), 3 * SEC);
        http_admit_reap(&a, 4 * SEC);
        ck_assert(!was_cut(8));
        http_admit_done(&a);
}
END_TEST

START_TEST(test_full_table_cuts_longest_wait) {
        HttpAdmit a;

        setup(&a, 8, 16);
        /* 8 peers fill the table; two of them got their heads through. */
        for (int i = 0; i < 8; i++) {
                HttpAdmitConn *c = add(&a, 100 + i, ipv4((uint8_t) (10 + i)), 1 * SEC + (uint64_t) i * 100 * MS);
                if (i < 2)
                        http_admit_head_done(c);
        }
        ck_assert_uint_eq(http_admit_reap(&a, 2 * SEC), 6 * SEC + 200 * MS);
        ck_assert_uint_eq(n_cuts, 0);
        /* A newcomer: the longest wait for a head (fd 102, since 1.2 s) goes, not the busy ones, not it. */
        add(&a, 200, ipv4(99), 2 * SEC);
        http_admit_reap(&a, 2 * SEC);
        ck_assert_uint_eq(n_cuts, 1);
        ck_assert_int_eq(cuts[0], 102);
        ck_assert_uint_eq(a.n_live, 8);
        http_admit_done(&a);

        /* When every other connection is busy the newcomer stays, in the server's reserve, while its head is on
         * its way; one that sends none in min_age is the one that goes. */
        setup(&a, 2, 16);
        http_admit_head_done(add(&a, 1, ipv4(1), SEC));
        http_admit_head_done(add(&a, 2, ipv4(2), SEC));
        add(&a, 3, ipv4(3), SEC);
        ck_assert_uint_eq(http_admit_reap(&a, SEC + 100 * MS), SEC + 250 * MS);
        ck_assert_uint_eq(n_cuts, 0);
        ck_assert_uint_eq(a.n_live, 3);
        http_admit_reap(&a, SEC + 250 * MS);
        ck_assert_uint_eq(n_cuts, 1);
        ck_assert_int_eq(cuts[0], 3);
        ck_assert_uint_eq(a.n_live, 2);
        http_admit_done(&a);
}
END_TEST

START_TEST(test_removal_keeps_counts) {
        HttpAdmit a;
        HttpAdmitConn *c[4];

        setup(&a, 64, 2);
        for (int i = 0; i < 4; i++)
                c[i] = add(&a, i, ipv4(1), (uint64_t) i * (uint64_t) SEC);
        http_admit_reap(&a, 4 * SEC);
        ck_assert_uint_eq(a.n_live, 2);
        /* The server closes the cut ones and the live ones alike; the count stays right either way. */
        for (int i = 0; i < 4; i++)
                http_admit_remove(&a, c[i]);
        ck_assert_uint_eq(a.n_live, 0);
        ck_assert_ptr_null(a.conns);
        http_admit_remove(&a, NULL);
        http_admit_head_done(NULL);
        http_admit_waiting(NULL, 0);
        http_admit_done(&a);
}
END_TEST

UNIT_TEST_MAIN("http-admit", test_head_deadline_is_whole, test_one_peer_keeps_to_its_share,
               test_same_uid_good_client_outlasts_the_flood, test_full_table_cuts_longest_wait,
               test_removal_keeps_counts)
