/* stackctl-rules.c: "stackctl rules": the rules stackwatchd runs, how often each fired, and the capture budget. */
#include <stdio.h>

#include "base/escape.h"
#include "base/json-util.h"
#include "base/log.h"
#include "serve/api.h"
#include "stackctl-args.h"
#include "stackctl-daemon.h"
#include "stackctl-format.h"
#include "stackctl-output.h"
#include "stackctl-verbs.h"

static int print_rule(json_object *rule) {
        _cleanup_free_ char *name = escape_string(json_get_string(rule, API_K_NAME) ?: "-"),
                            *classes = json_join_strings(json_get_array(rule, API_K_CLASSES)),
                            *actions = json_join_strings(json_get_array(rule, API_K_ACTIONS));
        uint64_t last = json_get_u64(rule, API_K_LAST_FIRED_USEC);
        char span[FORMAT_TIMESPAN_MAX], when[FORMAT_TIMESTAMP_MAX];

        if (!name || !classes || !actions)
                return log_oom();
        printf("%-24s %-24s %7s %-20s %7llu %s\n", name, classes,
               format_timespan(span, sizeof span, json_get_u64(rule, API_K_FOR_MS) * USEC_PER_MSEC), actions,
               (unsigned long long) json_get_u64(rule, API_K_FIRED),
               last > 0 ? format_timestamp(when, sizeof when, last) : "-");
        return 0;
}

int verb_rules(int argc, char **argv) {
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

        if (arg.format == OUTPUT_JSON) {
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
                if (print_rule(json_object_array_get_idx(rules, i)) < 0)
                        return EXIT_FAIL;
        if (arg.legend)
                printf("\n%zu rule%s. Capture budget: %llu of %llu used in the last minute.\n", n, n == 1 ? "" : "s",
                       (unsigned long long) json_get_u64(budget, API_K_USED),
                       (unsigned long long) json_get_u64(budget, API_K_MAX_PER_MINUTE));
        return EXIT_OK;
}
