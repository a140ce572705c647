/* stackctl-format.c: durations, sizes and times as people read them in stackctl's tables. */
#include <stdio.h>
#include <time.h>

#include "base/macro.h"
#include "stackctl-format.h"

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

char *format_bytes(char *buf, size_t size, uint64_t bytes) {
        static const char *const units[] = { "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
        double v = (double) bytes;
        size_t i = 0;

        if (bytes < 1024) {
                snprintf(buf, size, "%llu B", (unsigned long long) bytes);
                return buf;
        }
        v /= 1024;
        while (v >= 1024 && i + 1 < ELEMENTSOF(units)) {
                v /= 1024;
                i++;
        }
        snprintf(buf, size, "%.1f %s", v, units[i]);
        return buf;
}

char *format_timestamp(char *buf, size_t size, uint64_t usec) {
        time_t t = (time_t) (usec / USEC_PER_SEC);
        struct tm tm;

        if (!localtime_r(&t, &tm) || strftime(buf, size, "%Y-%m-%d %H:%M:%S", &tm) == 0)
                snprintf(buf, size, "@%llu", (unsigned long long) (usec / USEC_PER_SEC));
        return buf;
}
