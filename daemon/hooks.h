/* hooks.h: alert hooks: execve of a configured program (never a shell), the event in environment variables, a
 * timeout, a cap on how many run at once, stdout/stderr to the log, reaped by the event loop. */
#pragma once

#include <stdint.h>
#include <sys/types.h>

#include <json-c/json.h>
#include <systemd/sd-event.h>

#include "base/macro.h"

typedef struct Hooks Hooks;

/* Hooks waiting for a free slot when max_running are running; a firing beyond these is dropped and counted. */
#define HOOKS_QUEUE_MAX 64
/* The PATH a hook gets: the daemon's own environment is never passed on. */
#define HOOKS_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

/* The environment variables a hook gets (besides PATH). Each is absent when its value is unknown. */
#define HOOK_ENV_RULE "STACKWATCH_RULE"
#define HOOK_ENV_PID "STACKWATCH_PID"
#define HOOK_ENV_TID "STACKWATCH_TID"
#define HOOK_ENV_COMM "STACKWATCH_COMM"
#define HOOK_ENV_CLASS "STACKWATCH_CLASS"
#define HOOK_ENV_SNAPSHOT "STACKWATCH_SNAPSHOT"                 /* the archived file's absolute path */
#define HOOK_ENV_SNAPSHOT_ID "STACKWATCH_SNAPSHOT_ID"
#define HOOK_ENV_PAGE_URL "STACKWATCH_PAGE_URL"                 /* the snapshot's web page, with a TCP listener */
#define HOOK_ENV_SUMMARY "STACKWATCH_SUMMARY"
#define HOOK_ENV_ERROR "STACKWATCH_ERROR"                       /* why there is no snapshot */
#define HOOK_ENV_TIMESTAMP "STACKWATCH_TIMESTAMP"               /* CLOCK_REALTIME µs since the epoch */
#define HOOK_ENV_STATE "STACKWATCH_STATE"                       /* "firing" or "resolved" */
#define HOOK_ENV_SEVERITY "STACKWATCH_SEVERITY"                 /* the rule's: critical, warning, info */
#define HOOK_ENV_HOST "STACKWATCH_HOST"
#define HOOK_ENV_EXE "STACKWATCH_EXE"
#define HOOK_ENV_UNIT "STACKWATCH_UNIT"
#define HOOK_ENV_DURATION "STACKWATCH_DURATION_USEC"            /* how long the thread has been in its class */
#define HOOK_ENV_PYTHON_FRAME "STACKWATCH_PYTHON_FRAME"         /* "inner (app.py:12)": where its Python code is */
#define HOOK_ENV_SIGNATURE "STACKWATCH_SIGNATURE"             /* the problem's key (render/signature.h) */
#define HOOK_ENV_TITLE "STACKWATCH_TITLE"                       /* and what a person reads of it */
#define HOOK_ENV_PROBLEM_COUNT "STACKWATCH_PROBLEM_COUNT"       /* firings of the problem while it is open */
#define HOOK_ENV_EVENT "STACKWATCH_EVENT"                       /* all of the above as one JSON object */

/* STACKWATCH_EVENT, "stackwatch.hook-event/1": {"schema", "rule", "pid", "tid", "comm", "class", "snapshot_id",
 * "snapshot", "summary", "error", "timestamp_usec", "state", "repeat", "severity", "host", "exe", "cmdline", "unit",
 * "cgroup", "since_usec", "duration_usec", "expires_usec", "frames", "python_frame", "python_cycle"}, every key
 * always present, null when unknown. "python_cycle" is [{"pid", "tid", "frame"}, …]: a deadlock's threads that run
 * Python code, in wait order.
 * Version history:
 *   1  the keys above; state to frames were added later, python_frame and python_cycle later still (adding keys
 *      keeps the version).
 * Removing or renaming a key bumps the version; adding one does not. */
#define HOOK_EVENT_SCHEMA "stackwatch.hook-event/1"

/* A thread and the innermost Python frame it runs. */
typedef struct HookPythonFrame {
        pid_t pid, tid;
        char *frame;                    /* "inner (app.py:12)", escaped */
} HookPythonFrame;

typedef struct HookEvent {
        const char *rule;
        pid_t pid, tid;
        const char *comm;               /* process-supplied: passed as plain data, never interpreted */
        const char *klass;              /* thread class name, e.g. "blocked" */
        const char *snapshot_id;        /* NULL when there is no snapshot (capture off, failed, or over budget) */
        const char *snapshot_path;      /* absolute path of the archived file, NULL with snapshot_id */
        const char *page_url;           /* the snapshot's web page; NULL without a snapshot or a TCP listener */
        const char *summary;            /* one line: "pid 1234 (nginx) thread 1240 blocked for 125.0 s in read" */
        const char *error;              /* why there is no snapshot, NULL otherwise */
        uint64_t timestamp_usec;        /* CLOCK_REALTIME of the firing (of the recovery, when resolved) */
        const char *state;              /* "firing", or "resolved" once the thread left its class or exited */
        bool repeat;                    /* firing: the alert sent again, not a new firing */
        const char *severity;
        const char *host, *exe, *unit, *cgroup;
        char *const *cmdline;           /* NULL when unknown */
        char *const *frames;            /* the top of the thread's stack, one line per frame; NULL when unknown */
        const char *python_frame;       /* the innermost Python frame the thread runs; NULL when none or unknown */
        const HookPythonFrame *python_cycle; /* a deadlock: its threads that run Python code, in wait order */
        size_t n_python_cycle;
        uint64_t since_usec;            /* CLOCK_REALTIME when the thread entered its class */
        uint64_t duration_usec;         /* how long it has been (resolved: had been) in it */
        uint64_t expires_usec;          /* firing: CLOCK_REALTIME after which a receiver may end the alert, unless
                                         * it is sent again; 0 when resolved */
        const char *signature, *title;  /* the problem the snapshot shows; NULL without one */
        uint64_t count;                 /* the firings of it while this alert is open (1: this one) */
} HookEvent;

typedef struct HookStats {
        uint64_t started;               /* processes spawned */
        uint64_t succeeded;             /* exited 0 */
        uint64_t failed;                /* exited non-zero, killed by a signal, or could not be executed */
        uint64_t timed_out;             /* killed at the timeout (also counted in failed) */
        uint64_t dropped;               /* not run: the queue behind max_running was full */
} HookStats;

/* A hook runner on the event loop E (SIGCHLD must be blocked), with the compiled default limits. */
int hooks_new(sd_event *e, Hooks **ret);
/* Kills (SIGKILL, whole process group) and reaps what still runs, forgets what is queued; NULL-safe. */
Hooks *hooks_free(Hooks *h);
DEFINE_TRIVIAL_CLEANUP_FUNC(Hooks *, hooks_free);

/* The timeout applies to hooks started later; a higher MAX_RUNNING (at least 1) starts queued hooks at once. */
void hooks_set_limits(Hooks *h, uint64_t timeout_usec, unsigned max_running);

/* Run ARGV (argv[0] an absolute path) for EV now, or queue it when max_running are running (at most
 * HOOKS_QUEUE_MAX wait; beyond that the event is dropped with a warning, counted, and -ENOBUFS returned).
 * Returns 0 when started or queued, -errno otherwise. Every failure is logged here, with the rule and the path,
 * so the caller need not log again: -EINVAL for an argv that is empty or not absolute, the exec error for a
 * program that cannot be executed (-ENOENT, -EACCES, -ENOEXEC: counted in failed), -ENOMEM. */
int hooks_run(Hooks *h, char *const *argv, const HookEvent *ev);

/* How many hooks run now, and how many wait for a slot. */
unsigned hooks_running(const Hooks *h);
unsigned hooks_queued(const Hooks *h);
const HookStats *hooks_stats(const Hooks *h);

/* EV as the STACKWATCH_EVENT object (HOOK_EVENT_SCHEMA); NULL on OOM. */
json_object *hooks_event_to_json(const HookEvent *ev);
