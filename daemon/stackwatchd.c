/* stackwatchd.c: main(): arguments, configuration, the Manager, the event loop. */
#include <errno.h>
#include <getopt.h>
#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "stackwatchd-paths.h"

#include "base/log.h"
#include "base/macro.h"
#include "base/parse-util.h"
#include "base/time-util.h"
#include "config/config-load.h"
#include "http.h"
#include "journal.h"
#include "manager.h"
#include "trigger.h"

/* $(sysconfdir)/stackwatch/stackwatch.yaml, from the build: where make install put it. */
#define DEFAULT_CONFIG STACKWATCH_CONFIG_FILE

static const char *arg_config = DEFAULT_CONFIG;
static bool arg_config_given = false;
static const char *arg_rules_dir = NULL;
static bool arg_check_config = false;
static LogTarget arg_log_target = LOG_TARGET_AUTO;
static unsigned arg_scan_benchmark = 0;

static void help(void) {
        printf("stackwatchd [OPTIONS…]\n\n"
               "Watch every thread on the machine, classify hangs, and snapshot the stacks when a rule fires.\n\n"
               "  -h --help             Show this help\n"
               "     --version          Show the version\n"
               "  -c --config FILE      Configuration file (default " DEFAULT_CONFIG ")\n"
               "     --rules-dir DIR    Rule drop-ins (default: rules.d next to the configuration file)\n"
               "     --check-config     Check the configuration, print \"configuration OK\" or the errors, exit\n"
               "     --foreground       Run in the foreground (always the case; for init scripts)\n"
               "     --scan-benchmark N Run N scans back to back, print each one's cost, exit\n"
               "     --log-target T     auto (the journal when systemd connects stderr to it), journal\n"
               "                        or console (stderr)\n"
               "     --debug            Log debugging messages\n");
}

static int parse_argv(int argc, char **argv) {
        enum { ARG_VERSION = 0x100, ARG_RULES_DIR, ARG_CHECK_CONFIG, ARG_FOREGROUND, ARG_DEBUG, ARG_SCAN_BENCHMARK,
               ARG_LOG_TARGET };
        static const struct option options[] = {
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, ARG_VERSION },
                { "config", required_argument, NULL, 'c' },
                { "rules-dir", required_argument, NULL, ARG_RULES_DIR },
                { "check-config", no_argument, NULL, ARG_CHECK_CONFIG },
                { "foreground", no_argument, NULL, ARG_FOREGROUND },
                { "debug", no_argument, NULL, ARG_DEBUG },
                { "log-target", required_argument, NULL, ARG_LOG_TARGET },
                { "scan-benchmark", required_argument, NULL, ARG_SCAN_BENCHMARK },
                {}
        };
        int c;

        while ((c = getopt_long(argc, argv, "hc:", options, NULL)) >= 0)
                switch (c) {
                case 'h':
                        help();
                        return 0;
                case ARG_VERSION:
                        printf("stackwatchd %s\n", PACKAGE_VERSION);
                        return 0;
                case 'c':
                        arg_config = optarg;
                        arg_config_given = true;
                        break;
                case ARG_RULES_DIR:
                        arg_rules_dir = optarg;
                        break;
                case ARG_CHECK_CONFIG:
                        arg_check_config = true;
                        break;
                case ARG_FOREGROUND:
                        break;
                case ARG_DEBUG:
                        log_set_max_level(LOG_DEBUG);
                        break;
                case ARG_LOG_TARGET:
                        arg_log_target = log_target_from_string(optarg);
                        if (arg_log_target < 0) {
                                log_error("Invalid --log-target '%s': expected auto, journal or console.", optarg);
                                return -EINVAL;
                        }
                        break;
                case ARG_SCAN_BENCHMARK:
                        if (safe_atou(optarg, &arg_scan_benchmark) < 0 || arg_scan_benchmark == 0) {
                                log_error("Invalid --scan-benchmark '%s': expected a positive count.", optarg);
                                return -EINVAL;
                        }
                        break;
                default:
                        return -EINVAL;
                }
        if (optind < argc) {
                log_error("Unexpected argument '%s'. Try 'stackwatchd --help'.", argv[optind]);
                return -EINVAL;
        }
        return 1;
}

/* The scanner alone, as the daemon runs it, for bench/scan. */
static int scan_benchmark(const Config *config) {
        _cleanup_(scanner_freep) Scanner *s = NULL;
        int r;

        r = scanner_new(&s);
        if (r < 0)
                return log_error_errno(r, "Failed to open /proc: %m");
        r = scanner_set_source(s, config->scan_source);
        if (r < 0)
                return log_error_errno(r, "The BPF scan cannot run: %s", s->source_why ?: "%m");
        printf("source: %s (%s)\n", scan_source_to_string(s->source), s->source_why ?: "");
        for (unsigned i = 1; i <= arg_scan_benchmark; i++) {
                r = scanner_scan(s, now_usec(CLOCK_MONOTONIC));
                if (r < 0)
                        return log_error_errno(r, "Scan failed: %m");
                printf("scan %u: threads %u processes %u duration_us %llu cpu_us %llu deep_reads %llu kept_fds %u "
                       "max_kept_fds %u task_walks %llu records %llu same_records %llu reclassed %llu\n",
                       i, s->stats.threads, s->stats.processes, (unsigned long long) s->stats.last_duration_usec,
                       (unsigned long long) s->stats.last_cpu_usec,
                       (unsigned long long) s->stats.deep_reads, s->stats.kept_fds, s->stats.max_kept_fds,
                       (unsigned long long) s->stats.task_walks, (unsigned long long) s->stats.records,
                       (unsigned long long) s->stats.same_records, (unsigned long long) s->stats.reclassed);
        }
        return 0;
}

#ifdef __SANITIZE_ADDRESS__
/* In the sanitizer build, a refused allocation is NULL as in the real one, not a report and exit 1: the render child
 * under its memory limit (capture-job.c) must fail the way the release build does. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) {
        return "allocator_may_return_null=1";
}
#endif

int main(int argc, char **argv) {
        _cleanup_(manager_freep) Manager *m = NULL;
        _cleanup_(config_freep) Config *config = NULL;
        _cleanup_free_ char *rules_dir = NULL, *config_copy = NULL;
        ConfigErrors errs = {};
        sigset_t mask;
        int r;

        journal_setup(LOG_TARGET_AUTO);
        r = parse_argv(argc, argv);
        if (r <= 0)
                return r < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
        journal_setup(arg_log_target);
        if (!arg_rules_dir) {
                config_copy = strdup(arg_config);
                if (!config_copy || asprintf(&rules_dir, "%s/rules.d", dirname(config_copy)) < 0)
                        return log_oom(), EXIT_FAILURE;
                arg_rules_dir = rules_dir;
        }

        /* Only the default file may be missing (the built-in rules then apply): a file named on the command line
         * that is not there is a mistake, not a request for the defaults. */
        if (arg_config_given && access(arg_config, F_OK) < 0) {
                log_error_errno(errno, "Configuration file %s: %m", arg_config);
                return EXIT_FAILURE;
        }
        r = config_load(arg_config, arg_rules_dir, &config, &errs);
        if (r < 0) {
                config_errors_print(&errs, stderr);
                config_errors_done(&errs);
                if (!arg_check_config)
                        log_error("Invalid configuration, not starting.");
                return EXIT_FAILURE;
        }
        if (arg_check_config) {
                _cleanup_(http_tls_freep) HttpTls *tls = NULL;

                /* The certificate and key too: a pair the daemon would refuse at start is not "OK". */
                if (http_tls_load(config, &tls, /* ret_error= */ NULL) < 0)
                        return EXIT_FAILURE;
                printf("configuration OK: %zu rule(s), poll interval %llu ms\n", config->n_rules,
                       (unsigned long long) (config->poll_interval_usec / USEC_PER_MSEC));
                return EXIT_SUCCESS;
        }

        if (arg_scan_benchmark > 0)
                return scan_benchmark(config) < 0 ? EXIT_FAILURE : EXIT_SUCCESS;

        /* The loop takes these as events; SIGCHLD too, for the capture jobs. */
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGHUP);
        sigaddset(&mask, SIGCHLD);
        if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
                return log_error_errno(errno, "Failed to block signals: %m"), EXIT_FAILURE;
        /* A ptrace stop is waited for with 1 us sleeps: keep them 1 us. */
        (void) prctl(PR_SET_TIMERSLACK, 1000UL);

        r = manager_new(arg_config, arg_rules_dir, TAKE_PTR(config), &m);
        if (r < 0)
                return EXIT_FAILURE;
        log_info("stackwatchd %s starting: %zu rule(s), poll interval %llu ms, archive %s", PACKAGE_VERSION,
                 m->config->n_rules, (unsigned long long) (m->config->poll_interval_usec / USEC_PER_MSEC),
                 m->config->archive_dir);
        r = manager_run(m);
        return r < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
