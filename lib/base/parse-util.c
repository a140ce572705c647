/* parse-util.c: number parsers that check every byte and every overflow. */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>

#include "base/parse-util.h"

static bool is_space(char c) {
        return c == ' ' || c == '\t' || c == '\n';
}

static int digit_value(char c, unsigned base) {
        unsigned v;

        if (c >= '0' && c <= '9')
                v = (unsigned) (c - '0');
        else if (c >= 'a' && c <= 'f')
                v = (unsigned) (c - 'a') + 10;
        else if (c >= 'A' && c <= 'F')
                v = (unsigned) (c - 'A') + 10;
        else
                return -1;
        return v < base ? (int) v : -1;
}

int scan_digits(const char **p, const char *end, unsigned base, uint64_t *ret) {
        const char *s = *p;
        uint64_t v = 0;
        int d;

        /* The overflow bounds once, not a division per digit: /proc/PID/stat is parsed 10k times a poll. */
        const uint64_t max_div = UINT64_MAX / base, max_rem = UINT64_MAX % base;

        if (s >= end || digit_value(*s, base) < 0)
                return -EINVAL;
        for (; s < end && (d = digit_value(*s, base)) >= 0; s++) {
                if (v > max_div || (v == max_div && (uint64_t) d > max_rem))
                        return -ERANGE;
                v = v * base + (uint64_t) d;
        }
        *p = s;
        *ret = v;
        return 0;
}

int safe_atou64_base(const char *s, unsigned base, uint64_t *ret) {
        const char *end;
        uint64_t v;
        int r;

        if (!s)
                return -EINVAL;
        end = s + __builtin_strlen(s);
        if (base == 0) {
                if (end - s > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
                        s += 2;
                        base = 16;
                } else
                        base = 10;
        }
        r = scan_digits(&s, end, base, &v);
        if (r < 0)
                return r;
        if (s != end)
                return -EINVAL;
        *ret = v;
        return 0;
}

int safe_atou64(const char *s, uint64_t *ret) {
        return safe_atou64_base(s, 10, ret);
}

int safe_atou(const char *s, unsigned *ret) {
        uint64_t v;
        int r = safe_atou64(s, &v);

        if (r < 0)
                return r;
        if (v > UINT_MAX)
                return -ERANGE;
        *ret = (unsigned) v;
        return 0;
}

int safe_atoi(const char *s, int *ret) {
        bool neg = false;
        uint64_t v;
        int r;

        if (s && *s == '-') {
                neg = true;
                s++;
        }
        r = safe_atou64(s, &v);
        if (r < 0)
                return r;
        if (neg ? v > (uint64_t) INT_MAX + 1 : v > INT_MAX)
                return -ERANGE;
        *ret = neg ? (int) -(int64_t) v : (int) v;
        return 0;
}

int parse_pid(const char *s, int *ret) {
        unsigned v;
        int r = safe_atou(s, &v);

        if (r < 0)
                return r;
        if (v < 1 || v > (1U << 22))
                return -ERANGE;
        *ret = (int) v;
        return 0;
}

static void skip_spaces(const char **p, const char *end) {
        while (*p < end && is_space(**p))
                (*p)++;
}

/* A token must end at a space or the end of the buffer, so "12x" is not 12. */
static int token_end_ok(const char *p, const char *end) {
        return p >= end || is_space(*p) ? 0 : -EINVAL;
}

/* One unsigned token of BASE at *S (already past spaces and any prefix) ending at a space or END; commits *P. */
static int scan_unsigned_token(const char **p, const char *s, const char *end, unsigned base, uint64_t *ret) {
        uint64_t v;
        int r;

        r = scan_digits(&s, end, base, &v);
        if (r < 0)
                return r;
        r = token_end_ok(s, end);
        if (r < 0)
                return r;
        *ret = v;
        *p = s;
        return 0;
}

int scan_u64(const char **p, const char *end, uint64_t *ret) {
        skip_spaces(p, end);
        return scan_unsigned_token(p, *p, end, 10, ret);
}

int scan_i64(const char **p, const char *end, int64_t *ret) {
        bool neg = false;
        const char *s;
        uint64_t v;
        int r;

        skip_spaces(p, end);
        s = *p;
        if (s < end && *s == '-') {
                neg = true;
                s++;
        }
        r = scan_digits(&s, end, 10, &v);
        if (r < 0)
                return r;
        r = token_end_ok(s, end);
        if (r < 0)
                return r;
        if (neg ? v > (uint64_t) INT64_MAX + 1 : v > INT64_MAX)
                return -ERANGE;
        *ret = neg ? (int64_t) (0 - v) : (int64_t) v;
        *p = s;
        return 0;
}

int scan_hex_u64(const char **p, const char *end, uint64_t *ret) {
        const char *s;

        skip_spaces(p, end);
        s = *p;
        if (end - s > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
                s += 2;
        return scan_unsigned_token(p, s, end, 16, ret);
}

int scan_char(const char **p, const char *end, char *ret) {
        skip_spaces(p, end);
        if (*p >= end || token_end_ok(*p + 1, end) < 0)
                return -EINVAL;
        *ret = **p;
        (*p)++;
        return 0;
}

int scan_skip(const char **p, const char *end, unsigned n) {
        for (unsigned i = 0; i < n; i++) {
                skip_spaces(p, end);
                if (*p >= end)
                        return -EINVAL;
                while (*p < end && !is_space(**p))
                        (*p)++;
        }
        return 0;
}
