/* stackctl-dump.c: "stackctl dump PID…|--all": capture and print, as text, JSON lines or folded stacks (or have
 * the daemon capture, with --via-daemon). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/escape.h"
#include "base/json-util.h"
#include "base/log.h"
#include "base/parse-util.h"
#include "base/time-util.h"
#include "capture/capture.h"
#include "chain/wait-chain.h"
#include "proc/proc-read.h"
#include "render/snapshot-json.h"
#include "render/snapshot-pprof.h"
#include "render/snapshot-svg.h"
#include "render/snapshot-text.h"
#include "unwind/symbolize.h"
#include "unwind/symcache.h"
#include "stackctl-args.h"
#include "stackctl-daemon.h"
#include "stackctl-dump.h"
#include "stackctl-fanout.h"
#include "stackctl-output.h"
#include "stackctl-verbs.h"

static int print_snapshot(const Snapshot *s) {
        RenderOptions o = render_options_from_args();
        int r = snapshot_render(s, arg.format, &o, stdout);

        if (r == -ENOMEM)
                return log_oom();
        if (r < 0 || (arg.format == RENDER_JSON && putchar('\n') == EOF) || fflush(stdout) == EOF)
                return log_error_errno(r < 0 ? r : -errno, "Failed to write the %s output: %m",
                                       render_format_to_string(arg.format));
        return 0;
}

/* Whether something of S (or of a peer it reached) is missing that the user did not ask to leave out. -n N asks
 * for at most N frames per thread, as eu-stack's does (which exits 0 for it): a thread whose unwind stopped there
 * is what was asked. A budget the user did not set this way (--max-frames, --stack-bytes, the time and thread
 * budgets) makes the dump partial; everything but a thread's own cut also leaves an error, which marks S partial. */
static bool missing_unasked(const Snapshot *s) {
        size_t cut = 0;

        if (s->partial)
                return true;
        for (size_t i = 0; i < s->n_threads; i++) {
                const ThreadSnapshot *t = &s->threads[i];

                if (!t->truncated)
                        continue;
                if (!(arg.count > 0 && t->unwind_end && startswith(t->unwind_end, "max frames")))
                        return true;
                cut++;
        }
        /* Cut, but not in a thread's frames: something else, which -n did not ask for. */
        if (s->truncated && cut == 0 && !(s->wait_chain && s->wait_chain->truncated))
                return true;
        if (s->wait_chain && s->wait_chain->truncated)
                return true;
        for (size_t i = 0; i < s->n_peers; i++)
                if (missing_unasked(s->peers[i]))
                        return true;
        return false;
}

/* Capture and print one process; returns an EXIT_* code. QUIET_GONE: a process that vanished is not an error
 * (for --all, where processes come and go). */
static int dump_one(Symbolizer *sym, pid_t pid, bool quiet_gone) {
        _cleanup_snapshot_free_ Snapshot *s = NULL;
        CaptureOptions o = arg.capture;
        int r;

        /* -1 (eu-stack): the main thread only. */
        if (arg.one)
                o.tid = pid;
        /* One budget for the process and the peers it waits on. */
        o.deadline_usec = now_usec(CLOCK_MONOTONIC) + o.time_budget_usec;
        r = capture_process(pid, &o, sym, &s);
        if (r == -ESRCH) {
                if (quiet_gone)
                        return EXIT_OK;
                if (arg.capture.tid > 0)
                        log_error("No thread %d in process %d.", (int) arg.capture.tid, (int) pid);
                else
                        log_error("No such process: %d", (int) pid);
                return EXIT_NO_PROCESS;
        }
        if (r == -EACCES || r == -EPERM) {
                log_error("Permission denied reading process %d (needs root, or CAP_SYS_PTRACE and CAP_SYS_ADMIN).",
                          (int) pid);
                return EXIT_PERMISSION;
        }
        if (r == -ENOMEM)
                return log_oom(), EXIT_FAIL;
        if (r < 0) {
                log_error_errno(r, "Failed to capture process %d: %m", (int) pid);
                return EXIT_FAIL;
        }
        if (arg.peers > 0 || arg.locks) {
                r = wait_chain_capture(s, o.tid, arg.peers, &o, sym);
                if (r == -ENOMEM)
                        return log_oom(), EXIT_FAIL;
                if (r < 0)
                        snapshot_add_error(s, "Wait chain not followed: %s", strerror(-r));
        }
        if (print_snapshot(s) < 0)
                return EXIT_FAIL;
        return missing_unasked(s) ? EXIT_PARTIAL : EXIT_OK;
}

/* Combine per-process results: the most serious one wins. */
static int worse(int a, int b) {
        static const int rank[] = { [EXIT_OK] = 0, [EXIT_PARTIAL] = 1, [EXIT_PERMISSION] = 2,
                                    [EXIT_NO_PROCESS] = 3, [EXIT_FAIL] = 4, [EXIT_USAGE] = 5 };
        return rank[b] > rank[a] ? b : a;
}

static int dump_all(Symbolizer *sym) {
        _cleanup_close_ int procfd = -EBADF;
        _cleanup_free_ int *pids = NULL;
        size_t n = 0;
        unsigned dumped = 0, denied = 0;
        int r;

        procfd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (procfd < 0)
                return log_error_errno(errno, "Failed to open /proc: %m"), EXIT_FAIL;
        r = proc_list_numeric(procfd, ".", &pids, &n);
        if (r < 0)
                return log_error_errno(r, "Failed to list /proc: %m"), EXIT_FAIL;
        for (size_t i = 0; i < n; i++) {
                if (pids[i] == getpid())
                        continue;
                /* Processes come and go, and kernel threads and others' processes may be partial: with --all the
                 * exit code only says whether anything could be dumped. */
                r = dump_one(sym, pids[i], true);
                if (r == EXIT_OK || r == EXIT_PARTIAL)
                        dumped++;
                else if (r == EXIT_PERMISSION)
                        denied++;
        }
        /* A process we may not read is not dumped: say so in the status, as for a named process. */
        if (denied > 0) {
                log_error("%u process(es) could not be read (permission denied); %u dumped.", denied, dumped);
                return EXIT_PERMISSION;
        }
        return dumped > 0 ? EXIT_OK : EXIT_FAIL;
}

/* dump --via-daemon PID with several --host: each daemon captures its process PID (pids are per host, so most will
 * have none). Text: each host's reply under a "==> HOST <==" header, a host without the process a line saying so;
 * folded: each line with the host as its outermost frame; JSON: one object, each host's document under its name
 * (null when it has none). The exit status is the hosts' that did not answer properly (see fanout_exit_status()),
 * else 3 when no host has the process. */
static int dump_via_daemons(pid_t pid) {
        _cleanup_free_ char *path = NULL;
        _cleanup_(json_object_putp) json_object *all = NULL;
        FanoutReply *rs = NULL;
        size_t n = 0, found = 0;
        int r;

        if (stacks_path(pid, &path) < 0 ||
            fanout_get(path, DAEMON_CAPTURE_TIMEOUT_USEC, 0, &rs, &n) != EXIT_OK)
                return EXIT_FAIL;
        if (arg.format == RENDER_JSON && !(all = json_object_new_object())) {
                fanout_replies_free(rs, n);
                return log_oom(), EXIT_FAIL;
        }
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *host = escape_string(rs[i].host);
                json_object *doc = NULL;
                const char *why = NULL;

                if (rs[i].exit == EXIT_OK && arg.format == RENDER_JSON &&
                    json_parse_bounded(rs[i].body, rs[i].size, &doc, &why) < 0) {
                        free(rs[i].error);
                        rs[i].error = strdup("the reply is not JSON");
                        rs[i].exit = EXIT_FAIL;
                }
                if (rs[i].exit == EXIT_OK)
                        found++;
                switch (arg.format) {
                case RENDER_JSON:
                        json_object_object_add(all, rs[i].host, doc);
                        break;
                case RENDER_FOLDED:
                        /* For flame graph tools: the host is the root frame; why a host has nothing goes to stderr. */
                        if (rs[i].exit == EXIT_OK) {
                                for (char *l = rs[i].body, *nl; l && *l; l = nl) {
                                        nl = strchr(l, '\n');
                                        if (nl)
                                                *nl++ = 0;
                                        printf("%s;%s\n", host ?: "?", l);
                                }
                        } else if (rs[i].exit == EXIT_NO_PROCESS && arg.capture.tid == 0)
                                log_info("%s: no process %d there.", host ?: "?", (int) pid);
                        else
                                log_error("%s: %s", host ?: "?", rs[i].error ?: "no usable answer");
                        break;
                case RENDER_TEXT:
                default:
                        printf("%s==> %s <==%s\n", ansi_bold(), host ?: "?", ansi_normal());
                        if (rs[i].exit == EXIT_OK)
                                printf("%s%s", rs[i].body,
                                       rs[i].size > 0 && rs[i].body[rs[i].size - 1] != '\n' ? "\n" : "");
                        else if (rs[i].exit == EXIT_NO_PROCESS && arg.capture.tid == 0)
                                printf("No process %d on this host.\n", (int) pid);
                        else
                                printf("No dump: %s\n", rs[i].error ?: "no usable answer");
                        if (i + 1 < n)
                                putchar('\n');
                        break;
                }
        }
        if (all)
                (void) json_print(all);
        /* A host without the process answered properly; one that did not answer is in the exit status. */
        for (size_t i = 0; i < n; i++)
                if (rs[i].exit == EXIT_NO_PROCESS)
                        rs[i].exit = EXIT_OK;
        r = fanout_exit_status(rs, n);
        fanout_replies_free(rs, n);
        if (r == EXIT_OK && found == 0) {
                log_error("No process %d on any of the %zu hosts.", (int) pid, n);
                return EXIT_NO_PROCESS;
        }
        return r;
}

int symbolizer_from_args(Symbolizer **ret) {
        _cleanup_(symbolizer_freep) Symbolizer *sym = NULL;
        _cleanup_free_ char *dir = NULL;
        int r;

        if (symbolizer_new(arg.debuginfo_path, arg.source, &sym) < 0)
                return log_oom(), EXIT_FAIL;
        symbolizer_set_demangle(sym, !arg.no_demangle);
        if (arg.debuginfod_set && symbolizer_set_debuginfod(sym, arg.debuginfod) < 0)
                return log_oom(), EXIT_FAIL;
        if (!arg.cache_set && symcache_default_dir(&dir) < 0)
                return log_oom(), EXIT_FAIL;
        if (arg.cache_set ? arg.cache_dir : dir) {
                r = symbolizer_set_cache(sym, arg.cache_set ? arg.cache_dir : dir, SYMCACHE_MAX_SIZE_DEFAULT);
                /* The cache only saves time: without it the dump is the same, so an explicit one only is worth a
                 * word. */
                if (r < 0 && arg.cache_set)
                        log_warning_errno(r, "Cannot use the debuginfo cache '%s', dumping without: %m",
                                          arg.cache_dir);
                else if (r < 0)
                        log_debug_errno(r, "No debuginfo cache in '%s': %m", dir);
        }
        *ret = TAKE_PTR(sym);
        return EXIT_OK;
}

void symbolizer_done(Symbolizer *sym) {
        SymbolizerStats st;
        int r;

        fflush(stdout);
        r = symbolizer_flush_cache(sym);
        if (r < 0)
                log_debug_errno(r, "Debuginfo not cached: %m");
        symbolizer_get_stats(sym, &st);
        log_debug("symbolizer: %u modules cached (%u hits, %u misses), addresses: %u hits, %u misses; "
                  "debuginfo cache: %u hits, %u stored; resolved addresses cache: %u read, %u modules stored",
                  st.modules_cached, st.module_hits, st.module_misses, st.addr_hits, st.addr_misses, st.cache_hits,
                  st.cache_stored, st.pcs_loaded, st.pcs_stored);
}

int verb_dump(int argc, char **argv) {
        _cleanup_(symbolizer_freep) Symbolizer *sym = NULL;
        int ret = EXIT_OK, r;

        /* One SVG document draws one process (and the peers its chain reached). */
        if (arg.format == RENDER_SVG && (arg.all || argc != 2 || (arg.via_daemon && arg.n_hosts > 1))) {
                log_error("--svg draws one process: give one PID (and at most one --host).");
                return EXIT_USAGE;
        }
        /* A profile is one file of one process (and the peers it waits on): pprof reads no concatenation. */
        if (arg.format == RENDER_PPROF && (arg.all || argc != 2 || arg.n_hosts > 1)) {
                log_error("--pprof writes the profile of one process: name one PID (and at most one --host).");
                return EXIT_USAGE;
        }
        if (arg.via_daemon) {
                int pid;

                if (arg.all || argc != 2) {
                        log_error("Usage: stackctl dump --via-daemon PID (one process)");
                        return EXIT_USAGE;
                }
                if (arg.local_option) {
                        log_error("%s applies to local dumps only: with --via-daemon, stackwatchd captures with its "
                                  "own settings.", arg.local_option);
                        return EXIT_USAGE;
                }
                if (parse_pid(argv[1], &pid) < 0) {
                        log_error("Invalid process id '%s'.", argv[1]);
                        return EXIT_USAGE;
                }
                return arg.n_hosts > 1 ? dump_via_daemons(pid) : dump_via_daemon(pid);
        }
        if (arg.all == (argc > 1)) {
                log_error("Usage: stackctl dump PID… | --all");
                return EXIT_USAGE;
        }
        if (arg.all && (arg.peers > 0 || arg.locks)) {
                log_error("--peers and --locks follow the waits of the processes named: they do not go with --all.");
                return EXIT_USAGE;
        }
        for (int i = 1; i < argc; i++) {
                int pid;
                if (parse_pid(argv[i], &pid) < 0) {
                        log_error("Invalid process id '%s'.", argv[i]);
                        return EXIT_USAGE;
                }
        }
        arg.capture.debuginfo_path = arg.debuginfo_path;
        r = symbolizer_from_args(&sym);
        if (r != EXIT_OK)
                return r;
        if (arg.all)
                ret = dump_all(sym);
        else
                for (int i = 1; i < argc; i++) {
                        int pid;
                        (void) parse_pid(argv[i], &pid);
                        ret = worse(ret, dump_one(sym, pid, false));
                }
        symbolizer_done(sym);
        return ret;
}
