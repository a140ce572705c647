/* log.c: the logger behind log.h: stderr by default, or a writer the program installs (the daemon's journal). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"

static int log_max_level = LOG_INFO;
static LogWriter log_writer = NULL;

void log_set_max_level(int level) {
        log_max_level = level;
}

int log_get_max_level(void) {
        return log_max_level;
}

void log_set_writer(LogWriter writer) {
        log_writer = writer;
}

int log_internal(int level, int error, const char *file, int line, const char *func, const char *fmt, ...) {
        char buf[2048];
        va_list ap;

        error = abs(error);
        /* %m must format ERROR, not whatever errno happens to be by now. */
        errno = error;
        va_start(ap, fmt);
        vsnprintf(buf, sizeof buf, fmt, ap);
        va_end(ap);

        if (log_writer)
                log_writer(level, error, file, line, func, buf);
        else
                fprintf(stderr, "%s\n", buf);
        return -error;
}
