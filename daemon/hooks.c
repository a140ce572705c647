/* hooks.c: alert hooks. A hook is a program named by the configuration, started with posix_spawn (an execve of
 * that path: never a shell, never a $PATH lookup) in a session of its own, with the event in a clean environment,
 * stdin on /dev/null and stdout/stderr on a pipe the loop reads into the log. A timer kills its process group at
 * the timeout and the loop reaps it; at most max_running run at once, a bounded queue holds the rest. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/alloc-util.h"
#include "base/escape.h"
#include "base/json-util.h"
#include "base/log.h"
#include "base/macro.h"
#include "base/strv.h"
#include "config/config.h"
#include "hooks.h"
#include "journal.h"

/* A longer line of a hook's output is logged cut, marked with "…"; the rest of it is skipped. */
#define HOOK_LINE_MAX 1024
/* What one run may put into the log; beyond it, output is still read (so the hook never blocks on a full pipe)
 * and counted, not logged. */
#define HOOK_OUTPUT_MAX (16 * 1024)
/* Reads per wakeup of a hook's pipe, so that a hook that writes without pause cannot hold the loop. */
#define HOOK_READS_PER_WAKEUP 16
/* Reads of the pipe when the hook has ended: what it holds, bounded even if something still writes. */
#define HOOK_READS_AT_EXIT 64
/* PATH, the STACKWATCH_* variables, the terminating NULL. */
#define HOOK_ENV_MAX 24

typedef struct HookRun {
        Hooks *hooks;
        char **argv;
        char **envp;                    /* built when the event came, so a queued hook sees the event as it was */
        char *rule;                     /* for the log; "" when the event named none */
        char *state;                    /* the alert's: "firing", "resolved"; NULL when the event named none */
        char *label;                    /* for messages: "\"RULE\" (STATE)" */
        char *snapshot_id;
        pid_t target;

        /* Once it runs: */
        pid_t pid;
        int output_fd;
        sd_event_source *child_source, *output_source, *timeout_source;
        uint64_t timeout_usec;
        bool timed_out;
        char line[HOOK_LINE_MAX];       /* the output line being assembled */
        size_t line_len;
        bool line_cut;                  /* the line outgrew the buffer: skip to its newline */
        uint64_t output_logged, output_skipped;  /* bytes */
} HookRun;

struct Hooks {
        sd_event *event;
        uint64_t timeout_usec;
        unsigned max_running;

        HookRun **running;
        size_t n_running, n_running_allocated;
        HookRun *queue[HOOKS_QUEUE_MAX];        /* a ring, oldest at queue_head */
        size_t queue_head, n_queued;

        HookStats stats;
};

static HookRun *hook_run_free(HookRun *run) {
        if (!run)
                return NULL;
        sd_event_source_disable_unref(run->child_source);
        sd_event_source_disable_unref(run->output_source);
        sd_event_source_disable_unref(run->timeout_source);
        safe_close(run->output_fd);
        strv_free(run->argv);
        strv_free(run->envp);
        free(run->rule);
        free(run->state);
        free(run->label);
        free(run->snapshot_id);
        free(run);
        return NULL;
}
DEFINE_TRIVIAL_CLEANUP_FUNC(HookRun *, hook_run_free);

/* One structured entry about RUN: rule, target, hook path and pid, and STATUS when it ended. */
static void run_event(const HookRun *run, int level, const char *message_id, const char *status, const char *fmt,
                      ...) _printf_(5, 6);
static void run_event(const HookRun *run, int level, const char *message_id, const char *status, const char *fmt,
                      ...) {
        _cleanup_free_ char *msg = NULL;
        va_list ap;
        int r;

        if (level > log_get_max_level())
                return;
        va_start(ap, fmt);
        r = vasprintf(&msg, fmt, ap);
        va_end(ap);
        if (r < 0)
                return (void) log_oom();
        journal_event(level,
                      &(JournalEvent) { .message_id = message_id, .pid = run->target, .rule = run->rule,
                                        .state = run->state,
                                        .snapshot = run->snapshot_id, .hook = run->argv[0], .hook_pid = run->pid,
                                        .hook_status = status },
                      "%s", msg);
}

/* ---- the event as data: environment and JSON ---- */

/* VALUE, or null when it is not KNOWN. */
static int json_add_int(json_object *o, const char *key, int64_t value, bool known) {
        return known ? json_add_int64(o, key, value) : json_add(o, key, NULL);
}

/* The cycle's Python threads as [{"pid", "tid", "frame"}, …], or null when there are none. */
static int json_add_python_cycle(json_object *o, const HookPythonFrame *c, size_t n) {
        _cleanup_(json_object_putp) json_object *a = NULL;

        if (n == 0)
                return json_add(o, "python_cycle", NULL);
        a = json_object_new_array();
        if (!a)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                json_object *e = json_object_new_object();

                if (!e || json_object_array_add(a, e) < 0) {
                        json_object_put(e);
                        return -ENOMEM;
                }
                if (json_add_int64(e, "pid", c[i].pid) < 0 || json_add_int64(e, "tid", c[i].tid) < 0 ||
                    json_add_string(e, "frame", c[i].frame) < 0)
                        return -ENOMEM;
        }
        return json_add(o, "python_cycle", TAKE_PTR(a));
}

json_object *hooks_event_to_json(const HookEvent *ev) {
        json_object *o = json_object_new_object();

        if (!o)
                return NULL;
        if (json_add_string(o, "schema", HOOK_EVENT_SCHEMA) < 0 || json_add_string(o, "rule", ev->rule) < 0 ||
            json_add_int(o, "pid", ev->pid, ev->pid > 0) < 0 || json_add_int(o, "tid", ev->tid, ev->tid > 0) < 0 ||
            json_add_string(o, "comm", ev->comm) < 0 || json_add_string(o, "class", ev->klass) < 0 ||
            json_add_string(o, "snapshot_id", ev->snapshot_id) < 0 || json_add_string(o, "page_url", ev->page_url) < 0 ||
            json_add_string(o, "snapshot", ev->snapshot_path) < 0 || json_add_string(o, "summary", ev->summary) < 0 ||
            json_add_string(o, "error", ev->error) < 0 ||
            json_add_int(o, "timestamp_usec", (int64_t) ev->timestamp_usec, ev->timestamp_usec > 0) < 0 ||
            json_add_string(o, "state", ev->state) < 0 ||
            json_add(o, "repeat", json_object_new_boolean(ev->repeat)) < 0 ||
            json_add_string(o, "severity", ev->severity) < 0 || json_add_string(o, "host", ev->host) < 0 ||
            json_add_string(o, "exe", ev->exe) < 0 || json_add(o, "cmdline", json_new_strv(ev->cmdline)) < 0 ||
            json_add_string(o, "unit", ev->unit) < 0 || json_add_string(o, "cgroup", ev->cgroup) < 0 ||
            json_add_int(o, "since_usec", (int64_t) ev->since_usec, ev->since_usec > 0) < 0 ||
            json_add_int(o, "duration_usec", (int64_t) ev->duration_usec, ev->since_usec > 0) < 0 ||
            json_add_int(o, "expires_usec", (int64_t) ev->expires_usec, ev->expires_usec > 0) < 0 ||
            json_add(o, "frames", json_new_strv(ev->frames)) < 0 ||
            json_add_string(o, "python_frame", ev->python_frame) < 0 ||
            json_add_python_cycle(o, ev->python_cycle, ev->n_python_cycle) < 0 ||
            json_add_string(o, "signature", ev->signature) < 0 || json_add_string(o, "title", ev->title) < 0 ||
            json_add_int(o, "count", (int64_t) ev->count, ev->count > 0) < 0) {
                json_object_put(o);
                return NULL;
        }
        return o;
}

/* Append "KEY=VALUE" to ENVP (N entries so far) unless VALUE is NULL: an unknown value is an absent variable. */
static int env_add(char **envp, size_t *n, const char *key, const char *value) {
        if (!value)
                return 0;
        if (*n + 1 >= HOOK_ENV_MAX)
                return -E2BIG;
        if (asprintf(&envp[*n], "%s=%s", key, value) < 0) {
                envp[*n] = NULL;
                return -ENOMEM;
        }
        (*n)++;
        return 0;
}

/* The hook's whole environment: nothing of the daemon's, the event's values verbatim (execve passes bytes; nothing
 * on the way interprets them). */
static int hook_env_new(const HookEvent *ev, char ***ret) {
        _cleanup_strv_free_ char **envp = NULL;
        _cleanup_free_ char *event = NULL;
        char pid[32], tid[32], timestamp[32], duration[32], count[32];
        json_object *j;
        size_t n = 0;
        int r;

        envp = calloc(HOOK_ENV_MAX, sizeof *envp);
        j = hooks_event_to_json(ev);
        if (!envp || !j) {
                json_object_put(j);
                return -ENOMEM;
        }
        snprintf(pid, sizeof pid, "%d", (int) ev->pid);
        snprintf(tid, sizeof tid, "%d", (int) ev->tid);
        snprintf(timestamp, sizeof timestamp, "%llu", (unsigned long long) ev->timestamp_usec);
        snprintf(duration, sizeof duration, "%llu", (unsigned long long) ev->duration_usec);
        snprintf(count, sizeof count, "%llu", (unsigned long long) ev->count);
        if ((r = env_add(envp, &n, "PATH", HOOKS_PATH)) < 0 || (r = env_add(envp, &n, HOOK_ENV_RULE, ev->rule)) < 0 ||
            (r = env_add(envp, &n, HOOK_ENV_PID, ev->pid > 0 ? pid : NULL)) < 0 ||
            (r = env_add(envp, &n, HOOK_ENV_TID, ev->tid > 0 ? tid : NULL)) < 0 ||
            (r = env_add(envp, &n, HOOK_ENV_COMM, ev->comm)) < 0 ||
            (r = env_add(envp, &n, HOOK_ENV_CLASS, ev->klass)) < 0 ||
            (r = env_add(envp, &n, HOOK_ENV_SNAPSHOT, ev->snapshot_path)) < 0 ||
            (r = env_add(envp, &n, HOOK_ENV_SNAPSHOT_ID, ev->snapshot_id)) < 0 ||
            (r = env_add(envp, &n, HOOK_ENV_PAGE_URL, ev->page_url)) < 0 ||
            (r = env_add(envp, &n, HOOK_ENV_SUMMARY, ev->summary)) < 0 ||
            (r = env_add(envp, &n, HOOK_ENV_ERROR, ev->error)) < 0 ||
            (r = env_add(envp, &n, HOOK_ENV_TIMESTAMP, ev->timestamp_usec > 0 ? timestamp : NULL)) < 0 ||
            (r = env_add(envp, &n, HOOK_ENV_STATE, ev->state)) < 0 ||
            (r = env_add(envp, &n, HOOK_ENV_SEVERITY, ev->severity)) < 0 ||
            (r = env_add(envp, &n, HOOK_ENV_HOST, ev->host)) < 0 || (r = env_add(envp, &n, HOOK_ENV_EXE, ev->exe)) < 0 ||
            (r = env_add(envp, &n, HOOK_ENV_UNIT, ev->unit)) < 0 ||
            (r = env_add(envp, &n, HOOK_ENV_DURATION, ev->since_usec > 0 ? duration : NULL)) < 0 ||
            (r = env_add(envp, &n, HOOK_ENV_PYTHON_FRAME, ev->python_frame)) < 0 ||
            (r = env_add(envp, &n, HOOK_ENV_SIGNATURE, ev->signature)) < 0 ||
            (r = env_add(envp, &n, HOOK_ENV_TITLE, ev->title)) < 0 ||
            (r = env_add(envp, &n, HOOK_ENV_PROBLEM_COUNT, ev->count > 0 ? count : NULL)) < 0 ||
            (r = json_to_text(j, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &event, NULL)) < 0 ||
            (r = env_add(envp, &n, HOOK_ENV_EVENT, event)) < 0) {
                json_object_put(j);
                return r;
        }
        json_object_put(j);
        *ret = TAKE_PTR(envp);
        return 0;
}

static int hook_run_new(Hooks *h, char *const *argv, const HookEvent *ev, HookRun **ret) {
        _cleanup_(hook_run_freep) HookRun *run = NULL;
        int r;

        run = calloc(1, sizeof *run);
        if (!run)
                return -ENOMEM;
        run->hooks = h;
        run->output_fd = -EBADF;
        run->target = ev->pid;
        run->argv = strv_copy(argv);
        run->rule = strdup(ev->rule ?: "");
        if (ev->state && !(run->state = strdup(ev->state)))
                return -ENOMEM;
        /* Whether it was told of a firing or of the recovery, in every line about it. */
        if (asprintf(&run->label, ev->state ? "\"%s\" (%s)" : "\"%s\"", ev->rule ?: "", ev->state) < 0)
                run->label = NULL;
        if (!run->argv || !run->rule || !run->label ||
            (ev->snapshot_id && !(run->snapshot_id = strdup(ev->snapshot_id))))
                return -ENOMEM;
        r = hook_env_new(ev, &run->envp);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(run);
        return 0;
}

/* ---- output: line by line into the log, escaped and bounded ---- */

static void run_flush_line(HookRun *run, bool cut) {
        _cleanup_free_ char *line = NULL;

        if (run->output_logged + run->line_len > HOOK_OUTPUT_MAX) {
                run->output_skipped += run->line_len;
                run->line_len = 0;
                return;
        }
        run->output_logged += run->line_len;
        /* The hook's output is as untrusted as what it echoes (a comm, a summary): no terminal controls. */
        line = escape_cstring(run->line, run->line_len);
        run->line_len = 0;
        if (!line)
                return (void) log_oom();
        run_event(run, LOG_INFO, SW_MESSAGE_HOOK_OUTPUT, NULL, "Hook '%s'[%d] (rule %s): %s%s", run->argv[0],
                  (int) run->pid, run->label, line, cut ? "…" : "");
}

/* LEN bytes of one line at P; EOL when a newline ended them. */
static void run_take(HookRun *run, const char *p, size_t len, bool eol) {
        if (run->line_cut)
                run->output_skipped += len;
        else {
                size_t k = MIN(len, sizeof run->line - run->line_len);

                memcpy(run->line + run->line_len, p, k);
                run->line_len += k;
                if (k < len) {
                        run->output_skipped += len - k;
                        run_flush_line(run, true);
                        run->line_cut = true;
                }
        }
        if (eol) {
                if (!run->line_cut)
                        run_flush_line(run, false);
                run->line_cut = false;
        }
}

static void run_output(HookRun *run, const char *buf, size_t n) {
        while (n > 0) {
                const char *nl = memchr(buf, '\n', n);
                size_t len = nl ? (size_t) (nl - buf) : n;

                run_take(run, buf, len, nl);
                len += !!nl;
                buf += len;
                n -= len;
        }
}

static void run_close_output(HookRun *run) {
        if (run->line_len > 0 && !run->line_cut)
                run_flush_line(run, false);
        run->line_len = 0;
        run->output_source = sd_event_source_disable_unref(run->output_source);
        run->output_fd = safe_close(run->output_fd);
}

/* Read what the pipe holds, at most MAX_READS times; at EOF (every writer gone) close it. */
static void run_read_output(HookRun *run, unsigned max_reads) {
        char buf[4096];

        for (unsigned i = 0; i < max_reads && run->output_fd >= 0; i++) {
                ssize_t n = read(run->output_fd, buf, sizeof buf);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno == EAGAIN)
                        return;
                if (n < 0)
                        log_debug_errno(errno, "Failed to read the output of hook '%s'[%d], ignoring the rest: %m",
                                        run->argv[0], (int) run->pid);
                if (n <= 0)
                        return run_close_output(run);
                run_output(run, buf, (size_t) n);
        }
}

static int on_hook_output(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        run_read_output(userdata, HOOK_READS_PER_WAKEUP);
        return 0;
}

/* ---- running, ending ---- */

/* Spawn ARGV with ENVP, stdout and stderr on OUTPUT_FD. Returns the exec error of a program that cannot run:
 * glibc's posix_spawn reports it, rather than a child that exits 127. */
static int hook_spawn(char *const *argv, char *const *envp, int output_fd, pid_t *ret_pid) {
        posix_spawn_file_actions_t fa;
        posix_spawnattr_t attr;
        sigset_t none, all;
        pid_t pid;
        int r;

        sigemptyset(&none);
        sigfillset(&all);
        r = posix_spawnattr_init(&attr);
        if (r != 0)
                return -r;
        r = posix_spawn_file_actions_init(&fa);
        if (r != 0)
                goto destroy_attr;
        /* A session of its own, so the timeout kills what the hook started as well (a script's curl); the signals
         * the daemon blocks and handles are unblocked and at their defaults in the hook. Then stdout and stderr
         * into the pipe, stdin on /dev/null (a read sees EOF at once), no other fd: a listening socket or a
         * client's connection must not outlive the daemon's own; and "/" as the working directory. */
        if ((r = posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK |
                                                         POSIX_SPAWN_SETSIGDEF)) != 0 ||
            (r = posix_spawnattr_setsigmask(&attr, &none)) != 0 ||
            (r = posix_spawnattr_setsigdefault(&attr, &all)) != 0 ||
            (r = posix_spawn_file_actions_adddup2(&fa, output_fd, STDOUT_FILENO)) != 0 ||
            (r = posix_spawn_file_actions_adddup2(&fa, output_fd, STDERR_FILENO)) != 0 ||
            (r = posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0)) != 0 ||
            (r = posix_spawn_file_actions_addclosefrom_np(&fa, STDERR_FILENO + 1)) != 0 ||
            (r = posix_spawn_file_actions_addchdir_np(&fa, "/")) != 0)
                goto destroy_fa;
        r = posix_spawn(&pid, argv[0], &fa, &attr, argv, envp);
        if (r == 0)
                *ret_pid = pid;
destroy_fa:
        posix_spawn_file_actions_destroy(&fa);
destroy_attr:
        posix_spawnattr_destroy(&attr);
        return -r;
}

/* SIGKILL to RUN's process group; to the hook alone should the group be gone already, so that nothing that
 * waits for it afterwards can wait forever. */
static void run_kill(HookRun *run) {
        if (kill(-run->pid, SIGKILL) < 0)
                (void) kill(run->pid, SIGKILL);
}

/* Kill RUN's process group and reap its leader, synchronously: for when the loop will not do it. */
static void run_kill_and_reap(HookRun *run) {
        if (run->pid <= 0)
                return;
        run->child_source = sd_event_source_disable_unref(run->child_source);
        run_kill(run);
        while (waitpid(run->pid, NULL, 0) < 0 && errno == EINTR)
                ;
}

static void hooks_remove_running(Hooks *h, HookRun *run) {
        for (size_t i = 0; i < h->n_running; i++)
                if (h->running[i] == run) {
                        h->running[i] = h->running[--h->n_running];
                        return;
                }
}

static void hooks_start_queued(Hooks *h);

static int on_hook_exit(sd_event_source *s, const siginfo_t *si, void *userdata) {
        HookRun *run = userdata;
        Hooks *h = run->hooks;
        char status[32];
        bool ok = false;

        /* Whatever it left behind in its process group goes with it: a hook is one run, and leftovers would escape
         * the timeout and hold the pipe open. The leader stays a zombie until this callback returns, so the group
         * id is still its own. */
        (void) kill(-run->pid, SIGKILL);
        /* What it wrote before it ended is in the pipe: into the log before the entry that says it ended. */
        run_read_output(run, HOOK_READS_AT_EXIT);
        run_close_output(run);

        if (si->si_code == CLD_EXITED) {
                snprintf(status, sizeof status, "%d", si->si_status);
                ok = si->si_status == 0;
                if (ok)
                        run_event(run, LOG_INFO, SW_MESSAGE_HOOK, status,
                                  "Hook '%s' (pid %d) for rule %s succeeded", run->argv[0], (int) run->pid,
                                  run->label);
                else
                        run_event(run, LOG_WARNING, SW_MESSAGE_HOOK, status,
                                  "Hook '%s' (pid %d) for rule %s failed with exit status %d", run->argv[0],
                                  (int) run->pid, run->label, si->si_status);
        } else {
                snprintf(status, sizeof status, "SIG%s", sigabbrev_np(si->si_status) ?: "?");
                run_event(run, LOG_WARNING, SW_MESSAGE_HOOK, status, "Hook '%s' (pid %d) for rule %s %s %s",
                          run->argv[0], (int) run->pid, run->label,
                          run->timed_out ? "was killed at its timeout with" : "was killed by", status);
        }
        if (run->output_skipped > 0)
                run_event(run, LOG_NOTICE, SW_MESSAGE_HOOK_OUTPUT, NULL,
                          "Hook '%s'[%d] (rule %s): %llu more bytes of output not logged", run->argv[0],
                          (int) run->pid, run->label, (unsigned long long) run->output_skipped);
        if (ok)
                h->stats.succeeded++;
        else
                h->stats.failed++;
        if (run->timed_out)
                h->stats.timed_out++;

        hooks_remove_running(h, run);
        hook_run_free(run);
        hooks_start_queued(h);
        return 0;
}

static int on_hook_timeout(sd_event_source *s, uint64_t usec, void *userdata) {
        HookRun *run = userdata;
        char after[32];

        /* The child source reports the end; this says why. */
        snprintf(after, sizeof after, "%.6g s", (double) run->timeout_usec / USEC_PER_SEC);
        run_event(run, LOG_WARNING, SW_MESSAGE_HOOK, NULL, "Hook '%s' for rule %s timed out after %s; killed",
                  run->argv[0], run->label, after);
        run->timed_out = true;
        run_kill(run);
        return 0;
}

static int hooks_start_one(Hooks *h, HookRun *run) {
        int fds[2], r;

        if (!GREEDY_REALLOC(h->running, h->n_running_allocated, h->n_running + 1))
                return log_oom();
        if (pipe2(fds, O_CLOEXEC) < 0)
                return log_error_errno(errno, "Failed to create the output pipe of hook '%s' for rule %s: %m",
                                       run->argv[0], run->label);
        run->output_fd = fds[0];
        /* Only the daemon's end is non-blocking: a hook whose stdout returned EAGAIN would fail in odd ways. */
        if (fcntl(run->output_fd, F_SETFL, O_NONBLOCK) < 0) {
                safe_close(fds[1]);
                return log_error_errno(errno, "Failed to set up the output pipe of hook '%s': %m", run->argv[0]);
        }
        r = hook_spawn(run->argv, run->envp, fds[1], &run->pid);
        safe_close(fds[1]);
        if (r < 0) {
                run_event(run, LOG_ERR, SW_MESSAGE_HOOK, strerrorname_np(-r),
                          "Failed to execute hook '%s' for rule %s: %s", run->argv[0], run->label, strerror(-r));
                return r;
        }
        h->stats.started++;
        run->timeout_usec = h->timeout_usec;
        if ((r = sd_event_add_child(h->event, &run->child_source, run->pid, WEXITED, on_hook_exit, run)) < 0 ||
            (r = sd_event_add_io(h->event, &run->output_source, run->output_fd, EPOLLIN, on_hook_output, run)) < 0 ||
            (r = sd_event_add_time_relative(h->event, &run->timeout_source, CLOCK_MONOTONIC, run->timeout_usec, 0,
                                            on_hook_timeout, run)) < 0) {
                /* Unwatched, it could run past every limit: stop it now. */
                run_kill_and_reap(run);
                run_event(run, LOG_ERR, SW_MESSAGE_HOOK, strerrorname_np(-r),
                          "Failed to watch hook '%s' (pid %d) for rule %s, killed it: %s", run->argv[0],
                          (int) run->pid, run->label, strerror(-r));
                run->pid = 0;
                return r;
        }
        h->running[h->n_running++] = run;
        run_event(run, LOG_INFO, SW_MESSAGE_HOOK, NULL, "Hook '%s' (pid %d) started for rule %s, pid %d",
                  run->argv[0], (int) run->pid, run->label, (int) run->target);
        return 0;
}

/* Start RUN and add it to the running ones (taking it), or log and count why not (RUN is then the caller's). */
static int hooks_start(Hooks *h, HookRun *run) {
        int r = hooks_start_one(h, run);

        if (r < 0)
                h->stats.failed++;
        return r;
}

static void hooks_start_queued(Hooks *h) {
        while (h->n_queued > 0 && h->n_running < h->max_running) {
                HookRun *run = h->queue[h->queue_head];

                h->queue[h->queue_head] = NULL;
                h->queue_head = (h->queue_head + 1) % HOOKS_QUEUE_MAX;
                h->n_queued--;
                /* A failure is logged and counted there; the next one may still run. */
                if (hooks_start(h, run) < 0)
                        hook_run_free(run);
        }
}

int hooks_run(Hooks *h, char *const *argv, const HookEvent *ev) {
        _cleanup_(hook_run_freep) HookRun *run = NULL;
        int r;

        if (!argv || !argv[0] || argv[0][0] != '/')
                return log_error_errno(SYNTHETIC_ERRNO(EINVAL),
                                       "Hook for rule \"%s\" is not an absolute path ('%s'); not running it",
                                       strna(ev->rule), argv && argv[0] ? argv[0] : "");
        r = hook_run_new(h, argv, ev, &run);
        if (r < 0)
                return log_oom();
        if (h->n_queued == 0 && h->n_running < h->max_running) {
                r = hooks_start(h, run);
                if (r < 0)
                        return r;
                TAKE_PTR(run);
                return 0;
        }
        if (h->n_queued >= HOOKS_QUEUE_MAX) {
                h->stats.dropped++;
                run_event(run, LOG_WARNING, SW_MESSAGE_HOOK, NULL,
                          "Too many hooks waiting (%zu running, %zu queued); not running hook '%s' for rule %s, "
                          "pid %d",
                          h->n_running, h->n_queued, run->argv[0], run->label, (int) run->target);
                return -ENOBUFS;
        }
        log_debug("Hook '%s' for rule %s queued behind %zu running", run->argv[0], run->label, h->n_running);
        h->queue[(h->queue_head + h->n_queued) % HOOKS_QUEUE_MAX] = TAKE_PTR(run);
        h->n_queued++;
        return 0;
}

void hooks_set_limits(Hooks *h, uint64_t timeout_usec, unsigned max_running) {
        h->timeout_usec = timeout_usec;
        h->max_running = MAX(max_running, 1U);
        hooks_start_queued(h);
}

int hooks_new(sd_event *e, Hooks **ret) {
        Hooks *h = calloc(1, sizeof *h);

        if (!h)
                return -ENOMEM;
        h->event = sd_event_ref(e);
        h->timeout_usec = CONFIG_DEFAULT_HOOK_TIMEOUT_USEC;
        h->max_running = CONFIG_DEFAULT_HOOK_MAX_RUNNING;
        *ret = h;
        return 0;
}

Hooks *hooks_free(Hooks *h) {
        if (!h)
                return NULL;
        for (size_t i = 0; i < h->n_running; i++) {
                HookRun *run = h->running[i];

                run_event(run, LOG_WARNING, SW_MESSAGE_HOOK, "SIGKILL",
                          "Hook '%s' (pid %d) for rule %s still running at stop; killed", run->argv[0],
                          (int) run->pid, run->label);
                run_kill_and_reap(run);
                hook_run_free(run);
        }
        free(h->running);
        for (size_t i = 0; i < h->n_queued; i++)
                hook_run_free(h->queue[(h->queue_head + i) % HOOKS_QUEUE_MAX]);
        if (h->n_queued > 0)
                log_info("Stopping with %zu hook(s) queued; they do not run", h->n_queued);
        sd_event_unref(h->event);
        free(h);
        return NULL;
}

unsigned hooks_running(const Hooks *h) {
        return (unsigned) h->n_running;
}

unsigned hooks_queued(const Hooks *h) {
        return (unsigned) h->n_queued;
}

const HookStats *hooks_stats(const Hooks *h) {
        return &h->stats;
}
