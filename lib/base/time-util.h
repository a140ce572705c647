/* time-util.h: the one "now in microseconds" every module uses, and durations as people read them. */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "base/macro.h"

static inline uint64_t now_usec(clockid_t clock) {
        struct timespec ts;

        clock_gettime(clock, &ts);
        return (uint64_t) ts.tv_sec * USEC_PER_SEC + (uint64_t) ts.tv_nsec / NSEC_PER_USEC;
}

/* A timespec (a file's mtime) in microseconds; 0 for a time before the epoch. */
static inline uint64_t timespec_load(const struct timespec *ts) {
        if (ts->tv_sec < 0)
                return 0;
        return (uint64_t) ts->tv_sec * USEC_PER_SEC + (uint64_t) ts->tv_nsec / NSEC_PER_USEC;
}

#define FORMAT_TIMESPAN_MAX 32

/* "850us", "4.2ms", "120ms", "3.2s", "42s", "5m10s", "5m", "2h", "2h5m", "3d4h". Returns BUF. */
char *format_timespan(char *buf, size_t size, uint64_t usec);
