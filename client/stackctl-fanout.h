/* stackctl-fanout.h: one GET to several daemons at once (every --host), each within its time. */
#pragma once

#include <stddef.h>
#include <stdint.h>

typedef struct FanoutReply {
        const char *host;               /* as given to --host */
        int exit;                       /* what a single-host stackctl would have exited with (EXIT_*) */
        char *body;                     /* the reply when exit is EXIT_OK (NUL-terminated); NULL otherwise */
        size_t size;
        char *error;                    /* why not, escaped; NULL when it answered */
} FanoutReply;

/* GET PATH from every host of arg.host_names concurrently, each within TIMEOUT_USEC (arg.timeout_usec overrides);
 * ALSO_OK as daemon_get() takes it. *RET has one reply per host, in the order given. EXIT_OK, or EXIT_FAIL when
 * nothing could be started. */
int fanout_get(const char *path, uint64_t timeout_usec, long also_ok, FanoutReply **ret, size_t *ret_n);
void fanout_replies_free(FanoutReply *r, size_t n);
