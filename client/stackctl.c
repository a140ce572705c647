/* stackctl.c: the stackwatch client: argument parsing and the verb table. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/un.h>

#include "api.h"
#include "log.h"
#include "macro.h"
#include "parse-util.h"
#include "stackctl.h"
#include "thread-class.h"
#include "wait-chain.h"

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
        { "ps", 0, 0, verb_ps, "ps", "Threads the daemon finds unhealthy (--all, --class, --unit, --comm)" },
        { "rules", 0, 0, verb_rules, "rules", "The daemon's rules, how often each fired, the capture budget" },
        { "status", 0, 0, verb_status, "status", "Whether the daemon runs and scans, what it watches and captured" },
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
        { "   --peers N", "dump: also the processes it waits on, N hops deep, and the wait chain (default 0)" },
        { "   --locks", "dump: the mutexes threads wait for, who holds each, and lock deadlocks" },
        { "-m --method M", "auto (default), passive, or ptrace" },
        { "-u --unwinder U", "libdw (default), libunwind, or fp" },
        { "   --no-kernel", "Leave out kernel stacks" },
        { "   --max-frames N", "At most N user frames per thread (default 256)" },
        { "   --stack-bytes N", "Copy at most N bytes of each thread's stack (default 262144)" },
        { "   --time-budget MS", "Stop capturing a process and its peers after MS milliseconds (default 10000)" },
        { "   --debuginfo-path P", "Where to look for separate debuginfo (default :.debug:/usr/lib/debug)" },
        { "   --no-source", "Symbols only: no file:line or inlined frames (skips loading DWARF)" },
        { "   --modules", "Also list the modules with their build-ids" },
        { "   --archive DIR", "Snapshot archive for list and show (default " STACKWATCH_ARCHIVE_DEFAULT ")" },
        { "   --pid PID", "list: only snapshots of this process" },
        { "   --rule NAME", "list: only snapshots taken by this rule" },
        { "   --since WHEN", "list: only snapshots since WHEN (10m, 2h, @EPOCH, YYYY-MM-DD[ HH:MM[:SS]])" },
        { "   --via-daemon", "dump: have stackwatchd capture the process (one PID)" },
        { "   --class LIST", "ps: only these classes, comma-separated (blocked,busy-loop,…)" },
        { "   --unit GLOB", "ps: only processes in matching systemd units" },
        { "   --comm GLOB", "ps: only threads or processes with a matching name" },
        { "   --no-legend", "ps, rules: no header and footer lines" },
        { "   --socket PATH", "The daemon's socket (default " API_SOCKET_DEFAULT ")" },
        { "   --host URL", "Ask the daemon over TCP instead (http://HOST:PORT)" },
        { "   --token-file FILE", "With --host: send the bearer token in FILE" },
        { "   --timeout SEC", "Wait at most SEC seconds for the daemon (default 10, dump 60)" },
        { "   --debug", "Log debugging messages to stderr" },
};

/* printf pads by bytes: widen the field by the UTF-8 continuation bytes in S so that "PID…" lines up. */
static int column_width(const char *s, int width) {
        for (; *s; s++)
                if (((unsigned char) *s & 0xc0) == 0x80)
                        width++;
        return width;
}

static void help(FILE *f) {
        fprintf(f, "stackctl [OPTIONS…] COMMAND …\n\nShow kernel and user stacks of live processes.\n\nCommands:\n");
        for (size_t i = 0; i < ELEMENTSOF(verbs); i++)
                fprintf(f, "  %-*s %s\n", column_width(verbs[i].usage, 24), verbs[i].usage, verbs[i].help);
        fprintf(f, "\nOptions:\n");
        for (size_t i = 0; i < ELEMENTSOF(option_help); i++)
                fprintf(f, "  %-*s %s\n", column_width(option_help[i].option, 24), option_help[i].option,
                        option_help[i].help);
        fprintf(f, "\nExit status: 0 ok, 1 failure, 2 usage, 3 no such process or nothing found, 4 permission "
                   "denied, 5 partial dump, 6 no daemon.\n");
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
        ARG_VIA_DAEMON,
        ARG_CLASS,
        ARG_UNIT,
        ARG_COMM,
        ARG_NO_LEGEND,
        ARG_SOCKET,
        ARG_HOST,
        ARG_TOKEN_FILE,
        ARG_TIMEOUT,
        ARG_PEERS,
        ARG_LOCKS,
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

/* --class blocked,busy-loop: every name must be a class, checked here so that a typo is a usage error. */
static int parse_classes(const char *s) {
        _cleanup_free_ char *copy = strdup(s);
        char *save = NULL;
        unsigned n = 0;

        if (!copy)
                return log_oom();
        for (char *w = strtok_r(copy, ",", &save); w; w = strtok_r(NULL, ",", &save), n++)
                if (thread_class_from_string(w) < 0) {
                        log_error("Unknown class '%s': expected running, waiting, blocked, busy-loop, syscall-spin, "
                                  "stopped or zombie.", w);
                        return -EINVAL;
                }
        if (n == 0) {
                log_error("Empty --class: expected one or more class names, separated by commas.");
                return -EINVAL;
        }
        return 0;
}

/* --host: "http://HOST:PORT" or "HOST:PORT" (http is implied), without a trailing slash; libcurl checks the rest. */
static int parse_host(const char *s) {
        static char url[API_URL_MAX];
        size_t len;

        for (const char *p = s; *p; p++)
                if ((unsigned char) *p <= ' ' || *p == 0x7f) {
                        log_error("Invalid --host: a URL has no spaces or control characters.");
                        return -EINVAL;
                }
        if (snprintf(url, sizeof url, "%s%s", strstr(s, "://") ? "" : "http://", s) >= (int) sizeof url) {
                log_error("Invalid --host: longer than %d bytes.", API_URL_MAX);
                return -EINVAL;
        }
        len = strlen(url);
        while (len > 0 && url[len - 1] == '/')
                url[--len] = 0;
        if (!startswith(url, "http://") && !startswith(url, "https://")) {
                log_error("Invalid --host '%s': expected http://HOST:PORT.", s);
                return -EINVAL;
        }
        arg.host = url;
        return 0;
}

/* Options that only a local capture uses: with --via-daemon the daemon captures with its own settings. */
static const struct {
        int c;
        const char *name;
} local_only[] = {
        { 'm', "--method" },
        { 'u', "--unwinder" },
        { ARG_NO_KERNEL, "--no-kernel" },
        { ARG_MAX_FRAMES, "--max-frames" },
        { ARG_STACK_BYTES, "--stack-bytes" },
        { ARG_TIME_BUDGET, "--time-budget" },
        { ARG_DEBUGINFO_PATH, "--debuginfo-path" },
        { ARG_MODULES, "--modules" },
        { ARG_NO_SOURCE, "--no-source" },
};

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
                { "via-daemon", no_argument, NULL, ARG_VIA_DAEMON },
                { "class", required_argument, NULL, ARG_CLASS },
                { "unit", required_argument, NULL, ARG_UNIT },
                { "comm", required_argument, NULL, ARG_COMM },
                { "no-legend", no_argument, NULL, ARG_NO_LEGEND },
                { "socket", required_argument, NULL, ARG_SOCKET },
                { "host", required_argument, NULL, ARG_HOST },
                { "token-file", required_argument, NULL, ARG_TOKEN_FILE },
                { "timeout", required_argument, NULL, ARG_TIMEOUT },
                { "peers", required_argument, NULL, ARG_PEERS },
                { "locks", no_argument, NULL, ARG_LOCKS },
                {}
        };
        uint64_t v;
        int c;

        capture_options_init(&arg.capture);
        arg.source = true;
        arg.archive_dir = STACKWATCH_ARCHIVE_DEFAULT;
        arg.socket_path = API_SOCKET_DEFAULT;
        arg.legend = true;
        while ((c = getopt_long(argc, argv, "hat:m:u:", options, NULL)) >= 0) {
                for (size_t i = 0; i < ELEMENTSOF(local_only); i++)
                        if (local_only[i].c == c && !arg.local_option)
                                arg.local_option = local_only[i].name;
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
                case ARG_PEERS:
                        if (parse_uint_arg("--peers", optarg, 0, WAIT_CHAIN_DEPTH_MAX, &v) < 0)
                                return -EINVAL;
                        arg.peers = (unsigned) v;
                        break;
                case ARG_LOCKS:
                        arg.locks = true;
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
                case ARG_VIA_DAEMON:
                        arg.via_daemon = true;
                        break;
                case ARG_CLASS:
                        if (parse_classes(optarg) < 0)
                                return -EINVAL;
                        arg.classes = optarg;
                        break;
                case ARG_UNIT:
                        arg.unit_glob = optarg;
                        break;
                case ARG_COMM:
                        arg.comm_glob = optarg;
                        break;
                case ARG_NO_LEGEND:
                        arg.legend = false;
                        break;
                case ARG_SOCKET:
                        if (optarg[0] == 0 || strlen(optarg) >= sizeof(((struct sockaddr_un *) NULL)->sun_path)) {
                                log_error("Invalid --socket '%s': expected a path shorter than %zu bytes.", optarg,
                                          sizeof(((struct sockaddr_un *) NULL)->sun_path));
                                return -EINVAL;
                        }
                        arg.socket_path = optarg;
                        break;
                case ARG_HOST:
                        if (parse_host(optarg) < 0)
                                return -EINVAL;
                        break;
                case ARG_TOKEN_FILE:
                        arg.token_file = optarg;
                        break;
                case ARG_TIMEOUT:
                        if (parse_uint_arg("--timeout", optarg, 1, 3600, &v) < 0)
                                return -EINVAL;
                        arg.timeout_usec = v * USEC_PER_SEC;
                        break;
                case '?':
                        return -EINVAL;
                default:
                        return -EINVAL;
                }
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
