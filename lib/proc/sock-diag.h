/* sock-diag.h: the kernel's socket tables through sock_diag netlink: unix sockets with their peers and bound names,
 * TCP and UDP endpoints with their inodes. One dump per table; the caller keeps it for the length of a capture. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct UnixSock {
        uint64_t inode;
        uint64_t peer;          /* inode of the socket at the other end, 0 when not connected */
        uint8_t type;           /* SOCK_STREAM, SOCK_DGRAM, SOCK_SEQPACKET */
        uint8_t state;          /* TCP_ESTABLISHED, TCP_LISTEN, … as the kernel reports them for unix sockets */
        char *name;             /* the bound path; abstract names start with '@'; NULL when unbound */
        uint32_t *icons;        /* a listener's connections not accepted yet: the inodes of their clients' sockets */
        size_t n_icons;
} UnixSock;

/* Every unix socket of this network namespace, sorted by inode. */
int sock_diag_unix(UnixSock **ret, size_t *ret_n);
void unix_socks_free(UnixSock *s, size_t n);
/* Binary search by inode; NULL when absent. */
const UnixSock *unix_socks_find(const UnixSock *s, size_t n, uint64_t inode);
/* The listener whose backlog holds the connection of the client socket INODE; NULL when none does. */
const UnixSock *unix_socks_find_listener(const UnixSock *s, size_t n, uint64_t inode);

typedef struct InetSock {
        uint64_t inode;         /* 0 for sockets no process holds yet (a connection still in a listener's backlog) */
        uint8_t family;         /* AF_INET or AF_INET6 */
        uint8_t protocol;       /* IPPROTO_TCP or IPPROTO_UDP */
        uint8_t state;          /* TCP_* */
        uint8_t src[16], dst[16];       /* network order; IPv4 in the first 4 bytes */
        uint16_t sport, dport;          /* host order */
} InetSock;

/* Every IPv4 and IPv6 socket of PROTOCOL (IPPROTO_TCP or IPPROTO_UDP). */
int sock_diag_inet(uint8_t protocol, InetSock **ret, size_t *ret_n);
/* Whether the address is a loopback address (127/8, ::1, or ::ffff:127.x). */
bool inet_sock_is_loopback(uint8_t family, const uint8_t addr[16]);
/* "127.0.0.1:8080" or "[::1]:8080" into BUF. */
void inet_sock_format(uint8_t family, const uint8_t addr[16], uint16_t port, char *buf, size_t size);
