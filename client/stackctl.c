/* stackctl.c: the stackwatch client: argument parsing and the verb table. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>

#include "log.h"
#include "macro.h"
#include "parse-util.h"
#include "stackctl.h"

StackctlArgs arg;

typedef struct Verb {
        const char *name;
        int min_args, max_args;         /* -1: unbounded */
        int (*fn)(int argc, char **argv);
        const char *usage;
        const char *help;
} Verb;

static const Verb verbs[] = {
        { "dump", 0, -1, verb_dump, "dump PID… | --all",
          "Print the kernel and user stack of every thread of PID, without stopping blocked threads" },
        { "list", 0, 0, verb_list, "list", "List the snapshots in the archive (--pid, --rule, --since)" },
        { "show", 0, 1, verb_show, "show [ID|latest]", "Print one archived snapshot (default: the latest)" },
};

static const struct {
        const char *option;
        const char *help;
} option_help[] = {
        { "-h --help", "Show this help" },
        { "   --version", "Show the version" },
        { "   --json", "One JSON document (stackwatch.snapshot/1) per process, one per line" },
        { "   --folded", "Folded stacks for flame graph tools, one line per thread" },
        { "-a --all", "Dump every process on the machine" },
        { "-t --tid TID", "Only this thread" },
        { "-m --method M", "auto (default), passive, or ptrace" },
        { "-u --unwinder U", "libdw (default), libunwind, or fp" },
        { "   --no-kernel", "Leave out kernel stacks" },
        { "   --max-frames N", "At most N user frames per thread (default 256)" },
        { "   --stack-bytes N", "Copy at most N bytes of each thread's stack (default 262144)" },
        { "   --time-budget MS", "Give up on a process after MS milliseconds (default 10000)" },
        { "   --debuginfo-path P", "Where to look for separate debuginfo (default :.debug:/usr/lib/debug)" },
        { "   --no-source", "Symbols only: no file:line or inlined frames (skips loading DWARF)" },
        { "   --modules", "Also list the modules with their build-ids" },
        { "   --archive DIR", "Snapshot archive for list and show (default " STACKWATCH_ARCHIVE_DEFAULT ")" },
        { "   --pid PID", "list: only snapshots of this process" },
        { "   --rule NAME", "list: only snapshots taken by this rule" },
        { "   --since WHEN", "list: only snapshots since WHEN (10m, 2h, @EPOCH, YYYY-MM-DD[ HH:MM[:SS]])" },
        { "   --debug", "Log debugging messages to stderr" },
};

static void help(FILE *f) {
        fprintf(f, "stackctl [OPTIONS…] COMMAND …\n\nShow kernel and user stacks of live processes.\n\nCommands:\n");
        for (size_t i = 0; i < ELEMENTSOF(verbs); i++)
                fprintf(f, "  %-24s %s\n", verbs[i].usage, verbs[i].help);
        fprintf(f, "\nOptions:\n");
        for (size_t i = 0; i < ELEMENTSOF(option_help); i++)
                fprintf(f, "  %-24s %s\n", option_help[i].option, option_help[i].help);
        fprintf(f, "\nExit status: 0 ok, 1 failure, 2 usage, 3 no such process or nothing found, 4 permission "
                   "denied, 5 partial dump.\n");
}

enum {
        ARG_VERSION = 0x100,
        ARG_JSON,
        ARG_FOLDED,
        ARG_NO_KERNEL,
        ARG_MAX_FRAMES,
        ARG_STACK_BYTES,
        ARG_TIME_BUDGET,
        ARG_DEBUGINFO_PATH,
        ARG_MODULES,
        ARG_NO_SOURCE,
        ARG_ARCHIVE,
        ARG_PID,
        ARG_RULE,
        ARG_SINCE,
        ARG_DEBUG,
};

static int parse_uint_arg(const char *name, const char *value, uint64_t min, uint64_t max, uint64_t *ret) {
        uint64_t v;

        if (safe_atou64(value, &v) < 0 || v < min || v > max) {
                log_error("Invalid %s '%s': expected a whole number from %llu to %llu.", name, value,
                          (unsigned long long) min, (unsigned long long) max);
                return -EINVAL;
        }
        *ret = v;
        return 0;
}

static int parse_argv(int argc, char **argv) {
        static const struct option options[] = {
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, ARG_VERSION },
                { "json", no_argument, NULL, ARG_JSON },
                { "folded", no_argument, NULL, ARG_FOLDED },
                { "all", no_argument, NULL, 'a' },
                { "tid", required_argument, NULL, 't' },
                { "method", required_argument, NULL, 'm' },
                { "unwinder", required_argument, NULL, 'u' },
                { "no-kernel", no_argument, NULL, ARG_NO_KERNEL },
                { "max-frames", required_argument, NULL, ARG_MAX_FRAMES },
                { "stack-bytes", required_argument, NULL, ARG_STACK_BYTES },
                { "time-budget", required_argument, NULL, ARG_TIME_BUDGET },
                { "debuginfo-path", required_argument, NULL, ARG_DEBUGINFO_PATH },
                { "modules", no_argument, NULL, ARG_MODULES },
                { "no-source", no_argument, NULL, ARG_NO_SOURCE },
                { "archive", required_argument, NULL, ARG_ARCHIVE },
                { "pid", required_argument, NULL, ARG_PID },
                { "rule", required_argument, NULL, ARG_RULE },
                { "since", required_argument, NULL, ARG_SINCE },
                { "debug", no_argument, NULL, ARG_DEBUG },
                {}
        };
        uint64_t v;
        int c;

        capture_options_init(&arg.capture);
        arg.source = true;
        arg.archive_dir = STACKWATCH_ARCHIVE_DEFAULT;
        while ((c = getopt_long(argc, argv, "hat:m:u:", options, NULL)) >= 0)
                switch (c) {
                case 'h':
                        help(stdout);
                        return 0;
                case ARG_VERSION:
                        printf("stackctl %s\n", PACKAGE_VERSION);
                        return 0;
                case ARG_JSON:
                        arg.format = OUTPUT_JSON;
                        break;
                case ARG_FOLDED:
                        arg.format = OUTPUT_FOLDED;
                        break;
                case 'a':
                        arg.all = true;
                        break;
                case 't': {
                        int tid;
                        if (parse_pid(optarg, &tid) < 0) {
                                log_error("Invalid thread id '%s'.", optarg);
                                return -EINVAL;
                        }
                        arg.capture.tid = tid;
                        break;
                }
                case 'm':
                        arg.capture.method = capture_method_from_string(optarg);
                        if (arg.capture.method < 0 || arg.capture.method == CAPTURE_METHOD_NONE) {
                                log_error("Invalid --method '%s': expected auto, passive or ptrace.", optarg);
                                return -EINVAL;
                        }
                        break;
                case 'u':
                        arg.capture.unwinder = unwinder_kind_from_string(optarg);
                        if (arg.capture.unwinder < 0) {
                                log_error("Invalid --unwinder '%s': expected libdw, libunwind or fp.", optarg);
                                return -EINVAL;
                        }
                        if (!unwinder_kind_available(arg.capture.unwinder)) {
                                log_error("This stackctl was built without the %s unwinder (configure --with-libunwind).",
                                          optarg);
                                return -EINVAL;
                        }
                        break;
                case ARG_NO_KERNEL:
                        arg.capture.kernel = false;
                        break;
                case ARG_MAX_FRAMES:
                        if (parse_uint_arg("--max-frames", optarg, 1, CAPTURE_FRAMES_MAX, &v) < 0)
                                return -EINVAL;
                        arg.capture.max_frames = (unsigned) v;
                        break;
                case ARG_STACK_BYTES:
                        if (parse_uint_arg("--stack-bytes", optarg, 64, CAPTURE_STACK_BYTES_MAX, &v) < 0)
                                return -EINVAL;
                        arg.capture.stack_bytes = (size_t) v;
                        break;
                case ARG_TIME_BUDGET:
                        if (parse_uint_arg("--time-budget", optarg, 1, 3600 * 1000, &v) < 0)
                                return -EINVAL;
                        arg.capture.time_budget_usec = v * USEC_PER_MSEC;
                        break;
                case ARG_DEBUGINFO_PATH:
                        arg.debuginfo_path = optarg;
                        break;
                case ARG_MODULES:
                        arg.modules = true;
                        break;
                case ARG_NO_SOURCE:
                        arg.source = false;
                        break;
                case ARG_ARCHIVE:
                        arg.archive_dir = optarg;
                        break;
                case ARG_PID: {
                        int pid;
                        if (parse_pid(optarg, &pid) < 0) {
                                log_error("Invalid --pid '%s'.", optarg);
                                return -EINVAL;
                        }
                        arg.filter_pid = pid;
                        break;
                }
                case ARG_RULE:
                        arg.filter_rule = optarg;
                        break;
                case ARG_SINCE:
                        if (parse_since(optarg, &arg.since_usec) < 0) {
                                log_error("Invalid --since '%s': expected 10m, 2h, 3d, @EPOCH or YYYY-MM-DD[ HH:MM[:SS]].",
                                          optarg);
                                return -EINVAL;
                        }
                        break;
                case ARG_DEBUG:
                        log_set_max_level(LOG_DEBUG);
                        break;
                case '?':
                        return -EINVAL;
                default:
                        return -EINVAL;
                }
        return 1;
}

static int dispatch(int argc, char **argv) {
        const Verb *v = NULL;
        int nargs;

        if (argc < 1) {
                log_error("Missing command. Try 'stackctl --help'.");
                return EXIT_USAGE;
        }
        for (size_t i = 0; i < ELEMENTSOF(verbs); i++)
                if (streq(verbs[i].name, argv[0]))
                        v = &verbs[i];
        if (!v) {
                log_error("Unknown command '%s'. Try 'stackctl --help'.", argv[0]);
                return EXIT_USAGE;
        }
        nargs = argc - 1;
        if (nargs < v->min_args || (v->max_args >= 0 && nargs > v->max_args)) {
                log_error("Usage: stackctl %s", v->usage);
                return EXIT_USAGE;
        }
        return v->fn(argc, argv);
}

int main(int argc, char **argv) {
        int r;

        /* Short sleeps while waiting for a ptrace stop must be short: the target is stopped meanwhile. */
        (void) prctl(PR_SET_TIMERSLACK, 1000UL);

        r = parse_argv(argc, argv);
        if (r < 0)
                return EXIT_USAGE;
        if (r == 0)
                return EXIT_OK;
        return dispatch(argc - optind, argv + optind);
}
