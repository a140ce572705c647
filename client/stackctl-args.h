/* stackctl-args.h: what stackctl's command line said, read by every verb: the parsed options and the exit codes. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "capture/capture.h"
#include "render/render.h"

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

/* A daemon --host or a line of --hosts names (list, show --journal: a machine whose records to keep). */
typedef struct HostArg {
        char *name;                     /* as given, or as the hosts file has it: a URL, for tables and JSON keys */
        char *match_name;               /* list, show --journal: the _HOSTNAME it keeps (of a --hosts URL: its host) */
        char *token_file;               /* its own token file (a --hosts line); NULL: --token-file's */
} HostArg;

/* At most this many daemons at once: each is a child process of the fan-out. */
#define HOSTS_MAX 256

typedef struct StackctlArgs {
        RenderFormat format;
        int svg_picture;                /* --svg=PICTURE: an SvgPicture */
        bool icicle;                    /* --icicle: the SVG flame graph upside down */
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
        bool socket_given;              /* --socket: list and show ask that daemon */
        const char *host;               /* "http://HOST:PORT" (normalized), or NULL for the unix socket */
        const char *token_file;         /* --token-file */
        const char *host_token_file;    /* the token file of the host asked now, when its --hosts line names one */
        const char *cacert;             /* --cacert: with an https:// --host */
        uint64_t timeout_usec;          /* 0: the verb's default */
        /* coredumpctl's and eu-stack's habits. */
        bool one;                       /* -1: list, show: the latest match only; dump: the main thread only */
        unsigned count;                 /* -n N: list: the N latest; dump: N frames per thread; 0: not given */
        bool reverse;                   /* list: newest first */
        uint64_t until_usec;            /* list, show: snapshots before this; 0: no bound */
        const char *output;             /* -o FILE: dump, show write there */
        const char *pprof;              /* --pprof FILE: dump, show write a pprof profile there ("-": stdout) */
        int json_flags;                 /* json-c's flags for --json=short (the default) or --json=pretty */
        bool no_pager;
        bool no_demangle;               /* dump, show: linkage names as they are */
        bool no_group;                  /* dump, show: every thread on its own, threads alike not grouped */
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
        HostArg *hosts;                 /* every --host and the lines of every --hosts FILE, in order */
        size_t n_hosts;
} StackctlArgs;

/* Filled in by stackctl.c, before a verb runs. */
extern StackctlArgs arg;

#define STACKWATCH_ARCHIVE_DEFAULT "/var/lib/stackwatch"
