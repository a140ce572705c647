/* problems.h: problems, not snapshots. Every firing of a rule has the signature of what it caught
 * (render/signature.h); a problem is every firing of one signature, counted across time, processes and hosts, with
 * the snapshots of it the archive still has. One shape serves every source: a ledger line, a journal record, a
 * daemon's GET /problems row and a fan-out's merge are all a Problem, and problem_table_merge() adds one to a table.
 *
 * The ledger (PROBLEMS_LEDGER in the archive directory) is how an archive remembers firings it took no snapshot of
 * (a problem still open on its process counts, it is not captured again): one JSON object a line, appended per
 * firing; past PROBLEMS_LEDGER_MAX bytes it is rewritten as one line per problem (merged), the oldest problems left
 * out when even that is too long. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <json-c/json.h>

#include "store/archive.h"

#define PROBLEMS_LEDGER "problems.jsonl"
#define PROBLEMS_LEDGER_MAX (1024U * 1024U)
/* What one problem keeps at most: processes and hosts named, days counted (the newest). */
#define PROBLEM_PROCESSES_MAX 16U
#define PROBLEM_HOSTS_MAX 64U
#define PROBLEM_DAYS_MAX 400U

typedef struct ProblemProcess {
        pid_t pid;
        char *comm;
        char *host;             /* NULL: this host */
} ProblemProcess;

typedef struct ProblemDay {
        char day[11];           /* "2026-11-29", UTC */
        uint64_t count;
} ProblemDay;

typedef struct Problem {
        char signature[ARCHIVE_SIGNATURE_LENGTH + 1];
        char *title;            /* the newest firing's */
        uint64_t count;         /* firings */
        uint64_t first_usec, last_usec; /* CLOCK_REALTIME */
        bool open;              /* a daemon has it open now */
        char **hosts;           /* NULL-terminated, NULL: none named */
        ProblemProcess *processes;
        size_t n_processes;
        ProblemDay *days;       /* oldest first */
        size_t n_days;
        uint64_t snapshots;     /* the snapshots of it an archive has */
        char *first_id, *latest_id; /* the oldest and the newest of them; NULL: none */
        char *first_host, *latest_host; /* where they are, for a table merged from several hosts; NULL: here */
} Problem;

typedef struct ProblemTable {
        Problem *items;
        size_t n, n_allocated;
} ProblemTable;

void problem_done(Problem *p);
void problem_table_done(ProblemTable *t);
/* The row of SIGNATURE, NULL when T has none. */
Problem *problem_table_find(const ProblemTable *t, const char *signature);
/* Add P to T: a new row, or into the row of its signature (counts and days added, processes and hosts joined, the
 * first and latest snapshot and the title the newer ones). P is copied. -ENOMEM, -EINVAL for a bad signature. */
int problem_table_merge(ProblemTable *t, const Problem *p);
/* One firing as a Problem of count 1, for problem_table_merge() and the ledger; strings borrowed (do not
 * problem_done() it). */
Problem problem_of_firing(const char *signature, const char *title, uint64_t time_usec, pid_t pid, const char *comm,
                          const char *host, const char *snapshot_id);
/* The snapshots an archive has (archive_list()) counted into T: each row's snapshots, first_id and latest_id (those
 * the rows had before are dropped: a snapshot a firing named may have rotated out); a snapshot whose signature has
 * no row (the ledger lost it, or nothing wrote one) is a row of one firing. Snapshots
 * without a signature in their header are left out. */
int problem_table_add_snapshots(ProblemTable *t, const ArchiveSummary *list, size_t n);
/* Oldest first by last_usec, then by signature. */
void problem_table_sort(ProblemTable *t);

/* P as the API, stackctl problems --json and the ledger have it; NULL on OOM. */
json_object *problem_to_json(const Problem *p);
/* The other way; lenient about what is missing, -EBADMSG when O is not an object with a valid signature. */
int problem_from_json(json_object *o, Problem *ret);

/* Append P (a firing) to the ledger of the archive directory DIR_FD, compacting it past PROBLEMS_LEDGER_MAX. */
int problems_ledger_append(int dir_fd, const Problem *p);
/* Merge every line of the ledger into T; a missing ledger is an empty one, a line that does not parse is skipped
 * (counted in *RET_SKIPPED, optional). */
int problems_ledger_load(int dir_fd, ProblemTable *t, size_t *ret_skipped);
/* The same for the ledger's text BUF (NUL-terminated, changed in place): what the load and the fuzzer share. */
int problems_ledger_parse(char *buf, ProblemTable *t, size_t *ret_skipped);
