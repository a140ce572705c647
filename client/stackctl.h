/* stackctl.h: what the stackctl verbs share: parsed options, exit codes, the verb signature. */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include "capture.h"

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
        uint64_t timeout_usec;          /* 0: the verb's default */
} StackctlArgs;

extern StackctlArgs arg;

/* A verb returns an exit code (EXIT_*). */
int verb_dump(int argc, char **argv);
int verb_list(int argc, char **argv);
int verb_show(int argc, char **argv);
int verb_ps(int argc, char **argv);
int verb_rules(int argc, char **argv);
int verb_status(int argc, char **argv);

/* dump --via-daemon PID: the daemon captures, we print its reply. */
int dump_via_daemon(pid_t pid);

int parse_since(const char *s, uint64_t *ret);

#define STACKWATCH_ARCHIVE_DEFAULT "/var/lib/stackwatch"
