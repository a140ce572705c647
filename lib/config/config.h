/* config.h: the daemon's configuration: the model, its compiled defaults and ranges (loading: config-load.h). */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "base/macro.h"
#include "config/config-value.h"
#include "config/rules.h"
#include "model/snapshot.h"
#include "model/unwind-kind.h"

#define CONFIG_DEFAULT_PATH "/etc/stackwatch/stackwatch.yaml"
#define CONFIG_DEFAULT_RULES_DIR "/etc/stackwatch/rules.d"


/* Compiled defaults: what the daemon runs with when no file says otherwise (conf/stackwatch.yaml repeats them). */
#define CONFIG_DEFAULT_ARCHIVE_DIR "/var/lib/stackwatch"
#define CONFIG_DEFAULT_MAX_SNAPSHOTS 1000
#define CONFIG_DEFAULT_MAX_SIZE (512 * CONFIG_MIB)
#define CONFIG_DEFAULT_MAX_AGE_USEC (30 * CONFIG_USEC_PER_DAY)
#define CONFIG_DEFAULT_KEEP_FREE CONFIG_GIB
#define CONFIG_DEFAULT_JOURNAL_MAX_SIZE (8 * CONFIG_MIB)
#define CONFIG_DEFAULT_MAX_PER_MINUTE 6
#define CONFIG_DEFAULT_MAX_FRAMES 256
#define CONFIG_DEFAULT_MAX_THREADS 4096                                /* CAPTURE_THREADS_DEFAULT */
#define CONFIG_DEFAULT_STACK_BYTES (256 * CONFIG_KIB)
#define CONFIG_DEFAULT_TIME_BUDGET_USEC (10 * USEC_PER_SEC)
#define CONFIG_DEFAULT_HTTP_SOCKET "/run/stackwatch/stackwatch.sock"       /* API_SOCKET_DEFAULT */
#define CONFIG_DEFAULT_HTTP_SOCKET_MODE 0660
#define CONFIG_DEFAULT_HTTP_MAX_CONNECTIONS 64
#define CONFIG_DEFAULT_HTTP_TIMEOUT_USEC (10 * USEC_PER_SEC)
#define CONFIG_DEFAULT_HTTP_MAX_CAPTURES_PER_MINUTE 12  /* GET /stacks/PID: its own budget, apart from the rules' */
#define CONFIG_DEFAULT_HOOK_TIMEOUT_USEC (30 * USEC_PER_SEC)
#define CONFIG_DEFAULT_HOOK_MAX_RUNNING 4
#define CONFIG_DEFAULT_HOOK_REPEAT_USEC (5 * CONFIG_USEC_PER_MINUTE)
#define CONFIG_DEFAULT_SYMBOLS_CACHE_MAX_SIZE CONFIG_GIB        /* SYMCACHE_MAX_SIZE_DEFAULT */

/* Everything but the rules and the strings (archive directory, socket path; built by config_new_default()). */
#define CONFIG_DEFAULTS                                                 \
        (Config) {                                                      \
                .poll_interval_auto = true,                             \
                .max_snapshots = CONFIG_DEFAULT_MAX_SNAPSHOTS,          \
                .max_size = CONFIG_DEFAULT_MAX_SIZE,                    \
                .max_age_usec = CONFIG_DEFAULT_MAX_AGE_USEC,            \
                .keep_free = CONFIG_DEFAULT_KEEP_FREE,                  \
                .journal = CONFIG_JOURNAL_SUMMARY,                      \
                .journal_max_size = CONFIG_DEFAULT_JOURNAL_MAX_SIZE,    \
                .max_per_minute = CONFIG_DEFAULT_MAX_PER_MINUTE,        \
                .method = CAPTURE_METHOD_AUTO,                          \
                .unwinder = UNWINDER_LIBDW,                             \
                .max_frames = CONFIG_DEFAULT_MAX_FRAMES,                \
                .max_threads = CONFIG_DEFAULT_MAX_THREADS,              \
                .stack_bytes = CONFIG_DEFAULT_STACK_BYTES,              \
                .time_budget_usec = CONFIG_DEFAULT_TIME_BUDGET_USEC,    \
                .kernel = true,                                         \
                .java = true,                                           \
                .node = true,                                           \
                .ruby = true,                                           \
                .http_socket_mode = CONFIG_DEFAULT_HTTP_SOCKET_MODE,    \
                .http_max_connections = CONFIG_DEFAULT_HTTP_MAX_CONNECTIONS, \
                .http_timeout_usec = CONFIG_DEFAULT_HTTP_TIMEOUT_USEC,  \
                .http_max_captures_per_minute = CONFIG_DEFAULT_HTTP_MAX_CAPTURES_PER_MINUTE, \
                .hook_timeout_usec = CONFIG_DEFAULT_HOOK_TIMEOUT_USEC,  \
                .hook_max_running = CONFIG_DEFAULT_HOOK_MAX_RUNNING,    \
                .hook_repeat_usec = CONFIG_DEFAULT_HOOK_REPEAT_USEC,    \
                .symbols_cache_max_size = CONFIG_DEFAULT_SYMBOLS_CACHE_MAX_SIZE, \
        }

/* Ranges: a value outside them is an error that names the range, never a silent clamp. */
#define CONFIG_POLL_INTERVAL_MIN_USEC (50 * USEC_PER_MSEC)
#define CONFIG_POLL_INTERVAL_MAX_USEC CONFIG_USEC_PER_HOUR
#define CONFIG_POLL_AUTO_MIN_USEC (250 * USEC_PER_MSEC)        /* auto: shortest for: / 10, within these */
#define CONFIG_POLL_AUTO_MAX_USEC (10 * USEC_PER_SEC)
#define CONFIG_POLL_AUTO_DIVISOR 10
#define CONFIG_MAX_SNAPSHOTS_MIN 1
#define CONFIG_MAX_SNAPSHOTS_MAX 1000000
#define CONFIG_MAX_SIZE_MIN CONFIG_MIB
#define CONFIG_MAX_AGE_MIN_USEC CONFIG_USEC_PER_MINUTE
#define CONFIG_MAX_AGE_MAX_USEC (3650 * CONFIG_USEC_PER_DAY)
#define CONFIG_MAX_PER_MINUTE_MIN 1
#define CONFIG_MAX_PER_MINUTE_MAX 600
#define CONFIG_MAX_FRAMES_MIN 1
#define CONFIG_MAX_FRAMES_MAX 4096
#define CONFIG_MAX_THREADS_MIN 1
#define CONFIG_MAX_THREADS_MAX 65536                                    /* CAPTURE_THREADS_MAX */
#define CONFIG_STACK_BYTES_MIN (4 * CONFIG_KIB)
#define CONFIG_JOURNAL_MAX_SIZE_MIN CONFIG_KIB
#define CONFIG_JOURNAL_MAX_SIZE_MAX (256 * CONFIG_MIB)       /* journald takes entries up to 768 MiB */
#define CONFIG_STACK_BYTES_MAX (64 * CONFIG_MIB)
#define CONFIG_TIME_BUDGET_MIN_USEC (100 * USEC_PER_MSEC)
#define CONFIG_TIME_BUDGET_MAX_USEC (10 * CONFIG_USEC_PER_MINUTE)
#define CONFIG_RULE_DURATION_MAX_USEC (365 * CONFIG_USEC_PER_DAY) /* for: and cooldown: */
#define CONFIG_RULE_PROBE_MAX_USEC (1000 * 1000ULL)                  /* probe: the target pauses at each syscall */
#define CONFIG_PEERS_MAX 8
#define CONFIG_HTTP_MAX_CONNECTIONS_MIN 1
#define CONFIG_HTTP_MAX_CONNECTIONS_MAX 1024
#define CONFIG_HTTP_TIMEOUT_MIN_USEC USEC_PER_SEC
#define CONFIG_HTTP_TIMEOUT_MAX_USEC (10 * CONFIG_USEC_PER_MINUTE)
#define CONFIG_HOOK_TIMEOUT_MIN_USEC (100 * USEC_PER_MSEC)
#define CONFIG_HOOK_TIMEOUT_MAX_USEC CONFIG_USEC_PER_HOUR
#define CONFIG_HOOK_MAX_RUNNING_MIN 1
#define CONFIG_HOOK_MAX_RUNNING_MAX 64
#define CONFIG_HOOK_REPEAT_MIN_USEC USEC_PER_SEC
#define CONFIG_HOOK_REPEAT_MAX_USEC (24 * CONFIG_USEC_PER_HOUR)
#define CONFIG_HOOK_ARGS_MAX 64
#define CONFIG_SYMBOLS_CACHE_MAX_SIZE_MIN (16 * CONFIG_MIB)    /* SYMCACHE_MAX_SIZE_MIN */
#define CONFIG_DEBUGINFOD_URLS_MAX 4096
#define CONFIG_SIZE_MAX (1024 * 1024 * CONFIG_GIB)                /* 1024T: max_size, keep_free */
#define CONFIG_RULES_MAX 1024
/* Files larger than this are refused rather than parsed: a configuration is a page or two. */
#define CONFIG_FILE_SIZE_MAX CONFIG_MIB
/* archive.journal: how much of a snapshot goes into the journal with the firing's record. */
typedef enum ConfigJournal {
        CONFIG_JOURNAL_OFF,             /* none: the record points at the archive */
        CONFIG_JOURNAL_SUMMARY,         /* the culprit thread's stack as text (the default) */
        CONFIG_JOURNAL_FULL,            /* and the whole snapshot, as its archive file, if within journal_max_size */
        _CONFIG_JOURNAL_MAX,
        _CONFIG_JOURNAL_INVALID = -EINVAL,
} ConfigJournal;

/* scan.source: where the poll reads every thread's state from. */
typedef enum ConfigScanSource {
        CONFIG_SCAN_AUTO,               /* BPF where the kernel, the build and the privileges allow it, else /proc */
        CONFIG_SCAN_BPF,                /* the BPF task iterator, or the daemon does not start */
        CONFIG_SCAN_PROC,               /* /proc only */
        _CONFIG_SCAN_SOURCE_MAX,
        _CONFIG_SCAN_SOURCE_INVALID = -EINVAL,
} ConfigScanSource;

const char *config_scan_source_to_string(ConfigScanSource s);
ConfigScanSource config_scan_source_from_string(const char *s);

const char *config_journal_to_string(ConfigJournal j);
ConfigJournal config_journal_from_string(const char *s);

typedef struct Config {
        uint64_t poll_interval_usec;    /* resolved: auto already applied */
        bool poll_interval_auto;        /* then the daemon stretches it too, as the scan's cost asks (manager.c) */
        ConfigScanSource scan_source;

        char *archive_dir;
        uint64_t max_snapshots;
        uint64_t max_size;              /* bytes */
        uint64_t max_age_usec;
        uint64_t keep_free;             /* bytes */
        ConfigJournal journal;          /* what of a snapshot the firing's journal record carries */
        uint64_t journal_max_size;      /* full: the largest snapshot (compressed) put into the journal */
        bool every_firing;              /* a snapshot and an alert for every firing, also of a problem already open
                                         * on its process (counted all the same); false: one per open problem */

        unsigned max_per_minute;
        CaptureMethod method;
        UnwinderKind unwinder;
        unsigned max_frames;
        unsigned max_threads;
        uint64_t stack_bytes;
        uint64_t time_budget_usec;
        bool kernel;
        bool java;                      /* ask a JVM for its thread dump (a safepoint of its own) */
        bool node;                      /* read a Node.js process's JavaScript frames */
        bool ruby;                      /* read a Ruby process's own frames */

        /* http: */
        char *http_socket;              /* NULL: no unix socket ("socket: none") */
        unsigned http_socket_mode;
        bool has_http_socket_group;
        gid_t http_socket_gid;
        char *http_listen;              /* NULL: no TCP listener (the default); else as config_parse_listen() takes */
        char *http_token_file;          /* the capture scope: every route, /stacks (which stops threads) too */
        char *http_read_token_file;     /* the read scope: every route but /stacks; one of the two is required with
                                         * http_listen */
        char *http_tls_cert, *http_tls_key;     /* PEM files: HTTPS on the TCP listener */
        bool http_allow_plain;          /* plain HTTP on a non-loopback address (else refused) */
        unsigned http_max_connections;
        uint64_t http_timeout_usec;
        unsigned http_max_captures_per_minute;  /* live captures over HTTP, apart from max_per_minute (the rules') */

        /* hooks: */
        char **hook_command;            /* argv for rules with the hook action and no hook: of their own */
        uint64_t hook_timeout_usec;
        unsigned hook_max_running;
        uint64_t hook_repeat_usec;      /* a firing hook's alert is sent again this often while it lasts */

        /* symbols: */
        char *symbols_cache_dir;        /* the debuginfo cache; NULL: the default (symcache_default_dir()) */
        bool symbols_cache_off;         /* "cache_dir: off" */
        uint64_t symbols_cache_max_size;
        char *symbols_debuginfod;       /* debuginfod servers (DEBUGINFOD_URLS' syntax); NULL: the environment's */
        bool symbols_debuginfod_off;    /* "debuginfod: off": none, whatever the environment says */

        Rule *rules;
        size_t n_rules, n_rules_allocated;
} Config;

/* NULL-safe; frees a half-built Config too; returns NULL. */
Config *config_free(Config *c);
DEFINE_TRIVIAL_CLEANUP_FUNC(Config *, config_free);

/* The compiled defaults without any rules: the starting point of a load. */
int config_new_empty(Config **ret);
/* The compiled defaults, built-in rules included: what the daemon runs with and no file at all. */
int config_new_default(Config **ret);

/* Append copies of the built-in rules (hung-task, busy-loop, syscall-spin) to C; -ENOMEM. */
int config_add_builtin_rules(Config *c);
/* The poll interval "auto" stands for: shortest for: / 10, within 250 ms..10 s; 10 s with no rules. */
uint64_t config_poll_interval_auto(const Config *c);
