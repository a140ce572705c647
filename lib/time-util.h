/* time-util.h: the one "now in microseconds" every module uses. */
#pragma once

#include <stdint.h>
#include <time.h>

#include "macro.h"

static inline uint64_t now_usec(clockid_t clock) {
        struct timespec ts;

        clock_gettime(clock, &ts);
        return (uint64_t) ts.tv_sec * USEC_PER_SEC + (uint64_t) ts.tv_nsec / NSEC_PER_USEC;
}
