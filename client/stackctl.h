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
        const char *archive_dir;
        pid_t filter_pid;
        const char *filter_rule;
        uint64_t since_usec;
} StackctlArgs;

extern StackctlArgs arg;

/* A verb returns an exit code (EXIT_*). */
int verb_dump(int argc, char **argv);
int verb_list(int argc, char **argv);
int verb_show(int argc, char **argv);

int parse_since(const char *s, uint64_t *ret);

#define STACKWATCH_ARCHIVE_DEFAULT "/var/lib/stackwatch"
