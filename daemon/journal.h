/* journal.h: the daemon's log sink (the journal under systemd, stderr otherwise) and structured events. */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

/* Message IDs of the events the daemon logs (journalctl MESSAGE_ID=…). */
#define SW_MESSAGE_RULE_FIRED "5b6a1e30c8f84d5a9f8c1e2d7a4b3c01"
#define SW_MESSAGE_SNAPSHOT "5b6a1e30c8f84d5a9f8c1e2d7a4b3c02"
#define SW_MESSAGE_CAPTURE_FAILED "5b6a1e30c8f84d5a9f8c1e2d7a4b3c03"
#define SW_MESSAGE_BUDGET "5b6a1e30c8f84d5a9f8c1e2d7a4b3c04"
/* A hook started, ended, timed out, could not run, or was dropped; and a line a hook wrote. */
#define SW_MESSAGE_HOOK "5b6a1e30c8f84d5a9f8c1e2d7a4b3c05"
#define SW_MESSAGE_HOOK_OUTPUT "5b6a1e30c8f84d5a9f8c1e2d7a4b3c06"

/* Send log_*() output to the journal when systemd started us with our stderr connected to it. */
void journal_setup(void);
bool journal_enabled(void);

typedef struct JournalEvent {
        const char *message_id;
        pid_t pid;              /* 0: none */
        pid_t tid;
        const char *rule;
        const char *klass;
        const char *snapshot;
        const char *comm;       /* process-supplied: escaped before it is logged */
        const char *hook;       /* a hook's argv[0] */
        pid_t hook_pid;         /* 0: none */
        const char *hook_status; /* how it ended: "0".."255", a signal ("SIGKILL"), or an errno name ("ENOENT") */
} JournalEvent;

/* Log one structured event: to the journal with STACKWATCH_* fields, or to stderr as a line. */
void journal_event(int level, const JournalEvent *ev, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
