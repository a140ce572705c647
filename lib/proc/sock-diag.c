/* sock-diag.c: NETLINK_SOCK_DIAG dumps (unix_diag, inet_diag). No library in our stack speaks sock_diag (libmnl
 * would, but it is not one of ours), and a dump is one request and a loop over replies: written here. */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "base/alloc-util.h"
#include "base/log.h"
#include "base/macro.h"
#include "proc/sock-diag.h"

/* A reply buffer: the kernel fills up to a page or two of messages per recv. */
#define DIAG_BUF_SIZE (64 * 1024)
/* Far more sockets than a machine has; a bound so that a hostile flood cannot grow our memory without end. */
#define DIAG_SOCKETS_MAX (1024 * 1024)

typedef int (*DiagMessage)(const struct nlmsghdr *h, void *userdata);

/* One reply BUF (N bytes, what one recv() returned): ON_MSG for every message in it. 1 at the end of the dump
 * (NLMSG_DONE), 0 when more replies are to come, -errno for NLMSG_ERROR or what ON_MSG returned. */
static int diag_reply(const char *buf, ssize_t n, DiagMessage on_msg, void *userdata) {
        int r;

        /* N stays signed: NLMSG_NEXT() takes the aligned length of a message, more than is left after an unaligned
         * last one, and N must then go below zero for NLMSG_OK() to stop the walk. */
        for (const struct nlmsghdr *m = (const struct nlmsghdr *) buf; NLMSG_OK(m, n); m = NLMSG_NEXT(m, n)) {
                if (m->nlmsg_type == NLMSG_DONE)
                        return 1;
                if (m->nlmsg_type == NLMSG_ERROR) {
                        const struct nlmsgerr *e = NLMSG_DATA(m);
                        if (m->nlmsg_len < NLMSG_LENGTH(sizeof *e))
                                return -EIO;
                        return e->error < 0 ? e->error : -EIO;
                }
                r = on_msg(m, userdata);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* Send REQ (LEN bytes, a nlmsghdr and its payload) as a dump request and call ON_MSG for every reply message. */
static int diag_dump(void *req, size_t len, DiagMessage on_msg, void *userdata) {
        struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ char *buf = NULL;
        struct nlmsghdr *h = req;
        int r;

        fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
        if (fd < 0)
                return negative_errno();
        h->nlmsg_len = (uint32_t) len;
        h->nlmsg_type = SOCK_DIAG_BY_FAMILY;
        h->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
        h->nlmsg_seq = 1;
        if (sendto(fd, req, len, 0, (struct sockaddr *) &kernel, sizeof kernel) < 0)
                return negative_errno();
        buf = malloc(DIAG_BUF_SIZE);
        if (!buf)
                return -ENOMEM;
        for (;;) {
                ssize_t n = recv(fd, buf, DIAG_BUF_SIZE, 0);

                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return negative_errno();
                }
                if (n == 0)
                        return -EIO;
                r = diag_reply(buf, n, on_msg, userdata);
                if (r != 0)
                        return MIN(r, 0);
        }
}

/* ---- unix ---- */

typedef struct UnixTable {
        UnixSock *socks;
        size_t n, allocated;
} UnixTable;

void unix_socks_free(UnixSock *s, size_t n) {
        for (size_t i = 0; i < n; i++) {
                free(s[i].name);
                free(s[i].icons);
        }
        free(s);
}

static int on_unix(const struct nlmsghdr *h, void *userdata) {
        UnixTable *t = userdata;
        const struct unix_diag_msg *m = NLMSG_DATA(h);
        ssize_t left; /* signed, as in diag_reply(): RTA_NEXT() may take more than is left */
        UnixSock u;

        if (h->nlmsg_len < NLMSG_LENGTH(sizeof *m))
                return -EIO;
        u = (UnixSock) { .inode = m->udiag_ino, .type = m->udiag_type, .state = m->udiag_state };
        left = (ssize_t) (h->nlmsg_len - NLMSG_LENGTH(sizeof *m));
        for (const struct rtattr *a = (const struct rtattr *) (m + 1); RTA_OK(a, left); a = RTA_NEXT(a, left)) {
                size_t plen = RTA_PAYLOAD(a);

                if (a->rta_type == UNIX_DIAG_PEER && plen >= sizeof(uint32_t)) {
                        uint32_t peer;
                        memcpy(&peer, RTA_DATA(a), sizeof peer);
                        u.peer = peer;
                } else if (a->rta_type == UNIX_DIAG_NAME && plen > 0 && !u.name) {
                        const char *d = RTA_DATA(a);
                        /* An abstract name starts with a NUL and may hold anything: shown as '@' + bytes up to the
                         * first NUL, escaped later by whoever prints it. */
                        u.name = d[0] == 0 ? NULL : strndup(d, plen);
                        if (d[0] == 0 && asprintf(&u.name, "@%.*s", (int) strnlen(d + 1, plen - 1), d + 1) < 0)
                                u.name = NULL;
                        if (!u.name)
                                return -ENOMEM;
                } else if (a->rta_type == UNIX_DIAG_ICONS && plen >= sizeof(uint32_t) && !u.icons) {
                        u.n_icons = plen / sizeof(uint32_t);
                        u.icons = malloc(u.n_icons * sizeof(uint32_t));
                        if (!u.icons) {
                                free(u.name);
                                return -ENOMEM;
                        }
                        memcpy(u.icons, RTA_DATA(a), u.n_icons * sizeof(uint32_t));
                }
        }
        if (t->n >= DIAG_SOCKETS_MAX || !GREEDY_REALLOC(t->socks, t->allocated, t->n + 1)) {
                free(u.name);
                free(u.icons);
                return t->n >= DIAG_SOCKETS_MAX ? 0 : -ENOMEM;
        }
        t->socks[t->n++] = u;
        return 0;
}

static int cmp_unix(const void *a, const void *b) {
        const UnixSock *x = a, *y = b;
        return x->inode < y->inode ? -1 : x->inode > y->inode;
}

int sock_diag_unix(UnixSock **ret, size_t *ret_n) {
        struct {
                struct nlmsghdr h;
                struct unix_diag_req r;
        } req = {
                .r = {
                        .sdiag_family = AF_UNIX,
                        .udiag_states = ~0U,
                        .udiag_show = UDIAG_SHOW_PEER | UDIAG_SHOW_NAME | UDIAG_SHOW_ICONS,
                },
        };
        UnixTable t = {};
        int r;

        r = diag_dump(&req, sizeof req, on_unix, &t);
        if (r < 0) {
                unix_socks_free(t.socks, t.n);
                return log_debug_errno(r, "unix_diag dump failed: %m");
        }
        if (t.n > 0)
                qsort(t.socks, t.n, sizeof *t.socks, cmp_unix);
        *ret = t.socks;
        *ret_n = t.n;
        return 0;
}

const UnixSock *unix_socks_find(const UnixSock *s, size_t n, uint64_t inode) {
        UnixSock key = { .inode = inode };
        return n ? bsearch(&key, s, n, sizeof *s, cmp_unix) : NULL;
}

const UnixSock *unix_socks_find_listener(const UnixSock *s, size_t n, uint64_t inode) {
        for (size_t i = 0; i < n; i++)
                for (size_t k = 0; k < s[i].n_icons; k++)
                        if (s[i].icons[k] == inode)
                                return &s[i];
        return NULL;
}

/* ---- inet ---- */

typedef struct InetTable {
        InetSock *socks;
        size_t n, allocated;
        uint8_t protocol;
} InetTable;

static int on_inet(const struct nlmsghdr *h, void *userdata) {
        InetTable *t = userdata;
        const struct inet_diag_msg *m = NLMSG_DATA(h);
        InetSock s;

        if (h->nlmsg_len < NLMSG_LENGTH(sizeof *m))
                return -EIO;
        if (t->n >= DIAG_SOCKETS_MAX)
                return 0;
        s = (InetSock) {
                .inode = m->idiag_inode,
                .family = m->idiag_family,
                .protocol = t->protocol,
                .state = m->idiag_state,
                .sport = ntohs(m->id.idiag_sport),
                .dport = ntohs(m->id.idiag_dport),
        };
        memcpy(s.src, m->id.idiag_src, 16);
        memcpy(s.dst, m->id.idiag_dst, 16);
        if (!GREEDY_REALLOC(t->socks, t->allocated, t->n + 1))
                return -ENOMEM;
        t->socks[t->n++] = s;
        return 0;
}

int sock_diag_inet(uint8_t protocol, InetSock **ret, size_t *ret_n) {
        static const uint8_t families[] = { AF_INET, AF_INET6 };
        InetTable t = { .protocol = protocol };
        int r;

        for (size_t i = 0; i < ELEMENTSOF(families); i++) {
                struct {
                        struct nlmsghdr h;
                        struct inet_diag_req_v2 r;
                } req = {
                        .r = {
                                .sdiag_family = families[i],
                                .sdiag_protocol = protocol,
                                .idiag_states = ~0U,
                        },
                };

                r = diag_dump(&req, sizeof req, on_inet, &t);
                /* A kernel without IPv6 has no table for it: what the other family gave still counts. */
                if (r < 0 && !(families[i] == AF_INET6 && (r == -ENOENT || r == -EAFNOSUPPORT))) {
                        free(t.socks);
                        return log_debug_errno(r, "inet_diag dump (family %u, protocol %u) failed: %m",
                                               families[i], protocol);
                }
        }
        *ret = t.socks;
        *ret_n = t.n;
        return 0;
}

bool inet_sock_is_loopback(uint8_t family, const uint8_t a[16]) {
        static const uint8_t v6_loop[16] = { [15] = 1 };
        static const uint8_t v4_mapped[12] = { [10] = 0xff, [11] = 0xff };

        if (family == AF_INET)
                return a[0] == 127;
        return memcmp(a, v6_loop, 16) == 0 || (memcmp(a, v4_mapped, 12) == 0 && a[12] == 127);
}

void inet_sock_format(uint8_t family, const uint8_t addr[16], uint16_t port, char *buf, size_t size) {
        char a[INET6_ADDRSTRLEN] = "?";

        if (family == AF_INET) {
                inet_ntop(AF_INET, addr, a, sizeof a);
                snprintf(buf, size, "%s:%u", a, port);
        } else {
                inet_ntop(AF_INET6, addr, a, sizeof a);
                snprintf(buf, size, "[%s]:%u", a, port);
        }
}
