/* stackctl-source-journal.c: "stackctl list/show --journal": the snapshots that travelled in journal records (one record per
 * firing, MESSAGE_ID SW_MESSAGE_RULE_FIRED; with archive.journal: full the snapshot's archive file rides along in
 * STACKWATCH_SNAPSHOT_FILE), read on any machine as coredumpctl reads cores: the local journal, -D DIR, --file GLOB,
 * a central host's journal-remote files; and "problems --journal": every record's firing counted to its problem
 * (STACKWATCH_SIGNATURE), whatever host it came from. libsystemd is opened on first use, so that every other
 * stackctl run starts without it. */
#include <dlfcn.h>
#include <errno.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <systemd/sd-journal.h>

#include "base/json-util.h"
#include "base/log.h"
#include "base/parse-util.h"
#include "store/archive.h"
#include "store/problems.h"
#include "stackctl-args.h"
#include "stackctl-source.h"

#define LIBSYSTEMD_SONAME "libsystemd.so.0"
/* The firing record's MESSAGE_ID (daemon/journal.h, SW_MESSAGE_RULE_FIRED). */
#define FIRED_MESSAGE_ID "5b6a1e30c8f84d5a9f8c1e2d7a4b3c01"

static void *sd_dl;
static typeof(sd_journal_open) *sym_sd_journal_open;
static typeof(sd_journal_open_directory) *sym_sd_journal_open_directory;
static typeof(sd_journal_open_files) *sym_sd_journal_open_files;
static typeof(sd_journal_close) *sym_sd_journal_close;
static typeof(sd_journal_add_match) *sym_sd_journal_add_match;
static typeof(sd_journal_next) *sym_sd_journal_next;
static typeof(sd_journal_get_data) *sym_sd_journal_get_data;
static typeof(sd_journal_get_realtime_usec) *sym_sd_journal_get_realtime_usec;
static typeof(sd_journal_set_data_threshold) *sym_sd_journal_set_data_threshold;

#define DLSYM(dl, name) (sym_##name = (typeof(sym_##name)) dlsym(dl, #name))

static int dlopen_journal(void) {
        void *dl;

        if (sd_dl)
                return 0;
        dl = dlopen(LIBSYSTEMD_SONAME, RTLD_NOW | RTLD_LOCAL);
        if (!dl)
                return log_error_errno(SYNTHETIC_ERRNO(EOPNOTSUPP),
                                       "Reading the journal needs libsystemd (apt-get install libsystemd0): %s",
                                       dlerror());
        if (!DLSYM(dl, sd_journal_open) || !DLSYM(dl, sd_journal_open_directory) ||
            !DLSYM(dl, sd_journal_open_files) || !DLSYM(dl, sd_journal_close) || !DLSYM(dl, sd_journal_add_match) ||
            !DLSYM(dl, sd_journal_next) || !DLSYM(dl, sd_journal_get_data) ||
            !DLSYM(dl, sd_journal_get_realtime_usec) || !DLSYM(dl, sd_journal_set_data_threshold)) {
                log_error("%s lacks a function stackctl needs: %s", LIBSYSTEMD_SONAME, dlerror());
                dlclose(dl);
                return -EOPNOTSUPP;
        }
        sd_dl = dl;
        return 0;
}

static void journal_closep(sd_journal **j) {
        if (*j)
                sym_sd_journal_close(*j);
}

/* The journals the options name: -D DIR, --file GLOB, or this machine's (all machines' with --merge). */
static int journal_open(sd_journal **ret) {
        int r;

        r = dlopen_journal();
        if (r < 0)
                return EXIT_FAIL;
        if (arg.journal_dir)
                r = sym_sd_journal_open_directory(ret, arg.journal_dir, 0);
        else if (arg.journal_files) {
                glob_t g = {};

                if (glob(arg.journal_files, 0, NULL, &g) != 0 || g.gl_pathc == 0) {
                        globfree(&g);
                        log_error("No journal files match '%s'.", arg.journal_files);
                        return EXIT_NOT_FOUND;
                }
                r = sym_sd_journal_open_files(ret, (const char **) g.gl_pathv, 0);
                globfree(&g);
        } else
                r = sym_sd_journal_open(ret, arg.merge ? 0 : SD_JOURNAL_LOCAL_ONLY);
        if (r == -EACCES || r == -EPERM) {
                log_error("Permission denied opening the journal (root, or the systemd-journal group).");
                return EXIT_PERMISSION;
        }
        if (r < 0) {
                log_error_errno(r, "Failed to open the journal: %m");
                return EXIT_FAIL;
        }
        return EXIT_OK;
}

/* Firing records only; of the hosts --host names, when it does (several: any of them); with ID, that snapshot. */
static int journal_add_matches(sd_journal *j, const char *id) {
        _cleanup_free_ char *idm = NULL;
        int r;

        r = sym_sd_journal_add_match(j, "MESSAGE_ID=" FIRED_MESSAGE_ID, 0);
        if (r >= 0 && id) {
                if (asprintf(&idm, "STACKWATCH_SNAPSHOT_ID=%s", id) < 0)
                        return -ENOMEM;
                r = sym_sd_journal_add_match(j, idm, 0);
        }
        for (size_t i = 0; r >= 0 && i < arg.n_hosts; i++) {
                _cleanup_free_ char *h = NULL;

                if (asprintf(&h, "_HOSTNAME=%s", arg.hosts[i].match_name) < 0)
                        return -ENOMEM;
                r = sym_sd_journal_add_match(j, h, 0);
        }
        return r;
}

/* The value of FIELD of the current entry, NUL-terminated (a copy), or NULL. */
static char *field(sd_journal *j, const char *name) {
        const void *data;
        size_t len, k = strlen(name);

        if (sym_sd_journal_get_data(j, name, &data, &len) < 0 || len <= k || ((const char *) data)[k] != '=')
                return NULL;
        return strndup((const char *) data + k + 1, len - k - 1);
}

/* The current entry as a list entry, from its fields (the record names the snapshot; the file is not read here):
 * 1, or 0 for a firing without a snapshot. */
static int entry_summary(sd_journal *j, SnapshotEntry *ret) {
        _cleanup_free_ char *pid = NULL, *size = NULL, *truncated = NULL;
        const void *data;
        size_t len;
        uint64_t t = 0;
        bool has_file;
        int p = 0;

        *ret = (SnapshotEntry) {};
        ret->s.id = field(j, "STACKWATCH_SNAPSHOT_ID");
        if (!ret->s.id)
                return 0; /* a firing without a snapshot: nothing to show */
        pid = field(j, "STACKWATCH_PID");
        if (pid)
                (void) parse_pid(pid, &p);
        (void) sym_sd_journal_get_realtime_usec(j, &t);
        ret->s.pid = p;
        ret->s.timestamp_usec = t;
        ret->s.comm = field(j, "STACKWATCH_COMM");
        ret->s.exe = field(j, "STACKWATCH_EXE");
        ret->s.unit = field(j, "STACKWATCH_UNIT");
        ret->s.rule = field(j, "STACKWATCH_RULE");
        ret->s.klass = field(j, "STACKWATCH_CLASS");
        ret->host = field(j, "_HOSTNAME");
        /* The problem it shows: list SIGNATURE matches it. A key not of our form is none. */
        ret->s.signature = field(j, "STACKWATCH_SIGNATURE");
        if (ret->s.signature && !archive_signature_is_valid(ret->s.signature))
                ret->s.signature = mfree(ret->s.signature);
        ret->s.title = ret->s.signature ? field(j, "STACKWATCH_TITLE") : NULL;
        size = field(j, "STACKWATCH_SNAPSHOT_SIZE");
        if (size)
                (void) safe_atou64(size, &ret->s.file_size);
        /* Only whether the file is there: with the data threshold at its default, this reads at most 64 KiB. */
        has_file = sym_sd_journal_get_data(j, "STACKWATCH_SNAPSHOT_FILE", &data, &len) >= 0;
        truncated = field(j, "STACKWATCH_SNAPSHOT_TRUNCATED");
        /* list --json: whether show can print it whole from here, and whether the daemon left it out for its size
         * (archive.journal: full, over archive.journal_max_size). */
        ret->extra = json_object_new_object();
        if (ret->extra) {
                json_object_object_add(ret->extra, "in_journal", json_object_new_boolean(has_file));
                json_object_object_add(ret->extra, "truncated", json_object_new_boolean(streq_ptr(truncated, "1")));
        }
        return 1;
}

static void entry_done(SnapshotEntry *e) {
        archive_summary_done(&e->s);
        free(e->host);
        json_object_put(e->extra);
        *e = (SnapshotEntry) {};
}

static bool journal_wanted(void) {
        return arg.journal;
}

static const char *journal_where(void *state) {
        return "the journal";
}

static int journal_source_open(void **ret) {
        sd_journal *j = NULL;
        int r = journal_open(&j);

        if (r == EXIT_OK)
                *ret = j;
        return r;
}

static void journal_source_close(void *state) {
        sym_sd_journal_close(state);
}

static int journal_source_list(void *state, SnapshotEntry **ret, size_t *ret_n) {
        sd_journal *j = state;
        SnapshotEntry *all = NULL;
        size_t n = 0, n_alloc = 0;
        int r;

        if (journal_add_matches(j, NULL) < 0)
                return log_oom(), EXIT_FAIL;
        while ((r = sym_sd_journal_next(j)) > 0) {
                SnapshotEntry e;

                if (entry_summary(j, &e) <= 0)
                        continue;
                if (n == n_alloc) {
                        SnapshotEntry *nw = reallocarray(all, n_alloc = MAX(64U, n_alloc * 2), sizeof *all);
                        if (!nw) {
                                entry_done(&e);
                                snapshot_entries_free(all, n);
                                return log_oom(), EXIT_FAIL;
                        }
                        all = nw;
                }
                all[n++] = e;
        }
        if (r < 0) {
                snapshot_entries_free(all, n);
                log_error_errno(r, "Failed to read the journal: %m");
                return EXIT_FAIL;
        }
        *ret = all;
        *ret_n = n;
        return EXIT_OK;
}

/* Snapshot ID's record, or with "latest" the latest of all: its fields, into *RET. */
static int find_record(sd_journal *j, const char *id, SnapshotEntry *ret) {
        bool latest = streq(id, "latest"), found = false;
        int r;

        if (journal_add_matches(j, latest ? NULL : id) < 0)
                return log_oom(), EXIT_FAIL;
        /* Forward to the end: the last one is the latest. Each entry's fields are small but for the file, which is
         * read only for the record chosen. */
        while ((r = sym_sd_journal_next(j)) > 0) {
                SnapshotEntry e;

                if (entry_summary(j, &e) <= 0)
                        continue;
                if (found)
                        entry_done(ret);
                *ret = e;
                found = true;
        }
        if (r < 0) {
                if (found)
                        entry_done(ret);
                log_error_errno(r, "Failed to read the journal: %m");
                return EXIT_FAIL;
        }
        if (!found) {
                if (latest)
                        log_error("No snapshots in the journal.");
                else
                        log_error("No snapshot '%s' in the journal.", id);
                return EXIT_NOT_FOUND;
        }
        return EXIT_OK;
}

static int journal_source_fetch(void *state, const char *id, const char *host, SnapshotDocument *ret) {
        _cleanup_(journal_closep) sd_journal *j = NULL, *j2 = NULL;
        _cleanup_(entry_done) SnapshotEntry e = {};
        _cleanup_free_ char *truncated = NULL;
        const void *data;
        size_t dlen;
        int r;

        /* A journal of its own: a list before (show MATCH…) read the source's to its end, with other matches. */
        r = journal_open(&j);
        if (r != EXIT_OK)
                return r;
        r = find_record(j, id, &e);
        if (r != EXIT_OK)
                return r;
        /* The chosen record again, its file whole this time. */
        r = journal_open(&j2);
        if (r != EXIT_OK)
                return r;
        (void) sym_sd_journal_set_data_threshold(j2, 0);
        if (journal_add_matches(j2, e.s.id) < 0 || sym_sd_journal_next(j2) <= 0) {
                log_error("The journal record of snapshot '%s' went away.", e.s.id);
                return EXIT_FAIL;
        }
        r = sym_sd_journal_get_data(j2, "STACKWATCH_SNAPSHOT_FILE", &data, &dlen);
        if (r < 0 && streq_ptr(truncated = field(j2, "STACKWATCH_SNAPSHOT_TRUNCATED"), "1")) {
                /* archive.journal: full, but the daemon left the file out: it was over archive.journal_max_size. The
                 * record carries the snapshot's size, not the bound. */
                if (asprintf(&ret->why, "the snapshot (%llu bytes) was larger than archive.journal_max_size on %s: "
                             "the whole of it is in that host's archive", (unsigned long long) e.s.file_size,
                             e.host ?: "its host") < 0)
                        return log_oom(), EXIT_FAIL;
                ret->stack_text = field(j2, "STACKWATCH_STACK");
                if (arg.format != RENDER_TEXT || !ret->stack_text) {
                        log_error("Snapshot '%s' is not in the journal: %s.", e.s.id, ret->why);
                        return EXIT_NOT_FOUND;
                }
                ret->where = e.host ? strdup(e.host) : NULL;
                return EXIT_OK;
        }
        if (r < 0) {
                /* archive.journal: summary: the culprit's stack is here, the whole snapshot on its host. */
                ret->stack_text = field(j2, "STACKWATCH_STACK");
                if (arg.format != RENDER_TEXT || !ret->stack_text) {
                        log_error("Snapshot '%s' is not in the journal (archive.journal is not full on %s); "
                                  "it is in the archive of that host.", e.s.id, e.host ?: "its host");
                        return EXIT_NOT_FOUND;
                }
                ret->where = e.host ? strdup(e.host) : NULL;
                return EXIT_OK;
        }
        dlen -= strlen("STACKWATCH_SNAPSHOT_FILE=");
        r = archive_decode((const uint8_t *) data + strlen("STACKWATCH_SNAPSHOT_FILE="), dlen, &ret->json, &ret->len,
                           NULL);
        if (r < 0) {
                log_error("Snapshot '%s' in the journal is not a readable stackwatch snapshot file: %s", e.s.id,
                          r == -EFBIG ? "too large" : "damaged");
                return EXIT_FAIL;
        }
        return EXIT_OK;
}

/* The current entry, a firing record, as one firing of its problem merged into T: 1, or 0 for a record without a
 * signature (a daemon that did not record them). */
static int merge_firing(sd_journal *j, ProblemTable *t) {
        _cleanup_free_ char *sig = NULL, *title = NULL, *pid = NULL, *comm = NULL, *host = NULL, *id = NULL;
        ProblemProcess proc;
        uint64_t when = 0;
        Problem p;
        int n = 0;

        sig = field(j, "STACKWATCH_SIGNATURE");
        if (!sig || !archive_signature_is_valid(sig))
                return 0;
        title = field(j, "STACKWATCH_TITLE");
        /* OBJECT_PID is the firing's process (journald adds its fields from it); STACKWATCH_PID says the same. */
        pid = field(j, "OBJECT_PID") ?: field(j, "STACKWATCH_PID");
        if (pid)
                (void) parse_pid(pid, &n);
        comm = field(j, "STACKWATCH_COMM");
        host = field(j, "_HOSTNAME");
        id = field(j, "STACKWATCH_SNAPSHOT_ID");
        (void) sym_sd_journal_get_realtime_usec(j, &when);
        p = problem_of_firing(sig, title, when, n, comm, host, id);
        /* Records come from many machines: a pid is a process on its host, and the snapshot is in that host's
         * archive. */
        if (p.n_processes > 0) {
                proc = (ProblemProcess) { .pid = n, .comm = comm, .host = host };
                p.processes = &proc;
        }
        if (id) {
                /* A later firing of a problem still open names the problem's snapshot again: one snapshot. */
                const Problem *row = problem_table_find(t, sig);

                p.snapshots = !row || (!streq_ptr(row->latest_id, id) && !streq_ptr(row->first_id, id));
                p.first_host = p.latest_host = host;
        }
        return problem_table_merge(t, &p) < 0 ? -ENOMEM : 1;
}

static int journal_source_problems(void *state, ProblemTable *t) {
        sd_journal *j = state;
        int r;

        if (journal_add_matches(j, NULL) < 0)
                return log_oom(), EXIT_FAIL;
        while ((r = sym_sd_journal_next(j)) > 0)
                if (merge_firing(j, t) < 0)
                        return log_oom(), EXIT_FAIL;
        if (r < 0) {
                log_error_errno(r, "Failed to read the journal: %m");
                return EXIT_FAIL;
        }
        return EXIT_OK;
}

const SnapshotSourceType snapshot_source_journal = {
        .name = "journal",
        .wanted = journal_wanted,
        .where = journal_where,
        .open = journal_source_open,
        .close = journal_source_close,
        .list = journal_source_list,
        .fetch = journal_source_fetch,
        .problems = journal_source_problems,
        .host_column = true,
};
