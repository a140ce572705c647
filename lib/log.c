/* log.c: the logger behind log.h: stderr in the foreground, the journal under systemd. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <systemd/sd-journal.h>

#include "log.h"

static int log_max_level = LOG_INFO;
static LogTarget log_target = LOG_TARGET_STDERR;

void log_set_max_level(int level) {
        log_max_level = level;
}

int log_get_max_level(void) {
        return log_max_level;
}

void log_set_target(LogTarget target) {
        log_target = target;
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

        if (log_target == LOG_TARGET_JOURNAL) {
                char code_file[256], code_line[32];

                snprintf(code_file, sizeof code_file, "CODE_FILE=%s", file);
                snprintf(code_line, sizeof code_line, "CODE_LINE=%d", line);
                sd_journal_send_with_location(code_file, code_line, func, "MESSAGE=%s", buf,
                                              "PRIORITY=%d", level, error > 0 ? "ERRNO=%d" : NULL, error,
                                              NULL);
        } else
                fprintf(stderr, "%s\n", buf);

        return -error;
}
