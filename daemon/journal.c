/* journal.c: the journal writer for lib/log.c and the daemon's structured events (MESSAGE_ID, STACKWATCH_*). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <syslog.h>

#include <systemd/sd-journal.h>

#include "base/escape.h"
#include "base/log.h"
#include "base/macro.h"
#include "base/string-table.h"
#include "base/time-util.h"
#include "journal.h"

static bool use_journal;

static void journal_writer(int level, int error, const char *file, int line, const char *func, const char *message) {
        char code_file[256], code_line[32];

        snprintf(code_file, sizeof code_file, "CODE_FILE=%s", file);
        snprintf(code_line, sizeof code_line, "CODE_LINE=%d", line);
        sd_journal_send_with_location(code_file, code_line, func, "MESSAGE=%s", message, "PRIORITY=%d", level,
                                      "SYSLOG_IDENTIFIER=stackwatchd", error > 0 ? "ERRNO=%d" : NULL, error, NULL);
}

/* systemd sets JOURNAL_STREAM to the device:inode of the stream it connected stderr to. */
static bool stderr_is_journal(void) {
        const char *e = getenv("JOURNAL_STREAM");
        unsigned long long dev, ino;
        struct stat st;

        if (!e || sscanf(e, "%llu:%llu", &dev, &ino) != 2 || fstat(STDERR_FILENO, &st) < 0)
                return false;
        return st.st_dev == dev && st.st_ino == ino;
}

static const char *const log_target_table[_LOG_TARGET_MAX] = {
        [LOG_TARGET_AUTO] = "auto",
        [LOG_TARGET_JOURNAL] = "journal",
        [LOG_TARGET_CONSOLE] = "console",
};
DEFINE_STRING_TABLE_LOOKUP(log_target, LogTarget);

void journal_setup(LogTarget target) {
        use_journal = target == LOG_TARGET_JOURNAL || (target == LOG_TARGET_AUTO && stderr_is_journal());
        log_set_writer(use_journal ? journal_writer : NULL);
}

bool journal_enabled(void) {
        return use_journal;
}

/* Append "KEY=VALUE" to the record unless VALUE is NULL or empty. */
static int field_add(struct iovec *iov, size_t *n, size_t max, const char *key, const char *value) {
        char *f;

        if (!value || !value[0])
                return 0;
        if (*n >= max || asprintf(&f, "%s=%s", key, value) < 0)
                return -ENOMEM;
        iov[(*n)++] = (struct iovec) { .iov_base = f, .iov_len = strlen(f) };
        return 0;
}

/* ARGV joined with spaces, each argument escaped. */
static char *cmdline_join(char *const *argv) {
        _cleanup_free_ char *buf = NULL;
        size_t size = 0;
        FILE *f;

        if (!argv || !argv[0])
                return NULL;
        f = open_memstream(&buf, &size);
        if (!f)
                return NULL;
        for (size_t i = 0; argv[i]; i++) {
                _cleanup_free_ char *e = escape_string(argv[i]);
                fprintf(f, "%s%s", i ? " " : "", e ?: "?");
        }
        if (fclose(f) != 0)
                return NULL;
        return TAKE_PTR(buf);
}

#define JOURNAL_FIELDS_MAX 40

/* Append KEY=DATA (SIZE bytes, any bytes: sd_journal_sendv() sends a value with a newline or NUL in binary form). */
static int field_add_binary(struct iovec *iov, size_t *n, size_t max, const char *key, const void *data, size_t size) {
        size_t k = strlen(key);
        char *f;

        if (!data)
                return 0;
        if (*n >= max || !(f = malloc(k + 1 + size)))
                return -ENOMEM;
        memcpy(f, key, k);
        f[k] = '=';
        memcpy(f + k + 1, data, size);
        iov[(*n)++] = (struct iovec) { .iov_base = f, .iov_len = k + 1 + size };
        return 0;
}

void journal_event(int level, const JournalEvent *ev, const char *fmt, ...) {
        _cleanup_free_ char *msg = NULL, *comm = NULL, *exe = NULL, *unit = NULL, *cgroup = NULL, *cmdline = NULL,
                            *title = NULL;
        char pid[32] = "", tid[32] = "", hook_pid[32] = "", prio[8], duration[32] = "", snap_size[32] = "",
             problem_count[32] = "", duration_text[FORMAT_TIMESPAN_MAX] = "";
        struct iovec iov[JOURNAL_FIELDS_MAX];
        size_t n = 0;
        va_list ap;
        int r;

        if (level > log_get_max_level())
                return;
        va_start(ap, fmt);
        r = vasprintf(&msg, fmt, ap);
        va_end(ap);
        if (r < 0)
                return;
        if (!use_journal) {
                fprintf(stderr, "%s\n", msg);
                return;
        }
        comm = ev->comm ? escape_string(ev->comm) : NULL;
        exe = ev->exe ? escape_string(ev->exe) : NULL;
        unit = ev->unit ? escape_string(ev->unit) : NULL;
        cgroup = ev->cgroup ? escape_string(ev->cgroup) : NULL;
        title = ev->title ? escape_string(ev->title) : NULL;
        cmdline = cmdline_join(ev->cmdline);
        if (ev->pid > 0)
                snprintf(pid, sizeof pid, "%d", (int) ev->pid);
        if (ev->tid > 0)
                snprintf(tid, sizeof tid, "%d", (int) ev->tid);
        if (ev->hook_pid > 0)
                snprintf(hook_pid, sizeof hook_pid, "%d", (int) ev->hook_pid);
        if (ev->duration_usec > 0) {
                snprintf(duration, sizeof duration, "%llu", (unsigned long long) ev->duration_usec);
                format_timespan(duration_text, sizeof duration_text, ev->duration_usec);
        }
        snprintf(prio, sizeof prio, "%d", level);
        if (ev->problem_count > 0)
                snprintf(problem_count, sizeof problem_count, "%llu", (unsigned long long) ev->problem_count);
        if (ev->snapshot_size > 0)
                snprintf(snap_size, sizeof snap_size, "%llu", (unsigned long long) ev->snapshot_size);
        r = 0;
        if (field_add(iov, &n, ELEMENTSOF(iov), "MESSAGE", msg) < 0 ||
            field_add(iov, &n, ELEMENTSOF(iov), "PRIORITY", prio) < 0 ||
            field_add(iov, &n, ELEMENTSOF(iov), "SYSLOG_IDENTIFIER", "stackwatchd") < 0 ||
            field_add(iov, &n, ELEMENTSOF(iov), "MESSAGE_ID", ev->message_id) < 0 ||
            field_add(iov, &n, ELEMENTSOF(iov), "OBJECT_PID", ev->object ? pid : NULL) < 0 ||
            field_add(iov, &n, ELEMENTSOF(iov), "STACKWATCH_PID", pid) < 0 ||
            field_add(iov, &n, ELEMENTSOF(iov), "STACKWATCH_TID", tid) < 0 ||
            field_add(iov, &n, ELEMENTSOF(iov), "STACKWATCH_RULE", ev->rule) < 0 ||
            field_add(iov, &n, ELEMENTSOF(iov), "STACKWATCH_SEVERITY", ev->severity) < 0 ||
            field_add(iov, &n, ELEMENTSOF(iov), "STACKWATCH_CLASS", ev->klass) < 0 ||
            field_add(iov, &n, ELEMENTSOF(iov), "STACKWATCH_DURATION_USEC", duration) < 0 ||
            field_add(iov, &n, ELEMENTSOF(iov), "STACKWATCH_DURATION", duration_text[0] ? duration_text : NULL) < 0 ||
            field_add(iov, &n, ELEMENTSOF(iov), "STACKWATCH_STATE", ev->state) < 0 ||
            field_add(iov, &n, ELEMENTSOF(iov), "STACKWATCH_SNAPSHOT_ID", ev->snapshot) < 0 ||
            field_add(iov, &n, ELEMENTSOF(iov), "STACKWATCH_PAGE_URL", ev->page_url) < 0 ||
            field_add(iov, &n, ELEMENTSOF(iov), "STACKWATCH_ERROR", ev->error) < 0 ||
            field_add(iov, &n, ELEMENTSOF(iov), "STACKWATCH_COMM", comm) < 0 ||
            field_add(iov, &n, ELEMENTSOF(iov), "STACKWATCH_EXE", exe) < 0 ||
            field_add(iov, &n, ELEMENTSOF(iov), "STACKWATCH_CMDLINE", cmdline) < 0 ||
            field_add(iov, &n, ELEMENTSOF(iov), "STACKWATCH_UNIT", unit) < 0 ||
            field_add(iov, &n, ELEMENTSOF(iov), "STACKWATCH_CGROUP", cgroup) < 0 ||
            field_add(iov, &n, ELEMENTSOF(iov), "STACKWATCH_HOOK", ev->hook) < 0 ||
            field_add(iov, &n, ELEMENTSOF(iov), "STACKWATCH_HOOK_PID", hook_pid) < 0 ||
            field_add(iov, &n, ELEMENTSOF(iov), "STACKWATCH_HOOK_STATUS", ev->hook_status) < 0 ||
            field_add(iov, &n, ELEMENTSOF(iov), "STACKWATCH_PYTHON_FRAME", ev->python_frame) < 0 ||
            field_add(iov, &n, ELEMENTSOF(iov), "STACKWATCH_SIGNATURE", ev->signature) < 0 ||
            field_add(iov, &n, ELEMENTSOF(iov), "STACKWATCH_TITLE", title) < 0 ||
            field_add(iov, &n, ELEMENTSOF(iov), "STACKWATCH_PROBLEM_COUNT", ev->problem_count ? problem_count : NULL) < 0 ||
            field_add(iov, &n, ELEMENTSOF(iov), "STACKWATCH_GOROUTINES", ev->goroutines) < 0 ||
            field_add(iov, &n, ELEMENTSOF(iov), "STACKWATCH_STACK", ev->stack) < 0 ||
            field_add(iov, &n, ELEMENTSOF(iov), "STACKWATCH_SNAPSHOT_SIZE", snap_size) < 0 ||
            field_add(iov, &n, ELEMENTSOF(iov), "STACKWATCH_SNAPSHOT_TRUNCATED", ev->snapshot_truncated ? "1" : NULL) <
                    0 ||
            field_add_binary(iov, &n, ELEMENTSOF(iov), "STACKWATCH_SNAPSHOT_FILE", ev->snapshot_file,
                             ev->snapshot_file_size) < 0)
                r = -ENOMEM;
        if (r >= 0)
                (void) sd_journal_sendv(iov, (int) n);
        for (size_t i = 0; i < n; i++)
                free(iov[i].iov_base);
}
