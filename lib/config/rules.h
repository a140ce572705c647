/* rules.h: the Rule model (what a rule matches, what it does) and the matcher over one thread's facts. */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "model/thread-class.h"

/* The longest rule name, and the characters a name may use: [A-Za-z0-9_.-]. */
#define RULE_NAME_MAX 64
/* The /proc state letters a rule may filter on. */
#define RULE_STATES "RSDTtZ"

/* What a rule does when it fires, one bit per action; the names come from one table. */
typedef enum RuleActionType {
        RULE_ACTION_TYPE_SNAPSHOT,
        RULE_ACTION_TYPE_LOG,
        RULE_ACTION_TYPE_HOOK,
        _RULE_ACTION_TYPE_MAX,
        _RULE_ACTION_TYPE_INVALID = -EINVAL,
} RuleActionType;

typedef enum RuleAction {
        RULE_ACTION_SNAPSHOT = 1 << RULE_ACTION_TYPE_SNAPSHOT,
        RULE_ACTION_LOG = 1 << RULE_ACTION_TYPE_LOG,
        RULE_ACTION_HOOK = 1 << RULE_ACTION_TYPE_HOOK,
} RuleAction;

/* "snapshot", "log", "hook". */
const char *rule_action_type_to_string(RuleActionType t);
RuleActionType rule_action_type_from_string(const char *s);

/* How urgent a firing is, for alerting (Alertmanager's severity label, the journal's PRIORITY): the rule's own
 * severity: key, else warning. */
typedef enum RuleSeverity {
        RULE_SEVERITY_WARNING,          /* first: the zero of a rule */
        RULE_SEVERITY_CRITICAL,
        RULE_SEVERITY_INFO,
        _RULE_SEVERITY_MAX,
        _RULE_SEVERITY_INVALID = -EINVAL,
} RuleSeverity;

/* "warning", "critical", "info". */
const char *rule_severity_to_string(RuleSeverity s);
RuleSeverity rule_severity_from_string(const char *s);

typedef struct Rule {
        char *name;
        char *file;                     /* where it was defined ("<built-in>" for the defaults) */
        unsigned line, column;          /* 1-based position of its name; 0 for built-in rules */

        unsigned classes;               /* bitmask of 1 << ThreadClass */
        uint64_t for_usec;              /* how long the class must have held */
        char *states;                   /* NULL = any, else the allowed state letters, e.g. "D" */
        char **comm, **exe, **unit, **cgroup, **wchan;  /* NULL = any, else fnmatch() globs, one must match */
        bool has_user;
        uid_t user;
        int64_t *syscalls;              /* NULL = any, else the syscall numbers one of which must be in progress */
        size_t n_syscalls, n_syscalls_allocated;
        double cpu_min;                 /* < 0: not set; else minimum CPU percent of one core */
        bool deadlock;                  /* only threads whose process is in a cross-process deadlock (wait-chain.h) */
        bool lock_holder;               /* only a thread holding a mutex other threads wait for, itself waiting on
                                         * no mutex: the head of a lock convoy */

        unsigned actions;               /* RuleAction bits */
        unsigned peers;                 /* wait-chain depth for snapshots */
        uint64_t cooldown_usec;         /* per (rule, process): how long after firing it stays quiet */
        uint64_t probe_usec;            /* syscall-spin: trace the thread's syscalls this long first (0: don't) */
        char **hook;                    /* argv of the hook action; NULL: the config's hooks.command */
        RuleSeverity severity;
} Rule;

/* The values a rule has when its file does not say otherwise. */
#define RULE_DEFAULT_COOLDOWN_USEC (10 * 60 * 1000000ULL)
#define RULE_DEFAULT_PEERS 1U
#define RULE_DEFAULT_ACTIONS ((unsigned) (RULE_ACTION_SNAPSHOT | RULE_ACTION_LOG))
#define RULE_DEFAULTS                                           \
        (Rule) {                                                \
                .cpu_min = -1,                                  \
                .actions = RULE_DEFAULT_ACTIONS,                \
                .peers = RULE_DEFAULT_PEERS,                    \
                .cooldown_usec = RULE_DEFAULT_COOLDOWN_USEC,    \
        }

/* Free everything a rule owns (not the Rule itself) and reset it to zero; safe on a half-built rule. */
void rule_done(Rule *r);
/* Whether S is 1..RULE_NAME_MAX characters of [A-Za-z0-9_.-]. */
bool rule_name_is_valid(const char *s);

/* The facts a rule is matched against: one thread, as the scanner and classifier see it now. */
typedef struct ThreadFacts {
        ThreadClass class;
        uint64_t class_usec;            /* how long the class has held */
        char state;                     /* /proc state letter, 0 when unknown */
        const char *comm, *exe, *unit, *cgroup, *wchan;  /* NULL when unknown */
        uid_t uid;                      /* (uid_t) -1 when unknown */
        int64_t syscall_nr;             /* -1 when not in a syscall (or unknown) */
        double cpu_percent;             /* NaN when unknown */
        bool deadlock;                  /* its process is in a deadlock; the caller decides it last and only for
                                         * rules that ask (it costs a wait-chain walk) */
        bool lock_holder;               /* it heads a lock convoy; likewise decided last */
} ThreadFacts;

/* Whether rule R matches a thread with facts F: every filter the rule sets must hold. A fact that is unknown
 * (NULL, 0, -1, NaN) never satisfies a filter that is set, and never fails one that is not. */
bool rule_matches(const Rule *r, const ThreadFacts *f);
