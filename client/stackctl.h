/* stackctl.h: what the stackctl verbs share: parsed options, exit codes, the verb signature, asking the daemon. */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include <json-c/json.h>

#include "base/json-util.h"
#include "capture/capture.h"
#include "capture/symbolize.h"
#include "store/archive.h"
#include "stackctl-http.h"

/* Exit codes a script can use. */
enum {
        EXIT_OK = 0,
        EXIT_FAIL = 1,          /* any other failure */
        EXIT_USAGE = 2,         /* bad command line */
        EXIT_NO_PROCESS = 3,    /* no such process (or thread) */
        EXIT_NOT_FOUND = 3,     /* nothing found (no such snapshot, an empty list) */
        EXIT_PERMISSION = 4,    /* not allowed to read the process */
        EXIT_PARTIAL = 5,       /* dumped, but some part is missing (see the errors in the output) */
        EXIT_NO_DAEMON = 6,     /* no stackwatchd listening where we looked */
};

typedef enum OutputFormat {
        OUTPUT_TEXT,
        OUTPUT_JSON,
        OUTPUT_FOLDED,
} OutputFormat;

typedef struct StackctlArgs {
        OutputFormat format;
        bool all;
        bool modules;
        bool source;
        const char *debuginfo_path;
        CaptureOptions capture;
        unsigned peers;                 /* dump: wait-chain depth, 0 for none */
        bool locks;                     /* dump: the lock table (and a wait chain of depth 0 without --peers) */
        const char *archive_dir;
        pid_t filter_pid;
        const char *filter_rule;
        uint64_t since_usec;
        /* Talking to the daemon. */
        bool via_daemon;                /* dump: ask stackwatchd instead of capturing here */
        const char *local_option;       /* the first option that only a local dump uses, for --via-daemon */
        bool legend;                    /* ps, rules: header and footer lines */
        const char *classes;            /* ps: comma-separated class names */
        const char *unit_glob;
        const char *comm_glob;
        const char *socket_path;
        const char *host;               /* "http://HOST:PORT" (normalized), or NULL for the unix socket */
        const char *token_file;
        const char *cacert;             /* --cacert: with an https:// --host */
        uint64_t timeout_usec;          /* 0: the verb's default */
        /* coredumpctl's and eu-stack's habits. */
        bool one;                       /* -1: list, show: the latest match only; dump: the main thread only */
        unsigned count;                 /* -n N: list: the N latest; dump: N frames per thread; 0: not given */
        bool reverse;                   /* list: newest first */
        uint64_t until_usec;            /* list, show: snapshots before this; 0: no bound */
        const char *output;             /* -o FILE: dump, show write there */
        int json_flags;                 /* json-c's flags for --json=short (the default) or --json=pretty */
        bool no_pager;
        bool no_demangle;               /* dump, show: linkage names as they are */
        bool resymbolize;               /* show: frames resolved again with today's debuginfo */
        bool debuginfod_set;            /* --debuginfod URLS or --no-debuginfod (URLS NULL) was given */
        const char *debuginfod;
        bool cache_set;                 /* --cache-dir DIR or --no-cache (DIR NULL) was given */
        const char *cache_dir;
        bool colour;                    /* stdout is a terminal that takes colour (and NO_COLOR is not set) */
        /* list, show --journal */
        bool journal;
        const char *journal_dir;        /* -D DIR */
        const char *journal_files;      /* --file GLOB */
        bool merge;                     /* -m: every machine's journals, not only this one's */
        const char *host_names[16];     /* --host NAME (as given): list, show: _HOSTNAME matches */
        size_t n_host_names;
} StackctlArgs;

extern StackctlArgs arg;

/* A verb returns an exit code (EXIT_*). */
int verb_dump(int argc, char **argv);
int verb_list(int argc, char **argv);
int verb_show(int argc, char **argv);
int verb_ps(int argc, char **argv);
int verb_rules(int argc, char **argv);
int verb_status(int argc, char **argv);

int parse_since(const char *s, uint64_t *ret);

/* A match on list and show, as coredumpctl takes them: "1234", "nginx", "/usr/sbin/nginx", or FIELD=VALUE. */
typedef enum MatchField {
        MATCH_PID,
        MATCH_COMM,
        MATCH_EXE,
        MATCH_UNIT,
        MATCH_RULE,
        MATCH_CLASS,
} MatchField;

typedef struct Match {
        MatchField field;
        const char *value;              /* a glob for COMM, EXE and UNIT */
        pid_t pid;
} Match;

#define MATCHES_MAX 16

/* ARGV as matches (a usage error is logged); whether S satisfies them and the filter options; whether any filter
 * is in force. */
int parse_matches(int argc, char **argv, Match *ret, size_t *ret_n);
bool matches(const ArchiveSummary *s, const Match *m, size_t n);
bool filtered(size_t n_matches);
/* One line of list, and its header, with a HOST column when HOST is given (journal snapshots). */
void print_summary(const ArchiveSummary *s, const char *host);
void print_summary_header(bool host);

/* list and show --journal (stackctl-journal.c): snapshots from journal records, libsystemd loaded on first use. */
int journal_list(int argc, char **argv);
/* Render a snapshot document as show does (text, JSON or folded, per the options); an EXIT_* code. */
int show_document(const char *json, size_t len, const char *id);
int journal_show(int argc, char **argv);

/* ---- output (stackctl-output.c): pager, colour, JSON ---- */

/* On a terminal, unless --no-pager: pipe stdout into $STACKCTL_PAGER, $PAGER or "less" (LESS=FRSXMK unless set),
 * until pager_close(), which waits for it. A pager of "" or "cat" is none. */
void pager_open(void);
void pager_close(void);
/* ANSI SGR sequences when arg.colour, "" otherwise. */
const char *ansi_bold(void);
const char *ansi_class(const char *klass);      /* red for blocked, yellow for busy-loop and syscall-spin */
const char *ansi_normal(void);
/* O as arg.json_flags say, with a newline; EXIT_OK or EXIT_FAIL. */
int json_print(json_object *o);

/* --host: set arg.host to S as a URL ("http://" implied, no trailing slash); a usage error is logged. */
int parse_host(const char *s);

/* ---- several daemons at once (stackctl-fanout.c) ---- */

typedef struct FanoutReply {
        const char *host;               /* as given to --host */
        int exit;                       /* what a single-host stackctl would have exited with (EXIT_*) */
        char *body;                     /* the reply when exit is EXIT_OK (NUL-terminated); NULL otherwise */
        size_t size;
        char *error;                    /* why not, escaped; NULL when it answered */
} FanoutReply;

/* GET PATH from every host of arg.host_names concurrently, each within TIMEOUT_USEC (arg.timeout_usec overrides);
 * ALSO_OK as daemon_get() takes it. *RET has one reply per host, in the order given. EXIT_OK, or EXIT_FAIL when
 * nothing could be started. */
int fanout_get(const char *path, uint64_t timeout_usec, long also_ok, FanoutReply **ret, size_t *ret_n);
void fanout_replies_free(FanoutReply *r, size_t n);

/* ps and status with several --host: every daemon asked at once, each within --timeout, one table with a HOST
 * column; a host that does not answer is a line of it. */
int fanout_ps(void);
int fanout_status(void);

/* dump --via-daemon PID: the daemon captures, we print its reply. */
int dump_via_daemon(pid_t pid);
/* The symbolizer dump and show --resymbolize use, as the options say; logs and returns an exit status on failure. */
int symbolizer_from_args(Symbolizer **ret);
/* After the output: the debuginfo found elsewhere goes into the cache, for the next run. */
void symbolizer_done(Symbolizer *sym);

#define STACKWATCH_ARCHIVE_DEFAULT "/var/lib/stackwatch"

/* ---- asking stackwatchd (stackctl-daemon.c): one request as an exit code, JSON accessors ---- */

/* How long a request may take unless --timeout says otherwise; a live capture may wait for the budget's slot
 * and stop a busy process's threads one by one, so it gets longer. */
#define DAEMON_TIMEOUT_USEC (10 * USEC_PER_SEC)
#define DAEMON_CAPTURE_TIMEOUT_USEC (60 * USEC_PER_SEC)

/* GET PATH_AND_QUERY from the daemon the options name. Returns EXIT_OK with RET filled in for a 2xx reply and
 * for status ALSO_OK (0: none); anything else is reported here and returned as the EXIT_* code a script sees:
 * no daemon 6, permission or token 4, not found 3, the rest 1. */
int daemon_get(const char *path_and_query, uint64_t default_timeout_usec, long also_ok, HttpResponse *ret);

/* The same, and the body parsed as a JSON object into RET_JSON. */
int daemon_get_json(const char *path_and_query, long also_ok, HttpResponse *ret, json_object **ret_json);

/* Write a reply's body to stdout as it came, ending with a newline. EXIT_OK or EXIT_FAIL. */
int daemon_print_body(const HttpResponse *r);

/* An array of strings joined with ",", escaped for a terminal; "-" when empty. NULL on OOM. */
char *json_join_strings(json_object *array);
