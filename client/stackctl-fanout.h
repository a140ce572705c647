/* stackctl-fanout.h: one GET to several daemons at once (every --host), each within its time. */
#pragma once

#include <stddef.h>
#include <stdint.h>

typedef struct FanoutReply {
        const char *host;               /* as given to --host (or in the hosts file) */
        int exit;                       /* what a single-host stackctl would have exited with (EXIT_*) */
        char *body;                     /* the reply when exit is EXIT_OK (NUL-terminated); NULL otherwise */
        size_t size;
        char *error;                    /* why not, escaped; NULL when it answered */
} FanoutReply;

/* GET PATH from every host of arg.hosts concurrently, each within TIMEOUT_USEC (arg.timeout_usec overrides);
 * ALSO_OK as daemon_get() takes it. *RET has one reply per host, in the order given. EXIT_OK, or EXIT_FAIL when
 * nothing could be started. */
int fanout_get(const char *path, uint64_t timeout_usec, long also_ok, FanoutReply **ret, size_t *ret_n);
void fanout_replies_free(FanoutReply *r, size_t n);

/* The exit status of a fan-out, so that no host that did not answer properly hides behind the others: EXIT_OK when
 * every reply's exit is EXIT_OK; else the code of the hosts that did not (EXIT_PERMISSION, EXIT_NO_DAEMON, …) when
 * they all have the same one; else EXIT_FAIL (different reasons: each host's is in the table). */
int fanout_exit_status(const FanoutReply *r, size_t n);
