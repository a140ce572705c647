/* stackctl-archive.c: "stackctl list" and "stackctl show": the snapshot archive, read directly, daemon or not. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "archive.h"
#include "escape.h"
#include "log.h"
#include "parse-util.h"
#include "snapshot-json.h"
#include "snapshot-text.h"
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

static bool matches(const ArchiveSummary *s) {
        if (arg.filter_pid > 0 && s->pid != arg.filter_pid)
                return false;
        if (arg.filter_rule && !streq(s->rule, arg.filter_rule))
                return false;
        if (arg.since_usec > 0 && s->timestamp_usec < arg.since_usec)
                return false;
        return true;
}

int verb_list(int argc, char **argv) {
        _cleanup_(archive_freep) Archive *a = NULL;
        ArchiveSummary *sums = NULL;
        size_t n = 0, skipped = 0, shown = 0;
        json_object *arr = NULL;
        int r;

        r = open_archive(&a);
        if (r != EXIT_OK)
                return r;
        r = archive_list(a, &sums, &n, &skipped);
        if (r < 0) {
                log_error_errno(r, "Failed to list %s: %m", arg.archive_dir);
                return EXIT_FAIL;
        }
        if (skipped > 0)
                log_warning("Skipped %zu unreadable file(s) in %s.", skipped, arg.archive_dir);
        if (arg.format == OUTPUT_JSON)
                arr = json_object_new_array();
        else if (n > 0)
                printf("%-19s %7s %-16s %-16s %-12s %s\n", "TIME", "PID", "COMM", "RULE", "CLASS", "ID");
        for (size_t i = 0; i < n; i++) {
                const ArchiveSummary *s = &sums[i];
                if (!matches(s))
                        continue;
                shown++;
                if (arr) {
                        json_object *o = json_object_new_object();
                        json_object_object_add(o, "id", json_object_new_string(s->id));
                        json_object_object_add(o, "timestamp_usec", json_object_new_uint64(s->timestamp_usec));
                        json_object_object_add(o, "pid", json_object_new_int(s->pid));
                        json_object_object_add(o, "comm", s->comm ? json_object_new_string(s->comm) : NULL);
                        json_object_object_add(o, "rule", s->rule ? json_object_new_string(s->rule) : NULL);
                        json_object_object_add(o, "class", s->klass ? json_object_new_string(s->klass) : NULL);
                        json_object_object_add(o, "size", json_object_new_uint64(s->size));
                        json_object_array_add(arr, o);
                } else {
                        _cleanup_free_ char *comm = escape_string(s->comm ?: "-"), *rule = escape_string(s->rule ?: "-"),
                                            *klass = escape_string(s->klass ?: "-");
                        char when[FORMAT_TIMESTAMP_MAX];

                        format_timestamp(when, sizeof when, s->timestamp_usec);
                        printf("%-19s %7d %-16s %-16s %-12s %s\n", when, s->pid, comm ?: "?", rule ?: "?",
                               klass ?: "?", s->id);
                }
        }
        if (arr) {
                puts(json_object_to_json_string_ext(arr, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
                json_object_put(arr);
        }
        archive_summaries_free(sums, n);
        if (shown == 0) {
                if (arg.format != OUTPUT_JSON)
                        log_error("No snapshots%s in %s.", arg.filter_pid || arg.filter_rule || arg.since_usec ?
                                  " match" : "", arg.archive_dir);
                return EXIT_NOT_FOUND;
        }
        return EXIT_OK;
}

int verb_show(int argc, char **argv) {
        _cleanup_(archive_freep) Archive *a = NULL;
        _cleanup_free_ char *json = NULL;
        const char *id = argc > 1 ? argv[1] : "latest", *err = NULL;
        size_t len = 0;
        int r;

        r = open_archive(&a);
        if (r != EXIT_OK)
                return r;
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
        /* A stored document is untrusted input: snapshot_render_stored() bounds its structure before json-c builds
         * a tree of it, and writes JSON out again through json-c, every control character escaped. */
        r = snapshot_render_stored(json, len,
                                   arg.format == OUTPUT_JSON     ? SNAPSHOT_RENDER_JSON
                                   : arg.format == OUTPUT_FOLDED ? SNAPSHOT_RENDER_FOLDED
                                                                 : SNAPSHOT_RENDER_TEXT,
                                   &(TextOptions) { .kernel = arg.capture.kernel, .modules = arg.modules }, stdout,
                                   &err);
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
