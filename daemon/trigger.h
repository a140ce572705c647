/* trigger.h: rules over classified threads → firings, with per-(rule, process) cooldowns and a global
 * captures-per-minute budget. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "chain/wait-chain.h"
#include "config/config.h"
#include "capture-budget.h"
#include "scan.h"

#define TRIGGER_BUDGET_WINDOW_USEC (60 * USEC_PER_SEC)

typedef struct Cooldown {
        char *rule;
        pid_t pid;
        uint64_t starttime;
        uint64_t until_usec;
} Cooldown;

typedef struct RuleStats {
        char *rule;
        uint64_t fired;
        uint64_t last_fired_usec;       /* CLOCK_REALTIME, 0 never */
} RuleStats;

/* Deadlock rules walk wait chains: at most this many walks per poll, following at most this many hops (a longer
 * cycle is not seen). A walk's verdict holds while the waits it rests on in every process it read stay as they were
 * (Trigger.waits_key), up to the hold; without a key, for the recheck interval. */
#define TRIGGER_DEADLOCK_WALKS_PER_POLL 8U
#define TRIGGER_DEADLOCK_RECHECK_USEC (5 * USEC_PER_SEC)
#define TRIGGER_DEADLOCK_HOLD_USEC (60 * USEC_PER_SEC)
#define TRIGGER_DEADLOCK_DEPTH 4U
#define TRIGGER_DEADLOCK_CYCLE_MAX (WAIT_CHAIN_PEERS_MAX + 1U) /* a chain's processes */
#define TRIGGER_CONVOY_HEADS_MAX 8U

/* The last wait-chain walk from one process: whether it is in a deadlock, and with whom. */
typedef struct DeadlockCheck {
        pid_t pid;
        uint64_t starttime;
        uint64_t checked_usec;          /* CLOCK_MONOTONIC */
        bool deadlock;
        pid_t cycle[TRIGGER_DEADLOCK_CYCLE_MAX];
        unsigned n_cycle;
        pid_t lock_tid;                 /* a deadlock inside the process: a thread of the lock cycle, or waiting
                                         * on a mutex whose holder exited; the firing starts its chain there */
        pid_t convoy_heads[TRIGGER_CONVOY_HEADS_MAX];   /* threads holding a mutex others wait for, themselves
                                                         * waiting on none (lock_holder rules) */
        unsigned n_convoy_heads;
        pid_t chain[TRIGGER_DEADLOCK_CYCLE_MAX];        /* the processes the walk read, the walk's first first */
        uint64_t keys[TRIGGER_DEADLOCK_CYCLE_MAX];      /* what the verdict rests on in each, then (waits_key) */
        unsigned n_chain;                               /* 0: no keys, the check holds for the recheck interval */
} DeadlockCheck;

/* What a deadlock verdict rests on in process P, as one number (owed_waits_key()): the same number, the same
 * verdict. */
typedef uint64_t (*TriggerWaitsKey)(Scanner *s, ProcessEntry *p);

typedef struct Trigger {
        Cooldown *cooldowns;
        size_t n_cooldowns, n_cooldowns_allocated;
        CaptureBudget budget;           /* the rules' captures in the last minute (capture.max_per_minute) */
        uint64_t budget_logged_usec;
        uint64_t budget_skipped;
        uint64_t deferred;              /* firings put off to the next poll: no capture slot was free */
        RuleStats *stats;
        size_t n_stats, n_stats_allocated;
        DeadlockCheck *checks;
        size_t n_checks, n_checks_allocated;
        uint64_t deadlock_walks;        /* wait-chain walks done for deadlock rules, ever */
        uint64_t deadlock_walk_usec;    /* and the time they took */
        uint64_t lock_edges_found;      /* mutex waits those walks met whose holder they named */
        uint64_t lock_edges_unknown;    /* and whose holder is gone or cannot be told */
        TriggerWaitsKey waits_key;      /* NULL: a deadlock check holds for the recheck interval, whatever moved */
} Trigger;

/* Called for every (rule, process) that matched, outside its cooldown (or inside it, to re-open an alert: see
 * TriggerAlerting). CAPTURE says whether a snapshot is taken: false for a rule without the snapshot action, and for
 * a firing inside the cooldown. PEERS
 * is how deep the snapshot follows the wait chain: the rule's peers, or for a deadlock at least the cycle's length,
 * so that the snapshot shows the whole cycle. Returns 0 when it fired, or -EBUSY when a capture was due but no
 * capture slot is free: then the firing is deferred, as if it had not matched (no cooldown, no budget taken, not
 * counted as fired), and it is tried again on the next poll. */
typedef int (*TriggerFire)(const Rule *rule, ThreadEntry *t, unsigned peers, bool capture, void *userdata);
/* Whether the alert of RULE on process P (its hook's, kept until resolved) is still open. A rule with the hook
 * action whose thread qualifies again inside the cooldown, after its alert resolved, fires again without a
 * snapshot (CAPTURE false): the cooldown limits snapshots, not whether a hang that resumed is alerted. */
typedef bool (*TriggerAlerting)(const Rule *rule, const ProcessEntry *p, void *userdata);

void trigger_done(Trigger *t);
/* The rules' captures-per-minute budget (capture.max_per_minute; live captures over HTTP have their own, in
 * capture-budget.h): take one (false when spent), how many were taken in the last minute, and how long until the
 * next one frees up (0: available now). */
bool trigger_budget_take(Trigger *t, const Config *c, uint64_t now_usec);
unsigned trigger_budget_used(Trigger *t, uint64_t now_usec);
uint64_t trigger_budget_wait_usec(Trigger *t, const Config *c, uint64_t now_usec);
/* How often rule RULE fired and when last; NULL when it never fired. */
const RuleStats *trigger_rule_stats(const Trigger *t, const char *rule);
/* ALERTING may be NULL: then nothing fires inside a cooldown. */
int trigger_evaluate(Trigger *t, const Config *c, Scanner *s, uint64_t now_usec, TriggerFire fire,
                     TriggerAlerting alerting, void *userdata);
