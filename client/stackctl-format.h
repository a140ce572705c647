/* stackctl-format.h: durations, sizes and times as people read them in stackctl's tables. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "base/time-util.h" /* format_timespan() */

#define FORMAT_BYTES_MAX 32
#define FORMAT_TIMESTAMP_MAX 32

/* "512 B", "1.5 KiB", "12.0 MiB", … Returns BUF. */
char *format_bytes(char *buf, size_t size, uint64_t bytes);
/* Local time "YYYY-MM-DD HH:MM:SS" of a CLOCK_REALTIME time in µs ("@SECONDS" if it cannot be). Returns BUF. */
char *format_timestamp(char *buf, size_t size, uint64_t usec);
