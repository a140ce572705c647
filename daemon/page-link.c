/* page-link.c: the snapshot page's URL in alerts, from the first TCP listener's address. */
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/macro.h"
#include "page-link.h"

/* One per daemon, like its listeners: set once, when the first TCP listener starts, kept across reloads (which
 * keep the listeners). */
static char *page_base;

void page_link_set_base(const char *hostport, bool tls) {
        const char *scheme = tls ? "https" : "http";
        char host[HOST_NAME_MAX + 1] = "";

        if (page_base)
                return;
        /* A wildcard address is no place to browse to: the host name is, for whoever reads the alert. */
        if ((startswith(hostport, "0.0.0.0:") || startswith(hostport, "[::]:")) && gethostname(host, sizeof host) == 0) {
                host[sizeof host - 1] = 0;
                if (asprintf(&page_base, "%s://%s%s", scheme, host, strrchr(hostport, ':')) < 0)
                        page_base = NULL;
        } else if (asprintf(&page_base, "%s://%s", scheme, hostport) < 0)
                page_base = NULL;
}

char *page_link_snapshot(const char *id) {
        char *s;

        if (!page_base || !id)
                return NULL;
        return asprintf(&s, "%s/#/snapshots/%s", page_base, id) < 0 ? NULL : s;
}
