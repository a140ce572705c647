/* firing.c: what a firing tells the hook and the journal, and the alerts hooks raise, from firing to resolved. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "base/alloc-util.h"
#include "base/escape.h"
#include "base/log.h"
#include "base/macro.h"
#include "base/strv.h"
#include "base/time-util.h"
#include "store/archive.h"
#include "firing.h"
#include "page-link.h"
#include "journal.h"

/* A firing alert expires after this many repeat intervals without being sent again: one missed repeat (a loaded
 * machine, a hook that failed once) does not end it. */
#define ALERT_EXPIRY_REPEATS 3
/* A summary names at most this many other Python threads of a deadlock ("and 3 more"): it is one line. The hook's
 * event and the journal record's message have them all. */
#define SUMMARY_CYCLE_MAX 4

static int strdup_or_null(const char *s, char **ret) {
        *ret = NULL;
        if (s && !(*ret = strdup(s)))
                return -ENOMEM;
        return 0;
}

int firing_new(const Rule *r, ThreadEntry *t, Scanner *s, char *const *hook_argv, Firing **ret) {
        _cleanup_(firing_freep) Firing *f = NULL;
        uint64_t now_mono = now_usec(CLOCK_MONOTONIC), now_real = now_usec(CLOCK_REALTIME);
        ProcessEntry *p = t->process;
        char host[HOST_NAME_MAX + 1] = "";

        f = calloc(1, sizeof *f);
        if (!f)
                return -ENOMEM;
        (void) scanner_load_identity(s, p);
        (void) gethostname(host, sizeof host - 1);
        *f = (Firing) {
                .severity = r->severity,
                .classes = r->classes,
                .pid = t->pid,
                .tid = t->tid,
                .starttime = p->starttime,
                .syscall = t->sample.have_syscall && t->sample.syscall.kind == PROC_SYSCALL_BLOCKED
                                   ? syscall_name(t->sample.syscall.nr)
                                   : NULL,
                .fired_usec = now_real,
                .count = 1,
                .since_usec = now_real - MIN(now_real, now_mono - MIN(now_mono, t->cls.since_usec)),
        };
        if (strdup_or_null(r->name, &f->rule) < 0 || strdup_or_null(p->comm, &f->comm) < 0 ||
            strdup_or_null(thread_class_to_string(t->cls.class), &f->klass) < 0 ||
            strdup_or_null(host[0] ? host : NULL, &f->host) < 0 || strdup_or_null(p->exe, &f->exe) < 0 ||
            strdup_or_null(p->unit, &f->unit) < 0 || strdup_or_null(p->cgroup, &f->cgroup) < 0)
                return -ENOMEM;
        if (hook_argv && !(f->argv = strv_copy(hook_argv)))
                return -ENOMEM;
        *ret = TAKE_PTR(f);
        return 0;
}

Firing *firing_free(Firing *f) {
        if (!f)
                return NULL;
        free(f->goroutines);
        free(f->rule);
        strv_free(f->argv);
        free(f->comm);
        free(f->klass);
        free(f->host);
        free(f->exe);
        free(f->unit);
        free(f->cgroup);
        strv_free(f->cmdline);
        strv_free(f->frames);
        free(f->stack);
        firing_set_python(f, NULL, NULL, 0);
        free(f->snapshot_id);
        free(f->snapshot_path);
        free(f->error);
        free(f->signature);
        free(f->title);
        free(f->processes);
        for (size_t i = 0; i < f->n_members; i++)
                free(f->members[i].rule);
        free(f->members);
        free(f);
        return NULL;
}

int firing_set_problem(Firing *f, const char *signature, const char *title, const FiringProcess *procs, size_t n) {
        free(f->signature);
        free(f->title);
        free(f->processes);
        f->signature = f->title = NULL;
        f->processes = NULL;
        f->n_processes = 0;
        if (!signature)
                return 0;
        if (strdup_or_null(signature, &f->signature) < 0 || strdup_or_null(title, &f->title) < 0)
                return -ENOMEM;
        f->processes = calloc(n + 1, sizeof *f->processes);
        if (!f->processes)
                return -ENOMEM;
        f->processes[f->n_processes++] = (FiringProcess) { .pid = f->pid, .starttime = f->starttime };
        for (size_t i = 0; i < n; i++)
                if (procs[i].pid != f->pid)
                        f->processes[f->n_processes++] = procs[i];
        return 0;
}

int firing_set_capture(Firing *f, const char *archive_dir, const char *id, const char *error, double max_pause_us,
                       char **cmdline, char **frames, char *stack) {
        free(f->stack);
        f->stack = stack;
        strv_free(f->cmdline);
        f->cmdline = cmdline;
        strv_free(f->frames);
        f->frames = frames;
        f->max_pause_us = max_pause_us;
        free(f->snapshot_id);
        free(f->snapshot_path);
        free(f->error);
        f->snapshot_id = f->snapshot_path = f->error = NULL;
        if (id) {
                if (strdup_or_null(id, &f->snapshot_id) < 0 ||
                    asprintf(&f->snapshot_path, "%s/%s" ARCHIVE_SUFFIX, archive_dir, id) < 0) {
                        f->snapshot_path = NULL;
                        return -ENOMEM;
                }
                return 0;
        }
        return strdup_or_null(error, &f->error);
}

void firing_set_python(Firing *f, char *frame, HookPythonFrame *cycle, size_t n_cycle) {
        free(f->python_frame);
        f->python_frame = frame;
        for (size_t i = 0; i < f->n_python_cycle; i++)
                free(f->python_cycle[i].frame);
        free(f->python_cycle);
        f->python_cycle = cycle;
        f->n_python_cycle = n_cycle;
}

/* "; deadlock with thread 1241 in outer (app.py:20), pid 1300 thread 1300 in serve (peer.py:8)": the cycle's Python
 * threads but F's own, which the summary names already. */
static void put_cycle(const Firing *f, FILE *out) {
        size_t shown = 0, others = 0;

        for (size_t i = 0; i < f->n_python_cycle; i++) {
                const HookPythonFrame *c = &f->python_cycle[i];

                if (c->tid == f->tid)
                        continue;
                if (others++ >= SUMMARY_CYCLE_MAX)
                        continue;
                fputs(shown++ ? ", " : "; deadlock with ", out);
                if (c->pid != f->pid)
                        fprintf(out, "pid %d ", (int) c->pid);
                fprintf(out, "thread %d in %s", (int) c->tid, c->frame);
        }
        if (others > shown)
                fprintf(out, " and %zu more", others - shown);
}

char *firing_summary(const Firing *f, bool resolved, uint64_t at) {
        _cleanup_free_ char *comm = escape_string(f->comm ?: ""), *s = NULL;
        double secs = (double) (at - MIN(f->since_usec, at)) / 1e6;
        size_t size = 0;
        FILE *out;

        if (!comm)
                return NULL;
        out = open_memstream(&s, &size);
        if (!out)
                return NULL;
        fprintf(out, "pid %d (%s) thread %d ", (int) f->pid, comm, (int) f->tid);
        if (resolved)
                fprintf(out, "no longer %s, after %.1f s", f->klass, secs);
        else {
                fprintf(out, "%s for %.1f s", f->klass, secs);
                if (f->syscall)
                        fprintf(out, " in %s", f->syscall);
                /* Where its Python code is: the function a busy loop spins in, or the one that made the call. */
                if (f->python_frame)
                        fprintf(out, "%s in %s", f->syscall ? "," : "", f->python_frame);
                put_cycle(f, out);
                if (f->goroutines)
                        fprintf(out, "; %s", f->goroutines);
        }
        if (fclose(out) != 0)
                return NULL;
        return TAKE_PTR(s);
}

static int severity_priority(RuleSeverity s) {
        return s == RULE_SEVERITY_CRITICAL ? LOG_CRIT : s == RULE_SEVERITY_INFO ? LOG_NOTICE : LOG_WARNING;
}

/* The journal record of F as the firing and the recovery both carry it: the process, the rule, the class, the
 * snapshot, how long up to AT (CLOCK_REALTIME), and the alert's STATE. */
static JournalEvent firing_event(const Firing *f, const char *message_id, const char *state, uint64_t at) {
        return (JournalEvent) {
                .message_id = message_id,
                .pid = f->pid,
                .tid = f->tid,
                .object = true,
                .rule = f->rule,
                .severity = rule_severity_to_string(f->severity),
                .klass = f->klass,
                .snapshot = f->snapshot_id,
                .comm = f->comm,
                .exe = f->exe,
                .unit = f->unit,
                .cgroup = f->cgroup,
                .cmdline = f->cmdline,
                .duration_usec = at - MIN(f->since_usec, at),
                .state = state,
                .python_frame = f->python_frame,
                .goroutines = f->goroutines,
                .signature = f->signature,
                .title = f->title,
                .problem_count = f->signature ? f->count : 0,
        };
}

void firing_log(const Firing *f, const FiringJournal *j) {
        _cleanup_free_ char *summary = firing_summary(f, false, f->fired_usec), *stack = NULL, *snap = NULL;
        size_t size = 0;
        FILE *m;

        if (!summary)
                return (void) log_oom();
        if (f->count > 1 && f->snapshot_id) {
                if (asprintf(&snap, "; problem %s, open, seen %llu times: its snapshot %s stands", f->signature,
                             (unsigned long long) f->count, f->snapshot_id) < 0)
                        return (void) log_oom();
        } else if (f->snapshot_id && asprintf(&snap, "; snapshot %s (longest pause %.0f us)", f->snapshot_id,
                                              f->max_pause_us) < 0)
                return (void) log_oom();
        if (f->frames) {
                m = open_memstream(&stack, &size);
                if (!m)
                        return (void) log_oom();
                fprintf(m, "\n\nStack of thread %d:", (int) f->tid);
                for (char **l = f->frames; *l; l++)
                        fprintf(m, "\n%s", *l);
                if (fclose(m) != 0)
                        return (void) log_oom();
        }
        JournalEvent ev = firing_event(f, SW_MESSAGE_RULE_FIRED, "firing", f->fired_usec);
        _cleanup_free_ char *page = page_link_snapshot(f->snapshot_id);

        ev.page_url = page;

        ev.error = f->error;
        ev.stack = j->mode >= CONFIG_JOURNAL_SUMMARY ? f->stack : NULL;
        ev.snapshot_file = j->mode == CONFIG_JOURNAL_FULL ? j->file : NULL;
        ev.snapshot_file_size = j->file_size;
        ev.snapshot_size = j->mode == CONFIG_JOURNAL_FULL ? j->file_size : 0;
        ev.snapshot_truncated = j->mode == CONFIG_JOURNAL_FULL && j->too_large;
        journal_event(severity_priority(f->severity), &ev, "Rule \"%s\" fired: %s%s%s%s%s", f->rule, summary, snap ?: "",
                      f->error ? "; no snapshot: " : "", f->error ?: "", stack ?: "");
}

void alerts_done(Alerts *a) {
        for (size_t i = 0; i < a->n_active; i++)
                firing_free(a->active[i]);
        free(a->active);
        *a = (Alerts) {};
}

/* Run F's hook: a new firing, a repeat, or the recovery. */
static void alert_send(Hooks *h, Firing *f, bool resolved, bool repeat, uint64_t repeat_usec) {
        if (!f->argv)
                return;
        uint64_t now_real = now_usec(CLOCK_REALTIME), at = resolved || repeat ? now_real : f->fired_usec;
        _cleanup_free_ char *summary = firing_summary(f, resolved, at), *page = page_link_snapshot(f->snapshot_id);

        if (!summary) {
                log_oom();
                return;
        }
        if (resolved) {
                JournalEvent ev = firing_event(f, SW_MESSAGE_RULE_RESOLVED, "resolved", at);
                journal_event(LOG_NOTICE, &ev, "Rule \"%s\" resolved: %s", f->rule, summary);
        }
        f->sent_usec = now_usec(CLOCK_MONOTONIC);
        (void) hooks_run(h, f->argv,
                         &(HookEvent) {
                                 .rule = f->rule,
                                 .pid = f->pid,
                                 .tid = f->tid,
                                 .comm = f->comm,
                                 .klass = f->klass,
                                 .snapshot_id = f->snapshot_id,
                                 .snapshot_path = f->snapshot_path,
                                 .page_url = page,
                                 .summary = summary,
                                 .error = f->error,
                                 .timestamp_usec = at,
                                 .state = resolved ? "resolved" : "firing",
                                 .repeat = repeat,
                                 .severity = rule_severity_to_string(f->severity),
                                 .host = f->host,
                                 .exe = f->exe,
                                 .unit = f->unit,
                                 .cgroup = f->cgroup,
                                 .cmdline = f->cmdline,
                                 .frames = f->frames,
                                 .python_frame = f->python_frame,
                                 .python_cycle = f->python_cycle,
                                 .n_python_cycle = f->n_python_cycle,
                                 .since_usec = f->since_usec,
                                 .duration_usec = at - MIN(f->since_usec, at),
                                 .expires_usec = resolved ? 0 : now_real + ALERT_EXPIRY_REPEATS * repeat_usec,
                                 .signature = f->signature,
                                 .title = f->title,
                                 .count = f->count,
                         });
}

static bool same_alert(const Firing *a, const Firing *b) {
        return a->pid == b->pid && a->starttime == b->starttime && streq(a->rule, b->rule);
}

void alerts_fire(Alerts *a, Hooks *h, Firing *f, uint64_t repeat_usec) {
        alert_send(h, f, false, false, repeat_usec);
        for (size_t i = 0; i < a->n_active; i++)
                if (same_alert(a->active[i], f)) {
                        firing_free(a->active[i]);
                        a->active[i] = f;
                        return;
                }
        if (!GREEDY_REALLOC(a->active, a->n_active_allocated, a->n_active + 1)) {
                log_oom();
                firing_free(f);
                return;
        }
        a->active[a->n_active++] = f;
}

void alerts_merge(Firing *open, Firing *f) {
        FiringMember *m;

        open->count++;
        m = reallocarray(open->members, open->n_members + 1, sizeof *m);
        if (!m) {
                log_oom();
                firing_free(f);
                return;
        }
        open->members = m;
        m[open->n_members++] = (FiringMember) { .rule = TAKE_PTR(f->rule), .classes = f->classes, .pid = f->pid,
                                                 .tid = f->tid, .starttime = f->starttime };
        firing_free(f);
}

bool alerts_open(const Alerts *a, const char *rule, pid_t pid, uint64_t starttime) {
        for (size_t i = 0; i < a->n_active; i++) {
                const Firing *f = a->active[i];

                if (f->pid == pid && f->starttime == starttime && streq(f->rule, rule))
                        return true;
                for (size_t k = 0; k < f->n_members; k++)
                        if (f->members[k].pid == pid && f->members[k].starttime == starttime &&
                            streq(f->members[k].rule, rule))
                                return true;
        }
        return false;
}

static bool firing_covers(const Firing *f, pid_t pid, uint64_t starttime) {
        if (f->pid == pid && f->starttime == starttime)
                return true;
        for (size_t i = 0; i < f->n_processes; i++)
                if (f->processes[i].pid == pid && f->processes[i].starttime == starttime)
                        return true;
        return false;
}

Firing *alerts_problem(const Alerts *a, const char *signature, pid_t pid, uint64_t starttime) {
        for (size_t i = 0; signature && i < a->n_active; i++)
                if (streq_ptr(a->active[i]->signature, signature) && firing_covers(a->active[i], pid, starttime))
                        return a->active[i];
        return NULL;
}

int alerts_open_signatures(const Alerts *a, pid_t pid, uint64_t starttime, char ***ret) {
        _cleanup_strv_free_ char **v = NULL;

        for (size_t i = 0; i < a->n_active; i++)
                if (a->active[i]->signature && a->active[i]->snapshot_id && firing_covers(a->active[i], pid, starttime) &&
                    !strv_contains(v, a->active[i]->signature) && strv_extend(&v, a->active[i]->signature) < 0)
                        return -ENOMEM;
        *ret = TAKE_PTR(v);
        return 0;
}

static const Rule *config_rule(const Config *c, const char *name) {
        for (size_t i = 0; i < c->n_rules; i++)
                if (streq(c->rules[i].name, name))
                        return &c->rules[i];
        return NULL;
}

/* Whether thread TID of PID (STARTTIME) is still what RULE fired on: the same process, in one of the rule's
 * classes, and the rule still loaded. */
static bool firing_lasts(const char *rule, pid_t pid, pid_t tid, uint64_t starttime, const Scanner *s,
                         const Config *c) {
        const ThreadEntry *t = intmap_get(&s->threads, tid);
        const Rule *r = config_rule(c, rule);

        return r && t && t->process && t->process->pid == pid && t->process->starttime == starttime &&
               t->cls.class >= 0 && (r->classes & (1U << t->cls.class));
}

/* An alert lasts while its firing does, or one merged into it: its problem is open. */
static bool alert_lasts(const Firing *f, const Scanner *s, const Config *c) {
        if (firing_lasts(f->rule, f->pid, f->tid, f->starttime, s, c))
                return true;
        for (size_t i = 0; i < f->n_members; i++)
                if (firing_lasts(f->members[i].rule, f->members[i].pid, f->members[i].tid, f->members[i].starttime,
                                 s, c))
                        return true;
        return false;
}

void alerts_check(Alerts *a, Hooks *h, const Scanner *s, const Config *c, uint64_t now_monotonic) {
        size_t k = 0;

        for (size_t i = 0; i < a->n_active; i++) {
                Firing *f = a->active[i];

                if (!alert_lasts(f, s, c)) {
                        alert_send(h, f, true, false, c->hook_repeat_usec);
                        a->resolved += f->argv != NULL;
                        firing_free(f);
                        continue;
                }
                /* A firing of this very poll was sent after NOW was read: not due, not an underflow. */
                if (f->argv && now_monotonic > f->sent_usec && now_monotonic - f->sent_usec >= c->hook_repeat_usec) {
                        alert_send(h, f, false, true, c->hook_repeat_usec);
                        a->repeated++;
                }
                a->active[k++] = f;
        }
        a->n_active = k;
}
