/* journal.c: the journal writer for lib/log.c and the daemon's structured events (MESSAGE_ID, STACKWATCH_*). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <syslog.h>

#include <systemd/sd-journal.h>

#include "escape.h"
#include "journal.h"
#include "log.h"
#include "macro.h"

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

void journal_setup(void) {
        use_journal = stderr_is_journal();
        if (use_journal)
                log_set_writer(journal_writer);
}

bool journal_enabled(void) {
        return use_journal;
}

void journal_event(int level, const JournalEvent *ev, const char *fmt, ...) {
        _cleanup_free_ char *msg = NULL, *comm = NULL;
        va_list ap;
        int r;

        if (level > log_get_max_level())
                return;
        va_start(ap, fmt);
        r = vasprintf(&msg, fmt, ap);
        va_end(ap);
        if (r < 0)
                return;
        comm = ev->comm ? escape_string(ev->comm) : NULL;

        if (!use_journal) {
                fprintf(stderr, "%s\n", msg);
                return;
        }
        char pid[32] = "", tid[32] = "", hook_pid[32] = "";
        if (ev->pid > 0)
                snprintf(pid, sizeof pid, "%d", (int) ev->pid);
        if (ev->tid > 0)
                snprintf(tid, sizeof tid, "%d", (int) ev->tid);
        if (ev->hook_pid > 0)
                snprintf(hook_pid, sizeof hook_pid, "%d", (int) ev->hook_pid);
        /* sd_journal_send stops at the first NULL format, so absent fields become empty ones at the end. */
        sd_journal_send("MESSAGE=%s", msg, "PRIORITY=%d", level, "SYSLOG_IDENTIFIER=stackwatchd",
                        "MESSAGE_ID=%s", ev->message_id ?: "", "STACKWATCH_PID=%s", pid, "STACKWATCH_TID=%s", tid,
                        "STACKWATCH_RULE=%s", ev->rule ?: "", "STACKWATCH_CLASS=%s", ev->klass ?: "",
                        "STACKWATCH_SNAPSHOT=%s", ev->snapshot ?: "", "STACKWATCH_COMM=%s", comm ?: "",
                        "STACKWATCH_HOOK=%s", ev->hook ?: "", "STACKWATCH_HOOK_PID=%s", hook_pid,
                        "STACKWATCH_HOOK_STATUS=%s", ev->hook_status ?: "", NULL);
}
