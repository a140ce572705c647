/* stackctl-http.h: one HTTP GET to stackwatchd, over its unix socket or TCP, with libcurl (opened on first use). */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "base/macro.h"

/* A reply may not be larger than this; a live capture of a big process is a few MiB. */
#define HTTP_BODY_MAX (64U * 1024U * 1024U)
#define HTTP_CONNECT_TIMEOUT_USEC (5 * USEC_PER_SEC)

/* Where the daemon listens: a unix socket (base_url NULL) or a base URL "http://HOST:PORT". */
typedef struct HttpTarget {
        const char *socket_path;
        const char *base_url;
        const char *token;              /* sent as "Authorization: Bearer TOKEN" when not NULL */
        const char *cacert;             /* https: the CA certificate(s) to check the daemon's against; NULL: the
                                         * system's */
        uint64_t timeout_usec;          /* the whole request */
} HttpTarget;

typedef struct HttpResponse {
        long status;                    /* 200, 404, … */
        char *body;                     /* NUL-terminated (never NULL after a successful http_get) */
        size_t size;
        char *content_type;             /* NULL when the server sent none */
        uint64_t retry_after_sec;       /* Retry-After in seconds, 0 when absent */
} HttpResponse;

void http_response_done(HttpResponse *r);

/* Append "?KEY=VALUE" (or "&KEY=VALUE" when *PATH has a query already) to the malloc'd *PATH, VALUE
 * percent-escaped. Failures are logged: -ENOMEM, -EOPNOTSUPP (no libcurl). */
int http_query_append(char **path, const char *key, const char *value);

/* GET PATH_AND_QUERY (starting with '/') from T. Any HTTP status is a success (0, with RET filled in); a
 * failure to get a reply is logged here, where the reason is known, and returned as:
 *   -ECONNREFUSED  nothing listens there (no socket file, a stale one, or a refused TCP connection);
 *   -EACCES        not allowed to connect to the socket;
 *   -ETIMEDOUT, -EFBIG (reply larger than HTTP_BODY_MAX), -E2BIG (URL longer than API_URL_MAX), -EINVAL (bad
 *   URL), -EOPNOTSUPP (no libcurl), -ENOMEM, -EIO (anything else). */
int http_get(const HttpTarget *t, const char *path_and_query, HttpResponse *ret);

/* "the unix socket PATH" or the URL, for messages. */
const char *http_target_name(const HttpTarget *t);
