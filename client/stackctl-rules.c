/* stackctl-rules.c: "stackctl rules": the rules stackwatchd runs, how often each fired, and the capture budget. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/escape.h"
#include "base/json-util.h"
#include "base/log.h"
#include "serve/api.h"
#include "stackctl-args.h"
#include "stackctl-daemon.h"
#include "stackctl-fanout.h"
#include "stackctl-format.h"
#include "stackctl-output.h"
#include "stackctl-verbs.h"

static int print_rule(json_object *rule, const char *host) {
        _cleanup_free_ char *name = escape_string(json_get_string(rule, API_K_NAME) ?: "-"),
                            *classes = json_join_strings(json_get_array(rule, API_K_CLASSES)),
                            *actions = json_join_strings(json_get_array(rule, API_K_ACTIONS));
        uint64_t last = json_get_u64(rule, API_K_LAST_FIRED_USEC);
        char span[FORMAT_TIMESPAN_MAX], when[FORMAT_TIMESTAMP_MAX];

        if (!name || !classes || !actions)
                return log_oom();
        if (host)
                printf("%-20s ", host);
        printf("%-24s %-24s %7s %-20s %7llu %s\n", name, classes,
               format_timespan(span, sizeof span, json_get_u64(rule, API_K_FOR_MS) * USEC_PER_MSEC), actions,
               (unsigned long long) json_get_u64(rule, API_K_FIRED),
               last > 0 ? format_timestamp(when, sizeof when, last) : "-");
        return 0;
}

/* rules --host A --host B …: one table, a HOST column first, a host that did not answer as a line of its own and in
 * the exit status; each host's capture budget in the footer. */
static int fanout_rules(void) {
        FanoutReply *rs = NULL;
        json_object **docs = NULL, *all = NULL;
        size_t n = 0, rows = 0, answered = 0;
        int r;

        if (fanout_get(API_ROUTE_RULES, DAEMON_TIMEOUT_USEC, 0, &rs, &n) != EXIT_OK)
                return EXIT_FAIL;
        docs = calloc(n ?: 1, sizeof *docs);
        if (!docs || (arg.format == RENDER_JSON && !(all = json_object_new_object()))) {
                free(docs);
                fanout_replies_free(rs, n);
                return log_oom(), EXIT_FAIL;
        }
        for (size_t i = 0; i < n; i++) {
                const char *why = NULL;

                if (rs[i].exit == EXIT_OK && (json_parse_bounded(rs[i].body, rs[i].size, &docs[i], &why) < 0 ||
                                              !json_get_array(docs[i], API_K_RULES))) {
                        free(rs[i].error);
                        rs[i].error = strdup("the reply is not a list of rules");
                        rs[i].exit = EXIT_FAIL;
                }
                if (rs[i].exit == EXIT_OK)
                        answered++;
                if (all)
                        json_object_object_add(all, rs[i].host,
                                               rs[i].exit == EXIT_OK ? json_object_get(docs[i]) : NULL);
        }
        if (all) {
                (void) json_print(all);
                json_object_put(all);
        } else {
                if (arg.legend)
                        printf("%s%-20s %-24s %-24s %7s %-20s %7s %s%s\n", ansi_bold(), "HOST", "RULE", "CLASSES",
                               "FOR", "ACTIONS", "FIRED", "LAST", ansi_normal());
                for (size_t i = 0; i < n; i++) {
                        _cleanup_free_ char *host = escape_string(rs[i].host);
                        json_object *rules = json_get_array(docs[i], API_K_RULES);

                        if (rs[i].exit != EXIT_OK) {
                                printf("%-20s %s\n", host ?: "?", rs[i].error ?: "no usable answer");
                                continue;
                        }
                        for (size_t k = 0; rules && k < json_object_array_length(rules); k++, rows++)
                                (void) print_rule(json_object_array_get_idx(rules, k), host ?: "?");
                }
                if (arg.legend) {
                        printf("\n%zu rule%s from %zu of %zu hosts.\n", rows, rows == 1 ? "" : "s", answered, n);
                        for (size_t i = 0; i < n; i++) {
                                _cleanup_free_ char *host = escape_string(rs[i].host);
                                json_object *budget = json_get_object(docs[i], API_K_BUDGET);

                                if (rs[i].exit == EXIT_OK)
                                        printf("Capture budget of %s: %llu of %llu used in the last minute.\n",
                                               host ?: "?", (unsigned long long) json_get_u64(budget, API_K_USED),
                                               (unsigned long long) json_get_u64(budget, API_K_MAX_PER_MINUTE));
                        }
                }
        }
        for (size_t i = 0; i < n; i++)
                json_object_put(docs[i]);
        free(docs);
        r = fanout_exit_status(rs, n);
        fanout_replies_free(rs, n);
        return r;
}

int verb_rules(int argc, char **argv) {
        if (arg.n_hosts > 1)
                return fanout_rules();
        _cleanup_(http_response_done) HttpResponse resp = {};
        _cleanup_(json_object_putp) json_object *doc = NULL;
        json_object *rules, *budget;
        size_t n;
        int r;

        r = daemon_get_json(API_ROUTE_RULES, 0, &resp, &doc);
        if (r != EXIT_OK)
                return r;
        rules = json_get_array(doc, API_K_RULES);
        budget = json_get_object(doc, API_K_BUDGET);
        n = rules ? json_object_array_length(rules) : 0;

        if (arg.format == RENDER_JSON) {
                r = daemon_print_body(&resp);
                return r != EXIT_OK ? r : n > 0 ? EXIT_OK : EXIT_NOT_FOUND;
        }
        if (n == 0) {
                log_error("stackwatchd has no rules loaded.");
                return EXIT_NOT_FOUND;
        }
        if (arg.legend)
                printf("%s%-24s %-24s %7s %-20s %7s %s%s\n", ansi_bold(), "RULE", "CLASSES", "FOR", "ACTIONS", "FIRED",
                       "LAST", ansi_normal());
        for (size_t i = 0; i < n; i++)
                if (print_rule(json_object_array_get_idx(rules, i), NULL) < 0)
                        return EXIT_FAIL;
        if (arg.legend)
                printf("\n%zu rule%s. Capture budget: %llu of %llu used in the last minute.\n", n, n == 1 ? "" : "s",
                       (unsigned long long) json_get_u64(budget, API_K_USED),
                       (unsigned long long) json_get_u64(budget, API_K_MAX_PER_MINUTE));
        return EXIT_OK;
}
