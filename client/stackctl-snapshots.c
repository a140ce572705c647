/* stackctl-snapshots.c: "stackctl list" and "stackctl show" over a snapshot source (stackctl-source.h): the
 * archive, read directly, daemon or not; journal records; a daemon's API. The list table and show's rendering are
 * here, once for every source; the matches and the -1 and -n window are stackctl-match.c's, the choice of source
 * stackctl-sources.c's. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/escape.h"
#include "base/json-util.h"
#include "base/log.h"
#include "render/snapshot-json.h"
#include "render/snapshot-text.h"
#include "store/archive.h"
#include "unwind/symbolize.h"
#include "stackctl-args.h"
#include "stackctl-dump.h"
#include "stackctl-format.h"
#include "stackctl-output.h"
#include "stackctl-match.h"
#include "stackctl-source.h"
#include "stackctl-sources.h"
#include "stackctl-verbs.h"

/* The source's snapshots that match ARGV, oldest first, into *RET (the rest are freed). */
static int select_snapshots(Source *src, int argc, char **argv, SnapshotEntry **ret, size_t *ret_n,
                            size_t *ret_n_matches) {
        Match m[MATCHES_MAX];
        SnapshotEntry *all = NULL;
        size_t n = 0, n_m = 0, k = 0;
        int r;

        if (match_parse(argc, argv, m, &n_m) < 0)
                return EXIT_USAGE;
        /* A source that could read only some of what it has (a host of several that did not answer) returns
         * that with its error: it is shown, and the error is the exit status. */
        r = src->type->list(src->state, &all, &n);
        if (r != EXIT_OK && !all)
                return r;
        for (size_t i = 0; i < n; i++) {
                if (!match_snapshot(&all[i].s, m, n_m)) {
                        archive_summary_done(&all[i].s);
                        free(all[i].host);
                        json_object_put(all[i].extra);
                        continue;
                }
                all[k++] = all[i];
        }
        *ret = all;
        *ret_n = k;
        *ret_n_matches = n_m;
        return r;
}

static void print_summary(const ArchiveSummary *s, const char *host) {
        _cleanup_free_ char *comm = escape_string(s->comm ?: "-"), *rule = escape_string(s->rule ?: "-"),
                            *klass = escape_string(s->klass ?: "-"), *h = host ? escape_string(host) : NULL;
        char when[FORMAT_TIMESTAMP_MAX];

        format_timestamp(when, sizeof when, s->timestamp_usec);
        printf("%-19s ", when);
        if (host)
                printf("%-16s ", h ?: "?");
        printf("%7d %-16s %-16s %s%-12s%s %s\n", s->pid, comm ?: "?", rule ?: "?", ansi_class(s->klass), klass ?: "?",
               ansi_normal(), s->id);
}

static void print_summary_header(bool host) {
        printf("%s%-19s ", ansi_bold(), "TIME");
        if (host)
                printf("%-16s ", "HOST");
        printf("%7s %-16s %-16s %-12s %s%s\n", "PID", "COMM", "RULE", "CLASS", "ID", ansi_normal());
}

/* show --resymbolize: the document's frames resolved again with today's debuginfo, then printed; which pcs changed
 * goes to stderr. */
static int show_resymbolized(const char *json, size_t len, const char *id) {
        _cleanup_(symbolizer_freep) Symbolizer *sym = NULL;
        RenderOptions o = render_options_from_args();
        const char *why = NULL;
        int r;

        r = symbolizer_from_args(&sym);
        if (r != EXIT_OK)
                return r;
        fprintf(stderr, "Re-symbolizing %s with the debuginfo found today:\n", id);
        r = symbolizer_render_resymbolized(sym, json, len, arg.format, &o, stdout, stderr, &why);
        if (r == -ENOMEM)
                return log_oom(), EXIT_FAIL;
        if (r < 0) {
                log_error("Snapshot '%s' is not a readable stackwatch snapshot: %s", id, why ?: strerror(-r));
                return EXIT_FAIL;
        }
        if (arg.format == RENDER_JSON)
                putchar('\n');
        symbolizer_done(sym);
        return EXIT_OK;
}

static int show_document(const char *json, size_t len, const char *id) {
        RenderOptions o = render_options_from_args();
        const char *err = NULL;
        int r;

        if (arg.resymbolize)
                return show_resymbolized(json, len, id);

        /* A stored document is untrusted input: snapshot_render_stored() bounds its structure before json-c builds
         * a tree of it, and writes JSON out again through json-c, every control character escaped. */
        r = snapshot_render_stored(json, len, arg.format, &o, stdout, &err);
        if (r == -ENOMEM)
                return log_oom(), EXIT_FAIL;
        if (r == -EBADMSG) {
                log_error("Snapshot '%s' is not a readable stackwatch snapshot: %s", id, err);
                return EXIT_FAIL;
        }
        if (r < 0) {
                log_error_errno(r, "Failed to write snapshot '%s': %m", id);
                return EXIT_FAIL;
        }
        if (arg.format == RENDER_JSON)
                putchar('\n');
        return EXIT_OK;
}

int verb_list(int argc, char **argv) {
        _cleanup_(source_closep) Source src = {};
        SnapshotEntry *sel = NULL;
        size_t n_sel = 0, n_m = 0, first;
        json_object *arr = NULL;
        bool host = false;
        int r;

        r = source_open(&src);
        if (r != EXIT_OK)
                return r;
        r = select_snapshots(&src, argc - 1, argv + 1, &sel, &n_sel, &n_m);
        if (r != EXIT_OK && !sel)
                return r;
        host = src.type->host_column;
        for (size_t i = 0; i < n_sel && !host; i++)
                host = sel[i].host != NULL;
        /* -1 and -n N: the latest ones, still listed oldest first unless --reverse. */
        first = match_first_kept(n_sel);
        if (arg.format == RENDER_JSON)
                arr = json_object_new_array();
        else if (n_sel > first && arg.legend)
                print_summary_header(host);
        for (size_t j = first; j < n_sel; j++) {
                const SnapshotEntry *e = &sel[arg.reverse ? n_sel - 1 - (j - first) : j];

                if (arr) {
                        json_object *o = archive_summary_to_json(&e->s);

                        if (o && host)
                                json_object_object_add(o, "host", json_new_string_or_null(e->host));
                        if (o && e->extra) {
                                json_object_object_foreach(e->extra, key, value)
                                        json_object_object_add(o, key, json_object_get(value));
                        }
                        json_object_array_add(arr, o);
                } else
                        print_summary(&e->s, host ? e->host ?: "-" : NULL);
        }
        if (arr) {
                (void) json_print(arr);
                json_object_put(arr);
        }
        snapshot_entries_free(sel, n_sel);
        if (r != EXIT_OK)
                return r;
        if (n_sel == 0) {
                if (arg.format != RENDER_JSON)
                        log_error("No snapshots%s in %s.", match_filtered(n_m) || arg.n_hosts ? " match" : "",
                                  src.type->where(src.state));
                return EXIT_NOT_FOUND;
        }
        return EXIT_OK;
}

/* show MATCH…: the latest snapshot that satisfies them all, into *RET_ID and *RET_HOST. */
static int pick_latest(Source *src, int argc, char **argv, char **ret_id, char **ret_host) {
        SnapshotEntry *sel = NULL;
        size_t n_sel = 0, n_m = 0;
        int r;

        r = select_snapshots(src, argc, argv, &sel, &n_sel, &n_m);
        if (r != EXIT_OK) {
                /* Not every host answered: the latest of those that did may not be the latest. */
                snapshot_entries_free(sel, n_sel);
                return r;
        }
        if (n_sel == 0) {
                snapshot_entries_free(sel, n_sel);
                log_error("No snapshots match in %s.", src->type->where(src->state));
                return EXIT_NOT_FOUND;
        }
        *ret_id = TAKE_PTR(sel[n_sel - 1].s.id);
        *ret_host = TAKE_PTR(sel[n_sel - 1].host);
        snapshot_entries_free(sel, n_sel);
        return EXIT_OK;
}

int verb_show(int argc, char **argv) {
        _cleanup_(source_closep) Source src = {};
        _cleanup_(snapshot_document_done) SnapshotDocument doc = {};
        _cleanup_free_ char *picked = NULL, *host = NULL;
        const char *id = "latest";
        int r;

        r = source_open(&src);
        if (r != EXIT_OK)
                return r;
        if (argc == 2 && (streq(argv[1], "latest") || archive_id_is_valid(argv[1])))
                id = argv[1];
        else if (argc > 1 || match_filtered(0)) {
                r = pick_latest(&src, argc - 1, argv + 1, &picked, &host);
                if (r != EXIT_OK)
                        return r;
                id = picked;
        }
        r = src.type->fetch(src.state, id, host, &doc);
        if (r != EXIT_OK)
                return r;
        if (!doc.json) {
                /* archive.journal: summary: the culprit's stack is here, the whole snapshot on its host. */
                printf("%s", doc.stack_text);
                if (doc.why)
                        log_warning("Only the culprit thread's stack is in the journal: %s.", doc.why);
                else
                        log_warning("Only the culprit thread's stack is in the journal (archive.journal: summary); "
                                    "the whole snapshot %s is in the archive of %s.", id, doc.where ?: "its host");
                return EXIT_OK;
        }
        return show_document(doc.json, doc.len, id);
}
