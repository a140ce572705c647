/* time-util.c: durations as people read them (see time-util.h). */
#include <stdio.h>

#include "base/time-util.h"

/* Two units at most, the smaller one left out when it is zero; tenths below 10 (truncated, never rounded up, so
 * that 9.99 s reads "9.9s" and not "10.0s"), also left out when zero. */
char *format_timespan(char *buf, size_t size, uint64_t usec) {
        unsigned long long us = usec, ms = us / USEC_PER_MSEC, s = us / USEC_PER_SEC;
        unsigned long long big, small;
        const char *bu, *su;

        if (us < USEC_PER_MSEC) {
                snprintf(buf, size, "%lluus", us);
                return buf;
        }
        if (us < 10 * USEC_PER_MSEC && us % USEC_PER_MSEC >= 100) {
                snprintf(buf, size, "%llu.%llums", ms, us % USEC_PER_MSEC / 100);
                return buf;
        }
        if (us < USEC_PER_SEC) {
                snprintf(buf, size, "%llums", ms);
                return buf;
        }
        if (us < 10 * USEC_PER_SEC && ms % 1000 >= 100) {
                snprintf(buf, size, "%llu.%llus", s, ms % 1000 / 100);
                return buf;
        }
        if (s < 60) {
                snprintf(buf, size, "%llus", s);
                return buf;
        }
        if (s < 3600)
                big = s / 60, small = s % 60, bu = "m", su = "s";
        else if (s < 86400)
                big = s / 3600, small = s / 60 % 60, bu = "h", su = "m";
        else
                big = s / 86400, small = s / 3600 % 24, bu = "d", su = "h";
        if (small > 0)
                snprintf(buf, size, "%llu%s%llu%s", big, bu, small, su);
        else
                snprintf(buf, size, "%llu%s", big, bu);
        return buf;
}
