/* capture-job.c: captures run in a child process. The kernel detaches a tracer's tracees when it exits, so even a
 * thread that stops late is released; a crash in libdw on a hostile binary takes down the child, not the daemon;
 * and the event loop never waits for an unwind. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/io-util.h"
#include "base/json-util.h"
#include "base/log.h"
#include "base/macro.h"
#include "base/string-table.h"
#include "base/strv.h"
#include "base/time-util.h"
#include "capture/syscall-probe.h"
#include "chain/wait-chain.h"
#include "render/goroutine-text.h"
#include "render/signature.h"
#include "render/snapshot-json.h"
#include "render/snapshot-pprof.h"
#include "render/snapshot-text.h"
#include "store/archive-vacuum.h"
#include "unwind/symbolize.h"
#include "capture-job.h"

/* The report's size: a line of numbers, and the identity line, a command line escaped into JSON, a few frames, the
 * thread's stack and the Python frames of some threads. The pipe is made this large too (the parent reads it only
 * once the child has exited): each part is bounded, but a hostile process's bytes come escaped, 6 for 1. */
#define JOB_REPORT_MAX (256 * 1024)

struct CaptureJob {
        pid_t child;
        pid_t target;
        char *rule;                     /* a render: the snapshot id */
        bool render;
        int pipe_fd;                    /* the child reports its first line here (job_report_ok()),
                                         * and a second line: {"python": [..]}, with {"cmdline": [..],
                                         * "frames": [..]} for an archived capture */
        bool timed_out;
        sd_event_source *child_source, *timeout_source;
        CaptureJobDone done;
        void *userdata;
};

/* The options of a render as SPEC asks, with kernel frames or not. */
static RenderOptions job_render_options(const CaptureJobSpec *spec, bool kernel) {
        return (RenderOptions) { .kernel = kernel, .picture = spec->picture };
}

/* A live capture: the snapshot rendered into the caller's file. */
static int job_render(const Snapshot *s, const CaptureJobSpec *spec) {
        RenderOptions o = job_render_options(spec, spec->options.kernel);
        _cleanup_fclose_ FILE *f = NULL;
        int r;

        f = fdopen(spec->output_fd, "w");
        if (!f)
                return negative_errno();
        r = snapshot_render(s, spec->format, &o, f);
        if (r < 0)
                return r;
        if (fflush(f) != 0)
                return negative_errno();
        return 0;
}

/* The child's first line: "OK <id|-> <max pause µs> <duration µs> <threads> <fallback stops>", of S (NULL: a
 * render, which captured nothing), job_finish() reads it. */
static void job_report_ok(int out_fd, const char *id, const Snapshot *s) {
        dprintf(out_fd, "OK %s %.1f %llu %zu %zu\n", id ?: "-", s ? s->max_pause_us : 0.0,
                (unsigned long long) (s ? s->duration_usec : 0), s ? s->n_threads : 0,
                s ? snapshot_fallback_stops(s, true) : 0);
}

/* Cap the data segment (every private writable mapping: the heap, malloc's mmaps) at what it is now plus EXTRA.
 * Relative, and RLIMIT_DATA rather than RLIMIT_AS: a sanitizer's shadow is already mapped, and its allocator maps
 * user memory inside a region it reserved at start, which the address space never sees grow. */
static int limit_data(uint64_t extra) {
        _cleanup_fclose_ FILE *f = fopen("/proc/self/statm", "re");
        unsigned long long size, resident, shared, text, lib, data;
        struct rlimit rl;

        if (!f)
                return negative_errno();
        if (fscanf(f, "%llu %llu %llu %llu %llu %llu", &size, &resident, &shared, &text, &lib, &data) != 6)
                return -EIO;
        rl.rlim_cur = rl.rlim_max = data * (uint64_t) sysconf(_SC_PAGESIZE) + extra;
        return setrlimit(RLIMIT_DATA, &rl) < 0 ? negative_errno() : 0;
}

/* The child of a render: read a stored snapshot and render it. It is untrusted input, so this runs here, bounded in
 * time (the job's timeout) and memory, and never on the daemon's loop. On a document that is not a snapshot, the
 * reason replaces the output. */
void capture_job_symbols(const Config *c, SymbolizerSettings *ret) {
        *ret = (SymbolizerSettings) {
                .cache_dir = c->symbols_cache_off ? NULL : c->symbols_cache_dir,
                .cache_max_size = c->symbols_cache_max_size,
                .debuginfod_set = c->symbols_debuginfod || c->symbols_debuginfod_off,
                .debuginfod = c->symbols_debuginfod_off ? NULL : c->symbols_debuginfod,
        };
}

/* The spec's cache and debuginfod settings: a cache that cannot be used costs time, not the capture. */
static int job_symbolizer_apply(Symbolizer *sym, const CaptureJobSpec *spec) {
        int r = symbolizer_apply(sym, &spec->symbols);

        if (r == -ENOMEM)
                return r;
        if (r < 0)
                log_debug_errno(r, "No debuginfo cache in '%s', capturing without: %m", spec->symbols.cache_dir);
        return 0;
}

/* After the result is out: what was found outside the cache goes into it, while the budget lasts (a child killed at
 * its timeout mid-copy would leave a temporary file for the next trim). */
static void job_flush_cache(Symbolizer *sym, uint64_t deadline_usec) {
        int r;

        if (deadline_usec && now_usec(CLOCK_MONOTONIC) >= deadline_usec)
                return;
        r = symbolizer_flush_cache(sym);
        if (r < 0)
                log_debug_errno(r, "Debuginfo not cached: %m");
}

static int job_render_stored(const CaptureJobSpec *spec, int out_fd) {
        _cleanup_(archive_freep) Archive *a = NULL;
        _cleanup_free_ char *json = NULL;
        _cleanup_fclose_ FILE *f = NULL;
        const char *why = NULL;
        RenderOptions o;
        size_t len = 0;
        int r;

        r = archive_open(spec->archive_dir, &a);
        if (r >= 0)
                r = archive_read(a, spec->render_id, &json, &len, NULL);
        if (r < 0)
                return -r;
        /* The read is bounded by ARCHIVE_DOCUMENT_MAX; what json-c builds of it, from here on. */
        r = limit_data(MIN(CAPTURE_JOB_RENDER_MEMORY_BASE + CAPTURE_JOB_RENDER_MEMORY_PER_BYTE * len,
                                    CAPTURE_JOB_RENDER_MEMORY_MAX));
        if (r < 0)
                log_debug_errno(r, "Failed to limit the render's memory, rendering without: %m");
        f = fdopen(spec->output_fd, "w");
        if (!f)
                return errno;
        o = job_render_options(spec, true);
        if (spec->resymbolize) {
                _cleanup_(symbolizer_freep) Symbolizer *sym = NULL;

                r = symbolizer_new(NULL, true, &sym);
                if (r >= 0)
                        r = job_symbolizer_apply(sym, spec);
                if (r >= 0)
                        r = symbolizer_render_resymbolized(sym, json, len, spec->format, &o, f, NULL, &why);
                if (r >= 0)
                        job_flush_cache(sym, 0);
        } else
                r = snapshot_render_stored(json, len, spec->format, &o, f, &why);
        if (fflush(f) != 0 && r >= 0)
                r = negative_errno();
        if (r == -EBADMSG && ftruncate(spec->output_fd, 0) >= 0 && lseek(spec->output_fd, 0, SEEK_SET) == 0)
                (void) loop_write(spec->output_fd, why, strlen(why));
        if (r < 0)
                return -r;
        job_report_ok(out_fd, NULL, NULL);
        return 0;
}

/* Cut S at MAX bytes with a visible "…", at a character's start: a frame is UTF-8, and so is its cut. */
static void cut_text(char *s, size_t max) {
        size_t k;

        if (strlen(s) <= max)
                return;
        k = max - strlen("…");
        while (k > 0 && ((unsigned char) s[k] & 0xc0) == 0x80)
                k--;
        strcpy(s + k, "…");
}

typedef struct PythonReport {
        json_object *array;
        pid_t tids[CAPTURE_JOB_PYTHON_MAX];
        size_t n;
} PythonReport;

/* Add thread TID of process PID to the report when it runs Python code, once; CYCLE: it is one of the deadlock's. */
static int report_python_thread(PythonReport *rep, const Snapshot *root, pid_t pid, pid_t tid, bool cycle) {
        const Snapshot *p = snapshot_process_of(root, pid);
        _cleanup_(json_object_putp) json_object *e = NULL;
        _cleanup_free_ char *frame = NULL;
        int r;

        if (rep->n >= CAPTURE_JOB_PYTHON_MAX || !p || !snapshot_runs_frame_runtime(p))
                return 0;
        for (size_t i = 0; i < rep->n; i++)
                if (rep->tids[i] == tid)
                        return 0;
        r = snapshot_top_runtime_frame(p, tid, &frame);
        if (r < 0)
                return r;
        if (!frame)
                return 0;
        cut_text(frame, CAPTURE_JOB_FRAME_MAX);
        e = json_object_new_object();
        if (!e || json_add_int64(e, "pid", pid) < 0 || json_add_int64(e, "tid", tid) < 0 ||
            json_add_string(e, "frame", frame) < 0 || json_add(e, "cycle", json_object_new_boolean(cycle)) < 0 ||
            json_object_array_add(rep->array, e) < 0)
                return -ENOMEM;
        TAKE_PTR(e);
        rep->tids[rep->n++] = tid;
        return 0;
}

/* The innermost Python frame of the threads that run Python code, for the firing (the culprit's, a deadlock's
 * cycle's) and for `stackctl ps` (every thread the snapshot caught): in that order, within the bound, so that the
 * report stays small. Read from the snapshot here: the loop never reads a target's memory. */
static int report_python(const Snapshot *s, pid_t tid, json_object **ret) {
        pid_t pids[CAPTURE_JOB_PYTHON_MAX], tids[CAPTURE_JOB_PYTHON_MAX];
        PythonReport rep = { .array = json_object_new_array() };
        size_t n_cycle = snapshot_deadlock_threads(s, pids, tids, ELEMENTSOF(tids));
        bool trigger_cycle = false;
        int r = 0;

        if (!rep.array)
                return -ENOMEM;
        for (size_t i = 0; i < n_cycle; i++)
                trigger_cycle = trigger_cycle || tids[i] == tid;
        if (tid > 0)
                r = report_python_thread(&rep, s, s->pid, tid, trigger_cycle);
        for (size_t i = 0; r >= 0 && i < n_cycle; i++)
                r = report_python_thread(&rep, s, pids[i], tids[i], true);
        for (size_t i = 0; r >= 0 && i < s->n_threads; i++)
                r = report_python_thread(&rep, s, s->pid, s->threads[i].tid, false);
        for (size_t k = 0; r >= 0 && k < s->n_peers; k++)
                for (size_t i = 0; r >= 0 && i < s->peers[k]->n_threads; i++)
                        r = report_python_thread(&rep, s, s->peers[k]->pid, s->peers[k]->threads[i].tid, false);
        if (r < 0) {
                json_object_put(rep.array);
                return r;
        }
        *ret = rep.array;
        return 0;
}

/* A live capture's second report line: where its threads are in Python code, as an archived capture reports it
 * (job_report_identity()), so that the daemon knows it from any capture it made. */
static int job_report_python(const Snapshot *s, int out_fd) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_object();
        _cleanup_free_ char *text = NULL;
        json_object *python = NULL;

        if (!o || report_python(s, 0, &python) < 0 || json_add(o, "python", python) < 0 ||
            json_to_text(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &text, NULL) < 0)
                return ENOMEM;
        dprintf(out_fd, "%s\n", text);
        return 0;
}

/* The second report line: what an alert and a journal record show of the process, taken here, in the child,
 * because reading /proc/PID/cmdline can block on the target's memory map lock, which the loop must never risk; and
 * the problem the snapshot shows, DUPLICATE when it was not stored for it (capture_job_result.duplicate). */
static int job_report_identity(const Snapshot *s, pid_t tid, bool duplicate, int out_fd) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_object();
        _cleanup_strv_free_ char **frames = NULL, **cmdline = NULL;
        _cleanup_free_ char *stack = NULL, *text = NULL, *goroutines = NULL;
        json_object *python = NULL, *peers = json_object_new_array();
        size_t total = 0;
        int r;

        if (!o || !peers) {
                json_object_put(peers);
                return ENOMEM;
        }
        for (size_t i = 0; i < s->n_peers && i < CAPTURE_JOB_PEERS_MAX; i++)
                if (json_object_array_add(peers, json_object_new_int(s->peers[i]->pid)) < 0)
                        return ENOMEM;
        /* Bounded, so that the report fits the pipe the parent reads only once the child has exited. */
        r = snapshot_top_frames(s, tid, CAPTURE_JOB_TOP_FRAMES, &frames);
        for (size_t i = 0; r >= 0 && frames && frames[i]; i++)
                cut_text(frames[i], CAPTURE_JOB_FRAME_MAX);
        for (size_t i = 0; r >= 0 && s->cmdline && s->cmdline[i] && total < CAPTURE_JOB_CMDLINE_MAX; i++) {
                size_t n = MIN(strlen(s->cmdline[i]), CAPTURE_JOB_CMDLINE_MAX - total);

                r = strv_consume(&cmdline, strndup(s->cmdline[i], n));
                total += n + 1;
        }
        if (r >= 0)
                r = snapshot_thread_text(s, tid, &(TextOptions) { .kernel = true }, CAPTURE_JOB_STACK_MAX, &stack);
        if (r >= 0)
                r = report_python(s, tid, &python);
        if (r >= 0)
                r = goroutines_summary(s, &goroutines);
        if (r >= 0 && goroutines)
                cut_text(goroutines, CAPTURE_JOB_FRAME_MAX);
        if (r < 0 || json_add(o, "cmdline", json_new_strv(cmdline ?: s->cmdline)) < 0 ||
            json_add(o, "frames", json_new_strv(frames)) < 0 || json_add_string(o, "stack", stack) < 0 ||
            json_add(o, "python", python) < 0 || json_add_string(o, "goroutines", goroutines) < 0 ||
            json_add_string(o, "signature", s->signature) < 0 || json_add_string(o, "title", s->title) < 0 ||
            json_add(o, "duplicate", json_object_new_boolean(duplicate)) < 0 || json_add(o, "peers", peers) < 0 ||
            json_to_text(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &text, NULL) < 0)
                return ENOMEM;
        dprintf(out_fd, "%s\n", text);
        return 0;
}

/* The child: capture, serialize, archive (or render), report. Exit status: 0, or an errno. */
static int job_child(const CaptureJobSpec *spec, int out_fd) {
        _cleanup_(symbolizer_freep) Symbolizer *sym = NULL;
        _cleanup_snapshot_free_ Snapshot *s = NULL;
        _cleanup_(archive_freep) Archive *a = NULL;
        _cleanup_free_ char *id = NULL, *json = NULL;
        ArchiveSummary summary;
        ArchiveRoom room = {};
        CaptureOptions options;
        json_object *j;
        size_t json_len;
        int r;

        SyscallProbe probe = { .nr = -1 };
        bool probed = false;

        if (spec->render_id)
                return job_render_stored(spec, out_fd);

        /* The probe first: it watches the thread spin, and the capture afterwards sees the same loop. */
        if (spec->probe_usec > 0 && spec->trigger.tid > 0) {
                r = syscall_probe(spec->trigger.tid, spec->probe_usec, &probe);
                if (r >= 0)
                        probed = true;
                else
                        log_warning_errno(r, "Syscall probe of thread %d failed, capturing without: %m",
                                          (int) spec->trigger.tid);
        }
        /* One budget, from here, for the process and its peers: the probe above has its own. */
        options = spec->options;
        options.deadline_usec = now_usec(CLOCK_MONOTONIC) + options.time_budget_usec;
        options.keep_tid = spec->trigger.tid;
        r = symbolizer_new(options.debuginfo_path, true, &sym);
        if (r >= 0)
                r = job_symbolizer_apply(sym, spec);
        if (r < 0)
                return -r;
        r = capture_process(spec->pid, &options, sym, &s);
        if (r < 0)
                return -r;
        if (spec->peers > 0) {
                r = wait_chain_capture(s, spec->chain_tid, spec->peers, &options, sym);
                if (r == -ENOMEM)
                        return ENOMEM;
                if (r < 0)
                        (void) snapshot_add_error(s, "Wait chain not followed: %s", strerror(-r));
        }
        /* A live capture was asked for, not triggered: it has no trigger section. */
        if (spec->output_fd >= 0) {
                r = job_render(s, spec);
                if (r < 0)
                        return -r;
                job_report_ok(out_fd, NULL, s);
                /* The capture is served already: without this line only the daemon's view of it is the poorer. */
                (void) job_report_python(s, out_fd);
                job_flush_cache(sym, options.deadline_usec);
                return 0;
        }
        s->trigger = calloc(1, sizeof *s->trigger);
        if (!s->trigger)
                return ENOMEM;
        *s->trigger = spec->trigger;
        s->trigger->probe_nr = -1;
        if (probed) {
                s->trigger->probe_window_usec = MAX(probe.window_usec, 1U);
                s->trigger->probe_syscalls = probe.syscalls;
                s->trigger->probe_nr = probe.nr;
                s->trigger->probe_result = probe.result;
                s->trigger->probe_count = probe.count;
        }
        s->trigger->rule = strdup(spec->trigger.rule ?: "");
        s->trigger->klass = strdup(spec->trigger.klass ?: "");
        s->trigger->wchan = spec->trigger.wchan ? strdup(spec->trigger.wchan) : NULL;
        if (!s->trigger->rule || !s->trigger->klass || snapshot_sign(s) < 0)
                return ENOMEM;
        /* The problem is open on this process already: its snapshot stands, this firing only counts. */
        if (s->signature && strv_contains(spec->open_signatures, s->signature)) {
                job_report_ok(out_fd, NULL, s);
                return job_report_identity(s, spec->trigger.tid, true, out_fd);
        }
        j = snapshot_to_json(s);
        if (!j)
                return ENOMEM;
        r = json_to_text(j, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &json, &json_len);
        json_object_put(j);
        if (r < 0)
                return -r;
        summary = (ArchiveSummary) {
                .timestamp_usec = s->timestamp_usec,
                .pid = s->pid,
                .comm = s->comm,
                .rule = s->trigger->rule,
                .klass = s->trigger->klass,
                .exe = s->exe,
                .unit = s->unit,
                .signature = s->signature,
                .title = s->title,
                .host = s->hostname,
        };
        r = archive_open(spec->archive_dir, &a);
        if (r >= 0)
                r = archive_write_rotating(a, json, json_len, &summary, &spec->limits, &id, &room);
        if (room.full && room.removed == -EFBIG)
                log_warning("No room in the archive for a snapshot of pid %d, and it would not fit even in an empty "
                            "one: kept the old snapshots.", (int) s->pid);
        else if (room.full)
                log_warning("No room in the archive for a snapshot of pid %d: removed %d old snapshot(s)%s%s.",
                            (int) s->pid, MAX(room.removed, 0), room.removed < 0 ? " (vacuum failed)" : "",
                            r >= 0 ? " and stored it" : ", still no room");
        if (r < 0)
                return -r;
        job_report_ok(out_fd, id, s);
        r = job_report_identity(s, spec->trigger.tid, false, out_fd);
        if (r == 0)
                job_flush_cache(sym, options.deadline_usec);
        return r;
}

/* The report's "python" array; entries that are not what the child writes are skipped. -ENOMEM. */
static int job_python_parse(json_object *a, CaptureJobPython **ret, size_t *ret_n) {
        size_t n = a ? MIN(json_object_array_length(a), (size_t) CAPTURE_JOB_PYTHON_MAX) : 0, k = 0;
        CaptureJobPython *p;

        if (n == 0)
                return 0;
        p = calloc(n, sizeof *p);
        if (!p)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                json_object *e = json_object_array_get_idx(a, i);
                uint64_t pid = json_get_u64(e, "pid"), tid = json_get_u64(e, "tid");
                const char *frame = json_get_string(e, "frame");

                if (pid == 0 || pid > INT32_MAX || tid == 0 || tid > INT32_MAX || !frame)
                        continue;
                p[k] = (CaptureJobPython) { .pid = (pid_t) pid, .tid = (pid_t) tid, .frame = strdup(frame),
                                            .cycle = json_get_bool(e, "cycle") };
                if (!p[k].frame) {
                        for (size_t i2 = 0; i2 < k; i2++)
                                free(p[i2].frame);
                        free(p);
                        return -ENOMEM;
                }
                k++;
        }
        *ret = p;
        *ret_n = k;
        return 0;
}

const CaptureJobPython *capture_job_result_python(const CaptureJobResult *res, pid_t tid) {
        for (size_t i = 0; i < res->n_python; i++)
                if (res->python[i].tid == tid)
                        return &res->python[i];
        return NULL;
}

static void job_finish(CaptureJob *j, int error) {
        _cleanup_free_ char *buf = malloc(JOB_REPORT_MAX + 1);
        _cleanup_(json_object_putp) json_object *identity = NULL;
        char id[ARCHIVE_ID_MAX + 1];
        CaptureJobResult res = { .error = error ?: -EIO };
        unsigned long long duration;
        size_t len = 0;
        char *nl;

        j->child_source = sd_event_source_disable_unref(j->child_source);
        j->timeout_source = sd_event_source_disable_unref(j->timeout_source);
        if (j->timed_out)
                res.error = -ETIME;
        /* The child has exited: what it wrote is all in the pipe, and a read ends at its end. */
        while (buf && len < JOB_REPORT_MAX) {
                ssize_t n = read(j->pipe_fd, buf + len, JOB_REPORT_MAX - len);
                if (n <= 0)
                        break;
                len += (size_t) n;
        }
        if (buf)
                buf[len] = 0;
        nl = buf ? strchr(buf, '\n') : NULL;
        if (error == 0 && nl &&
            sscanf(buf, "OK %35s %lf %llu %u %u", id, &res.max_pause_us, &duration, &res.threads,
                   &res.fallback_stops) == 5) {
                res.error = 0;
                res.duration_usec = duration;
                res.id = streq(id, "-") ? NULL : id;
                /* Our own child wrote it, but bounded all the same: a missing or cut line just means no identity. */
                if (nl[1] && json_parse_bounded(nl + 1, strlen(nl + 1), &identity, &(const char *) { NULL }) >= 0 &&
                    (json_dup_strv(identity, "cmdline", &res.cmdline) < 0 ||
                     json_dup_strv(identity, "frames", &res.frames) < 0 ||
                     json_dup_string(identity, "stack", &res.stack) < 0 ||
                     json_dup_string(identity, "goroutines", &res.goroutines) < 0 ||
                     json_dup_string(identity, "signature", &res.signature) < 0 ||
                     json_dup_string(identity, "title", &res.title) < 0 ||
                     job_python_parse(json_get_array(identity, "python"), &res.python, &res.n_python) < 0))
                        log_oom();
                res.duplicate = identity && json_get_bool(identity, "duplicate") && !res.id && res.signature;
                json_object *peers = identity ? json_get_array(identity, "peers") : NULL;
                for (size_t i = 0; peers && i < json_object_array_length(peers) && i < CAPTURE_JOB_PEERS_MAX; i++) {
                        int64_t pid = json_object_get_int64(json_object_array_get_idx(peers, i));

                        if (pid > 0 && pid <= INT32_MAX)
                                res.peers[res.n_peers++] = (pid_t) pid;
                }
        }
        j->done(j, &res, j->userdata);
        free(res.signature);
        free(res.title);
        strv_free(res.cmdline);
        strv_free(res.frames);
        free(res.stack);
        free(res.goroutines);
        for (size_t i = 0; i < res.n_python; i++)
                free(res.python[i].frame);
        free(res.python);
}

static int on_child(sd_event_source *s, const siginfo_t *si, void *userdata) {
        CaptureJob *j = userdata;
        int error = 0;

        j->child = 0;
        if (si->si_code == CLD_EXITED && si->si_status != 0)
                error = -si->si_status;
        else if (si->si_code != CLD_EXITED)
                error = -ECHILD; /* killed by a signal: crashed */
        job_finish(j, error);
        return 0;
}

static int on_timeout(sd_event_source *s, uint64_t usec, void *userdata) {
        CaptureJob *j = userdata;

        /* The child source reports the kill; say why. */
        if (j->render)
                log_warning("Rendering stored snapshot %s timed out; killing it", strna(j->rule));
        else
                log_warning("Capture of pid %d for rule \"%s\" timed out; killing it", (int) j->target,
                            strna(j->rule));
        j->timed_out = true;
        if (j->child > 0)
                (void) kill(j->child, SIGKILL);
        return 0;
}

int capture_job_start(sd_event *e, const CaptureJobSpec *spec, CaptureJobDone done, void *userdata,
                      CaptureJob **ret) {
        CaptureJob *j;
        int fds[2], r;
        pid_t child;

        j = calloc(1, sizeof *j);
        if (!j)
                return -ENOMEM;
        j->pipe_fd = -EBADF;
        j->target = spec->pid;
        j->done = done;
        j->userdata = userdata;
        j->render = spec->render_id != NULL;
        j->rule = strdup(spec->render_id ?: spec->trigger.rule ?: "");
        if (!j->rule || pipe2(fds, O_CLOEXEC | O_NONBLOCK) < 0) {
                r = j->rule ? negative_errno() : -ENOMEM;
                capture_job_free(j);
                return r;
        }
        /* Best effort: the default 64 KiB holds every report but the most hostile one. */
        (void) fcntl(fds[1], F_SETPIPE_SZ, JOB_REPORT_MAX);
        /* The child keeps only its two pipes: a copy of an HTTP client's connection or of a listening socket must not
         * outlive the daemon's own (a client would wait for an EOF the child holds up). The loop's fds go too. Dying
         * with the daemon, the kernel detaches anything it holds. */
        /* And the BPF register reader's program, loaded once by the daemon (capture_regs_preload()); -EBADF, and
         * ignored, where it did not load. */
        r = fork_child(&(ForkOptions) { .flags = FORK_CHILD_OF_DAEMON, .keep_fds = (const int[]) { fds[1],
                                        spec->output_fd, capture_regs_fd() }, .n_keep_fds = 3,
                                        .setup_failed_status = ESRCH },
                       &child);
        if (r < 0) {
                safe_close(fds[0]);
                safe_close(fds[1]);
                capture_job_free(j);
                return r;
        }
        if (r == 0) {
                free(j->rule); /* the parent's bookkeeping, not ours */
                free(j);
                _exit(job_child(spec, fds[1]));
        }
        safe_close(fds[1]);
        j->pipe_fd = fds[0];
        j->child = child;
        r = sd_event_add_child(e, &j->child_source, child, WEXITED, on_child, j);
        if (r >= 0)
                r = sd_event_add_time_relative(e, &j->timeout_source, CLOCK_MONOTONIC, spec->timeout_usec, 0,
                                               on_timeout, j);
        if (r < 0) {
                capture_job_free(j);
                return r;
        }
        *ret = j;
        return 0;
}

CaptureJob *capture_job_free(CaptureJob *j) {
        if (!j)
                return NULL;
        sd_event_source_disable_unref(j->child_source);
        sd_event_source_disable_unref(j->timeout_source);
        process_kill(j->child, true);
        safe_close(j->pipe_fd);
        free(j->rule);
        free(j);
        return NULL;
}

pid_t capture_job_target(const CaptureJob *j) {
        return j->target;
}

const char *capture_job_rule(const CaptureJob *j) {
        return j->rule;
}
