/* log.h: logging to stderr (or a writer the program installs), returning -errno for "return log_…_errno()". */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <syslog.h>

#include "base/macro.h"

/* Where a formatted message goes instead of stderr. The journal writer lives with the daemon, so that lib/ and
 * stackctl do not pull in libsystemd and its dependencies (a fifth of stackctl's start-up). */
typedef void (*LogWriter)(int level, int error, const char *file, int line, const char *func, const char *message);

/* The process-wide log settings: the only mutable state in lib/, because a logger is process-wide. */
void log_set_max_level(int level);
int log_get_max_level(void);
void log_set_writer(LogWriter writer);

/* Log at LEVEL with ERROR as %m; returns -abs(error) (or 0 when ERROR is 0). */
int log_internal(int level, int error, const char *file, int line, const char *func, const char *fmt, ...)
        _printf_(6, 7);

/* Mark an error code as synthetic: logged as given, but %m is not derived from the current errno. */
#define SYNTHETIC_ERRNO(e) (e)

#define log_full_errno(level, error, ...)                                                       \
        ({                                                                                      \
                int _l_ = (level), _e_ = (error);                                               \
                _l_ <= log_get_max_level()                                                      \
                        ? log_internal(_l_, _e_, __FILE__, __LINE__, __func__, __VA_ARGS__)      \
                        : -abs(_e_);                                                            \
        })
#define log_full(level, ...) (void) log_full_errno(level, 0, __VA_ARGS__)

#define log_debug(...) log_full(LOG_DEBUG, __VA_ARGS__)
#define log_info(...) log_full(LOG_INFO, __VA_ARGS__)
#define log_notice(...) log_full(LOG_NOTICE, __VA_ARGS__)
#define log_warning(...) log_full(LOG_WARNING, __VA_ARGS__)
#define log_error(...) log_full(LOG_ERR, __VA_ARGS__)

#define log_debug_errno(e, ...) log_full_errno(LOG_DEBUG, e, __VA_ARGS__)
#define log_info_errno(e, ...) log_full_errno(LOG_INFO, e, __VA_ARGS__)
#define log_warning_errno(e, ...) log_full_errno(LOG_WARNING, e, __VA_ARGS__)
#define log_error_errno(e, ...) log_full_errno(LOG_ERR, e, __VA_ARGS__)

#define log_oom() log_error_errno(ENOMEM, "Out of memory.")
