/* stackctl.c: the stackwatch client: argument parsing and the verb table. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/un.h>
#include <unistd.h>

#include "base/log.h"
#include "base/macro.h"
#include "base/parse-util.h"
#include "chain/wait-chain.h"
#include "model/thread-class.h"
#include "render/snapshot-svg.h"
#include "serve/api.h"
#include "unwind/symcache.h"
#include "stackctl-args.h"
#include "stackctl-daemon.h"
#include "stackctl-output.h"
#include "stackctl-verbs.h"

/* One bit per verb: which verbs an option applies to. */
enum {
        V_DUMP = 1 << 0,
        V_LIST = 1 << 1,
        V_SHOW = 1 << 2,
        V_PS = 1 << 3,
        V_RULES = 1 << 4,
        V_STATUS = 1 << 5,
        V_PROBLEMS = 1 << 6,
        V_ALL = V_DUMP | V_LIST | V_SHOW | V_PS | V_RULES | V_STATUS | V_PROBLEMS,
        /* They talk to stackwatchd: dump with --via-daemon, list, show and problems with --socket or --host. */
        V_DAEMON = V_DUMP | V_LIST | V_SHOW | V_PS | V_RULES | V_STATUS | V_PROBLEMS,
        /* They read a snapshot source (stackctl-sources.h): the archive, the journal or a daemon's. */
        V_SOURCES = V_LIST | V_SHOW | V_PROBLEMS,
};

typedef struct Verb {
        const char *name;
        unsigned bit;
        int min_args, max_args;         /* -1: unbounded */
        int (*fn)(int argc, char **argv);
        const char *usage;
        const char *help;
} Verb;

static const Verb verbs[] = {
        { "dump", V_DUMP, 0, -1, verb_dump, "dump PID… | --all",
          "Print the kernel and user stack of every thread of PID, without stopping blocked threads" },
        { "list", V_LIST, 0, -1, verb_list, "list [MATCH…]",
          "List the archive's snapshots, oldest first (MATCH: PID, COMM, /EXE, SIGNATURE, FIELD=VALUE)" },
        { "show", V_SHOW, 0, -1, verb_show, "show [ID|latest|MATCH…]",
          "Print one archived snapshot (default: the latest, or the latest that matches)" },
        { "problems", V_PROBLEMS, 0, -1, verb_problems, "problems [MATCH…]",
          "One row per problem: how often it fired, when, where (MATCH: PID, COMM, SIGNATURE)" },
        { "ps", V_PS, 0, 0, verb_ps, "ps", "Threads the daemon finds unhealthy (--all, --class, --unit, --comm)" },
        { "rules", V_RULES, 0, 0, verb_rules, "rules",
          "The daemon's rules, how often each fired, the capture budget" },
        { "status", V_STATUS, 0, 0, verb_status, "status",
          "Whether the daemon runs and scans, what it watches and captured" },
};

static const struct {
        const char *option;
        const char *help;
} option_help[] = {
        { "-h --help", "Show this help" },
        { "   --version", "Show the version" },
        { "   --json[=MODE]", "JSON: short (one document per line, the default), pretty, or off" },
        { "   --folded", "dump, show: folded stacks for flame graph tools, one line per thread" },
        { "   --svg[=PICTURE]", "dump, show: one SVG picture of one process: all (the wait chain, then a flame graph), flame or chain" },
        { "   --icicle", "dump, show: with --svg, the flame graph upside down (the classes on top)" },
        { "   --pprof FILE", "dump, show: a pprof profile (gzipped profile.proto) to FILE (- for stdout), for go tool pprof" },
        { "   --no-group", "dump, show: every thread on its own (threads alike are printed once, as a group, by default)" },
        { "   --no-pager", "Do not pipe the output into a pager ($STACKCTL_PAGER, $PAGER, less) on a terminal" },
        { "-a --all", "dump: every process on the machine; ps: every thread" },
        { "-t --tid TID", "dump: only this thread" },
        { "-p --pid PID", "dump: this process (as an argument; eu-stack's -p); list, problems: only this process" },
        { "-1", "dump: only the main thread (eu-stack); list, problems: only the latest match; show: taken, a no-op" },
        { "-n N", "dump: at most N frames per thread (eu-stack); list, problems: only the N latest" },
        { "-s -i -m", "dump: eu-stack's source lines, inlined frames, module names (all shown by default)" },
        { "-b", "dump: eu-stack's build-ids (the same as --modules)" },
        { "   --peers N", "dump: also the processes it waits on, N hops deep, and the wait chain (default 0)" },
        { "   --locks", "dump: the mutexes threads wait for, who holds each, and lock deadlocks" },
        { "   --method M", "dump: auto (default), passive, or ptrace" },
        { "-u --unwinder U", "dump: libdw (default), libunwind, or fp" },
        { "   --no-kernel", "dump, show: leave out kernel stacks" },
        { "   --no-python", "dump: native frames only, no Python frames merged in (a CPython's are by default)" },
        { "   --no-goroutines", "dump: a Go program's threads only, not its goroutines (read by default)" },
        { "   --no-java", "dump: a JVM's native frames only, not asked for its thread dump (asked by default)" },
        { "   --no-node", "dump: a Node.js process's native frames only, no JavaScript frames (read by default)" },
        { "   --no-ruby", "dump: a Ruby process's native frames only, no Ruby frames (read by default)" },
        { "   --max-frames N", "dump: at most N user frames per thread (default 256)" },
        { "   --max-threads N", "dump: at most N threads per process (default 4096)" },
        { "   --stack-bytes N", "dump: copy at most N bytes of each thread's stack (default 262144)" },
        { "   --time-budget MS", "dump: stop capturing a process and its peers after MS ms (default 10000)" },
        { "   --debuginfo-path P", "dump, show --resymbolize: where separate debuginfo is (:.debug:/usr/lib/debug)" },
        { "   --no-source", "dump, show --resymbolize: symbols only, no file:line or inlined frames" },
        { "   --modules", "dump, show: also list the modules with their build-ids" },
        { "   --via-daemon", "dump: have stackwatchd capture the process (one PID; several hosts: each one's)" },
        { "-o --output FILE", "dump, show: write to FILE instead of stdout" },
        { "   --archive DIR", "list, show, problems: the snapshot archive (default " STACKWATCH_ARCHIVE_DEFAULT ")" },
        { "   --rule NAME", "list, show: only snapshots taken by this rule" },
        { "   --since WHEN", "list, show, problems: only since WHEN (10m, 2h, @EPOCH, YYYY-MM-DD[ HH:MM[:SS]])" },
        { "   --until WHEN", "list, show, problems: only before WHEN (the same forms)" },
        { "-r --reverse", "list, problems: newest first; dump: eu-stack's -r, names not demangled" },
        { "   --no-demangle", "dump, show: C++ and Rust names as the binary has them (demangled by default)" },
        { "   --resymbolize", "show: resolve the frames again from their pcs and build-ids with today's debuginfo" },
        { "   --debuginfod URLS", "dump, show --resymbolize: ask these debuginfod servers (DEBUGINFOD_URLS)" },
        { "   --no-debuginfod", "dump, show --resymbolize: ask no debuginfod server" },
        { "   --cache-dir DIR", "dump, show --resymbolize: debuginfo cache (" SYMCACHE_DIR_DEFAULT " for root)" },
        { "   --no-cache", "dump, show --resymbolize: no debuginfo cache" },
        { "   --journal", "list, show, problems: the journal's records of firings (archive.journal), not the archive" },
        { "-D --directory DIR", "With --journal: the journal files in DIR (a journal-remote directory)" },
        { "   --file GLOB", "With --journal: these journal files" },
        { "-m --merge", "With --journal: every machine's journals, not only this one's" },
        { "   --class LIST", "ps: only these classes, comma-separated (blocked,busy-loop,…)" },
        { "   --unit GLOB", "ps: only processes in matching systemd units" },
        { "   --comm GLOB", "ps: only threads or processes with a matching name" },
        { "   --no-legend", "list, problems, ps, rules: no header and footer lines" },
        { "   --socket PATH", "ps, rules, status, dump --via-daemon, list, show, problems (its archive): the daemon's socket" },
        { "   --host URL", "The same, over TCP (http://HOST:PORT; several: each); with --journal: a host NAME" },
        { "   --hosts FILE", "Every daemon in FILE, one a line: URL [TOKEN-FILE] (# comments); as --host each" },
        { "   --token-file FILE", "With --host: send the bearer token in FILE (--hosts: for lines without one)" },
        { "   --cacert FILE", "With --host https://…: check the daemon's certificate against the CA(s) in FILE" },
        { "   --timeout SEC", "Wait at most SEC seconds for the daemon (default 10, dump 60)" },
        { "   --debug", "Log debugging messages to stderr" },
};

/* --since: "10m" (that long ago), "@EPOCH", or a local time "YYYY-MM-DD[ HH:MM[:SS]]". */
static int parse_since(const char *s, uint64_t *ret) {
        static const struct {
                char unit;
                uint64_t usec;
        } units[] = { { 's', USEC_PER_SEC }, { 'm', 60 * USEC_PER_SEC }, { 'h', 3600 * USEC_PER_SEC },
                      { 'd', 86400 * USEC_PER_SEC } };
        static const char *const formats[] = { "%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M",
                                               "%Y-%m-%d" };
        struct timespec now;
        size_t len = strlen(s);
        uint64_t v;

        clock_gettime(CLOCK_REALTIME, &now);
        if (s[0] == '@')
                return safe_atou64(s + 1, &v) < 0 ? -EINVAL : (*ret = v * USEC_PER_SEC, 0);
        for (size_t i = 0; len > 1 && i < ELEMENTSOF(units); i++)
                if (s[len - 1] == units[i].unit) {
                        _cleanup_free_ char *num = strndup(s, len - 1);
                        uint64_t nowu = (uint64_t) now.tv_sec * USEC_PER_SEC;
                        if (!num || safe_atou64(num, &v) < 0 || v > nowu / units[i].usec)
                                return -EINVAL;
                        *ret = nowu - v * units[i].usec;
                        return 0;
                }
        for (size_t i = 0; i < ELEMENTSOF(formats); i++) {
                struct tm tm = { .tm_isdst = -1 };
                const char *end = strptime(s, formats[i], &tm);
                time_t t;
                if (!end || *end)
                        continue;
                t = mktime(&tm);
                if (t < 0)
                        return -EINVAL;
                *ret = (uint64_t) t * USEC_PER_SEC;
                return 0;
        }
        return -EINVAL;
}

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
        fprintf(f, "\nMATCH (list, show, problems), as coredumpctl takes them: a PID, a COMM, an /EXE path, a problem's\n"
                   "SIGNATURE (16 hex digits), or PID=, COMM=, EXE=, UNIT=, RULE=, CLASS=, SIGNATURE= with a value\n"
                   "(COMM, EXE and UNIT take globs); all must hold. A problem matches a PID or COMM of any of its\n"
                   "processes, and takes no EXE, UNIT, RULE or CLASS.\n");
        fprintf(f, "\nThe daemon's socket is " API_SOCKET_DEFAULT " unless --socket or --host says otherwise.\n");
        fprintf(f, "\nExit status: 0 ok, 1 failure, 2 usage, 3 no such process or nothing found, 4 permission\n"
                   "denied, 5 partial dump, 6 no daemon. With several hosts, any host that did not answer properly\n"
                   "sets it: the code they share, or 1 when they differ.\n");
}

enum {
        ARG_VERSION = 0x100,
        ARG_JSON,
        ARG_FOLDED,
        ARG_SVG,
        ARG_ICICLE,
        ARG_PPROF,
        ARG_NO_GROUP,
        ARG_NO_KERNEL,
        ARG_NO_PYTHON,
        ARG_NO_GOROUTINES,
        ARG_NO_JAVA,
        ARG_NO_NODE,
        ARG_NO_RUBY,
        ARG_MAX_FRAMES,
        ARG_MAX_THREADS,
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
        ARG_HOSTS,
        ARG_TOKEN_FILE,
        ARG_TIMEOUT,
        ARG_PEERS,
        ARG_LOCKS,
        ARG_UNTIL,
        ARG_NO_PAGER,
        ARG_METHOD,
        ARG_JOURNAL,
        ARG_FILE,
        ARG_CACERT,
        ARG_NO_DEMANGLE,
        ARG_RESYMBOLIZE,
        ARG_DEBUGINFOD,
        ARG_NO_DEBUGINFOD,
        ARG_CACHE_DIR,
        ARG_NO_CACHE,
};

/* Which verbs each option applies to; one given to another verb is a usage error, never silently ignored. */
static const struct {
        int c;
        const char *name;
        unsigned verbs;
} option_verbs[] = {
        { ARG_JSON, "--json", V_ALL },
        { ARG_FOLDED, "--folded", V_DUMP | V_SHOW },
        { ARG_SVG, "--svg", V_DUMP | V_SHOW },
        { ARG_ICICLE, "--icicle", V_DUMP | V_SHOW },
        { ARG_PPROF, "--pprof", V_DUMP | V_SHOW },
        { ARG_NO_GROUP, "--no-group", V_DUMP | V_SHOW },
        { ARG_NO_PAGER, "--no-pager", V_ALL },
        { 'a', "--all", V_DUMP | V_PS },
        { 't', "--tid", V_DUMP },
        { 'p', "--pid", V_DUMP | V_SOURCES },
        { '1', "-1", V_DUMP | V_SOURCES },
        { 'n', "-n", V_DUMP | V_LIST | V_PROBLEMS },
        { 's', "-s", V_DUMP },
        { 'i', "-i", V_DUMP },
        { 'm', "-m", V_DUMP | V_SOURCES },
        { ARG_JOURNAL, "--journal", V_SOURCES },
        { 'D', "--directory", V_SOURCES },
        { ARG_FILE, "--file", V_SOURCES },
        { 'b', "-b", V_DUMP },
        { ARG_PEERS, "--peers", V_DUMP },
        { ARG_LOCKS, "--locks", V_DUMP },
        { ARG_METHOD, "--method", V_DUMP },
        { 'u', "--unwinder", V_DUMP },
        { ARG_NO_KERNEL, "--no-kernel", V_DUMP | V_SHOW },
        { ARG_NO_PYTHON, "--no-python", V_DUMP },
        { ARG_NO_GOROUTINES, "--no-goroutines", V_DUMP },
        { ARG_NO_JAVA, "--no-java", V_DUMP },
        { ARG_NO_NODE, "--no-node", V_DUMP },
        { ARG_NO_RUBY, "--no-ruby", V_DUMP },
        { ARG_MAX_FRAMES, "--max-frames", V_DUMP },
        { ARG_MAX_THREADS, "--max-threads", V_DUMP },
        { ARG_STACK_BYTES, "--stack-bytes", V_DUMP },
        { ARG_TIME_BUDGET, "--time-budget", V_DUMP },
        { ARG_DEBUGINFO_PATH, "--debuginfo-path", V_DUMP | V_SHOW },
        { ARG_NO_SOURCE, "--no-source", V_DUMP | V_SHOW },
        { ARG_MODULES, "--modules", V_DUMP | V_SHOW },
        { ARG_VIA_DAEMON, "--via-daemon", V_DUMP },
        { 'o', "--output", V_DUMP | V_SHOW },
        { ARG_ARCHIVE, "--archive", V_SOURCES },
        { ARG_RULE, "--rule", V_LIST | V_SHOW },
        { ARG_SINCE, "--since", V_SOURCES },
        { ARG_UNTIL, "--until", V_SOURCES },
        { 'r', "--reverse", V_LIST | V_PROBLEMS | V_DUMP },
        { ARG_NO_DEMANGLE, "--no-demangle", V_DUMP | V_SHOW },
        { ARG_RESYMBOLIZE, "--resymbolize", V_SHOW },
        { ARG_DEBUGINFOD, "--debuginfod", V_DUMP | V_SHOW },
        { ARG_NO_DEBUGINFOD, "--no-debuginfod", V_DUMP | V_SHOW },
        { ARG_CACHE_DIR, "--cache-dir", V_DUMP | V_SHOW },
        { ARG_NO_CACHE, "--no-cache", V_DUMP | V_SHOW },
        { ARG_CLASS, "--class", V_PS },
        { ARG_UNIT, "--unit", V_PS },
        { ARG_COMM, "--comm", V_PS },
        { ARG_NO_LEGEND, "--no-legend", V_LIST | V_PROBLEMS | V_PS | V_RULES },
        { ARG_SOCKET, "--socket", V_DAEMON },
        { ARG_HOST, "--host", V_DAEMON },
        { ARG_HOSTS, "--hosts", V_DAEMON },
        { ARG_TOKEN_FILE, "--token-file", V_DAEMON },
        { ARG_CACERT, "--cacert", V_DAEMON },
        { ARG_TIMEOUT, "--timeout", V_DAEMON },
        { ARG_DEBUG, "--debug", V_ALL },
};

/* dump -p PID (eu-stack): the PIDs, taken as arguments. */
static char *arg_pids[64];
static size_t n_arg_pids;

/* The options given, in order, for the check against the verb. */
static int seen_options[64];
static size_t n_seen_options;

static void option_seen(int c) {
        for (size_t i = 0; i < n_seen_options; i++)
                if (seen_options[i] == c)
                        return;
        if (n_seen_options < ELEMENTSOF(seen_options))
                seen_options[n_seen_options++] = c;
}

/* Usage error for the first option that does not apply to verb V. */
static int check_options(const Verb *v) {
        for (size_t i = 0; i < n_seen_options; i++)
                for (size_t k = 0; k < ELEMENTSOF(option_verbs); k++)
                        if (option_verbs[k].c == seen_options[i] && !(option_verbs[k].verbs & v->bit)) {
                                log_error("%s does not apply to '%s'. Try 'stackctl --help'.", option_verbs[k].name,
                                          v->name);
                                return -EINVAL;
                        }
        return 0;
}

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
                                  "stopped, zombie, frozen or lock-retry.", w);
                        return -EINVAL;
                }
        if (n == 0) {
                log_error("Empty --class: expected one or more class names, separated by commas.");
                return -EINVAL;
        }
        return 0;
}

/* Options that only a local capture uses: with --via-daemon the daemon captures with its own settings. */
static const struct {
        int c;
        const char *name;
} local_only[] = {
        { ARG_METHOD, "--method" },
        { 'u', "--unwinder" },
        { ARG_NO_KERNEL, "--no-kernel" },
        { ARG_ICICLE, "--icicle" },
        { ARG_NO_PYTHON, "--no-python" },
        { ARG_NO_GOROUTINES, "--no-goroutines" },
        { ARG_NO_JAVA, "--no-java" },
        { ARG_NO_NODE, "--no-node" },
        { ARG_NO_RUBY, "--no-ruby" },
        { ARG_MAX_FRAMES, "--max-frames" },
        { ARG_MAX_THREADS, "--max-threads" },
        { ARG_STACK_BYTES, "--stack-bytes" },
        { ARG_TIME_BUDGET, "--time-budget" },
        { ARG_DEBUGINFO_PATH, "--debuginfo-path" },
        { ARG_MODULES, "--modules" },
        { ARG_NO_SOURCE, "--no-source" },
        { ARG_NO_DEMANGLE, "--no-demangle" },
        { ARG_DEBUGINFOD, "--debuginfod" },
        { ARG_NO_DEBUGINFOD, "--no-debuginfod" },
        { ARG_CACHE_DIR, "--cache-dir" },
        { ARG_NO_CACHE, "--no-cache" },
};

static int parse_argv(int argc, char **argv) {
        static const struct option options[] = {
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, ARG_VERSION },
                { "json", optional_argument, NULL, ARG_JSON },
                { "folded", no_argument, NULL, ARG_FOLDED },
                { "svg", optional_argument, NULL, ARG_SVG },
                { "icicle", no_argument, NULL, ARG_ICICLE },
                { "pprof", required_argument, NULL, ARG_PPROF },
                { "no-group", no_argument, NULL, ARG_NO_GROUP },
                { "all", no_argument, NULL, 'a' },
                { "tid", required_argument, NULL, 't' },
                { "method", required_argument, NULL, ARG_METHOD },
                { "unwinder", required_argument, NULL, 'u' },
                { "no-kernel", no_argument, NULL, ARG_NO_KERNEL },
                { "no-python", no_argument, NULL, ARG_NO_PYTHON },
                { "no-goroutines", no_argument, NULL, ARG_NO_GOROUTINES },
                { "no-java", no_argument, NULL, ARG_NO_JAVA },
                { "no-node", no_argument, NULL, ARG_NO_NODE },
                { "no-ruby", no_argument, NULL, ARG_NO_RUBY },
                { "max-frames", required_argument, NULL, ARG_MAX_FRAMES },
                { "max-threads", required_argument, NULL, ARG_MAX_THREADS },
                { "stack-bytes", required_argument, NULL, ARG_STACK_BYTES },
                { "time-budget", required_argument, NULL, ARG_TIME_BUDGET },
                { "debuginfo-path", required_argument, NULL, ARG_DEBUGINFO_PATH },
                { "modules", no_argument, NULL, ARG_MODULES },
                { "no-source", no_argument, NULL, ARG_NO_SOURCE },
                { "archive", required_argument, NULL, ARG_ARCHIVE },
                { "pid", required_argument, NULL, 'p' },
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
                { "hosts", required_argument, NULL, ARG_HOSTS },
                { "token-file", required_argument, NULL, ARG_TOKEN_FILE },
                { "timeout", required_argument, NULL, ARG_TIMEOUT },
                { "peers", required_argument, NULL, ARG_PEERS },
                { "locks", no_argument, NULL, ARG_LOCKS },
                { "until", required_argument, NULL, ARG_UNTIL },
                { "reverse", no_argument, NULL, 'r' },
                { "output", required_argument, NULL, 'o' },
                { "no-pager", no_argument, NULL, ARG_NO_PAGER },
                { "journal", no_argument, NULL, ARG_JOURNAL },
                { "cacert", required_argument, NULL, ARG_CACERT },
                { "no-demangle", no_argument, NULL, ARG_NO_DEMANGLE },
                { "resymbolize", no_argument, NULL, ARG_RESYMBOLIZE },
                { "debuginfod", required_argument, NULL, ARG_DEBUGINFOD },
                { "no-debuginfod", no_argument, NULL, ARG_NO_DEBUGINFOD },
                { "cache-dir", required_argument, NULL, ARG_CACHE_DIR },
                { "no-cache", no_argument, NULL, ARG_NO_CACHE },
                { "directory", required_argument, NULL, 'D' },
                { "file", required_argument, NULL, ARG_FILE },
                { "merge", no_argument, NULL, 'm' },
                {}
        };
        uint64_t v;
        int c;

        capture_options_init(&arg.capture);
        arg.source = true;
        arg.archive_dir = STACKWATCH_ARCHIVE_DEFAULT;
        arg.socket_path = API_SOCKET_DEFAULT;
        arg.legend = true;
        arg.json_flags = JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE;
        while ((c = getopt_long(argc, argv, "hat:u:p:1n:simbro:D:", options, NULL)) >= 0) {
                option_seen(c);
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
                        /* --json=MODE as coredumpctl and journalctl take it; plain --json is short. */
                        if (!optarg || streq(optarg, "short"))
                                arg.format = RENDER_JSON;
                        else if (streq(optarg, "pretty")) {
                                arg.format = RENDER_JSON;
                                arg.json_flags = JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED |
                                                 JSON_C_TO_STRING_NOSLASHESCAPE;
                        } else if (streq(optarg, "off"))
                                arg.format = RENDER_TEXT;
                        else {
                                log_error("Invalid --json '%s': expected short, pretty or off.", optarg);
                                return -EINVAL;
                        }
                        break;
                case ARG_FOLDED:
                        arg.format = RENDER_FOLDED;
                        break;
                case ARG_SVG:
                        arg.format = RENDER_SVG;
                        arg.svg_picture = optarg ? svg_picture_from_string(optarg) : SVG_PICTURE_ALL;
                        if (arg.svg_picture < 0) {
                                log_error("Invalid --svg '%s': expected all, flame or chain.", optarg);
                                return -EINVAL;
                        }
                        break;
                case ARG_ICICLE:
                        arg.icicle = true;
                        break;
                case ARG_PPROF:
                        arg.format = RENDER_PPROF;
                        arg.pprof = optarg;
                        break;
                case ARG_NO_GROUP:
                        arg.no_group = true;
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
                case ARG_METHOD:
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
                case ARG_NO_PYTHON:
                        arg.capture.skip_runtimes |= 1U << RUNTIME_PYTHON;
                        break;
                case ARG_NO_GOROUTINES:
                        arg.capture.skip_runtimes |= 1U << RUNTIME_GO;
                        break;
                case ARG_NO_JAVA:
                        arg.capture.skip_runtimes |= 1U << RUNTIME_JAVA;
                        break;
                case ARG_NO_NODE:
                        arg.capture.skip_runtimes |= 1U << RUNTIME_NODE;
                        break;
                case ARG_NO_RUBY:
                        arg.capture.skip_runtimes |= 1U << RUNTIME_RUBY;
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
                case ARG_MAX_THREADS:
                        if (parse_uint_arg("--max-threads", optarg, 1, CAPTURE_THREADS_MAX, &v) < 0)
                                return -EINVAL;
                        arg.capture.max_threads = (unsigned) v;
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
                case 'p': {
                        int pid;
                        if (parse_pid(optarg, &pid) < 0) {
                                log_error("Invalid --pid '%s'.", optarg);
                                return -EINVAL;
                        }
                        arg.filter_pid = pid;
                        if (n_arg_pids < ELEMENTSOF(arg_pids))
                                arg_pids[n_arg_pids++] = optarg;
                        break;
                }
                case '1':
                        arg.one = true;
                        break;
                case 'n':
                        if (parse_uint_arg("-n", optarg, 1, UINT32_MAX, &v) < 0)
                                return -EINVAL;
                        arg.count = (unsigned) v;
                        break;
                case 's':
                case 'i':
                        /* eu-stack's source lines and inlined frames: on unless --no-source. */
                        break;
                case 'm':
                        /* dump: eu-stack's module names (every frame shows its module); list, show, problems:
                         * --merge. */
                        arg.merge = true;
                        break;
                case ARG_JOURNAL:
                        arg.journal = true;
                        break;
                case ARG_CACERT:
                        arg.cacert = optarg;
                        break;
                case ARG_NO_DEMANGLE:
                        arg.no_demangle = true;
                        break;
                case ARG_RESYMBOLIZE:
                        arg.resymbolize = true;
                        break;
                case ARG_DEBUGINFOD:
                        arg.debuginfod = optarg;
                        arg.debuginfod_set = true;
                        break;
                case ARG_NO_DEBUGINFOD:
                        arg.debuginfod = NULL;
                        arg.debuginfod_set = true;
                        break;
                case ARG_CACHE_DIR:
                        if (optarg[0] != '/') {
                                log_error("--cache-dir takes an absolute path, not '%s'.", optarg);
                                return -EINVAL;
                        }
                        arg.cache_dir = optarg;
                        arg.cache_set = true;
                        break;
                case ARG_NO_CACHE:
                        arg.cache_dir = NULL;
                        arg.cache_set = true;
                        break;
                case 'D':
                        arg.journal_dir = optarg;
                        break;
                case ARG_FILE:
                        arg.journal_files = optarg;
                        break;
                case 'b':
                        arg.modules = true;
                        break;
                case 'r':
                        arg.reverse = true;
                        break;
                case 'o':
                        arg.output = optarg;
                        break;
                case ARG_NO_PAGER:
                        arg.no_pager = true;
                        break;
                case ARG_UNTIL:
                        if (parse_since(optarg, &arg.until_usec) < 0) {
                                log_error("Invalid --until '%s': expected 10m, 2h, 3d, @EPOCH or "
                                          "YYYY-MM-DD[ HH:MM[:SS]].", optarg);
                                return -EINVAL;
                        }
                        break;
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
                        arg.socket_given = true;
                        break;
                case ARG_HOST:
                        if (hosts_add(optarg) < 0)
                                return -EINVAL;
                        break;
                case ARG_HOSTS:
                        if (hosts_load(optarg) < 0)
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
        _cleanup_free_ char **dump_argv = NULL;
        const Verb *v = NULL;
        int nargs, r;

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
        if (check_options(v) < 0)
                return EXIT_USAGE;
        /* dump -p PID…: eu-stack's way of naming the processes, the same as naming them as arguments. */
        if (v->bit == V_DUMP && n_arg_pids > 0) {
                dump_argv = calloc((size_t) argc + n_arg_pids + 1, sizeof *dump_argv);
                if (!dump_argv)
                        return log_oom(), EXIT_FAIL;
                memcpy(dump_argv, argv, (size_t) argc * sizeof *argv);
                memcpy(dump_argv + argc, arg_pids, n_arg_pids * sizeof *arg_pids);
                argc += (int) n_arg_pids;
                argv = dump_argv;
                arg.filter_pid = 0;
        }
        /* list, show, problems: -D, --file and -m read journals, and only with --journal; --host is a daemon
         * without it, a host name to match with it, and --socket a daemon. */
        if ((v->bit & V_SOURCES) && !arg.journal && (arg.journal_dir || arg.journal_files || arg.merge)) {
                log_error("-D, --file and --merge read snapshots from the journal: add --journal.");
                return EXIT_USAGE;
        }
        if ((v->bit & V_SOURCES) && arg.journal && arg.socket_given) {
                log_error("--socket names a daemon to read snapshots from, --journal the journal: use one.");
                return EXIT_USAGE;
        }
        if ((v->bit & V_SOURCES) && (arg.journal || !(arg.host || arg.socket_given)) &&
            (arg.token_file || arg.cacert || arg.timeout_usec)) {
                log_error("--token-file, --cacert and --timeout are for a daemon: list, show and problems read "
                          "one with --socket or --host.");
                return EXIT_USAGE;
        }
        if ((v->bit & V_SOURCES) && (arg.host || arg.socket_given) && !arg.journal &&
            !streq(arg.archive_dir, STACKWATCH_ARCHIVE_DEFAULT)) {
                log_error("--archive names a directory here; --socket and --host read a daemon's archive: use one.");
                return EXIT_USAGE;
        }
        /* dump captures here unless --via-daemon: an option naming a daemon would be ignored. */
        if (v->bit == V_DUMP && !arg.via_daemon &&
            (arg.n_hosts > 0 || arg.socket_given || arg.token_file || arg.cacert || arg.timeout_usec)) {
                log_error("--host, --hosts, --socket, --token-file, --cacert and --timeout are for a daemon: dump "
                          "asks one with --via-daemon.");
                return EXIT_USAGE;
        }
        /* One daemon: it is asked directly, with its own token file when its --hosts line names one. */
        if (arg.n_hosts == 1 && host_select(0) < 0)
                return EXIT_USAGE;
        if (arg.journal_dir && arg.journal_files) {
                log_error("-D and --file name the journals two ways: use one.");
                return EXIT_USAGE;
        }
        /* dump -r: eu-stack's raw (not demangled) names; list -r: newest first. */
        if (v->bit == V_DUMP && arg.reverse)
                arg.no_demangle = true;
        if (v->bit == V_DUMP && arg.count > 0)
                arg.capture.max_frames = arg.count;
        nargs = argc - 1;
        if (nargs < v->min_args || (v->max_args >= 0 && nargs > v->max_args)) {
                log_error("Usage: stackctl %s", v->usage);
                return EXIT_USAGE;
        }
        if (arg.format == RENDER_PPROF && arg.output) {
                log_error("--pprof names the file to write: it does not go with -o.");
                return EXIT_USAGE;
        }
        if (arg.format == RENDER_PPROF && !streq(arg.pprof, "-"))
                arg.output = arg.pprof;
        else if (arg.format == RENDER_PPROF && isatty(STDOUT_FILENO)) {
                /* As gzip does: compressed bytes on a terminal help nobody and may upset it. */
                log_error("--pprof - writes a binary profile: redirect stdout to a file or a pipe.");
                return EXIT_USAGE;
        }
        if (arg.output && !freopen(arg.output, "we", stdout)) {
                log_error_errno(errno, "Failed to open %s: %m", arg.output);
                return EXIT_FAIL;
        }
        /* A pager for what people read on a terminal; JSON and folded stacks are for programs. */
        if (arg.format == RENDER_TEXT && (v->bit & (V_DUMP | V_SOURCES | V_PS | V_RULES)))
                pager_open();
        r = v->fn(argc, argv);
        pager_close();
        return r;
}

int main(int argc, char **argv) {
        int r;

        /* Short sleeps while waiting for a ptrace stop must be short: the target is stopped meanwhile. */
        (void) prctl(PR_SET_TIMERSLACK, 1000UL);

        /* Colour where a person reads it: a terminal, not a "dumb" one, and NO_COLOR (no-color.org) unset. */
        arg.colour = isatty(STDOUT_FILENO) && !getenv("NO_COLOR") && !streq_ptr(getenv("TERM"), "dumb");
        r = parse_argv(argc, argv);
        if (r <= 0) {
                hosts_done();
                return r < 0 ? EXIT_USAGE : EXIT_OK;
        }
        r = dispatch(argc - optind, argv + optind);
        hosts_done();
        return r;
}
