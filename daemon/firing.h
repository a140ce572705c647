/* firing.h: one rule firing, from the scan that saw it to the alert it raised. A Firing holds what the hook and
 * the journal record are told about it; for a rule with the hook action it is then kept as an alert: sent again
 * every hooks.repeat_interval while the thread stays in the rule's class, and once more as "resolved" when the
 * thread leaves the class, the process exits, or a reload removes the rule. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "config/config.h"
#include "hooks.h"
#include "scan.h"

/* A process a problem covers: the firing's, and those its wait chain reached. */
typedef struct FiringProcess {
        pid_t pid;
        uint64_t starttime;
} FiringProcess;

/* A later firing of an open problem, merged into its alert: while it lasts, the alert does. */
typedef struct FiringMember {
        char *rule;
        unsigned classes;
        pid_t pid, tid;
        uint64_t starttime;
} FiringMember;

typedef struct Firing {
        char *rule;
        RuleSeverity severity;
        unsigned classes;               /* the rule's classes: the alert lasts while the thread is in one of them */
        pid_t pid, tid;
        uint64_t starttime;             /* of the process: a reused pid is another process */
        char **argv;                    /* the hook; NULL when the rule has no hook action */

        char *comm;                     /* process-supplied, like everything below but klass and syscall */
        char *klass;                    /* the thread's class when it fired */
        const char *syscall;            /* static: the blocked call's name, NULL when none */
        char *host, *exe, *unit, *cgroup;
        char **cmdline, **frames;       /* from the capture (frames: snapshot_top_frames()); NULL without one */
        char *stack;                    /* from the capture: the thread's whole stack as text; NULL without one */
        char *python_frame;             /* from the capture: the innermost Python frame the thread runs (escaped);
                                         * NULL when it runs none, or without a capture */
        HookPythonFrame *python_cycle;  /* from the capture of a deadlock: the cycle's threads that run Python code,
                                         * in wait order */
        size_t n_python_cycle;
        char *goroutines;               /* from the capture of a Go program: its largest group of blocked goroutines
                                         * and where they are (goroutines_summary()); NULL when none */
        char *snapshot_id, *snapshot_path;
        char *error;                    /* why there is no snapshot; NULL when there is one */
        char *signature, *title;        /* from the capture: the problem it shows (render/signature.h); NULL */
        FiringProcess *processes;       /* the processes the problem covers: this one, then its chain's */
        size_t n_processes;
        uint64_t count;                 /* firings of the problem while it is open, this one included */
        FiringMember *members;          /* as an alert: the later firings merged into it */
        size_t n_members;
        double max_pause_us;

        uint64_t since_usec;            /* CLOCK_REALTIME when the thread entered its class */
        uint64_t fired_usec;            /* CLOCK_REALTIME of the firing */
        uint64_t sent_usec;             /* CLOCK_MONOTONIC of the hook's last run for it */
} Firing;

/* A firing of rule R on thread T, as the scan sees it now; the identity (exe, unit, cgroup) is loaded. */
int firing_new(const Rule *r, ThreadEntry *t, Scanner *s, char *const *hook_argv, Firing **ret);
Firing *firing_free(Firing *f);
DEFINE_TRIVIAL_CLEANUP_FUNC(Firing *, firing_free);

/* Record the capture's result: the snapshot ID in ARCHIVE_DIR (NULL: none, ERROR says why), the process's command
 * line and the top frames (both taken over, may be NULL). -ENOMEM. */
int firing_set_capture(Firing *f, const char *archive_dir, const char *id, const char *error, double max_pause_us,
                       char **cmdline, char **frames, char *stack);

/* Record the problem the capture showed: SIGNATURE and TITLE (copied; NULL: none) and the processes it covers,
 * PIDS[0..N) with their start times (the firing's own is added first). -ENOMEM. */
int firing_set_problem(Firing *f, const char *signature, const char *title, const FiringProcess *procs, size_t n);

/* Record where the capture found the thread in Python code: its innermost Python frame (FRAME, NULL: none) and, for a
 * deadlock, the cycle's threads that run Python code (CYCLE[0..N_CYCLE)); all taken over. */
void firing_set_python(Firing *f, char *frame, HookPythonFrame *cycle, size_t n_cycle);

/* "pid 1234 (nginx) thread 1240 blocked for 125.0 s in read" (comm escaped), the time counted up to AT (CLOCK_REALTIME);
 * with ", in inner (app.py:12)" when the thread runs Python code ("busy-loop for 61.0 s in spin (app.py:3)" without a
 * syscall), and "; deadlock with thread 1241 in outer (app.py:20)" for the cycle's other Python threads. For a
 * resolved alert, "... no longer blocked, after 130.2 s". NULL on OOM. */
char *firing_summary(const Firing *f, bool resolved, uint64_t at);

/* What of the snapshot the journal record carries (archive.journal). */
typedef struct FiringJournal {
        ConfigJournal mode;
        const uint8_t *file;            /* full: the snapshot's archive file; NULL when none, or over the bound */
        size_t file_size;               /* its size, also when over the bound */
        bool too_large;                 /* full: left out, over archive.journal_max_size */
} FiringJournal;

/* The firing's one journal record (SW_MESSAGE_RULE_FIRED): the rule, the process, the class and for how long, the
 * snapshot or why there is none, and the top frames, as MESSAGE and as STACKWATCH_* fields, with OBJECT_PID=;
 * with J->mode summary also the thread's whole stack (STACKWATCH_STACK), with full also the snapshot file.
 * PRIORITY follows the rule's severity. */
void firing_log(const Firing *f, const FiringJournal *j);

/* The alerts raised by firings, while they last: one per open problem (a firing without a signature is a problem
 * of its own). Those of rules without a hook run none, but count the problem's firings all the same. */
typedef struct Alerts {
        Firing **active;
        size_t n_active, n_active_allocated;
        uint64_t resolved;              /* alerts resolved, ever */
        uint64_t repeated;              /* hook runs repeating a firing alert, ever */
} Alerts;

void alerts_done(Alerts *a);
/* Run F's hook for a new firing and keep F (taken over, also on error) as an alert, in place of an older alert of the
 * same rule on the same process. REPEAT_USEC is hooks.repeat_interval: the event says the alert expires after three
 * of them, so that a receiver ends it if the daemon stops sending. A firing without a hook is just freed. */
void alerts_fire(Alerts *a, Hooks *h, Firing *f, uint64_t repeat_usec);
/* Whether an alert of rule RULE on process PID (started at STARTTIME) is open, or a firing of it was merged into
 * one that is. */
bool alerts_open(const Alerts *a, const char *rule, pid_t pid, uint64_t starttime);
/* The open alert of problem SIGNATURE that covers process PID (STARTTIME); NULL when none. */
Firing *alerts_problem(const Alerts *a, const char *signature, pid_t pid, uint64_t starttime);
/* The signatures of the problems open on process PID (STARTTIME), NULL-terminated (NULL: none); -ENOMEM. */
int alerts_open_signatures(const Alerts *a, pid_t pid, uint64_t starttime, char ***ret);
/* F (taken over) is a later firing of OPEN's problem: OPEN counts it and lasts while F's thread stays in its class;
 * no hook runs. */
void alerts_merge(Firing *open, Firing *f);
/* Once per poll, after the scan: resolve the alerts whose thread has left the class (or exited, or whose rule is
 * gone), and send the others again when REPEAT_USEC has passed since their last run. */
void alerts_check(Alerts *a, Hooks *h, const Scanner *s, const Config *c, uint64_t now_monotonic);
