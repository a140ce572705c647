/* config.c: the Config model: compiled defaults, the built-in rules, the automatic poll interval. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc-util.h"
#include "base/macro.h"
#include "base/string-table.h"
#include "base/strv.h"
#include "config/config.h"

static const char *const config_journal_table[_CONFIG_JOURNAL_MAX] = {
        [CONFIG_JOURNAL_OFF] = "off",
        [CONFIG_JOURNAL_SUMMARY] = "summary",
        [CONFIG_JOURNAL_FULL] = "full",
};
DEFINE_STRING_TABLE_LOOKUP(config_journal, ConfigJournal);

static const char *const config_scan_source_table[_CONFIG_SCAN_SOURCE_MAX] = {
        [CONFIG_SCAN_AUTO] = "auto",
        [CONFIG_SCAN_BPF] = "bpf",
        [CONFIG_SCAN_PROC] = "proc",
};
DEFINE_STRING_TABLE_LOOKUP(config_scan_source, ConfigScanSource);

/* ---- the model and its defaults ---- */

Config *config_free(Config *c) {
        if (!c)
                return NULL;
        for (size_t i = 0; i < c->n_rules; i++)
                rule_done(&c->rules[i]);
        free(c->rules);
        free(c->archive_dir);
        free(c->http_socket);
        free(c->http_listen);
        free(c->http_token_file);
        free(c->http_read_token_file);
        free(c->http_tls_cert);
        free(c->http_tls_key);
        strv_free(c->hook_command);
        free(c->symbols_cache_dir);
        free(c->symbols_debuginfod);
        free(c);
        return NULL;
}

int config_new_empty(Config **ret) {
        _cleanup_(config_freep) Config *c = NULL;

        c = malloc(sizeof *c);
        if (!c)
                return -ENOMEM;
        *c = CONFIG_DEFAULTS;
        c->archive_dir = strdup(CONFIG_DEFAULT_ARCHIVE_DIR);
        c->http_socket = strdup(CONFIG_DEFAULT_HTTP_SOCKET);
        if (!c->archive_dir || !c->http_socket)
                return -ENOMEM;
        *ret = TAKE_PTR(c);
        return 0;
}

/* The built-in rules: what is certainly a hang, with no configuration at all, and nothing else: a healthy machine
 * raises nothing. "blocked" is only ever a wait something owes (D, or a parked wait owed.h judged), never an idle
 * terminal, event loop or runtime park, so these rules need no list of programs to leave alone. */
static const struct {
        const char *name;
        ThreadClass class;
        const char *states;
        uint64_t for_usec;
        RuleSeverity severity;
        bool deadlock;
} builtin_rules[] = {
        /* A task in D for 120 s is what the kernel's own hung-task detector reports. */
        { "hung-task", THREAD_CLASS_BLOCKED, "D", 120 * USEC_PER_SEC, RULE_SEVERITY_CRITICAL, false },
        /* Processes or threads that wait only on each other never wake: at once (the poll follows, at 1 s). */
        { "deadlock", THREAD_CLASS_BLOCKED, NULL, 10 * USEC_PER_SEC, RULE_SEVERITY_CRITICAL, true },
        /* A sleeping wait something owes (a mutex held, a stopped or stuck peer) for as long as hung-task waits. */
        { "blocked", THREAD_CLASS_BLOCKED, "S", 120 * USEC_PER_SEC, RULE_SEVERITY_CRITICAL, false },
        { "busy-loop", THREAD_CLASS_BUSY_LOOP, NULL, 60 * USEC_PER_SEC, RULE_SEVERITY_WARNING, false },
        { "syscall-spin", THREAD_CLASS_SYSCALL_SPIN, NULL, 60 * USEC_PER_SEC, RULE_SEVERITY_WARNING, false },
};

int config_add_builtin_rules(Config *c) {
        if (!GREEDY_REALLOC(c->rules, c->n_rules_allocated, c->n_rules + ELEMENTSOF(builtin_rules)))
                return -ENOMEM;
        for (size_t i = 0; i < ELEMENTSOF(builtin_rules); i++) {
                Rule *r = &c->rules[c->n_rules];

                *r = RULE_DEFAULTS;
                r->classes = 1U << builtin_rules[i].class;
                r->for_usec = builtin_rules[i].for_usec;
                r->severity = builtin_rules[i].severity;
                r->deadlock = builtin_rules[i].deadlock;
                r->name = strdup(builtin_rules[i].name);
                r->file = strdup("<built-in>");
                r->states = builtin_rules[i].states ? strdup(builtin_rules[i].states) : NULL;
                /* Counted before the checks, so config_free() releases a half-built rule. */
                c->n_rules++;
                if (!r->name || !r->file || (builtin_rules[i].states && !r->states))
                        return -ENOMEM;
        }
        return 0;
}

uint64_t config_poll_interval_auto(const Config *c) {
        uint64_t shortest = UINT64_MAX;

        if (c->n_rules == 0)
                return CONFIG_POLL_AUTO_MAX_USEC;
        for (size_t i = 0; i < c->n_rules; i++)
                shortest = MIN(shortest, c->rules[i].for_usec);
        shortest /= CONFIG_POLL_AUTO_DIVISOR;
        return MAX(MIN(shortest, CONFIG_POLL_AUTO_MAX_USEC), CONFIG_POLL_AUTO_MIN_USEC);
}

int config_new_default(Config **ret) {
        _cleanup_(config_freep) Config *c = NULL;
        int r;

        r = config_new_empty(&c);
        if (r < 0)
                return r;
        r = config_add_builtin_rules(c);
        if (r < 0)
                return r;
        c->poll_interval_usec = config_poll_interval_auto(c);
        *ret = TAKE_PTR(c);
        return 0;
}
