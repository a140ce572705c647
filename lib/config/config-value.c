/* config-value.c: the configuration's value parsers and formatters, and the list of errors with their places. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <netinet/in.h>
#include <string.h>

#include "base/alloc-util.h"
#include "base/macro.h"
#include "base/parse-util.h"
#include "config/config-value.h"

/* ---- errors ---- */

void config_errors_done(ConfigErrors *e) {
        if (!e)
                return;
        for (size_t i = 0; i < e->n; i++) {
                free(e->errors[i].file);
                free(e->errors[i].message);
        }
        free(e->errors);
        *e = (ConfigErrors) {};
}

int config_errors_add(ConfigErrors *e, const char *file, unsigned line, unsigned column, const char *fmt, ...) {
        _cleanup_free_ char *f = NULL, *m = NULL;
        va_list ap;
        int r;

        if (e->n >= CONFIG_ERRORS_MAX) {
                e->n_dropped++;
                return 0;
        }
        va_start(ap, fmt);
        r = vasprintf(&m, fmt, ap);
        va_end(ap);
        if (r < 0) {
                m = NULL;
                return -ENOMEM;
        }
        f = strdup(file ?: "<unknown>");
        if (!f)
                return -ENOMEM;
        if (!GREEDY_REALLOC(e->errors, e->n_allocated, e->n + 1))
                return -ENOMEM;
        e->errors[e->n++] = (ConfigError) {
                .file = TAKE_PTR(f),
                .line = line,
                .column = column,
                .message = TAKE_PTR(m),
        };
        return 0;
}

void config_errors_print(const ConfigErrors *e, FILE *f) {
        for (size_t i = 0; i < e->n; i++) {
                const ConfigError *x = &e->errors[i];
                if (x->line > 0)
                        fprintf(f, "%s:%u:%u: %s\n", x->file, x->line, x->column, x->message);
                else
                        fprintf(f, "%s: %s\n", x->file, x->message);
        }
        if (e->n_dropped > 0)
                fprintf(f, "(%zu more error(s) not shown)\n", e->n_dropped);
}

size_t config_errors_count(const ConfigErrors *e) {
        return e->n + e->n_dropped;
}

/* Where error I's file first appears among errors FROM.., so files keep the order they were loaded in. */
static size_t config_errors_file_rank(const ConfigErrors *e, size_t from, size_t i) {
        for (size_t k = from; k < i; k++)
                if (streq(e->errors[k].file, e->errors[i].file))
                        return k;
        return i;
}

void config_errors_sort(ConfigErrors *e, size_t from) {
        size_t rank[CONFIG_ERRORS_MAX];

        if (from >= e->n)
                return;
        for (size_t i = from; i < e->n; i++)
                rank[i - from] = config_errors_file_rank(e, from, i);
        for (size_t i = from + 1; i < e->n; i++)
                for (size_t k = i; k > from; k--) {
                        ConfigError *a = &e->errors[k - 1], *b = &e->errors[k], t;
                        size_t ra = rank[k - 1 - from], rb = rank[k - from];

                        if (ra < rb || (ra == rb && (a->line < b->line ||
                                                     (a->line == b->line && a->column <= b->column))))
                                break;
                        t = *a, *a = *b, *b = t;
                        rank[k - 1 - from] = rb, rank[k - from] = ra;
                }
}

/* ---- value parsers ---- */

/* "123" or "123.456": the integer part, and the fraction as FRAC / SCALE (SCALE a power of ten ≤ 10^18). */
static int parse_decimal_parts(const char **p, uint64_t *ret_int, uint64_t *ret_frac, uint64_t *ret_scale) {
        uint64_t i, frac = 0, scale = 1;
        const char *s = *p;
        int r;

        r = scan_digits(&s, s + strlen(s), 10, &i);
        if (r < 0)
                return r;
        if (*s == '.') {
                s++;
                if (*s < '0' || *s > '9')
                        return -EINVAL;
                for (; *s >= '0' && *s <= '9'; s++) {
                        if (scale >= 1000000000000000000ULL) {
                                /* More precision than a 64-bit fraction holds: only trailing zeros may follow. */
                                if (*s != '0')
                                        return -EINVAL;
                                continue;
                        }
                        frac = frac * 10 + (uint64_t) (*s - '0');
                        scale *= 10;
                }
        }
        *p = s;
        *ret_int = i;
        *ret_frac = frac;
        *ret_scale = scale;
        return 0;
}

static const struct {
        const char *suffix;
        uint64_t usec;
} duration_units[] = {
        { "us", 1 },
        { "ms", USEC_PER_MSEC },
        { "s", USEC_PER_SEC },
        { "m", CONFIG_USEC_PER_MINUTE },
        { "h", CONFIG_USEC_PER_HOUR },
        { "d", CONFIG_USEC_PER_DAY },
};

int config_parse_duration(const char *s, uint64_t *ret_usec) {
        uint64_t i, frac, scale, unit = 0, whole;
        unsigned __int128 part;
        int r;

        if (!s)
                return -EINVAL;
        r = parse_decimal_parts(&s, &i, &frac, &scale);
        if (r < 0)
                return r;
        if (*s == 0)
                unit = USEC_PER_SEC;
        for (size_t k = 0; k < ELEMENTSOF(duration_units) && unit == 0; k++)
                if (streq(s, duration_units[k].suffix))
                        unit = duration_units[k].usec;
        if (unit == 0)
                return -EINVAL;

        if (__builtin_mul_overflow(i, unit, &whole))
                return -ERANGE;
        part = (unsigned __int128) frac * unit;
        if (part % scale != 0)
                return -EINVAL; /* a fraction of a microsecond */
        if (__builtin_add_overflow(whole, (uint64_t) (part / scale), &whole))
                return -ERANGE;
        *ret_usec = whole;
        return 0;
}

int config_parse_size(const char *s, uint64_t *ret_bytes) {
        static const char units[] = "KMGT";
        uint64_t v, factor = 1;
        const char *u;
        int r;

        if (!s)
                return -EINVAL;
        r = scan_digits(&s, s + strlen(s), 10, &v);
        if (r < 0)
                return r;
        if (*s != 0) {
                if (s[1] != 0 || !(u = strchr(units, *s >= 'a' ? *s - ('a' - 'A') : *s)) || *u == 0)
                        return -EINVAL;
                for (const char *k = units; k <= u; k++)
                        factor *= 1024;
        }
        if (__builtin_mul_overflow(v, factor, &v))
                return -ERANGE;
        *ret_bytes = v;
        return 0;
}

int config_parse_listen(const char *s, struct sockaddr_storage *ret, socklen_t *ret_len) {
        struct sockaddr_storage ss = {};
        char host[INET6_ADDRSTRLEN + 1];
        const char *port;
        uint64_t p;
        socklen_t len;

        if (!s)
                return -EINVAL;
        if (s[0] == '[') {
                const char *end = strchr(s, ']');
                struct sockaddr_in6 *in6 = (struct sockaddr_in6 *) &ss;

                if (!end || end[1] != ':' || (size_t) (end - s - 1) >= sizeof host)
                        return -EINVAL;
                memcpy(host, s + 1, (size_t) (end - s - 1));
                host[end - s - 1] = 0;
                if (inet_pton(AF_INET6, host, &in6->sin6_addr) != 1)
                        return -EINVAL;
                in6->sin6_family = AF_INET6;
                port = end + 2;
                len = sizeof *in6;
        } else {
                const char *colon = strrchr(s, ':');
                struct sockaddr_in *in = (struct sockaddr_in *) &ss;

                in->sin_family = AF_INET;
                if (!colon) {
                        in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
                        port = s;
                } else {
                        if ((size_t) (colon - s) >= sizeof host)
                                return -EINVAL;
                        memcpy(host, s, (size_t) (colon - s));
                        host[colon - s] = 0;
                        if (inet_pton(AF_INET, host, &in->sin_addr) != 1)
                                return -EINVAL;
                        port = colon + 1;
                }
                len = sizeof *in;
        }
        if (safe_atou64(port, &p) < 0 || p > 65535)
                return -EINVAL;
        if (ss.ss_family == AF_INET6)
                ((struct sockaddr_in6 *) &ss)->sin6_port = htons((uint16_t) p);
        else
                ((struct sockaddr_in *) &ss)->sin_port = htons((uint16_t) p);
        if (ret)
                *ret = ss;
        if (ret_len)
                *ret_len = len;
        return 0;
}

int config_parse_mode(const char *s, unsigned *ret) {
        unsigned m = 0;
        size_t n;

        if (!s)
                return -EINVAL;
        n = strlen(s);
        if (n == 0 || n > 4)
                return -EINVAL;
        for (size_t i = 0; i < n; i++) {
                if (s[i] < '0' || s[i] > '7')
                        return -EINVAL;
                m = m * 8 + (unsigned) (s[i] - '0');
        }
        if (m > 0777)
                return -EINVAL;
        *ret = m;
        return 0;
}

int config_parse_bool(const char *s, bool *ret) {
        static const char *const yes[] = { "true", "yes", "on" }, *const no[] = { "false", "no", "off" };

        if (!s)
                return -EINVAL;
        for (size_t i = 0; i < ELEMENTSOF(yes); i++) {
                if (strcasecmp(s, yes[i]) == 0) {
                        *ret = true;
                        return 0;
                }
                if (strcasecmp(s, no[i]) == 0) {
                        *ret = false;
                        return 0;
                }
        }
        return -EINVAL;
}

int config_parse_decimal(const char *s, double *ret) {
        uint64_t i, frac, scale;
        int r;

        if (!s)
                return -EINVAL;
        r = parse_decimal_parts(&s, &i, &frac, &scale);
        if (r < 0)
                return r;
        if (*s != 0)
                return -EINVAL;
        *ret = (double) i + (double) frac / (double) scale;
        return 0;
}

char *config_format_duration(char *buf, size_t size, uint64_t usec) {
        if (usec == 0) {
                snprintf(buf, size, "0");
                return buf;
        }
        for (size_t k = ELEMENTSOF(duration_units); k > 0; k--)
                if (usec % duration_units[k - 1].usec == 0) {
                        snprintf(buf, size, "%llu%s", (unsigned long long) (usec / duration_units[k - 1].usec),
                                 duration_units[k - 1].suffix);
                        break;
                }
        return buf;
}

char *config_format_size(char *buf, size_t size, uint64_t bytes) {
        static const char units[] = "TGMK";
        unsigned shift = 40;

        for (const char *u = units; *u; u++, shift -= 10)
                if (bytes > 0 && bytes % (1ULL << shift) == 0) {
                        snprintf(buf, size, "%llu%c", (unsigned long long) (bytes >> shift), *u);
                        return buf;
                }
        snprintf(buf, size, "%llu", (unsigned long long) bytes);
        return buf;
}

bool config_listen_is_loopback(const char *s) {
        struct sockaddr_storage ss;

        if (config_parse_listen(s, &ss, NULL) < 0)
                return false;
        if (ss.ss_family == AF_INET6)
                return IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *) &ss)->sin6_addr);
        return (ntohl(((const struct sockaddr_in *) &ss)->sin_addr.s_addr) >> 24) == 127;
}
