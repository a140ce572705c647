/* stackctl-source-archive.c: the snapshot archive (--archive DIR, /var/lib/stackwatch), read directly, daemon or
 * not: its snapshots, and its problems from its ledger (problems.jsonl) and its snapshots' headers. */
#include <errno.h>
#include <stdlib.h>

#include "base/log.h"
#include "store/archive.h"
#include "store/problems.h"
#include "stackctl-args.h"
#include "stackctl-source.h"

static bool archive_wanted(void) {
        return true;
}

static const char *archive_where(void *state) {
        return arg.archive_dir;
}

static int archive_source_open(void **ret) {
        Archive *a;
        int r = archive_open(arg.archive_dir, &a);

        if (r == -EACCES || r == -EPERM) {
                log_error("Permission denied opening the archive %s.", arg.archive_dir);
                return EXIT_PERMISSION;
        }
        if (r < 0) {
                log_error_errno(r, "Failed to open the archive %s: %m", arg.archive_dir);
                return EXIT_FAIL;
        }
        *ret = a;
        return EXIT_OK;
}

static void archive_source_close(void *state) {
        archive_free(state);
}

/* The archive's snapshots, oldest first, saying what could not be read: an exit code. */
static int list_archive(void *state, ArchiveSummary **ret, size_t *ret_n) {
        size_t skipped = 0;
        int r = archive_list(state, ret, ret_n, &skipped);

        if (r < 0) {
                log_error_errno(r, "Failed to list %s: %m", arg.archive_dir);
                return EXIT_FAIL;
        }
        if (skipped > 0)
                log_warning("Skipped %zu unreadable file(s) in %s.", skipped, arg.archive_dir);
        return EXIT_OK;
}

static int archive_source_list(void *state, SnapshotEntry **ret, size_t *ret_n) {
        ArchiveSummary *sums = NULL;
        SnapshotEntry *e;
        size_t n = 0;
        int r;

        r = list_archive(state, &sums, &n);
        if (r != EXIT_OK)
                return r;
        e = calloc(n + 1, sizeof *e);
        if (!e) {
                archive_summaries_free(sums, n);
                return log_oom(), EXIT_FAIL;
        }
        for (size_t i = 0; i < n; i++)
                e[i].s = sums[i]; /* moved: the summaries' strings are the entries' now */
        free(sums);
        *ret = e;
        *ret_n = n;
        return EXIT_OK;
}

static int archive_source_fetch(void *state, const char *id, const char *host, SnapshotDocument *ret) {
        int r = archive_read(state, id, &ret->json, &ret->len, NULL);

        if (r == -EINVAL) {
                log_error("Invalid snapshot id '%s'.", id);
                return EXIT_USAGE;
        }
        if (r == -ENOENT) {
                log_error("No snapshot '%s' in %s.", id, arg.archive_dir);
                return EXIT_NOT_FOUND;
        }
        if (r < 0) {
                log_error_errno(r, "Failed to read snapshot '%s': %m", id);
                return EXIT_FAIL;
        }
        return EXIT_OK;
}

/* The ledger (every firing, also those the archive took no snapshot of), then the snapshots the archive has: their
 * count, the first and the latest of each problem, and a row for a snapshot the ledger does not know. */
static int archive_source_problems(void *state, ProblemTable *t) {
        ArchiveSummary *sums = NULL;
        size_t n = 0, skipped = 0;
        int r;

        r = problems_ledger_load(archive_dir_fd(state), t, &skipped);
        if (r == -EACCES || r == -EPERM) {
                log_error("Permission denied reading %s/%s.", arg.archive_dir, PROBLEMS_LEDGER);
                return EXIT_PERMISSION;
        }
        if (r == -ENOMEM)
                return log_oom(), EXIT_FAIL;
        if (r < 0) {
                log_error_errno(r, "Failed to read %s/%s: %m", arg.archive_dir, PROBLEMS_LEDGER);
                return EXIT_FAIL;
        }
        if (skipped > 0)
                log_warning("Skipped %zu unreadable line(s) of %s/%s.", skipped, arg.archive_dir, PROBLEMS_LEDGER);
        r = list_archive(state, &sums, &n);
        if (r != EXIT_OK)
                return r;
        r = problem_table_add_snapshots(t, sums, n);
        archive_summaries_free(sums, n);
        if (r < 0)
                return log_oom(), EXIT_FAIL;
        return EXIT_OK;
}

const SnapshotSourceType snapshot_source_archive = {
        .name = "archive",
        .wanted = archive_wanted,
        .where = archive_where,
        .open = archive_source_open,
        .close = archive_source_close,
        .list = archive_source_list,
        .fetch = archive_source_fetch,
        .problems = archive_source_problems,
};
