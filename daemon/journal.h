/* journal.h: the daemon's log sink (the journal under systemd, stderr otherwise) and structured events. */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* Message IDs of the events the daemon logs (journalctl MESSAGE_ID=…); conf/stackwatch.catalog explains each, and
 * stackwatchd(8) lists them. */
/* One record per firing, with the snapshot (or why there is none), the process and the top of the stack. */
#define SW_MESSAGE_RULE_FIRED "5b6a1e30c8f84d5a9f8c1e2d7a4b3c01"
/* The configuration was reloaded, or a reload failed and the running one was kept. (...c02 meant "snapshot written"
 * until the firing record took that over; it is not used again, and neither is ...c04, the old budget message.) */
#define SW_MESSAGE_RELOAD "5b6a1e30c8f84d5a9f8c1e2d7a4b3c07"
#define SW_MESSAGE_CAPTURE_FAILED "5b6a1e30c8f84d5a9f8c1e2d7a4b3c03"
/* An alert resolved: the thread left the rule's class, its process exited, or the rule went away. */
#define SW_MESSAGE_RULE_RESOLVED "5b6a1e30c8f84d5a9f8c1e2d7a4b3c08"
/* A hook started, ended, timed out, could not run, or was dropped; and a line a hook wrote. */
#define SW_MESSAGE_HOOK "5b6a1e30c8f84d5a9f8c1e2d7a4b3c05"
#define SW_MESSAGE_HOOK_OUTPUT "5b6a1e30c8f84d5a9f8c1e2d7a4b3c06"

/* Where log_*() output and events go: the journal when systemd started us with our stderr connected to it (auto),
 * or always (journal: a daemon started by a script or another supervisor), or always stderr (console). */
typedef enum LogTarget {
        LOG_TARGET_AUTO,
        LOG_TARGET_JOURNAL,
        LOG_TARGET_CONSOLE,
        _LOG_TARGET_MAX,
        _LOG_TARGET_INVALID = -EINVAL,
} LogTarget;

const char *log_target_to_string(LogTarget t);
LogTarget log_target_from_string(const char *s);

void journal_setup(LogTarget target);
bool journal_enabled(void);

typedef struct JournalEvent {
        const char *message_id;
        pid_t pid;              /* 0: none */
        pid_t tid;
        const char *rule;
        const char *klass;
        const char *snapshot;   /* STACKWATCH_SNAPSHOT_ID */
        const char *page_url;   /* STACKWATCH_PAGE_URL: the snapshot's web page, with a TCP listener */
        const char *comm;       /* process-supplied: escaped before it is logged, like exe, unit, cgroup, cmdline */
        bool object;            /* the record is about PID: OBJECT_PID=, so journald adds the process's own fields
                                 * (OBJECT_EXE=, OBJECT_SYSTEMD_UNIT=, ...) and journalctl -u UNIT shows it */
        const char *severity;
        const char *exe, *unit, *cgroup;
        char *const *cmdline;
        uint64_t duration_usec; /* 0: none; written also as STACKWATCH_DURATION, "2m5s" */
        const char *state;      /* STACKWATCH_STATE: the alert's, "firing" or "resolved"; NULL: none */
        const char *error;
        const char *stack;      /* STACKWATCH_STACK: a thread's whole stack as text (already escaped) */
        const char *python_frame; /* STACKWATCH_PYTHON_FRAME: the innermost Python frame it runs (already escaped) */
        const char *goroutines; /* STACKWATCH_GOROUTINES: a Go program's largest group of blocked goroutines (escaped) */
        const void *snapshot_file;      /* STACKWATCH_SNAPSHOT_FILE: a snapshot's archive file, binary */
        size_t snapshot_file_size;
        uint64_t snapshot_size;         /* STACKWATCH_SNAPSHOT_SIZE: that file's size, also when left out */
        bool snapshot_truncated;        /* STACKWATCH_SNAPSHOT_TRUNCATED=1: left out, over the size bound */
        const char *signature;  /* STACKWATCH_SIGNATURE: the problem's key */
        const char *title;      /* STACKWATCH_TITLE: what a person reads of it (process-supplied: escaped when logged) */
        uint64_t problem_count; /* STACKWATCH_PROBLEM_COUNT: its firings while it is open; 0: none */
        const char *hook;       /* a hook's argv[0] */
        pid_t hook_pid;         /* 0: none */
        const char *hook_status; /* how it ended: "0".."255", a signal ("SIGKILL"), or an errno name ("ENOENT") */
} JournalEvent;

/* Log one structured event: to the journal with the STACKWATCH_* fields it has (an unset one is left out, never
 * written empty), or to stderr as its message. */
void journal_event(int level, const JournalEvent *ev, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
