/* stackctl-match.h: the matches list, show and problems take, as coredumpctl takes them ("1234", "nginx",
 * "/usr/sbin/nginx", FIELD=VALUE) or as a problem's signature, and the -1 and -n window over what matched. Pure:
 * the options in arg and the words of the command line, nothing read. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "store/archive.h"
#include "store/problems.h"

typedef enum MatchField {
        MATCH_PID,
        MATCH_COMM,
        MATCH_EXE,
        MATCH_UNIT,
        MATCH_RULE,
        MATCH_CLASS,
        MATCH_SIGNATURE,
        _MATCH_FIELD_MAX,
} MatchField;

typedef struct Match {
        MatchField field;
        const char *value;              /* a glob for COMM, EXE and UNIT; borrowed from the command line */
        pid_t pid;
} Match;

#define MATCHES_MAX 16

/* The matches ARGV[0..ARGC) into RET (MATCHES_MAX at most): a number is a PID, 16 hex digits a SIGNATURE, a word
 * with a slash an EXE, any other word a COMM; or FIELD=VALUE. -EINVAL, logged, for a bad one. */
int match_parse(int argc, char **argv, Match *ret, size_t *ret_n);
/* Whether snapshot S satisfies every match M[0..N) and --pid, --rule, --since and --until. */
bool match_snapshot(const ArchiveSummary *s, const Match *m, size_t n);
/* -EINVAL, logged, when a match of M[0..N) names what a problem does not have (EXE, UNIT, RULE, CLASS). */
int match_check_problem(const Match *m, size_t n);
/* Whether problem P satisfies every match M[0..N) (PID, COMM: one of its processes; SIGNATURE: its key), --pid,
 * --since (seen since) and --until (first seen before). */
bool match_problem(const Problem *p, const Match *m, size_t n);
/* Whether anything narrows what is listed (N_MATCHES matches, --pid, --rule, --since, --until): "No snapshots
 * match" rather than "No snapshots". */
bool match_filtered(size_t n_matches);
/* -1 and -n N over N_ITEMS matched, oldest first: the index of the first one kept (the latest ones are). */
size_t match_first_kept(size_t n_items);
