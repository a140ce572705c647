/* stackctl-source.h: where "list", "show" and "problems" read. A source lists the snapshots it has, fetches one,
 * and counts the problems it knows of: the archive directory (stackctl-source-archive.c), the records of a journal
 * (stackctl-source-journal.c), or stackwatchd's API on one or several hosts (stackctl-source-daemon.c). Matching
 * (PID, COMM=, --since …), -1, -n, -r, the tables and show's rendering are written once, above the sources
 * (stackctl-match.c, stackctl-snapshots.c, stackctl-problems.c). A new source is one file with a
 * SnapshotSourceType, declared below and added to the table in stackctl-sources.c. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>

#include <json-c/json.h>

#include "store/archive.h"
#include "store/problems.h"

/* One snapshot as a list shows it. */
typedef struct SnapshotEntry {
        ArchiveSummary s;
        char *host;                     /* where it is, for a source that reads several hosts; NULL otherwise */
        json_object *extra;             /* keys the source adds to the entry in "list --json"; NULL: none */
} SnapshotEntry;

static inline void snapshot_entries_free(SnapshotEntry *e, size_t n) {
        for (size_t i = 0; e && i < n; i++) {
                archive_summary_done(&e[i].s);
                free(e[i].host);
                json_object_put(e[i].extra);
        }
        free(e);
}

/* One snapshot as show prints it: its document, or (a journal record written with archive.journal: summary)
 * only the culprit thread's stack as text, and where the whole document is. */
typedef struct SnapshotDocument {
        char *json;
        size_t len;
        char *stack_text;               /* set when json is not */
        char *where;                    /* with stack_text: the host whose archive holds the whole snapshot */
        char *why;                      /* with stack_text: why only the stack, when not archive.journal: summary */
} SnapshotDocument;

static inline void snapshot_document_done(SnapshotDocument *d) {
        free(d->json);
        free(d->stack_text);
        free(d->where);
        free(d->why);
        *d = (SnapshotDocument) {};
}

typedef struct SnapshotSourceType {
        const char *name;
        /* Whether the options ask for this source; the archive, the last one asked, always says yes. */
        bool (*wanted)(void);
        /* Where its snapshots are, for "No snapshots match in WHERE.": "/var/lib/stackwatch", "the journal". */
        const char *(*where)(void *state);
        /* Every function returns an exit code (EXIT_*), having logged why when it is not EXIT_OK. */
        int (*open)(void **ret_state);
        void (*close)(void *state);
        /* Every snapshot it has, oldest first. */
        int (*list)(void *state, SnapshotEntry **ret, size_t *ret_n);
        /* Snapshot ID (an id, or "latest": the newest of all), from HOST when a list entry named one (NULL
         * otherwise). */
        int (*fetch)(void *state, const char *id, const char *host, SnapshotDocument *ret);
        /* Every problem it knows of (store/problems.h), merged into T: every firing counted once, the hosts and
         * processes it was seen on, its latest snapshot. Like list, a source that could read only some of what it
         * has merges that and returns its error. */
        int (*problems)(void *state, ProblemTable *t);
        bool host_column;               /* list: a HOST column, even when no entry names its host */
} SnapshotSourceType;

extern const SnapshotSourceType snapshot_source_archive;
extern const SnapshotSourceType snapshot_source_journal;
extern const SnapshotSourceType snapshot_source_daemon;
