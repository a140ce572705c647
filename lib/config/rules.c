/* rules.c: rule actions, rule lifetime and the matcher (every filter a rule sets must hold). */
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

#include "base/macro.h"
#include "base/string-table.h"
#include "base/strv.h"
#include "config/rules.h"

static const char *const rule_action_type_table[_RULE_ACTION_TYPE_MAX] = {
        [RULE_ACTION_TYPE_SNAPSHOT] = "snapshot",
        [RULE_ACTION_TYPE_LOG] = "log",
        [RULE_ACTION_TYPE_HOOK] = "hook",
};
DEFINE_STRING_TABLE_LOOKUP(rule_action_type, RuleActionType);

static const char *const rule_severity_table[_RULE_SEVERITY_MAX] = {
        [RULE_SEVERITY_WARNING] = "warning",
        [RULE_SEVERITY_CRITICAL] = "critical",
        [RULE_SEVERITY_INFO] = "info",
};
DEFINE_STRING_TABLE_LOOKUP(rule_severity, RuleSeverity);

void rule_done(Rule *r) {
        if (!r)
                return;
        free(r->name);
        free(r->file);
        free(r->states);
        strv_free(r->comm);
        strv_free(r->exe);
        strv_free(r->unit);
        strv_free(r->cgroup);
        strv_free(r->wchan);
        free(r->syscalls);
        strv_free(r->hook);
        *r = (Rule) {};
}

bool rule_name_is_valid(const char *s) {
        size_t n;

        if (!s)
                return false;
        n = strlen(s);
        if (n == 0 || n > RULE_NAME_MAX)
                return false;
        for (const char *c = s; *c; c++)
                if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
                      *c == '_' || *c == '.' || *c == '-'))
                        return false;
        return true;
}

/* An unset filter (NULL) lets everything through; a set one needs a known value that one glob matches. Globs
 * use fnmatch() without FNM_PATHNAME, so "*" also spans "/" (a cgroup glob covers the subtree). */
static bool globs_match(char *const *globs, const char *value) {
        if (!globs)
                return true;
        if (!value)
                return false;
        for (char *const *g = globs; *g; g++)
                if (fnmatch(*g, value, 0) == 0)
                        return true;
        return false;
}

static bool syscalls_match(const Rule *r, int64_t nr) {
        if (!r->syscalls)
                return true;
        if (nr < 0)
                return false;
        for (size_t i = 0; i < r->n_syscalls; i++)
                if (r->syscalls[i] == nr)
                        return true;
        return false;
}

bool rule_matches(const Rule *r, const ThreadFacts *f) {
        if (!r || !f)
                return false;

        /* Cheapest and most selective first: the class and how long it has held. */
        if (f->class < 0 || f->class >= _THREAD_CLASS_MAX || !(r->classes & (1U << f->class)))
                return false;
        if (f->class_usec < r->for_usec)
                return false;
        if (r->states && (f->state == 0 || !strchr(r->states, f->state)))
                return false;
        if (r->has_user && (f->uid == (uid_t) -1 || f->uid != r->user))
                return false;
        if (!syscalls_match(r, f->syscall_nr))
                return false;
        /* A NaN CPU figure compares false, so "unknown" fails a set minimum as it should. */
        if (r->cpu_min >= 0 && !(f->cpu_percent >= r->cpu_min))
                return false;
        if (r->deadlock && !f->deadlock)
                return false;
        if (r->lock_holder && !f->lock_holder)
                return false;

        return globs_match(r->comm, f->comm) && globs_match(r->wchan, f->wchan) && globs_match(r->exe, f->exe) &&
               globs_match(r->unit, f->unit) && globs_match(r->cgroup, f->cgroup);
}
