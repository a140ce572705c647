/* stackctl-archive.c: "stackctl list" and "stackctl show": the snapshot archive, read directly, daemon or not. */
#include <errno.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/escape.h"
#include "base/log.h"
#include "base/parse-util.h"
#include "capture/symbolize.h"
#include "model/snapshot-json.h"
#include "model/snapshot-text.h"
#include "store/archive.h"
#include "stackctl-format.h"
#include "stackctl.h"

static int open_archive(Archive **ret) {
        int r = archive_open(arg.archive_dir, ret);

        if (r == -EACCES || r == -EPERM) {
                log_error("Permission denied opening the archive %s.", arg.archive_dir);
                return EXIT_PERMISSION;
        }
        if (r < 0) {
                log_error_errno(r, "Failed to open the archive %s: %m", arg.archive_dir);
                return EXIT_FAIL;
        }
        return EXIT_OK;
}


static int parse_match(const char *a, Match *ret) {
        static const struct {
                const char *prefix;
                MatchField field;
        } fields[] = {
                { "PID=", MATCH_PID },   { "COMM=", MATCH_COMM }, { "EXE=", MATCH_EXE },
                { "UNIT=", MATCH_UNIT }, { "RULE=", MATCH_RULE }, { "CLASS=", MATCH_CLASS },
        };
        const char *eq = strchr(a, '=');

        *ret = (Match) { .value = a };
        if (eq) {
                bool known = false;

                for (size_t i = 0; i < ELEMENTSOF(fields) && !known; i++)
                        if (startswith(a, fields[i].prefix)) {
                                *ret = (Match) { .field = fields[i].field, .value = a + strlen(fields[i].prefix) };
                                known = true;
                        }
                if (!known || !ret->value[0]) {
                        log_error("Invalid match '%s': expected PID=, COMM=, EXE=, UNIT=, RULE= or CLASS= with a "
                                  "value, a PID, a process name or an /EXE path.", a);
                        return -EINVAL;
                }
                if (ret->field == MATCH_PID && parse_pid(ret->value, &ret->pid) < 0) {
                        log_error("Invalid match '%s': not a process id.", a);
                        return -EINVAL;
                }
                return 0;
        }
        if (parse_pid(a, &ret->pid) >= 0)
                ret->field = MATCH_PID;
        else
                ret->field = strchr(a, '/') ? MATCH_EXE : MATCH_COMM;
        return 0;
}

int parse_matches(int argc, char **argv, Match *ret, size_t *ret_n) {
        if ((size_t) argc > MATCHES_MAX) {
                log_error("At most %d matches.", MATCHES_MAX);
                return -EINVAL;
        }
        for (int i = 0; i < argc; i++)
                if (parse_match(argv[i], &ret[i]) < 0)
                        return -EINVAL;
        *ret_n = (size_t) argc;
        return 0;
}

static bool glob_matches(const char *glob, const char *s) {
        return s && fnmatch(glob, s, 0) == 0;
}

bool matches(const ArchiveSummary *s, const Match *m, size_t n) {
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
                }
                if (!ok)
                        return false;
        }
        return true;
}

bool filtered(size_t n_matches) {
        return n_matches > 0 || arg.filter_pid || arg.filter_rule || arg.since_usec || arg.until_usec;
}

/* The archive's snapshots that match ARGV, oldest first: *RET_SEL holds indexes into *RET_SUMS. */
static int select_snapshots(Archive *a, int argc, char **argv, ArchiveSummary **ret_sums, size_t *ret_n,
                            size_t **ret_sel, size_t *ret_n_sel, size_t *ret_n_matches) {
        Match m[MATCHES_MAX];
        ArchiveSummary *sums = NULL;
        size_t n = 0, skipped = 0, n_m = 0, k = 0, *sel;
        int r;

        if (parse_matches(argc, argv, m, &n_m) < 0)
                return EXIT_USAGE;
        r = archive_list(a, &sums, &n, &skipped);
        if (r < 0) {
                log_error_errno(r, "Failed to list %s: %m", arg.archive_dir);
                return EXIT_FAIL;
        }
        if (skipped > 0)
                log_warning("Skipped %zu unreadable file(s) in %s.", skipped, arg.archive_dir);
        sel = calloc(n + 1, sizeof *sel);
        if (!sel) {
                archive_summaries_free(sums, n);
                return log_oom(), EXIT_FAIL;
        }
        for (size_t i = 0; i < n; i++)
                if (matches(&sums[i], m, n_m))
                        sel[k++] = i;
        *ret_sums = sums;
        *ret_n = n;
        *ret_sel = sel;
        *ret_n_sel = k;
        *ret_n_matches = n_m;
        return EXIT_OK;
}

void print_summary(const ArchiveSummary *s, const char *host) {
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

void print_summary_header(bool host) {
        printf("%s%-19s ", ansi_bold(), "TIME");
        if (host)
                printf("%-16s ", "HOST");
        printf("%7s %-16s %-16s %-12s %s%s\n", "PID", "COMM", "RULE", "CLASS", "ID", ansi_normal());
}

int verb_list(int argc, char **argv) {
        if (arg.journal)
                return journal_list(argc, argv);
        _cleanup_(archive_freep) Archive *a = NULL;
        _cleanup_free_ size_t *sel = NULL;
        ArchiveSummary *sums = NULL;
        size_t n = 0, n_sel = 0, n_m = 0, first;
        json_object *arr = NULL;
        int r;

        r = open_archive(&a);
        if (r != EXIT_OK)
                return r;
        r = select_snapshots(a, argc - 1, argv + 1, &sums, &n, &sel, &n_sel, &n_m);
        if (r != EXIT_OK)
                return r;
        /* -1 and -n N: the latest ones, still listed oldest first unless --reverse. */
        first = arg.one ? (n_sel > 0 ? n_sel - 1 : 0) : arg.count > 0 && arg.count < n_sel ? n_sel - arg.count : 0;
        if (arg.format == OUTPUT_JSON)
                arr = json_object_new_array();
        else if (n_sel > first && arg.legend)
                print_summary_header(false);
        for (size_t j = first; j < n_sel; j++) {
                const ArchiveSummary *s = &sums[sel[arg.reverse ? n_sel - 1 - (j - first) : j]];

                if (arr)
                        json_object_array_add(arr, archive_summary_to_json(s));
                else
                        print_summary(s, NULL);
        }
        if (arr) {
                (void) json_print(arr);
                json_object_put(arr);
        }
        archive_summaries_free(sums, n);
        if (n_sel == 0) {
                if (arg.format != OUTPUT_JSON)
                        log_error("No snapshots%s in %s.", filtered(n_m) ? " match" : "", arg.archive_dir);
                return EXIT_NOT_FOUND;
        }
        return EXIT_OK;
}

/* show MATCH…: the id of the latest snapshot that satisfies them all, into *RET. */
static int pick_latest(Archive *a, int argc, char **argv, char **ret) {
        _cleanup_free_ size_t *sel = NULL;
        ArchiveSummary *sums = NULL;
        size_t n = 0, n_sel = 0, n_m = 0;
        int r;

        r = select_snapshots(a, argc, argv, &sums, &n, &sel, &n_sel, &n_m);
        if (r != EXIT_OK)
                return r;
        if (n_sel > 0)
                *ret = strdup(sums[sel[n_sel - 1]].id);
        archive_summaries_free(sums, n);
        if (n_sel == 0) {
                log_error("No snapshots match in %s.", arg.archive_dir);
                return EXIT_NOT_FOUND;
        }
        return *ret ? EXIT_OK : (log_oom(), EXIT_FAIL);
}

int verb_show(int argc, char **argv) {
        if (arg.journal)
                return journal_show(argc, argv);
        _cleanup_(archive_freep) Archive *a = NULL;
        _cleanup_free_ char *json = NULL, *picked = NULL;
        const char *id = "latest";
        size_t len = 0;
        int r;

        r = open_archive(&a);
        if (r != EXIT_OK)
                return r;
        if (argc == 2 && (streq(argv[1], "latest") || archive_id_is_valid(argv[1])))
                id = argv[1];
        else if (argc > 1 || filtered(0)) {
                r = pick_latest(a, argc - 1, argv + 1, &picked);
                if (r != EXIT_OK)
                        return r;
                id = picked;
        }
        r = archive_read(a, id, &json, &len, NULL);
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
        return show_document(json, len, id);
}

/* show --resymbolize: the document's frames resolved again with today's debuginfo, then printed; which pcs changed
 * goes to stderr. */
static int show_resymbolized(const char *json, size_t len, const char *id) {
        _cleanup_(symbolizer_freep) Symbolizer *sym = NULL;
        const char *why = NULL;
        int r;

        r = symbolizer_from_args(&sym);
        if (r != EXIT_OK)
                return r;
        fprintf(stderr, "Re-symbolizing %s with the debuginfo found today:\n", id);
        r = symbolizer_render_resymbolized(sym, json, len,
                                           arg.format == OUTPUT_JSON     ? SNAPSHOT_RENDER_JSON
                                           : arg.format == OUTPUT_FOLDED ? SNAPSHOT_RENDER_FOLDED
                                                                         : SNAPSHOT_RENDER_TEXT,
                                           &(TextOptions) { .kernel = arg.capture.kernel, .modules = arg.modules,
                                                            .raw_names = arg.no_demangle,
                                                            .json_flags = arg.json_flags },
                                           stdout, stderr, &why);
        if (r == -ENOMEM)
                return log_oom(), EXIT_FAIL;
        if (r < 0) {
                log_error("Snapshot '%s' is not a readable stackwatch snapshot: %s", id, why ?: strerror(-r));
                return EXIT_FAIL;
        }
        if (arg.format == OUTPUT_JSON)
                putchar('\n');
        symbolizer_done(sym);
        return EXIT_OK;
}

int show_document(const char *json, size_t len, const char *id) {
        const char *err = NULL;
        int r;

        if (arg.resymbolize)
                return show_resymbolized(json, len, id);

        /* A stored document is untrusted input: snapshot_render_stored() bounds its structure before json-c builds
         * a tree of it, and writes JSON out again through json-c, every control character escaped. */
        r = snapshot_render_stored(json, len,
                                   arg.format == OUTPUT_JSON     ? SNAPSHOT_RENDER_JSON
                                   : arg.format == OUTPUT_FOLDED ? SNAPSHOT_RENDER_FOLDED
                                                                 : SNAPSHOT_RENDER_TEXT,
                                   &(TextOptions) { .kernel = arg.capture.kernel, .modules = arg.modules,
                                                    .raw_names = arg.no_demangle, .json_flags = arg.json_flags },
                                   stdout, &err);
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
        if (arg.format == OUTPUT_JSON)
                putchar('\n');
        return EXIT_OK;
}

/* --since: "10m" (that long ago), "@EPOCH", or a local time "YYYY-MM-DD[ HH:MM[:SS]]". */
int parse_since(const char *s, uint64_t *ret) {
        static const struct {
                char unit;
                uint64_t usec;
        } units[] = { { 's', USEC_PER_SEC }, { 'm', 60 * USEC_PER_SEC }, { 'h', 3600 * USEC_PER_SEC },
                      { 'd', 86400 * USEC_PER_SEC } };
        static const char *const formats[] = { "%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M",
                                               "%Y-%m-%d" };
        struct timespec now;
        size_t len = strlen(s);
        uint64_t v;

        clock_gettime(CLOCK_REALTIME, &now);
        if (s[0] == '@')
                return safe_atou64(s + 1, &v) < 0 ? -EINVAL : (*ret = v * USEC_PER_SEC, 0);
        for (size_t i = 0; len > 1 && i < ELEMENTSOF(units); i++)
                if (s[len - 1] == units[i].unit) {
                        _cleanup_free_ char *num = strndup(s, len - 1);
                        uint64_t nowu = (uint64_t) now.tv_sec * USEC_PER_SEC;
                        if (!num || safe_atou64(num, &v) < 0 || v > nowu / units[i].usec)
                                return -EINVAL;
                        *ret = nowu - v * units[i].usec;
                        return 0;
                }
        for (size_t i = 0; i < ELEMENTSOF(formats); i++) {
                struct tm tm = { .tm_isdst = -1 };
                const char *end = strptime(s, formats[i], &tm);
                time_t t;
                if (!end || *end)
                        continue;
                t = mktime(&tm);
                if (t < 0)
                        return -EINVAL;
                *ret = (uint64_t) t * USEC_PER_SEC;
                return 0;
        }
        return -EINVAL;
}
