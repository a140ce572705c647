/* parse-util.h: bounded, locale-free number parsers for /proc and command lines. */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* Parse a whole string as an unsigned decimal (base 0 also accepts 0x…); -EINVAL, -ERANGE. */
int safe_atou64(const char *s, uint64_t *ret);
int safe_atou64_base(const char *s, unsigned base, uint64_t *ret);
int safe_atou(const char *s, unsigned *ret);
int safe_atoi(const char *s, int *ret);
/* A pid or tid: 1 … 2^22 (PID_MAX_LIMIT); anything else is -EINVAL/-ERANGE. */
int parse_pid(const char *s, int *ret);

/* The one number scanner under all the others: digits of BASE (2..16) in [*p, end), at least one, no sign, no
 * spaces skipped; advances *p past them. -EINVAL when there is no digit, -ERANGE past UINT64_MAX. */
int scan_digits(const char **p, const char *end, unsigned base, uint64_t *ret);

/* Cursor parsers for one pass over a buffer: each skips leading spaces, parses one token, advances *p.
 * They never read past END and fail with -EINVAL on a missing or malformed token, -ERANGE on overflow. */
int scan_u64(const char **p, const char *end, uint64_t *ret);
int scan_i64(const char **p, const char *end, int64_t *ret);
int scan_hex_u64(const char **p, const char *end, uint64_t *ret); /* accepts an optional 0x */
int scan_char(const char **p, const char *end, char *ret);
/* Skip N space-separated tokens. */
int scan_skip(const char **p, const char *end, unsigned n);
