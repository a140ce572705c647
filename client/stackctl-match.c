/* stackctl-match.c: the matches of list, show and problems, and their -1 and -n window. */
#include <assert.h>
#include <errno.h>
#include <fnmatch.h>
#include <string.h>

#include "base/log.h"
#include "base/macro.h"
#include "base/parse-util.h"
#include "stackctl-args.h"
#include "stackctl-match.h"

static const struct {
        const char *prefix;
        MatchField field;
} match_fields[] = {
        { "PID=", MATCH_PID },   { "COMM=", MATCH_COMM }, { "EXE=", MATCH_EXE },
        { "UNIT=", MATCH_UNIT }, { "RULE=", MATCH_RULE }, { "CLASS=", MATCH_CLASS },
        { "SIGNATURE=", MATCH_SIGNATURE },
};

static int parse_one(const char *a, Match *ret) {
        const char *eq = strchr(a, '=');

        *ret = (Match) { .value = a };
        if (eq) {
                bool known = false;

                for (size_t i = 0; i < ELEMENTSOF(match_fields) && !known; i++)
                        if (startswith(a, match_fields[i].prefix)) {
                                *ret = (Match) { .field = match_fields[i].field,
                                                 .value = a + strlen(match_fields[i].prefix) };
                                known = true;
                        }
                if (!known || !ret->value[0]) {
                        log_error("Invalid match '%s': expected PID=, COMM=, EXE=, UNIT=, RULE=, CLASS= or "
                                  "SIGNATURE= with a value, a PID, a process name, an /EXE path or a signature.", a);
                        return -EINVAL;
                }
                if (ret->field == MATCH_PID && parse_pid(ret->value, &ret->pid) < 0) {
                        log_error("Invalid match '%s': not a process id.", a);
                        return -EINVAL;
                }
                if (ret->field == MATCH_SIGNATURE && !archive_signature_is_valid(ret->value)) {
                        log_error("Invalid match '%s': a signature is %d lowercase hex digits.", a,
                                  ARCHIVE_SIGNATURE_LENGTH);
                        return -EINVAL;
                }
                return 0;
        }
        /* A comm has at most 15 bytes: 16 hex digits are a signature, never a process name. */
        if (archive_signature_is_valid(a))
                ret->field = MATCH_SIGNATURE;
        else if (parse_pid(a, &ret->pid) >= 0)
                ret->field = MATCH_PID;
        else
                ret->field = strchr(a, '/') ? MATCH_EXE : MATCH_COMM;
        return 0;
}

int match_parse(int argc, char **argv, Match *ret, size_t *ret_n) {
        assert(argc >= 0);

        if ((size_t) argc > MATCHES_MAX) {
                log_error("At most %d matches.", MATCHES_MAX);
                return -EINVAL;
        }
        for (int i = 0; i < argc; i++)
                if (parse_one(argv[i], &ret[i]) < 0)
                        return -EINVAL;
        *ret_n = (size_t) argc;
        return 0;
}

static bool glob_matches(const char *glob, const char *s) {
        return s && fnmatch(glob, s, 0) == 0;
}

bool match_snapshot(const ArchiveSummary *s, const Match *m, size_t n) {
        if (arg.filter_pid > 0 && s->pid != arg.filter_pid)
                return false;
        if (arg.filter_rule && !streq_ptr(s->rule, arg.filter_rule))
                return false;
        if (arg.since_usec > 0 && s->timestamp_usec < arg.since_usec)
                return false;
        if (arg.until_usec > 0 && s->timestamp_usec >= arg.until_usec)
                return false;
        for (size_t i = 0; i < n; i++) {
                bool ok = false;

                switch (m[i].field) {
                case MATCH_PID:
                        ok = s->pid == m[i].pid;
                        break;
                case MATCH_COMM:
                        ok = glob_matches(m[i].value, s->comm);
                        break;
                case MATCH_EXE:
                        ok = glob_matches(m[i].value, s->exe);
                        break;
                case MATCH_UNIT:
                        ok = glob_matches(m[i].value, s->unit);
                        break;
                case MATCH_RULE:
                        ok = streq_ptr(s->rule, m[i].value);
                        break;
                case MATCH_CLASS:
                        ok = streq_ptr(s->klass, m[i].value);
                        break;
                case MATCH_SIGNATURE:
                        ok = streq_ptr(s->signature, m[i].value);
                        break;
                default:
                        assert(!"a match field without a test");
                }
                if (!ok)
                        return false;
        }
        return true;
}

static const char *field_prefix(MatchField f) {
        for (size_t i = 0; i < ELEMENTSOF(match_fields); i++)
                if (match_fields[i].field == f)
                        return match_fields[i].prefix;
        return "";
}

int match_check_problem(const Match *m, size_t n) {
        for (size_t i = 0; i < n; i++)
                if (m[i].field != MATCH_PID && m[i].field != MATCH_COMM && m[i].field != MATCH_SIGNATURE) {
                        /* A problem spans processes, rules and classes: it has none of one. */
                        log_error("Problems match a PID, a COMM or a SIGNATURE, not %s'%s'.",
                                  field_prefix(m[i].field), m[i].value);
                        return -EINVAL;
                }
        return 0;
}

static bool problem_has_pid(const Problem *p, pid_t pid) {
        for (size_t i = 0; i < p->n_processes; i++)
                if (p->processes[i].pid == pid)
                        return true;
        return false;
}

static bool problem_has_comm(const Problem *p, const char *glob) {
        for (size_t i = 0; i < p->n_processes; i++)
                if (glob_matches(glob, p->processes[i].comm))
                        return true;
        return false;
}

bool match_problem(const Problem *p, const Match *m, size_t n) {
        if (arg.filter_pid > 0 && !problem_has_pid(p, arg.filter_pid))
                return false;
        /* --since: seen since then; --until: first seen before then. */
        if (arg.since_usec > 0 && p->last_usec < arg.since_usec)
                return false;
        if (arg.until_usec > 0 && p->first_usec >= arg.until_usec)
                return false;
        for (size_t i = 0; i < n; i++) {
                bool ok = false;

                switch (m[i].field) {
                case MATCH_PID:
                        ok = problem_has_pid(p, m[i].pid);
                        break;
                case MATCH_COMM:
                        ok = problem_has_comm(p, m[i].value);
                        break;
                case MATCH_SIGNATURE:
                        ok = streq(p->signature, m[i].value);
                        break;
                default:
                        ok = false; /* refused by match_check_problem() */
                }
                if (!ok)
                        return false;
        }
        return true;
}

bool match_filtered(size_t n_matches) {
        return n_matches > 0 || arg.filter_pid || arg.filter_rule || arg.since_usec || arg.until_usec;
}

size_t match_first_kept(size_t n_items) {
        if (arg.one)
                return n_items > 0 ? n_items - 1 : 0;
        if (arg.count > 0 && arg.count < n_items)
                return n_items - arg.count;
        return 0;
}
