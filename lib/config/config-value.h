/* config-value.h: the configuration's value parsers and formatters, and the list of errors with their places. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>

#include "base/macro.h"

#define CONFIG_USEC_PER_MINUTE (60 * USEC_PER_SEC)
#define CONFIG_USEC_PER_HOUR (60 * CONFIG_USEC_PER_MINUTE)
#define CONFIG_USEC_PER_DAY (24 * CONFIG_USEC_PER_HOUR)
#define CONFIG_KIB 1024ULL
#define CONFIG_MIB (1024 * CONFIG_KIB)
#define CONFIG_GIB (1024 * CONFIG_MIB)

/* After this many errors the rest are summarized in one line. */
#define CONFIG_ERRORS_MAX 100

typedef struct ConfigError {
        char *file;
        unsigned line, column;          /* 1-based; 0 when the error concerns the whole file */
        char *message;
} ConfigError;

typedef struct ConfigErrors {
        ConfigError *errors;
        size_t n, n_allocated;
        size_t n_dropped;               /* errors beyond CONFIG_ERRORS_MAX, counted but not kept */
} ConfigErrors;

/* Free the errors and reset E to empty. */
void config_errors_done(ConfigErrors *e);
/* Append an error (MESSAGE formatted from FMT); -ENOMEM. Beyond CONFIG_ERRORS_MAX errors only count. */
int config_errors_add(ConfigErrors *e, const char *file, unsigned line, unsigned column, const char *fmt, ...)
        _printf_(5, 6);
/* Print "FILE:LINE:COLUMN: MESSAGE" per error into F, one per line ("FILE: MESSAGE" when LINE is 0). */
void config_errors_print(const ConfigErrors *e, FILE *f);
/* Errors recorded so far, dropped ones included. */
size_t config_errors_count(const ConfigErrors *e);
/* Order the errors from FROM on by file (in load order), line and column: checks that run after a file was
 * walked (a missing key, a duplicate name) then read in place. Stable; at most CONFIG_ERRORS_MAX entries. */
void config_errors_sort(ConfigErrors *e, size_t from);

/* The value parsers behind the file format; each takes the whole string, -EINVAL for malformed input and
 * -ERANGE on overflow, and leaves *ret untouched on failure.
 * Durations: an integer or decimal with a unit us, ms, s, m, h or d ("1.5s", "100ms"); a bare number is seconds.
 * Sizes: an integer with an optional K, M, G or T suffix, powers of 1024. Fractions of a microsecond or a byte
 * are an error, not a rounding. */
int config_parse_duration(const char *s, uint64_t *ret_usec);
int config_parse_size(const char *s, uint64_t *ret_bytes);
/* A TCP listen address: "PORT" (loopback), "ADDR:PORT" (IPv4) or "[ADDR]:PORT" (IPv6); port 0 lets the kernel
 * pick one. RET (optional) gets the socket address and RET_LEN its length. -EINVAL when malformed. */
int config_parse_listen(const char *s, struct sockaddr_storage *ret, socklen_t *ret_len);
/* Whether listen address S (as config_parse_listen() takes it) is a loopback address: 127.0.0.0/8 or ::1. */
bool config_listen_is_loopback(const char *s);
/* A file mode in octal, like 0660 or 660, at most 0777. */
int config_parse_mode(const char *s, unsigned *ret);
/* true/false, yes/no, on/off. */
int config_parse_bool(const char *s, bool *ret);
/* A non-negative decimal number like 50 or 12.5 (no exponent, no sign). */
int config_parse_decimal(const char *s, double *ret);
/* Short text for a duration or size ("1.5s", "10m", "512M") into BUF of SIZE bytes; returns BUF. */
char *config_format_duration(char *buf, size_t size, uint64_t usec);
char *config_format_size(char *buf, size_t size, uint64_t bytes);
#define CONFIG_FORMAT_MAX 32
