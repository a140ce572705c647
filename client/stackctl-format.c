/* stackctl-format.c: durations, sizes and times as people read them in stackctl's tables. */
#include <stdio.h>
#include <time.h>

#include "base/macro.h"
#include "stackctl-format.h"

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
