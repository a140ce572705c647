/* stackctl-format.h: durations, sizes and times as people read them in stackctl's tables. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#define FORMAT_TIMESPAN_MAX 32
#define FORMAT_BYTES_MAX 32
#define FORMAT_TIMESTAMP_MAX 32

/* "850us", "4.2ms", "120ms", "3.2s", "42s", "5m10s", "5m", "2h", "2h5m", "3d4h". Returns BUF. */
char *format_timespan(char *buf, size_t size, uint64_t usec);
/* "512 B", "1.5 KiB", "12.0 MiB", … Returns BUF. */
char *format_bytes(char *buf, size_t size, uint64_t bytes);
/* Local time "YYYY-MM-DD HH:MM:SS" of a CLOCK_REALTIME time in µs ("@SECONDS" if it cannot be). Returns BUF. */
char *format_timestamp(char *buf, size_t size, uint64_t usec);
