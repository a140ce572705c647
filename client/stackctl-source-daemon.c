/* stackctl-source-daemon.c: the archive of stackwatchd, through its API (GET /snapshots, /snapshots/ID, /problems):
 * "list", "show" and "problems" with --socket or --host, so that a person can read a fleet's snapshots without the
 * journal. With several --host every daemon is asked at once (stackctl-fanout.c): list merges their snapshots,
 * oldest first, with a HOST column, problems their problems, one row per problem however many hosts have it; a
 * host that does not answer is named and makes the exit status, never hidden by the others' answers. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/escape.h"
#include "base/json-util.h"
#include "base/log.h"
#include "base/strv.h"
#include "render/render.h"
#include "serve/api.h"
#include "store/archive.h"
#include "store/problems.h"
#include "stackctl-args.h"
#include "stackctl-daemon.h"
#include "stackctl-fanout.h"
#include "stackctl-source.h"

typedef struct DaemonSource {
        char where[256];                /* for "No snapshots match in …" */
} DaemonSource;

static bool daemon_wanted(void) {
        return !arg.journal && (arg.host || arg.socket_given);
}

static bool several_hosts(void) {
        return arg.n_hosts > 1;
}

static const char *daemon_where(void *state) {
        return ((DaemonSource *) state)->where;
}

static int daemon_source_open(void **ret) {
        DaemonSource *d = calloc(1, sizeof *d);

        if (!d)
                return log_oom(), EXIT_FAIL;
        if (several_hosts())
                snprintf(d->where, sizeof d->where, "the archives of %zu hosts", arg.n_hosts);
        else
                snprintf(d->where, sizeof d->where, "the archive of stackwatchd at %s",
                         arg.host ?: arg.socket_path);
        *ret = d;
        return EXIT_OK;
}

static void daemon_source_close(void *state) {
        free(state);
}

/* The entries of one GET /snapshots reply, appended to *ALL, each with HOST (copied) when it is not NULL. */
static int parse_list(const char *body, size_t size, const char *host, SnapshotEntry **all, size_t *n) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        json_object *arr;
        const char *why = NULL;
        size_t k;
        SnapshotEntry *nw;

        if (json_parse_bounded(body, size, &o, &why) < 0 ||
            !(arr = json_member(o, API_K_SNAPSHOTS, json_type_array))) {
                log_error("The reply of %s to " API_ROUTE_SNAPSHOTS " is not a list of snapshots%s%s.",
                          host ?: "stackwatchd", why ? ": " : "", why ?: "");
                return EXIT_FAIL;
        }
        k = json_object_array_length(arr);
        nw = reallocarray(*all, *n + k + 1, sizeof **all);
        if (!nw)
                return log_oom(), EXIT_FAIL;
        *all = nw;
        for (size_t i = 0; i < k; i++) {
                SnapshotEntry *e = &(*all)[*n];
                int r;

                *e = (SnapshotEntry) {};
                r = archive_summary_from_json(json_object_array_get_idx(arr, i), &e->s);
                if (r == -ENOMEM)
                        return log_oom(), EXIT_FAIL;
                if (r < 0) {
                        log_warning("Skipped an entry of %s's list that names no snapshot.", host ?: "stackwatchd");
                        continue;
                }
                if (host && !(e->host = strdup(host))) {
                        archive_summary_done(&e->s);
                        return log_oom(), EXIT_FAIL;
                }
                (*n)++;
        }
        return EXIT_OK;
}

static int compare_entries(const void *a, const void *b) {
        const SnapshotEntry *x = a, *y = b;

        return x->s.timestamp_usec < y->s.timestamp_usec ? -1 : x->s.timestamp_usec > y->s.timestamp_usec;
}

static int daemon_source_list(void *state, SnapshotEntry **ret, size_t *ret_n) {
        SnapshotEntry *all = NULL;
        size_t n = 0;
        int r = EXIT_OK;

        if (!several_hosts()) {
                _cleanup_(http_response_done) HttpResponse resp = {};

                r = daemon_get(API_ROUTE_SNAPSHOTS, DAEMON_TIMEOUT_USEC, 0, &resp);
                if (r == EXIT_OK)
                        r = parse_list(resp.body, resp.size, NULL, &all, &n);
        } else {
                FanoutReply *replies = NULL;
                size_t n_replies = 0;

                r = fanout_get(API_ROUTE_SNAPSHOTS, DAEMON_TIMEOUT_USEC, 0, &replies, &n_replies);
                for (size_t i = 0; r == EXIT_OK && i < n_replies; i++) {
                        if (replies[i].exit == EXIT_OK)
                                replies[i].exit = parse_list(replies[i].body, replies[i].size, replies[i].host, &all,
                                                             &n);
                        else
                                log_error("%s: %s", replies[i].host, replies[i].error ?: "no answer");
                }
                /* The hosts that failed say the exit status, as for ps; the others' snapshots are listed. */
                if (r == EXIT_OK)
                        r = fanout_exit_status(replies, n_replies);
                fanout_replies_free(replies, n_replies);
                /* Each host's list is oldest first; together, they are merged by time. */
                if (n > 1)
                        qsort(all, n, sizeof *all, compare_entries);
        }
        if (r != EXIT_OK && n == 0) {
                snapshot_entries_free(all, n);
                return r;
        }
        *ret = all;
        *ret_n = n;
        return r;
}

static int fetch_one(const char *id, SnapshotDocument *ret) {
        _cleanup_(http_response_done) HttpResponse resp = {};
        _cleanup_free_ char *path = NULL;
        int r;

        if (asprintf(&path, API_ROUTE_SNAPSHOTS "/%s", id) < 0)
                return log_oom(), EXIT_FAIL;
        if (http_query_append(&path, API_Q_FORMAT, render_format_to_string(RENDER_JSON)) < 0)
                return EXIT_FAIL;
        r = daemon_get(path, DAEMON_TIMEOUT_USEC, 0, &resp);
        if (r != EXIT_OK)
                return r;
        ret->json = TAKE_PTR(resp.body);
        ret->len = resp.size;
        return EXIT_OK;
}

static int daemon_source_fetch(void *state, const char *id, const char *host, SnapshotDocument *ret) {
        _cleanup_free_ char *path = NULL, *found_on = NULL, *latest = NULL, *latest_host = NULL;
        FanoutReply *replies = NULL;
        size_t n_replies = 0, n_found = 0;
        int r;

        if (!several_hosts())
                return fetch_one(id, ret);
        if (host) {
                /* From a list entry: that host only. */
                if (host_select_name(host) < 0)
                        return EXIT_USAGE;
                return fetch_one(id, ret);
        }
        if (streq(id, "latest")) {
                /* The newest of every host's snapshots. */
                SnapshotEntry *all = NULL;
                size_t n = 0;

                r = daemon_source_list(state, &all, &n);
                if (n == 0) {
                        snapshot_entries_free(all, n);
                        if (r == EXIT_OK)
                                log_error("No snapshots in %s.", daemon_where(state));
                        return r == EXIT_OK ? EXIT_NOT_FOUND : r;
                }
                latest = TAKE_PTR(all[n - 1].s.id);
                latest_host = TAKE_PTR(all[n - 1].host);
                snapshot_entries_free(all, n);
                if (host_select_name(latest_host) < 0)
                        return EXIT_USAGE;
                return fetch_one(latest, ret);
        }
        /* An id the user typed: the one host that has it. Ids are made of the pid and the time, so two hosts may
         * share one: then the user must say which. */
        if (asprintf(&path, API_ROUTE_SNAPSHOTS "/%s", id) < 0)
                return log_oom(), EXIT_FAIL;
        if (http_query_append(&path, API_Q_FORMAT, render_format_to_string(RENDER_JSON)) < 0)
                return EXIT_FAIL;
        r = fanout_get(path, DAEMON_TIMEOUT_USEC, 0, &replies, &n_replies);
        for (size_t i = 0; r == EXIT_OK && i < n_replies; i++) {
                if (replies[i].exit == EXIT_OK) {
                        if (n_found++ == 0) {
                                ret->json = TAKE_PTR(replies[i].body);
                                ret->len = replies[i].size;
                                found_on = strdup(replies[i].host);
                        }
                } else if (replies[i].exit != EXIT_NOT_FOUND) {
                        log_error("%s: %s", replies[i].host, replies[i].error ?: "no answer");
                        r = replies[i].exit;
                }
        }
        fanout_replies_free(replies, n_replies);
        if (r == EXIT_OK && n_found == 0) {
                log_error("No snapshot '%s' in %s.", id, daemon_where(state));
                r = EXIT_NOT_FOUND;
        } else if (r == EXIT_OK && n_found > 1) {
                log_error("Snapshot '%s' is on %zu of the hosts: name the one to show with a single --host.", id,
                          n_found);
                r = EXIT_USAGE;
        } else if (r != EXIT_OK && n_found > 0)
                log_error("Snapshot '%s' was found on %s, but not every host answered: it may be on another too.",
                          id, strna(found_on));
        if (r != EXIT_OK)
                snapshot_document_done(ret);
        return r;
}

/* Name where row P of the daemon that answered as HOST (its --host) is, where the row does not: its hosts (a
 * daemon names its machine's host name; a row from a snapshot alone names none), its processes (a pid is a process
 * on one host: the row's, or HOST), and its first and latest snapshot (HOST: where show asks for them). -ENOMEM. */
static int problem_name_host(Problem *p, const char *host) {
        const char *machine;

        if (!p->hosts && strv_extend(&p->hosts, host) < 0)
                return -ENOMEM;
        machine = strv_length(p->hosts) == 1 ? p->hosts[0] : host;
        for (size_t k = 0; k < p->n_processes; k++)
                if (!p->processes[k].host && !(p->processes[k].host = strdup(machine)))
                        return -ENOMEM;
        if (p->first_id && !p->first_host && !(p->first_host = strdup(host)))
                return -ENOMEM;
        if (p->latest_id && !p->latest_host && !(p->latest_host = strdup(host)))
                return -ENOMEM;
        return 0;
}

/* The rows of one GET /problems reply merged into T; HOST (several hosts: the one that answered) names where each
 * is (problem_name_host()). */
static int merge_problems(const char *body, size_t size, const char *host, ProblemTable *t) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        json_object *arr;
        const char *why = NULL;
        size_t skipped = 0;

        if (json_parse_bounded(body, size, &o, &why) < 0 ||
            !(arr = json_member(o, API_K_PROBLEMS, json_type_array))) {
                log_error("The reply of %s to " API_ROUTE_PROBLEMS " is not a list of problems%s%s.",
                          host ?: "stackwatchd", why ? ": " : "", why ?: "");
                return EXIT_FAIL;
        }
        for (size_t i = 0; i < json_object_array_length(arr); i++) {
                _cleanup_(problem_done) Problem p = {};
                int r;

                r = problem_from_json(json_object_array_get_idx(arr, i), &p);
                if (r == -ENOMEM)
                        return log_oom(), EXIT_FAIL;
                if (r < 0) {
                        skipped++;
                        continue;
                }
                if (host && problem_name_host(&p, host) < 0)
                        return log_oom(), EXIT_FAIL;
                r = problem_table_merge(t, &p);
                if (r < 0)
                        return log_oom(), EXIT_FAIL;
        }
        if (skipped > 0)
                log_warning("Skipped %zu row(s) of %s's problems that name no problem.", skipped,
                            host ?: "stackwatchd");
        return EXIT_OK;
}

/* GET /problems of every host, one table: the same problem on two hosts is one row, its firings added up. */
static int daemon_source_problems(void *state, ProblemTable *t) {
        FanoutReply *replies = NULL;
        size_t n_replies = 0;
        int r;

        if (!several_hosts()) {
                _cleanup_(http_response_done) HttpResponse resp = {};

                r = daemon_get(API_ROUTE_PROBLEMS, DAEMON_TIMEOUT_USEC, 0, &resp);
                return r == EXIT_OK ? merge_problems(resp.body, resp.size, NULL, t) : r;
        }
        r = fanout_get(API_ROUTE_PROBLEMS, DAEMON_TIMEOUT_USEC, 0, &replies, &n_replies);
        for (size_t i = 0; r == EXIT_OK && i < n_replies; i++) {
                if (replies[i].exit == EXIT_OK)
                        replies[i].exit = merge_problems(replies[i].body, replies[i].size, replies[i].host, t);
                else
                        log_error("%s: %s", replies[i].host, replies[i].error ?: "no answer");
        }
        /* The hosts that failed say the exit status; the others' problems are shown. */
        if (r == EXIT_OK)
                r = fanout_exit_status(replies, n_replies);
        fanout_replies_free(replies, n_replies);
        return r;
}

const SnapshotSourceType snapshot_source_daemon = {
        .name = "daemon",
        .wanted = daemon_wanted,
        .where = daemon_where,
        .open = daemon_source_open,
        .close = daemon_source_close,
        .list = daemon_source_list,
        .fetch = daemon_source_fetch,
        .problems = daemon_source_problems,
};
