/* trigger.h: rules over classified threads → firings, with per-(rule, process) cooldowns and a global
 * captures-per-minute budget. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "config.h"
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

typedef struct Trigger {
        Cooldown *cooldowns;
        size_t n_cooldowns;
        uint64_t *captures;             /* CLOCK_MONOTONIC times of captures in the budget window */
        size_t n_captures;
        uint64_t budget_logged_usec;
        uint64_t budget_skipped;
        RuleStats *stats;
        size_t n_stats;
} Trigger;

/* Called for every (rule, process) that matched, outside its cooldown. CAPTURE says whether the budget allows a
 * snapshot now (when it does not, the firing still logs, and the rule may fire again once budget frees up). */
typedef void (*TriggerFire)(const Rule *rule, ThreadEntry *t, bool capture, void *userdata);

void trigger_done(Trigger *t);
/* Whether any rule may match a sleeping (S) thread as blocked or waiting: then quiet sleepers get deep reads. */
bool trigger_rules_need_sleepers(const Config *c);
/* The global captures-per-minute budget, shared by rules and live captures over HTTP: take one (false when spent),
 * how many were taken in the last minute, and how long until the next one frees up (0: available now). */
bool trigger_budget_take(Trigger *t, const Config *c, uint64_t now_usec);
unsigned trigger_budget_used(Trigger *t, uint64_t now_usec);
uint64_t trigger_budget_wait_usec(Trigger *t, const Config *c, uint64_t now_usec);
/* How often rule RULE fired and when last; NULL when it never fired. */
const RuleStats *trigger_rule_stats(const Trigger *t, const char *rule);
int trigger_evaluate(Trigger *t, const Config *c, Scanner *s, uint64_t now_usec, TriggerFire fire, void *userdata);
