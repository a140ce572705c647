/* daemon-view.h: the daemon's state as the HTTP routes and /metrics read it; the manager fills it in, so that
 * neither of them needs to know the Manager. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config/config.h"
#include "store/archive.h"
#include "store/problems.h"
#include "firing.h"
#include "hooks.h"
#include "owed.h"
#include "scan.h"
#include "trigger.h"

/* The rules' captures in flight a view names (DaemonView.firing_pids), at least MANAGER_JOBS_MAX. */
#define DAEMON_VIEW_FIRINGS_MAX 8

typedef struct DaemonView {
        const Config *config;           /* the one in force (a reload replaces it) */
        Scanner *scanner;
        Trigger *trigger;
        const Owed *owed;
        Archive *archive;
        const Hooks *hooks;             /* NULL: none */
        uint64_t start_usec;            /* CLOCK_MONOTONIC */
        uint64_t snapshots_written;
        uint64_t capture_failures;
        size_t captures_running;
        pid_t firing_pids[DAEMON_VIEW_FIRINGS_MAX]; /* the processes a rule's capture in flight is taking: its
                                         * firing, not counted until the capture ends */
        size_t n_firing_pids;
        uint64_t archive_snapshots;     /* after the latest rotation */
        uint64_t archive_bytes;
        uint64_t archive_tmp_removed;   /* temporary files of killed writes swept since start */
        bool reload_failed;             /* the latest reload failed: the configuration in force is an older one */
        uint64_t reload_success_usec;   /* CLOCK_REALTIME of the latest successful load (the start, or a reload) */
        uint64_t reload_failures;       /* reloads refused since start */
        const char *reload_error;       /* why the latest reload failed (its first error); NULL when it did not */
        const Alerts *alerts;           /* the alerts hooks keep active; NULL: none */
        const ProblemTable *problems;   /* every firing's problem, the ledger's and since (no snapshot in it);
                                         * NULL: read the ledger */
        uint64_t poll_interval_usec;    /* the one in force: poll_interval, or auto stretched by the polls' cost */
        uint64_t last_poll_cpu_usec;    /* the latest poll's CPU time: its scan, walks and rules */
} DaemonView;
