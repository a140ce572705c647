/* fuzz-sock-diag.c: the sock_diag reply parser: one recv()'s worth of netlink messages through diag_reply() and
 * the unix or inet message parser, then the lookups and formatting the peer resolver does with the tables. The
 * first byte picks the table ('u' unix, 't' TCP, 'p' UDP); the rest is a reply as the kernel sent it (the seeds are
 * real ones). Nothing here opens a socket: the statics are reached by including the module, as the unit tests do. */
#include <netinet/in.h>

#include "../lib/proc/sock-diag.c"
#include "fuzz.h"

static void fuzz_unix(const char *buf, size_t n) {
        UnixTable t = {};

        if (diag_reply(buf, (ssize_t) n, on_unix, &t) >= 0 && t.n > 0) {
                qsort(t.socks, t.n, sizeof *t.socks, cmp_unix);
                for (size_t i = 0; i < t.n; i++) {
                        (void) unix_socks_find(t.socks, t.n, t.socks[i].peer);
                        if (t.socks[i].name)
                                (void) strlen(t.socks[i].name);
                }
        }
        unix_socks_free(t.socks, t.n);
}

static void fuzz_inet(const char *buf, size_t n, uint8_t protocol) {
        InetTable t = { .protocol = protocol };

        (void) diag_reply(buf, (ssize_t) n, on_inet, &t);
        for (size_t i = 0; i < t.n; i++) {
                char a[INET6_ADDRSTRLEN + 16];

                inet_sock_format(t.socks[i].family, t.socks[i].src, t.socks[i].sport, a, sizeof a);
                inet_sock_format(t.socks[i].family, t.socks[i].dst, t.socks[i].dport, a, sizeof a);
                (void) inet_sock_is_loopback(t.socks[i].family, t.socks[i].dst);
        }
        free(t.socks);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_free_ char *buf = NULL;

        if (size < 1)
                return 0;
        /* A malloc'd copy of exactly the reply, aligned as diag_dump()'s receive buffer is. */
        buf = fuzz_memdup(data + 1, size - 1);
        switch (data[0]) {
        case 'u':
                fuzz_unix(buf, size - 1);
                break;
        case 't':
                fuzz_inet(buf, size - 1, IPPROTO_TCP);
                break;
        case 'p':
                fuzz_inet(buf, size - 1, IPPROTO_UDP);
                break;
        }
        return 0;
}
