/* manager.h: the daemon's state, all of it: event loop, config, scanner, trigger, archive, capture jobs. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include <systemd/sd-event.h>

#include "config/config.h"
#include "store/archive.h"
#include "store/problems.h"
#include "capture-budget.h"
#include "capture-job.h"
#include "firing.h"
#include "hooks.h"
#include "lock-probe.h"
#include "metrics.h"
#include "owed.h"
#include "scan.h"
#include "trigger.h"

typedef struct Manager Manager;
typedef struct Http Http;
typedef struct HttpRoutes HttpRoutes;
typedef struct ManagerJob ManagerJob;

/* At most this many captures in flight (rules and HTTP together); a firing beyond it waits for the next poll. */
#define MANAGER_JOBS_MAX 4
/* The automatic poll interval keeps polling within 1/SHARE of a core, from the polls' CPU time (the scan, the walks,
 * the rules) averaged with WEIGHT for the newest: 0.8%, so that the daemon's whole budget at 10,000 threads on /proc
 * (1%) holds with what is not a poll (HTTP, captures, hooks) and with polls that cost more than the average (at 1%,
 * 10,000 threads with 5% waking each second came out at 1.07-1.08%). */
#define MANAGER_SCAN_COST_SHARE 125
#define MANAGER_SCAN_COST_WEIGHT 0.2

struct Manager {
        sd_event *event;
        sd_event_source *poll_source;

        char *config_path;
        char *rules_dir;
        Config *config;

        Scanner *scanner;
        LockProbes *lock_probes;        /* confirm the scanner's lock-retry suspects, in children */
        Owed owed;                      /* which parked waits something owes: blocked, or waiting */
        Trigger trigger;
        CaptureBudget api_budget;       /* GET /stacks/PID: http.max_captures_per_minute, apart from the rules' */
        Archive *archive;

        ManagerJob **jobs;
        size_t n_jobs, n_jobs_allocated;

        Http *http;
        HttpRoutes *http_routes;
        Hooks *hooks;
        Alerts alerts;
        ProblemTable problems;          /* the archive's ledger, read at start and counted on in memory */
        Metrics metrics;

        bool ready;
        bool stopping;                  /* SIGTERM seen: no more polls, waiting for captures in flight */
        char status[256];
        uint64_t snapshots_written;
        uint64_t problem_repeats;       /* firings of a problem open on their process: counted, not stored */
        uint64_t capture_failures;
        uint64_t start_usec;            /* CLOCK_MONOTONIC */
        uint64_t archive_snapshots;     /* after the latest rotation */
        uint64_t archive_bytes;
        uint64_t archive_tmp_removed;   /* temporary files of killed writes swept since start */

        bool reload_failed;             /* the latest reload was refused: an older configuration is in force */
        char *reload_error;             /* and its first error, "file:line:column: message" */
        char *apply_error;              /* why a configuration that parsed could not be applied; NULL: the archive */
        double poll_cpu_avg_usec;       /* the polls' CPU time (the scan, the walks, the rules), averaged
                                         * (MANAGER_SCAN_COST_WEIGHT for the newest) */
        uint64_t last_poll_cpu_usec;
        int scan_source_applied;        /* the scan.source the scanner was set for; -1: none yet */
        uint64_t reload_success_usec;   /* CLOCK_REALTIME of the load in force */
        uint64_t reload_failures;
};

/* Takes ownership of CONFIG. */
int manager_new(const char *config_path, const char *rules_dir, Config *config, Manager **ret);
Manager *manager_free(Manager *m);
DEFINE_TRIVIAL_CLEANUP_FUNC(Manager *, manager_free);

/* Run the event loop until SIGTERM/SIGINT (and the captures in flight then, up to a grace period); returns the
 * exit code. */
int manager_run(Manager *m);
/* Load the configuration again; on errors keep the running one and say why. */
int manager_reload(Manager *m);
