/* stackctl-problems.c: "stackctl problems": what keeps happening, not each time it did. A row per problem (every
 * firing of one signature, store/problems.h) as coredumpctl lists its cores, from the same sources and with the same
 * matches as list: how often it fired, when first and last, on how many hosts and processes, its latest snapshot
 * and its title; or the rows as JSON. */
#include <stdio.h>
#include <string.h>

#include "base/escape.h"
#include "base/json-util.h"
#include "base/log.h"
#include "base/macro.h"
#include "store/problems.h"
#include "stackctl-args.h"
#include "stackctl-format.h"
#include "stackctl-match.h"
#include "stackctl-output.h"
#include "stackctl-sources.h"
#include "stackctl-verbs.h"

/* PROCESSES names the pids of at most this many processes (of one host), in at most PIDS_WIDTH columns; more, or
 * processes on several hosts, are a count. */
#define PIDS_SHOWN_MAX 3
#define PIDS_WIDTH 16
#define ID_WIDTH 29 /* "20261129T053052.123456Z-12345": most ids */

/* The PROCESSES cell of P into BUF: "1234,1240", "5", "16+" (the most a problem keeps), "-" for none. */
static char *format_processes(const Problem *p, char *buf, size_t size) {
        bool one_host = true;
        size_t len = 0;

        if (p->n_processes == 0) {
                snprintf(buf, size, "-");
                return buf;
        }
        for (size_t i = 1; i < p->n_processes; i++)
                one_host = one_host && streq_ptr(p->processes[i].host, p->processes[0].host);
        if (one_host && p->n_processes <= PIDS_SHOWN_MAX) {
                for (size_t i = 0; i < p->n_processes && len < size; i++)
                        len += (size_t) snprintf(buf + len, size - len, "%s%d", i ? "," : "",
                                                 (int) p->processes[i].pid);
                if (len <= PIDS_WIDTH)
                        return buf;
        }
        snprintf(buf, size, "%zu%s", p->n_processes, p->n_processes >= PROBLEM_PROCESSES_MAX ? "+" : "");
        return buf;
}

static void print_header(void) {
        printf("%s%-16s %6s %-19s %-19s %5s %-*s %-*s %s%s\n", ansi_bold(), "SIGNATURE", "COUNT", "FIRST", "LAST",
               "HOSTS", PIDS_WIDTH, "PROCESSES", ID_WIDTH, "LATEST", "TITLE", ansi_normal());
}

static void print_row(const Problem *p) {
        _cleanup_free_ char *title = escape_string(p->title ?: "-"), *latest = escape_string(p->latest_id ?: "-");
        char first[FORMAT_TIMESTAMP_MAX], last[FORMAT_TIMESTAMP_MAX], procs[64];
        size_t hosts = 0;

        while (p->hosts && p->hosts[hosts])
                hosts++;
        /* A row that names no host is this one's (an archive read here, one daemon): one host. */
        printf("%-16s %6llu %-19s %-19s %5zu %-*s %-*s %s\n", p->signature, (unsigned long long) p->count,
               format_timestamp(first, sizeof first, p->first_usec), format_timestamp(last, sizeof last, p->last_usec),
               MAX(hosts, (size_t) 1), PIDS_WIDTH, format_processes(p, procs, sizeof procs), ID_WIDTH,
               latest ?: "?", title ?: "?");
}

/* Keep the rows of T that satisfy M[0..N), in their order; free the others. */
static void keep_matching(ProblemTable *t, const Match *m, size_t n) {
        size_t k = 0;

        for (size_t i = 0; i < t->n; i++) {
                if (!match_problem(&t->items[i], m, n)) {
                        problem_done(&t->items[i]);
                        continue;
                }
                t->items[k++] = t->items[i];
        }
        t->n = k;
}

int verb_problems(int argc, char **argv) {
        _cleanup_(source_closep) Source src = {};
        _cleanup_(problem_table_done) ProblemTable t = {};
        _cleanup_(json_object_putp) json_object *arr = NULL;
        Match m[MATCHES_MAX];
        size_t n_m = 0, first;
        int r;

        if (match_parse(argc - 1, argv + 1, m, &n_m) < 0 || match_check_problem(m, n_m) < 0)
                return EXIT_USAGE;
        r = source_open(&src);
        if (r != EXIT_OK)
                return r;
        /* A source that could read only some of what it has (a host of several that did not answer) gives that
         * with its error: it is shown, and the error is the exit status. */
        r = src.type->problems(src.state, &t);
        if (r != EXIT_OK && t.n == 0)
                return r;
        problem_table_sort(&t);
        keep_matching(&t, m, n_m);
        /* -1 and -n N: the problems seen last, still oldest first unless --reverse. */
        first = match_first_kept(t.n);
        if (arg.format == RENDER_JSON && !(arr = json_object_new_array()))
                return log_oom(), EXIT_FAIL;
        if (!arr && t.n > first && arg.legend)
                print_header();
        for (size_t j = first; j < t.n; j++) {
                const Problem *p = &t.items[arg.reverse ? t.n - 1 - (j - first) : j];

                if (!arr) {
                        print_row(p);
                        continue;
                }
                json_object *o = problem_to_json(p);
                if (!o || json_object_array_add(arr, o) < 0) {
                        json_object_put(o);
                        return log_oom(), EXIT_FAIL;
                }
        }
        if (arr && json_print(arr) != EXIT_OK)
                return EXIT_FAIL;
        if (r != EXIT_OK)
                return r;
        if (t.n == 0) {
                if (!arr)
                        log_error("No problems%s in %s.", match_filtered(n_m) || arg.n_hosts ? " match" : "",
                                  src.type->where(src.state));
                return EXIT_NOT_FOUND;
        }
        return EXIT_OK;
}
