/* stackctl-journal.c: "stackctl list/show --journal": the snapshots that travelled in journal records (one record per
 * firing, MESSAGE_ID SW_MESSAGE_RULE_FIRED; with archive.journal: full the snapshot's archive file rides along in
 * STACKWATCH_SNAPSHOT_FILE), read on any machine as coredumpctl reads cores: the local journal, -D DIR, --file GLOB,
 * a central host's journal-remote files. libsystemd is opened on first use, so that every other stackctl run
 * starts without it. */
#include <dlfcn.h>
#include <errno.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <systemd/sd-journal.h>

#include "base/escape.h"
#include "base/log.h"
#include "base/parse-util.h"
#include "model/snapshot-text.h"
#include "store/archive.h"
#include "stackctl-format.h"
#include "stackctl.h"

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
        for (size_t i = 0; r >= 0 && i < arg.n_host_names; i++) {
                _cleanup_free_ char *h = NULL;

                if (asprintf(&h, "_HOSTNAME=%s", arg.host_names[i]) < 0)
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

typedef struct JournalSnapshot {
        ArchiveSummary s;
        char *host;
        bool has_file;                  /* the record carries the snapshot (archive.journal: full) */
} JournalSnapshot;

static void journal_snapshot_done(JournalSnapshot *js) {
        archive_summary_done(&js->s);
        free(js->host);
}

/* The current entry as a summary, from its fields (the record names the snapshot; the file is not read here). */
static int entry_summary(sd_journal *j, JournalSnapshot *ret) {
        _cleanup_free_ char *pid = NULL, *size = NULL;
        const void *data;
        size_t len;
        uint64_t t = 0;
        int p = 0;

        *ret = (JournalSnapshot) {};
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
        size = field(j, "STACKWATCH_SNAPSHOT_SIZE");
        if (size)
                (void) safe_atou64(size, &ret->s.file_size);
        /* Only whether the file is there: with the data threshold at its default, this reads at most 64 KiB. */
        ret->has_file = sym_sd_journal_get_data(j, "STACKWATCH_SNAPSHOT_FILE", &data, &len) >= 0;
        return 1;
}

int journal_list(int argc, char **argv) {
        _cleanup_(journal_closep) sd_journal *j = NULL;
        Match m[MATCHES_MAX];
        json_object *arr = NULL;
        JournalSnapshot *all = NULL;
        size_t n = 0, n_alloc = 0, n_m = 0, first;
        int r;

        if (parse_matches(argc - 1, argv + 1, m, &n_m) < 0)
                return EXIT_USAGE;
        r = journal_open(&j);
        if (r != EXIT_OK)
                return r;
        if (journal_add_matches(j, NULL) < 0)
                return log_oom(), EXIT_FAIL;
        while ((r = sym_sd_journal_next(j)) > 0) {
                JournalSnapshot js;

                if (entry_summary(j, &js) <= 0)
                        continue;
                if (!matches(&js.s, m, n_m)) {
                        journal_snapshot_done(&js);
                        continue;
                }
                if (n == n_alloc) {
                        JournalSnapshot *nw = reallocarray(all, n_alloc = MAX(64U, n_alloc * 2), sizeof *all);
                        if (!nw) {
                                journal_snapshot_done(&js);
                                r = -ENOMEM;
                                break;
                        }
                        all = nw;
                }
                all[n++] = js;
        }
        if (r < 0)
                log_error_errno(r, "Failed to read the journal: %m");
        first = arg.one ? (n > 0 ? n - 1 : 0) : arg.count > 0 && arg.count < n ? n - arg.count : 0;
        if (arg.format == OUTPUT_JSON)
                arr = json_object_new_array();
        else if (n > first && arg.legend)
                print_summary_header(true);
        for (size_t i = first; i < n; i++) {
                const JournalSnapshot *js = &all[arg.reverse ? n - 1 - (i - first) : i];

                if (arr) {
                        json_object *o = archive_summary_to_json(&js->s);
                        if (o) {
                                json_object_object_add(o, "host", json_new_string_or_null(js->host));
                                json_object_object_add(o, "in_journal", json_object_new_boolean(js->has_file));
                        }
                        json_object_array_add(arr, o);
                } else
                        print_summary(&js->s, js->host ?: "-");
        }
        if (arr) {
                (void) json_print(arr);
                json_object_put(arr);
        }
        for (size_t i = 0; i < n; i++)
                journal_snapshot_done(&all[i]);
        free(all);
        if (r < 0)
                return r == -ENOMEM ? EXIT_FAIL : EXIT_FAIL;
        if (n == 0) {
                if (arg.format != OUTPUT_JSON)
                        log_error("No snapshots%s in the journal.", filtered(n_m) || arg.n_host_names ? " match" : "");
                return EXIT_NOT_FOUND;
        }
        return EXIT_OK;
}

/* The record to show: snapshot ID, or the latest that satisfies the matches (or the latest of all). */
static int find_record(sd_journal *j, int argc, char **argv, JournalSnapshot *ret) {
        const char *id = argc == 2 && archive_id_is_valid(argv[1]) ? argv[1] : NULL;
        bool latest = argc == 2 && streq(argv[1], "latest");
        Match m[MATCHES_MAX];
        size_t n_m = 0;
        bool found = false;
        int r;

        if (!id && !latest && parse_matches(argc - 1, argv + 1, m, &n_m) < 0)
                return EXIT_USAGE;
        if (journal_add_matches(j, id) < 0)
                return log_oom(), EXIT_FAIL;
        /* Forward to the end: the last one that matches is the latest. Each entry's fields are small but for the
         * file, which is read only for the record chosen. */
        while ((r = sym_sd_journal_next(j)) > 0) {
                JournalSnapshot js;

                if (entry_summary(j, &js) <= 0)
                        continue;
                if (!id && !matches(&js.s, m, n_m)) {
                        journal_snapshot_done(&js);
                        continue;
                }
                if (found)
                        journal_snapshot_done(ret);
                *ret = js;
                found = true;
        }
        if (r < 0) {
                if (found)
                        journal_snapshot_done(ret);
                log_error_errno(r, "Failed to read the journal: %m");
                return EXIT_FAIL;
        }
        if (!found) {
                log_error(id ? "No snapshot '%s' in the journal." : "No snapshots%s in the journal.",
                          id ?: (n_m > 0 ? " match" : ""));
                return EXIT_NOT_FOUND;
        }
        return EXIT_OK;
}

int journal_show(int argc, char **argv) {
        _cleanup_(journal_closep) sd_journal *j = NULL, *j2 = NULL;
        _cleanup_free_ char *json = NULL, *stack = NULL;
        JournalSnapshot js = {};
        const void *data;
        size_t len = 0, dlen;
        int r;

        r = journal_open(&j);
        if (r != EXIT_OK)
                return r;
        r = find_record(j, argc, argv, &js);
        if (r != EXIT_OK)
                return r;
        /* The chosen record again, its file whole this time. */
        r = journal_open(&j2);
        if (r != EXIT_OK) {
                journal_snapshot_done(&js);
                return r;
        }
        (void) sym_sd_journal_set_data_threshold(j2, 0);
        if (journal_add_matches(j2, js.s.id) < 0 || sym_sd_journal_next(j2) <= 0) {
                journal_snapshot_done(&js);
                log_error("The journal record of snapshot '%s' went away.", js.s.id);
                return EXIT_FAIL;
        }
        r = sym_sd_journal_get_data(j2, "STACKWATCH_SNAPSHOT_FILE", &data, &dlen);
        if (r < 0) {
                /* archive.journal: summary: the culprit's stack is here, the whole snapshot on its host. */
                stack = field(j2, "STACKWATCH_STACK");
                if (arg.format != OUTPUT_TEXT || !stack) {
                        log_error("Snapshot '%s' is not in the journal (archive.journal is not full on %s); "
                                  "it is in the archive of that host.", js.s.id, js.host ?: "its host");
                        journal_snapshot_done(&js);
                        return EXIT_NOT_FOUND;
                }
                printf("%s", stack);
                log_warning("Only the culprit thread's stack is in the journal (archive.journal: summary); the "
                            "whole snapshot %s is in the archive of %s.", js.s.id, js.host ?: "its host");
                journal_snapshot_done(&js);
                return EXIT_OK;
        }
        dlen -= strlen("STACKWATCH_SNAPSHOT_FILE=");
        r = archive_decode((const uint8_t *) data + strlen("STACKWATCH_SNAPSHOT_FILE="), dlen, &json, &len, NULL);
        if (r < 0) {
                log_error("Snapshot '%s' in the journal is not a readable stackwatch snapshot file: %s", js.s.id,
                          r == -EFBIG ? "too large" : "damaged");
                journal_snapshot_done(&js);
                return EXIT_FAIL;
        }
        /* From here on, exactly what show does with an archive file. */
        r = show_document(json, len, js.s.id);
        journal_snapshot_done(&js);
        return r;
}
