/* manager.c: the one event loop (sd-event): the poll timer, signals, capture jobs, sd_notify and the watchdog. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <systemd/sd-daemon.h>

#include "base/alloc-util.h"
#include "base/escape.h"
#include "base/log.h"
#include "base/macro.h"
#include "base/strv.h"
#include "base/time-util.h"
#include "config/config-load.h"
#include "store/archive-vacuum.h"
#include "store/problems.h"
#include "unwind/symcache.h"
#include "http-routes.h"
#include "http.h"
#include "journal.h"
#include "manager.h"

/* On SIGTERM, how long the captures in flight get to finish: the evidence of a hang is worth a short wait, but
 * systemd's stop timeout is not ours to spend. */
#define STOP_GRACE_USEC (5 * USEC_PER_SEC)

static ArchiveLimits manager_limits(const Manager *m) {
        return (ArchiveLimits) {
                .max_snapshots = m->config->max_snapshots,
                .max_size = m->config->max_size,
                .max_age_usec = m->config->max_age_usec,
                .keep_free = m->config->keep_free,
        };
}

/* One capture in flight, for a rule or for an HTTP request (rule NULL). */
struct ManagerJob {
        Manager *manager;
        CaptureJob *job;
        char *rule;
        pid_t pid;
        Firing *firing;                 /* a rule's: logged and its hook run when the capture ended */
        bool log;                       /* the rule has the log action */
        CaptureJobDone done;            /* HTTP: who waits for the result */
        void *userdata;
};

static ManagerJob *manager_job_free(ManagerJob *j) {
        if (!j)
                return NULL;
        capture_job_free(j->job);
        firing_free(j->firing);
        free(j->rule);
        free(j);
        return NULL;
}

/* The end of a firing: its journal record (when the rule logs, or took a snapshot), and its hook, which keeps it as
 * an alert until it resolves. F is taken over. */
static void manager_firing_done(Manager *m, Firing *f, bool log) {
        _cleanup_free_ uint8_t *file = NULL;
        FiringJournal j = { .mode = m->config->journal };
        Firing *open = f->signature && !m->config->every_firing
                               ? alerts_problem(&m->alerts, f->signature, f->pid, f->starttime)
                               : NULL;
        int r;

        /* A later firing of a problem still open: it counts, its record says so, and the problem's one alert lasts
         * while it does. */
        if (open)
                f->count = open->count + 1;
        if (f->signature) {
                Problem p = problem_of_firing(f->signature, f->title, f->fired_usec, f->pid, f->comm, f->host,
                                              f->snapshot_id);
                ProblemProcess procs[1 + CAPTURE_JOB_PEERS_MAX];
                size_t n = 0;

                /* The firing's process, then those its chain reached: a deadlock names both sides. */
                for (size_t i = 0; i < f->n_processes && n < ELEMENTSOF(procs); i++) {
                        const ProcessEntry *q = intmap_get(&m->scanner->processes, f->processes[i].pid);

                        procs[n++] = (ProblemProcess) { .pid = f->processes[i].pid,
                                                        .comm = i == 0 ? f->comm : q ? (char *) q->comm : NULL };
                }
                if (n > 0) {
                        p.processes = procs;
                        p.n_processes = n;
                }

                r = problems_ledger_append(archive_dir_fd(m->archive), &p);
                if (r < 0)
                        log_warning_errno(r, "Failed to count problem %s in the archive's ledger, ignoring: %m",
                                          f->signature);
                if (problem_table_merge(&m->problems, &p) == -ENOMEM)
                        log_oom();
        }

        if (log || f->snapshot_id) {
                /* archive.journal: full: the snapshot travels with the record, as its archive file, within a bound
                 * (a local read of at most journal_max_size, once per firing). */
                if (j.mode == CONFIG_JOURNAL_FULL && f->snapshot_id) {
                        r = archive_read_file(m->archive, f->snapshot_id, m->config->journal_max_size, &file,
                                              &j.file_size);
                        if (r == -EFBIG) {
                                j.too_large = true;
                                log_info("Snapshot %s is %zu bytes, over archive.journal_max_size (%llu): the journal "
                                         "record leaves it out", f->snapshot_id, j.file_size,
                                         (unsigned long long) m->config->journal_max_size);
                        } else if (r < 0)
                                log_warning_errno(r, "Failed to read snapshot %s for the journal: %m", f->snapshot_id);
                        j.file = file;
                }
                uint64_t t0 = now_usec(CLOCK_MONOTONIC);
                firing_log(f, &j);
                log_debug("Journal record of rule \"%s\" (snapshot %s, %zu bytes of it): %llu us", f->rule,
                          strna(f->snapshot_id), j.file ? j.file_size : 0,
                          (unsigned long long) (now_usec(CLOCK_MONOTONIC) - t0));
        }
        if (open)
                alerts_merge(open, f);
        else
                alerts_fire(&m->alerts, m->hooks, f, m->config->hook_repeat_usec);
}

/* Remove the temporary files of killed writes: an earlier daemon's, or a capture child's cut short by its timeout. */
static void manager_sweep(Manager *m) {
        int r = archive_sweep_tmp(m->archive, now_usec(CLOCK_REALTIME));

        if (r < 0)
                log_warning_errno(r, "Failed to sweep the archive's temporary files, ignoring: %m");
        else if (r > 0) {
                log_info("Removed %d temporary file(s) that killed writes left in the archive", r);
                m->archive_tmp_removed += (unsigned) r;
        }
}

/* Sweep, rotate, then count what is left for /metrics and /healthz. */
static void manager_vacuum(Manager *m) {
        ArchiveLimits l = manager_limits(m);
        ArchiveSummary *list = NULL;
        size_t n = 0;
        int r;

        manager_sweep(m);
        r = archive_vacuum(m->archive, &l, now_usec(CLOCK_REALTIME));
        if (r < 0)
                log_warning_errno(r, "Failed to rotate the archive, ignoring: %m");
        else if (r > 0)
                log_info("Rotated the archive: removed %d old snapshot(s)", r);
        if (archive_list(m->archive, &list, &n, NULL) >= 0) {
                m->archive_snapshots = n;
                m->archive_bytes = 0;
                for (size_t i = 0; i < n; i++)
                        m->archive_bytes += list[i].file_size;
                archive_summaries_free(list, n);
        }
}

static const char *capture_error_string(int error) {
        return error == -ECHILD ? "the capture process crashed" : strerror(-error);
}

/* Where the capture found F's thread in Python code and, for a deadlock, the cycle's threads. -ENOMEM. */
static int firing_python_from(Firing *f, const CaptureJobResult *res) {
        const CaptureJobPython *py = capture_job_result_python(res, f->tid);
        _cleanup_free_ char *frame = NULL;
        HookPythonFrame *cycle = NULL;
        size_t n = 0;

        if (py && !(frame = strdup(py->frame)))
                return -ENOMEM;
        for (size_t i = 0; i < res->n_python; i++)
                n += res->python[i].cycle;
        if (n > 0 && !(cycle = calloc(n, sizeof *cycle)))
                return -ENOMEM;
        for (size_t i = 0, k = 0; i < res->n_python && k < n; i++) {
                if (!res->python[i].cycle)
                        continue;
                cycle[k] = (HookPythonFrame) { .pid = res->python[i].pid, .tid = res->python[i].tid,
                                               .frame = strdup(res->python[i].frame) };
                if (!cycle[k++].frame) {
                        for (size_t i2 = 0; i2 < k; i2++)
                                free(cycle[i2].frame);
                        free(cycle);
                        return -ENOMEM;
                }
        }
        firing_set_python(f, TAKE_PTR(frame), cycle, n);
        return 0;
}

/* A snapshot was stored: what `stackctl ps` shows of where its threads are in Python code is now what this one caught.
 * The process's earlier frames go (a thread that left Python code keeps none); peers' threads get theirs. */
static void manager_keep_python(Manager *m, const ManagerJob *j, const CaptureJobResult *res) {
        scanner_forget_python_frames(m->scanner, j->pid, j->firing ? j->firing->starttime : 0);
        for (size_t i = 0; i < res->n_python; i++)
                if (scanner_set_python_frame(m->scanner, res->python[i].pid, res->python[i].tid,
                                             res->python[i].frame) < 0) {
                        log_oom();
                        return;
                }
}

/* The processes the problem of RES covers, by pid and start time: the capture's peers the scan still knows. */
static size_t problem_processes(const Manager *m, const CaptureJobResult *res, FiringProcess *ret) {
        size_t n = 0;

        for (size_t i = 0; i < res->n_peers; i++) {
                const ProcessEntry *p = intmap_get(&m->scanner->processes, res->peers[i]);

                if (p)
                        ret[n++] = (FiringProcess) { .pid = p->pid, .starttime = p->starttime };
        }
        return n;
}

/* The snapshot of the problem RES shows, when it is open on F's process already: the capture was not stored
 * (RES->duplicate), or was stored by a race (another firing of it captured meanwhile) and goes. NULL otherwise. */
static const char *job_open_problem(Manager *m, const Firing *f, const CaptureJobResult *res) {
        const Firing *open = f && !m->config->every_firing
                                     ? alerts_problem(&m->alerts, res->signature, f->pid, f->starttime)
                                     : NULL;
        int r;

        if (!open || !open->snapshot_id)
                return NULL;
        if (res->id && !res->duplicate) {
                r = archive_remove(m->archive, res->id);
                if (r < 0 && r != -ENOENT)
                        log_warning_errno(r, "Failed to remove snapshot %s of open problem %s: %m", res->id,
                                          res->signature);
                else
                        log_debug("Snapshot %s shows problem %s, open with snapshot %s: removed", res->id,
                                  res->signature, open->snapshot_id);
        }
        return open->snapshot_id;
}

static void job_done(CaptureJob *cj, const CaptureJobResult *res, void *userdata) {
        ManagerJob *j = userdata;
        Manager *m = j->manager;
        const char *rule = j->rule ?: METRICS_RULE_API, *id = res->id, *open_id;
        _cleanup_free_ char *open_copy = NULL;

        metrics_count_capture(&m->metrics, rule, capture_outcome_from_error(res->error), res->max_pause_us,
                              res->duration_usec, res->fallback_stops);
        if (!j->done && res->signature && (open_id = job_open_problem(m, j->firing, res))) {
                if (!(open_copy = strdup(open_id)))
                        log_oom();
                id = open_copy;
                m->problem_repeats++;
                manager_keep_python(m, j, res);
        } else if (res->duplicate)
                id = NULL;
        /* A live capture (GET /stacks/PID, the page's "capture now") knows where the threads are as well as a
         * snapshot does: without it, /processes would show a thread's syscall until a rule fires. */
        if (j->done && res->error == 0)
                manager_keep_python(m, j, res);
        if (j->done)
                j->done(cj, res, j->userdata);
        else if (res->id && id == res->id) {
                m->snapshots_written++;
                manager_keep_python(m, j, res);
        } else if (!open_copy) {
                m->capture_failures++;
                if (!j->firing)
                        journal_event(res->error == -ESRCH ? LOG_INFO : LOG_WARNING,
                                      &(JournalEvent) { .message_id = SW_MESSAGE_CAPTURE_FAILED, .pid = j->pid,
                                                        .rule = rule },
                                      "Capture of pid %d for rule \"%s\" failed: %s", (int) j->pid, rule,
                                      capture_error_string(res->error));
        }
        if (j->firing) {
                FiringProcess procs[CAPTURE_JOB_PEERS_MAX];
                char why[128];

                if (res->duplicate && !open_copy)
                        snprintf(why, sizeof why, "its problem's snapshot stood when the capture started, and the "
                                 "problem resolved since");
                else
                        snprintf(why, sizeof why, "capture failed: %s", capture_error_string(res->error));
                if (firing_set_capture(j->firing, m->config->archive_dir, id, why, res->max_pause_us,
                                       strv_copy(res->cmdline), strv_copy(res->frames),
                                       res->stack ? strdup(res->stack) : NULL) < 0 ||
                    firing_python_from(j->firing, res) < 0 ||
                    firing_set_problem(j->firing, res->signature, res->title, procs,
                                       problem_processes(m, res, procs)) < 0 ||
                    (res->goroutines && !(j->firing->goroutines = strdup(res->goroutines))))
                        log_oom();
                manager_firing_done(m, TAKE_PTR(j->firing), j->log);
        }
        for (size_t i = 0; i < m->n_jobs; i++)
                if (m->jobs[i] == j) {
                        m->jobs[i] = m->jobs[--m->n_jobs];
                        break;
                }
        manager_job_free(j);
        if (res->id && id == res->id)
                manager_vacuum(m);
        else
                manager_sweep(m);
        if (m->stopping && m->n_jobs == 0)
                (void) sd_event_exit(m->event, 0);
}

/* A job gets three times the capture budget plus 5 s (the budget bounds the capture and its peers together; the
 * rest is for the probe, symbolizer and writing the result on a loaded machine); then the child is killed. */
static uint64_t manager_job_timeout(const Manager *m) {
        return m->config->time_budget_usec * 3 + 5 * USEC_PER_SEC;
}

static void manager_capture_options(const Manager *m, CaptureOptions *o) {
        capture_options_init(o);
        o->method = m->config->method;
        o->unwinder = m->config->unwinder;
        o->kernel = m->config->kernel;
        if (!m->config->java)
                o->skip_runtimes |= 1U << RUNTIME_JAVA;
        if (!m->config->node)
                o->skip_runtimes |= 1U << RUNTIME_NODE;
        if (!m->config->ruby)
                o->skip_runtimes |= 1U << RUNTIME_RUBY;
        o->max_frames = m->config->max_frames;
        o->max_threads = m->config->max_threads;
        o->stack_bytes = m->config->stack_bytes;
        o->time_budget_usec = m->config->time_budget_usec;
}

/* Start SPEC as a tracked job; the caller has checked the budget. */
static int manager_start_job(Manager *m, const CaptureJobSpec *spec, const char *rule, Firing **firing, bool log,
                             CaptureJobDone done, void *userdata) {
        ManagerJob *j;
        int r;

        if (m->n_jobs >= MANAGER_JOBS_MAX)
                return -EBUSY;
        if (!GREEDY_REALLOC(m->jobs, m->n_jobs_allocated, m->n_jobs + 1))
                return -ENOMEM;
        j = calloc(1, sizeof *j);
        if (!j)
                return -ENOMEM;
        *j = (ManagerJob) { .manager = m, .pid = spec->pid, .done = done, .userdata = userdata };
        if (rule && !(j->rule = strdup(rule))) {
                free(j);
                return -ENOMEM;
        }
        r = capture_job_start(m->event, spec, job_done, j, &j->job);
        if (r < 0) {
                manager_job_free(j);
                return r;
        }
        if (firing)
                j->firing = TAKE_PTR(*firing);
        j->log = log;
        m->jobs[m->n_jobs++] = j;
        return 0;
}

/* HttpRoutesDaemon.capture_live: a capture for GET /stacks/PID, within the API's own budget
 * (http.max_captures_per_minute): a client polling /stacks cannot spend the snapshots the rules take, nor the rules
 * leave an operator without a capture. Captures in flight are one cap for both (MANAGER_JOBS_MAX). */
static int manager_capture_live(void *userdata_manager, pid_t pid, pid_t tid, unsigned peers, int output_fd,
                                RenderFormat format, SvgPicture picture, CaptureJobDone done, void *userdata,
                                uint64_t *ret_retry_usec) {
        Manager *m = userdata_manager;
        uint64_t now = now_usec(CLOCK_MONOTONIC);
        CaptureJobSpec spec = {
                .pid = pid,
                .peers = peers,
                .chain_tid = tid,
                .timeout_usec = manager_job_timeout(m),
                .output_fd = output_fd,
                .format = format,
                .picture = picture,
        };

        if (m->stopping)
                return -ESHUTDOWN;
        if (m->n_jobs >= MANAGER_JOBS_MAX) {
                m->metrics.captures_refused++;
                *ret_retry_usec = USEC_PER_SEC;
                return -EBUSY;
        }
        if (!capture_budget_take(&m->api_budget, m->config->http_max_captures_per_minute, now)) {
                m->metrics.captures_refused++;
                *ret_retry_usec = capture_budget_wait_usec(&m->api_budget, m->config->http_max_captures_per_minute,
                                                           now);
                return -EAGAIN;
        }
        manager_capture_options(m, &spec.options);
        capture_job_symbols(m->config, &spec.symbols);
        spec.options.tid = tid;
        return manager_start_job(m, &spec, NULL, NULL, false, done, userdata);
}

/* The interval the poll runs at. An explicit poll_interval is kept whatever it costs. "auto" (the rules' shortest
 * for: / 10) is stretched so that polling takes at most 1/MANAGER_SCAN_COST_SHARE of a core, from the polls' CPU
 * time (averaged: the scan, and the walks and the rules after it): at 10,000 idle threads on a 2-core machine, the
 * /proc scan's ~65 ms asks for 6.5 s, the BPF scan's ~1 ms keeps 1 s. */
static uint64_t manager_poll_interval(const Manager *m) {
        uint64_t want = m->config->poll_interval_usec;

        if (!m->config->poll_interval_auto)
                return want;
        return MAX(want, MIN((uint64_t) (m->poll_cpu_avg_usec * MANAGER_SCAN_COST_SHARE), CONFIG_POLL_AUTO_MAX_USEC));
}

/* HttpDaemon.view and HttpRoutesDaemon.view: what the transport, the routes and /metrics read. */
_Static_assert(MANAGER_JOBS_MAX <= DAEMON_VIEW_FIRINGS_MAX, "a view names every capture in flight");
static void manager_view(void *userdata, DaemonView *ret) {
        Manager *m = userdata;

        *ret = (DaemonView) {
                .config = m->config,
                .scanner = m->scanner,
                .trigger = &m->trigger,
                .owed = &m->owed,
                .archive = m->archive,
                .hooks = m->hooks,
                .start_usec = m->start_usec,
                .snapshots_written = m->snapshots_written,
                .capture_failures = m->capture_failures,
                .captures_running = m->n_jobs,
                .archive_snapshots = m->archive_snapshots,
                .archive_bytes = m->archive_bytes,
                .archive_tmp_removed = m->archive_tmp_removed,
                .reload_failed = m->reload_failed,
                .reload_success_usec = m->reload_success_usec,
                .reload_failures = m->reload_failures,
                .reload_error = m->reload_error,
                .alerts = &m->alerts,
                .problems = &m->problems,
                .poll_interval_usec = manager_poll_interval(m),
                .last_poll_cpu_usec = m->last_poll_cpu_usec,
        };
        for (size_t i = 0; i < m->n_jobs; i++)
                if (m->jobs[i]->firing)
                        ret->firing_pids[ret->n_firing_pids++] = m->jobs[i]->pid;
}

static int on_fire(const Rule *r, ThreadEntry *t, unsigned peers, bool capture, void *userdata) {
        _cleanup_(firing_freep) Firing *f = NULL;
        Manager *m = userdata;
        const char *klass = thread_class_to_string(t->cls.class);
        double secs = (double) (now_usec(CLOCK_MONOTONIC) - t->cls.since_usec) / 1e6;
        bool log = r->actions & RULE_ACTION_LOG;
        int err;

        /* Every capture slot busy: not a firing yet. The trigger tries again next poll, with no cooldown. */
        if (capture && m->n_jobs >= MANAGER_JOBS_MAX) {
                log_debug("Too many captures in flight; rule \"%s\" on pid %d waits for a slot", r->name, (int) t->pid);
                return -EBUSY;
        }
        if (firing_new(r, t, m->scanner, r->actions & RULE_ACTION_HOOK ? r->hook ?: m->config->hook_command : NULL,
                       &f) < 0)
                return log_oom();
        if (!capture) {
                /* A rule with the snapshot action fires without one only inside its cooldown: the hang resumed
                 * after its alert resolved, and the alert opens again. */
                if (firing_set_capture(f, NULL, NULL,
                                       r->actions & RULE_ACTION_SNAPSHOT
                                               ? "it fired on this process within the rule's cooldown: the snapshot "
                                                 "of that firing stands"
                                               : "the rule takes no snapshot",
                                       0, NULL, NULL, NULL) < 0)
                        return log_oom();
                manager_firing_done(m, TAKE_PTR(f), log);
                return 0;
        }
        CaptureJobSpec spec = {
                .pid = t->pid,
                .archive_dir = m->config->archive_dir,
                .limits = manager_limits(m),
                .comm = t->process->comm,
                .timeout_usec = manager_job_timeout(m) + r->probe_usec,
                .peers = peers,
                .chain_tid = t->tid,
                .probe_usec = t->cls.class == THREAD_CLASS_SYSCALL_SPIN ? r->probe_usec : 0,
                .output_fd = -EBADF,
                .trigger = {
                        .rule = r->name,
                        .klass = (char *) klass,
                        .tid = t->tid,
                        .state = t->sample.state,
                        .duration_usec = (uint64_t) (secs * 1e6),
                        .cpu_percent = t->cls.cpu_percent,
                        .syscall_nr = t->sample.have_syscall && t->sample.syscall.kind == PROC_SYSCALL_BLOCKED
                                              ? t->sample.syscall.nr
                                              : -1,
                        .wchan = t->wchan[0] ? t->wchan : NULL,
                        .syscalls_per_sec = t->cls.syscalls_per_sec,
                        .bytes_per_sec = t->cls.bytes_per_sec,
                },
        };
        manager_capture_options(m, &spec.options);
        capture_job_symbols(m->config, &spec.symbols);
        /* The child is a copy: what it is given lives as long as it needs. */
        _cleanup_strv_free_ char **open = NULL;
        if (!m->config->every_firing && alerts_open_signatures(&m->alerts, t->pid, t->process->starttime, &open) < 0)
                return log_oom();
        spec.open_signatures = open;
        err = manager_start_job(m, &spec, r->name, &f, log, NULL, NULL);
        if (err == -EBUSY) {
                m->metrics.captures_refused++;
                log_warning("Too many captures in flight; not capturing pid %d for rule \"%s\"", (int) t->pid,
                            r->name);
        } else if (err < 0)
                log_error_errno(err, "Failed to start a capture of pid %d: %m", (int) t->pid);
        if (err < 0) {
                if (firing_set_capture(f, NULL, NULL,
                                       err == -EBUSY ? "too many captures in flight" : "the capture could not start",
                                       0, NULL, NULL, NULL) < 0)
                        return log_oom();
                manager_firing_done(m, TAKE_PTR(f), log);
        }
        return 0;
}

/* An alert of rule R on P is open, or about to be: its firing's capture is still running (the hook runs, and the
 * alert opens, once the snapshot is written). */
static bool on_alerting(const Rule *r, const ProcessEntry *p, void *userdata) {
        Manager *m = userdata;

        for (size_t i = 0; i < m->n_jobs; i++) {
                const Firing *f = m->jobs[i]->firing;
                if (f && f->pid == p->pid && f->starttime == p->starttime && streq(f->rule, r->name))
                        return true;
        }
        return alerts_open(&m->alerts, r->name, p->pid, p->starttime);
}

static void manager_update_status(Manager *m) {
        const ScanStats *st = &m->scanner->stats;
        char status[256];

        snprintf(status, sizeof status,
                 "%swatching %u threads in %u processes: %u blocked, %u busy-loop, %u syscall-spin; %llu snapshots",
                 m->reload_failed ? "RELOAD FAILED (see the log), running on the previous configuration; " : "",
                 st->threads, st->processes, st->by_class[THREAD_CLASS_BLOCKED], st->by_class[THREAD_CLASS_BUSY_LOOP],
                 st->by_class[THREAD_CLASS_SYSCALL_SPIN], (unsigned long long) m->snapshots_written);
        if (!m->ready) {
                m->ready = true;
                (void) sd_notifyf(false, "READY=1\nSTATUS=%s", status);
                log_info("stackwatchd ready: %s", status);
        } else if (!streq(status, m->status))
                (void) sd_notifyf(false, "STATUS=%s", status);
        snprintf(m->status, sizeof m->status, "%s", status);
}

/* When the scan that ran from START to END is followed by the next: one poll interval after START, but after a rest
 * of half an interval or half the scan, whichever is longer, so that scans take at most 2/3 of the loop. Armed
 * relative to the loop's own clock (sd_event_now(), read before the scan), a scan that outlasted the interval was
 * followed by the next at once: on a loaded machine, 2,000 threads scanned in 335 ms against a 200 ms interval kept
 * the loop scanning without a break, and a client's reply or a finished capture got one turn between two scans. */
static uint64_t manager_next_scan(uint64_t interval, uint64_t start, uint64_t end) {
        return MAX(start + interval, end + MAX(interval, end - start) / 2);
}

static int on_poll(sd_event_source *s, uint64_t usec, void *userdata) {
        Manager *m = userdata;
        uint64_t now = now_usec(CLOCK_MONOTONIC), cpu0 = now_usec(CLOCK_THREAD_CPUTIME_ID), interval;
        int r;

        r = scanner_scan(m->scanner, now);
        if (r < 0)
                log_warning_errno(r, "Scan failed, ignoring: %m");
        else {
                const ScanStats *st = &m->scanner->stats;

                if (r > 0)
                        log_warning("Scanning /proc from now on: %s.", m->scanner->source_why ?: "the BPF scan failed");
                metrics_count_scan(&m->metrics, st->last_duration_usec);
                log_debug("Scan %llu: %u threads in %u processes in %llu us, %llu deep reads so far, %llu threads "
                          "classed so far",
                          (unsigned long long) st->scans, st->threads, st->processes,
                          (unsigned long long) st->last_duration_usec, (unsigned long long) st->deep_reads,
                          (unsigned long long) st->reclassed);
                lock_probes_start_wanted(m->lock_probes);
                owed_update(&m->owed, m->scanner, now);
                (void) trigger_evaluate(&m->trigger, m->config, m->scanner, now, on_fire, on_alerting, m);
                alerts_check(&m->alerts, m->hooks, m->scanner, m->config, now);
                /* The first poll is not one to judge by: it makes an entry for every thread. */
                m->last_poll_cpu_usec = now_usec(CLOCK_THREAD_CPUTIME_ID) - cpu0;
                m->poll_cpu_avg_usec = st->scans == 1 ? 0 :
                                       st->scans == 2 ? (double) m->last_poll_cpu_usec :
                                       MANAGER_SCAN_COST_WEIGHT * (double) m->last_poll_cpu_usec +
                                       (1 - MANAGER_SCAN_COST_WEIGHT) * m->poll_cpu_avg_usec;
        }
        manager_update_status(m);

        /* sd-event's default slack is 250 ms, a quarter of a 1 s poll: keep the interval within 1%. */
        interval = manager_poll_interval(m);
        (void) sd_event_source_set_time_accuracy(s, MAX(interval / 100, USEC_PER_MSEC));
        r = sd_event_source_set_time(s, manager_next_scan(interval, now, now_usec(CLOCK_MONOTONIC)));
        if (r >= 0)
                r = sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
        if (r < 0)
                return log_error_errno(r, "Failed to re-arm the poll timer: %m");
        return 0;
}

static int on_stop_grace(sd_event_source *s, uint64_t usec, void *userdata) {
        Manager *m = userdata;

        log_warning("Stopping with %zu capture(s) still in flight; they are abandoned", m->n_jobs);
        return sd_event_exit(m->event, 0);
}

static int on_terminate(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        Manager *m = userdata;

        if (m->stopping)
                return sd_event_exit(m->event, 0); /* a second signal: stop now */
        m->stopping = true;
        (void) sd_notify(false, "STOPPING=1\nSTATUS=Shutting down.");
        (void) sd_event_source_set_enabled(m->poll_source, SD_EVENT_OFF);
        if (m->n_jobs == 0) {
                log_info("Received %s, stopping", strsignal((int) si->ssi_signo));
                return sd_event_exit(m->event, 0);
        }
        log_info("Received %s, stopping after %zu capture(s) in flight (at most %llu s)",
                 strsignal((int) si->ssi_signo), m->n_jobs, (unsigned long long) (STOP_GRACE_USEC / USEC_PER_SEC));
        if (sd_event_add_time_relative(m->event, NULL, CLOCK_MONOTONIC, STOP_GRACE_USEC, 0, on_stop_grace, m) < 0)
                return sd_event_exit(m->event, 0);
        return 0;
}

static int on_reload(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        (void) manager_reload(userdata);
        return 0;
}

/* The scan's source as the configuration asks, chosen again only when scan.source changed: one line says which
 * and why. */
static int manager_apply_scan_source(Manager *m) {
        Scanner *s = m->scanner;
        int r;

        if (m->scan_source_applied == (int) m->config->scan_source)
                return 0;
        r = scanner_set_source(s, m->config->scan_source);
        if (r < 0) {
                m->apply_error = mfree(m->apply_error);
                (void) asprintf(&m->apply_error, "scan.source is bpf, but %s", s->source_why ?: strerror(-r));
                return log_error_errno(r, "The BPF scan cannot run (scan.source is bpf): %s", s->source_why ?: "%m");
        }
        m->scan_source_applied = (int) m->config->scan_source;
        if (s->source == SCAN_SOURCE_BPF)
                log_info("Scanning with the BPF task iterator (%s), walk: %s.", s->source_why ?: "bpf",
                         task_iter_walk_to_string(task_iter_walk(s->iter)));
        else
                log_info("Scanning /proc: %s.", s->source_why ?: "proc");
        return 0;
}

static int manager_apply_config(Manager *m) {
        _cleanup_(archive_freep) Archive *a = NULL;
        int r;

        r = manager_apply_scan_source(m);
        if (r < 0)
                return r;
        r = archive_open(m->config->archive_dir, &a);
        if (r < 0) {
                m->apply_error = mfree(m->apply_error);
                return log_error_errno(r, "Failed to open the archive '%s': %m", m->config->archive_dir);
        }
        archive_free(m->archive);
        m->archive = TAKE_PTR(a);
        /* The ledger's problems, read once: every firing adds to them here and to the file, and GET /problems
         * answers from memory (a 1 MiB ledger took 42 ms to read, on the loop, for every request). */
        problem_table_done(&m->problems);
        r = problems_ledger_load(archive_dir_fd(m->archive), &m->problems, NULL);
        if (r == -ENOMEM)
                return log_oom();
        if (r < 0)
                log_warning_errno(r, "Failed to read the archive's ledger of problems, counting from now: %m");
        /* The debuginfo cache's default directory ($STACKWATCH_CACHE_DIR, else the unit's CacheDirectory=), settled
         * here once rather than in every capture child. */
        if (!m->config->symbols_cache_dir && !m->config->symbols_cache_off) {
                r = symcache_default_dir(&m->config->symbols_cache_dir);
                if (r < 0)
                        return log_oom();
                m->config->symbols_cache_off = !m->config->symbols_cache_dir;
        }
        /* Rotation at start and after a reload, not only after the next write: the limits may have shrunk. */
        manager_vacuum(m);
        return 0;
}

/* A refused reload: the running configuration stays, and every place an operator looks says so (the log and the
 * journal, STATUS=, /healthz and stackctl status, /metrics) until a reload succeeds. */
static void manager_reload_failed(Manager *m, const char *first_error, size_t n_errors) {
        char *e = strdup(first_error);

        if (e) {
                free(m->reload_error);
                m->reload_error = e;
        }
        m->reload_failed = true;
        m->reload_failures++;
        journal_event(LOG_ERR, &(JournalEvent) { .message_id = SW_MESSAGE_RELOAD, .error = first_error },
                      "Configuration reload failed (%zu error(s)); keeping the running configuration with %zu "
                      "rule(s): %s", n_errors, m->config->n_rules, first_error);
        manager_update_status(m);
        (void) sd_notify(false, "READY=1");
}

int manager_reload(Manager *m) {
        _cleanup_(config_freep) Config *c = NULL;
        _cleanup_(http_tls_freep) HttpTls *tls = NULL;
        ConfigErrors errs = {};
        Config *old;
        int r;

        (void) sd_notifyf(false, "RELOADING=1\nMONOTONIC_USEC=%llu", (unsigned long long) now_usec(CLOCK_MONOTONIC));
        r = config_load(m->config_path, m->rules_dir, &c, &errs);
        if (r < 0) {
                _cleanup_free_ char *first = NULL;

                for (size_t i = 0; i < errs.n; i++)
                        log_error("%s:%u:%u: %s", errs.errors[i].file, errs.errors[i].line, errs.errors[i].column,
                                  errs.errors[i].message);
                if (errs.n > 0)
                        (void) asprintf(&first, "%s:%u:%u: %s", errs.errors[0].file, errs.errors[0].line,
                                        errs.errors[0].column, errs.errors[0].message);
                manager_reload_failed(m, first ?: strerror(-r), errs.n);
                config_errors_done(&errs);
                return r;
        }
        /* A certificate and key that fail their checks refuse the reload, as a broken file does: the listeners
         * keep the pair they have. */
        if (m->http) {
                _cleanup_free_ char *error = NULL;

                r = http_tls_load(c, &tls, &error);
                if (r < 0) {
                        manager_reload_failed(m, error ?: strerror(-r), 1);
                        return r;
                }
        }
        old = m->config;
        m->config = TAKE_PTR(c);
        r = manager_apply_config(m);
        if (r < 0) {
                /* The new archive directory is unusable: go back to the old configuration entirely. */
                c = m->config;
                m->config = old;
                (void) manager_apply_config(m);
                manager_reload_failed(m, m->apply_error ?: "the archive directory cannot be opened", 1);
                return r;
        }
        if (m->http)
                (void) http_reload(m->http, old, m->config, TAKE_PTR(tls));
        if (m->hooks)
                hooks_set_limits(m->hooks, m->config->hook_timeout_usec, m->config->hook_max_running);
        config_free(old);
        m->reload_failed = false;
        m->reload_error = mfree(m->reload_error);
        m->reload_success_usec = now_usec(CLOCK_REALTIME);
        journal_event(LOG_INFO, &(JournalEvent) { .message_id = SW_MESSAGE_RELOAD },
                      "Configuration reloaded: %zu rule(s), poll interval %llu ms", m->config->n_rules,
                      (unsigned long long) (m->config->poll_interval_usec / USEC_PER_MSEC));
        manager_update_status(m);
        (void) sd_notify(false, "READY=1");
        return 0;
}

int manager_new(const char *config_path, const char *rules_dir, Config *config, Manager **ret) {
        _cleanup_(manager_freep) Manager *m = NULL;
        int r;

        m = calloc(1, sizeof *m);
        if (!m)
                return log_oom();
        m->start_usec = now_usec(CLOCK_MONOTONIC);
        m->reload_success_usec = now_usec(CLOCK_REALTIME);
        m->config = config;
        m->config_path = strdup(config_path);
        m->rules_dir = strdup(rules_dir);
        if (!m->config_path || !m->rules_dir)
                return log_oom();

        r = scanner_new(&m->scanner);
        if (r < 0)
                return log_error_errno(r, "Failed to open /proc: %m");
        m->trigger.waits_key = owed_waits_key;
        m->scan_source_applied = -1;
        /* The captures' BPF register reader, loaded once here for every capture child (each would load it again:
         * 17 ms). Where it does not load, a capture stops a thread that needs its registers, as before. */
        (void) capture_regs_preload();
        r = manager_apply_config(m);
        if (r < 0)
                return r;

        r = sd_event_default(&m->event);
        if (r < 0)
                return log_error_errno(r, "Failed to allocate the event loop: %m");
        /* Signals (and SIGCHLD, for the capture jobs) are blocked in main() and delivered to the loop. */
        if ((r = sd_event_add_signal(m->event, NULL, SIGTERM, on_terminate, m)) < 0 ||
            (r = sd_event_add_signal(m->event, NULL, SIGINT, on_terminate, m)) < 0 ||
            (r = sd_event_add_signal(m->event, NULL, SIGHUP, on_reload, m)) < 0)
                return log_error_errno(r, "Failed to add signal handlers: %m");
        /* WATCHDOG=1 from the loop itself, at half the WatchdogSec= interval, when systemd asked for it. */
        r = sd_event_set_watchdog(m->event, true);
        if (r < 0)
                log_warning_errno(r, "Failed to enable the watchdog, ignoring: %m");
        r = lock_probes_new(m->event, m->scanner, &m->metrics, &m->lock_probes);
        if (r < 0)
                return log_oom();
        r = hooks_new(m->event, &m->hooks);
        if (r < 0)
                return log_error_errno(r, "Failed to set up hooks: %m");
        hooks_set_limits(m->hooks, m->config->hook_timeout_usec, m->config->hook_max_running);
        r = http_routes_new(&(HttpRoutesDaemon) {
                                    .event = m->event,
                                    .metrics = &m->metrics,
                                    .userdata = m,
                                    .view = manager_view,
                                    .capture_live = manager_capture_live,
                                    .captures_max = MANAGER_JOBS_MAX,
                            },
                            &m->http_routes);
        if (r < 0)
                return log_oom();
        r = http_new(&(HttpDaemon) {
                             .event = m->event,
                             .metrics = &m->metrics,
                             .userdata = m,
                             .view = manager_view,
                             .handler = http_routes_handler(m->http_routes),
                     },
                     &m->http);
        if (r < 0)
                return r;
        r = sd_event_add_time_relative(m->event, &m->poll_source, CLOCK_MONOTONIC, 0, 0, on_poll, m);
        if (r < 0)
                return log_error_errno(r, "Failed to add the poll timer: %m");
        r = sd_event_source_set_enabled(m->poll_source, SD_EVENT_ONESHOT);
        if (r < 0)
                return log_error_errno(r, "Failed to arm the poll timer: %m");
        *ret = TAKE_PTR(m);
        return 0;
}

Manager *manager_free(Manager *m) {
        if (!m)
                return NULL;
        /* Jobs first: an HTTP request waiting on one is then answered by http_free(). */
        for (size_t i = 0; i < m->n_jobs; i++)
                manager_job_free(m->jobs[i]);
        free(m->jobs);
        http_free(m->http);
        http_routes_free(m->http_routes);
        alerts_done(&m->alerts);
        problem_table_done(&m->problems);
        hooks_free(m->hooks);
        metrics_done(&m->metrics);
        sd_event_source_disable_unref(m->poll_source);
        lock_probes_free(m->lock_probes);
        sd_event_unref(m->event);
        archive_free(m->archive);
        capture_budget_done(&m->api_budget);
        owed_done(&m->owed);
        trigger_done(&m->trigger);
        scanner_free(m->scanner);
        config_free(m->config);
        free(m->config_path);
        free(m->rules_dir);
        free(m->reload_error);
        free(m->apply_error);
        free(m);
        return NULL;
}

int manager_run(Manager *m) {
        int r = sd_event_loop(m->event);

        if (r < 0)
                return log_error_errno(r, "Event loop failed: %m");
        return r;
}
