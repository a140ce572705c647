/* test-archive.c: the snapshot archive on real files in temporary directories: write, list, read, vacuum, ENOSPC. */
#include "unit.h"
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

/* The module itself, for its static helpers and Archive's insides (the named-temp fallback), as chrony's tests do. */
#include "../../lib/store/archive.c"
#include "store/archive-vacuum.h"
#include "store/problems.h"

/* 2024-01-02T03:04:05.000006Z */
#define T0 1704164645000006ULL
#define SEC USEC_PER_SEC
#define HOUR (3600ULL * USEC_PER_SEC)

/* ---- helpers ---- */

static char *tmpdir_new(void) {
        const char *base = getenv("TMPDIR") ?: "/tmp";
        char *t = NULL;

        ck_assert_int_gt(asprintf(&t, "%s/test-archive-XXXXXX", base), 0);
        ck_assert_ptr_nonnull(mkdtemp(t));
        return t;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
        (void) st;
        (void) ftw;
        return flag == FTW_DP ? rmdir(path) : unlink(path);
}

/* Remove DIR and everything below it, then free the name. */
static void tmpdir_free(char *dir) {
        ck_assert_int_eq(nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS), 0);
        free(dir);
}

static char *path_join(const char *dir, const char *name) {
        char *p = NULL;

        ck_assert_int_gt(asprintf(&p, "%s/%s", dir, name), 0);
        return p;
}

static void file_put(const char *dir, const char *name, const void *data, size_t len) {
        _cleanup_free_ char *p = path_join(dir, name);
        _cleanup_close_ int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);

        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(write(fd, data, len), (ssize_t) len);
}

static bool file_exists(const char *dir, const char *name) {
        _cleanup_free_ char *p = path_join(dir, name);
        struct stat st;

        return lstat(p, &st) == 0;
}

/* Read a whole file into a malloc'd buffer. */
static size_t file_get(const char *path, uint8_t **ret) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        struct stat st;
        uint8_t *buf;

        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(fstat(fd, &st), 0);
        buf = malloc((size_t) st.st_size + 1);
        ck_assert_ptr_nonnull(buf);
        ck_assert_int_eq(loop_pread(fd, buf, (size_t) st.st_size, 0), st.st_size);
        *ret = buf;
        return (size_t) st.st_size;
}

/* How many entries of DIR start with PREFIX ("" for all but . and ..). */
static size_t count_entries(const char *dir, const char *prefix) {
        _cleanup_closedir_ DIR *d = opendir(dir);
        struct dirent *de;
        size_t n = 0;

        ck_assert_ptr_nonnull(d);
        while ((de = readdir(d)))
                if (!streq(de->d_name, ".") && !streq(de->d_name, "..") && startswith(de->d_name, prefix))
                        n++;
        return n;
}

static ArchiveSummary summary_at(uint64_t ts, int pid) {
        return (ArchiveSummary) {
                .timestamp_usec = ts,
                .pid = pid,
                .comm = (char *) "sleeper",
                .rule = (char *) "stuck-read",
                .klass = (char *) "blocked-io",
        };
}

/* A JSON document of about N bytes that compresses poorly (6 bits a character), made from SEED. */
static char *doc_new(size_t n, uint64_t seed) {
        static const char alphabet[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+-";
        const char *head = "{\"schema\":\"stackwatch.snapshot/1\",\"blob\":\"";
        size_t h = strlen(head);
        char *s;

        ck_assert_uint_gt(n, h + 3);
        s = malloc(n + 1);
        ck_assert_ptr_nonnull(s);
        memcpy(s, head, h);
        for (size_t i = h; i < n - 2; i++) {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                s[i] = alphabet[seed & 63];
        }
        memcpy(s + n - 2, "\"}", 3);
        return s;
}

/* Write DOC with a summary at TS for PID; returns the new id. */
static char *put(Archive *a, const char *doc, uint64_t ts, int pid) {
        ArchiveSummary s = summary_at(ts, pid);
        char *id = NULL;

        ck_assert_int_eq(archive_write(a, doc, strlen(doc), &s, NULL, NULL, &id), 0);
        ck_assert_ptr_nonnull(id);
        return id;
}

static void list(Archive *a, ArchiveSummary **ret, size_t *ret_n, size_t *ret_skipped) {
        ck_assert_int_eq(archive_list(a, ret, ret_n, ret_skipped), 0);
}

/* The path of the zstd program, or NULL. */
static char *find_zstd(void) {
        const char *path = getenv("PATH") ?: "/usr/bin:/bin";
        _cleanup_free_ char *copy = strdup(path);
        char *save = NULL;

        ck_assert_ptr_nonnull(copy);
        for (char *dir = strtok_r(copy, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
                char *p = path_join(dir, "zstd");
                if (access(p, X_OK) == 0)
                        return p;
                free(p);
        }
        return NULL;
}

/* ---- write, list, read ---- */

START_TEST(test_round_trip) {
        _cleanup_(archive_freep) Archive *a = NULL;
        _cleanup_free_ char *id = NULL, *json = NULL, *file = NULL;
        _cleanup_free_ uint8_t *raw = NULL;
        char *dir = tmpdir_new();
        /* A comm a process chose: an escape sequence, a quote, a newline, a byte that is not UTF-8. */
        const char *comm = "\x1b[2J\"x\n\xff";
        const char *doc = "{\"schema\":\"stackwatch.snapshot/1\",\"process\":{\"pid\":4242,\"comm\":\"a\\u001b\"}}";
        ArchiveSummary in = summary_at(T0, 4242), out = {}, *s = NULL;
        size_t n = 0, skipped = 99, len = 0, raw_len;
        mode_t old = umask(022);
        struct stat st;

        ck_assert_int_eq(archive_open(dir, &a), 0);
        in.comm = (char *) comm;
        ck_assert_int_eq(archive_write(a, doc, strlen(doc), &in, NULL, NULL, &id), 0);
        ck_assert_str_eq(id, "20240102T030405.000006Z-4242");

        list(a, &s, &n, &skipped);
        ck_assert_uint_eq(n, 1);
        ck_assert_uint_eq(skipped, 0);
        ck_assert_str_eq(s[0].id, id);
        ck_assert_uint_eq(s[0].timestamp_usec, T0);
        ck_assert_int_eq(s[0].pid, 4242);
        ck_assert_str_eq(s[0].comm, comm);
        ck_assert_str_eq(s[0].rule, "stuck-read");
        ck_assert_str_eq(s[0].klass, "blocked-io");
        ck_assert_uint_eq(s[0].size, strlen(doc));
        file = path_join(dir, "20240102T030405.000006Z-4242.json.zst");
        ck_assert_int_eq(stat(file, &st), 0);
        ck_assert_uint_eq(s[0].file_size, (uint64_t) st.st_size);
        ck_assert_uint_eq(st.st_mode & 07777, 0640);
        umask(old);
        archive_summaries_free(s, n);

        ck_assert_int_eq(archive_read(a, id, &json, &len, &out), 0);
        ck_assert_uint_eq(len, strlen(doc));
        ck_assert_mem_eq(json, doc, len);
        ck_assert_int_eq(json[len], '\0');
        ck_assert_str_eq(out.id, id);
        ck_assert_str_eq(out.comm, comm);
        ck_assert_uint_eq(out.size, len);
        archive_summary_done(&out);

        /* The layout: a skippable frame with the JSON summary first, then a zstd frame. */
        raw_len = file_get(file, &raw);
        ck_assert_uint_gt(raw_len, 8);
        ck_assert_uint_eq(get_le32(raw), 0x184D2A50U);
        ck_assert_uint_le(get_le32(raw + 4), 512);
        ck_assert_int_eq(raw[8], '{');
        ck_assert_uint_eq(get_le32(raw + 8 + get_le32(raw + 4)), 0xFD2FB528U); /* ZSTD_MAGICNUMBER */

        /* Optional out-parameters may be NULL. */
        free(json);
        json = NULL;
        ck_assert_int_eq(archive_read(a, id, &json, NULL, NULL), 0);
        ck_assert_str_eq(json, doc);
        tmpdir_free(dir);
}
END_TEST

/* A snapshot file carried elsewhere (the journal) as bytes: read whole, decoded to the same document, its header
 * naming its own id; a flipped byte or a cut is refused; a file over the bound is -EFBIG with its size. */
START_TEST(test_file_bytes_round_trip) {
        _cleanup_(archive_freep) Archive *a = NULL;
        _cleanup_free_ char *id = NULL, *json = NULL, *again = NULL;
        _cleanup_free_ uint8_t *raw = NULL;
        char *dir = tmpdir_new();
        const char *doc = "{\"schema\":\"stackwatch.snapshot/1\",\"process\":{\"pid\":4242}}";
        ArchiveSummary in = summary_at(T0, 4242), out = {};
        size_t size = 0, len = 0;

        ck_assert_int_eq(archive_open(dir, &a), 0);
        in.exe = (char *) "/usr/sbin/nginx";
        in.unit = (char *) "nginx.service";
        in.host = (char *) "db-7";
        ck_assert_int_eq(archive_write(a, doc, strlen(doc), &in, NULL, NULL, &id), 0);
        ck_assert_int_eq(archive_read_file(a, id, 16, &raw, &size), -EFBIG);
        ck_assert_uint_gt(size, 16);
        ck_assert_int_eq(archive_read_file(a, id, 1 << 20, &raw, &size), 0);
        ck_assert_int_eq(archive_decode(raw, size, &json, &len, &out), 0);
        ck_assert_str_eq(json, doc);
        ck_assert_uint_eq(len, strlen(doc));
        ck_assert_str_eq(out.id, id);
        ck_assert_str_eq(out.exe, "/usr/sbin/nginx");
        ck_assert_str_eq(out.unit, "nginx.service");
        ck_assert_str_eq(out.host, "db-7");
        ck_assert_uint_eq(out.file_size, size);
        archive_summary_done(&out);
        ck_assert_int_eq(archive_decode(raw, size - 1, &again, NULL, NULL), -EBADMSG);
        raw[size - 3] ^= 0x40;
        ck_assert_int_eq(archive_decode(raw, size, &again, NULL, NULL), -EBADMSG);
        ck_assert_int_eq(archive_decode(raw, 7, &again, NULL, NULL), -EBADMSG);
        ck_assert_int_eq(archive_read_file(a, "../x", 1 << 20, &raw, &size), -EINVAL);
        tmpdir_free(dir);
}
END_TEST

/* A snapshot whose firing the ledger has not counted yet (the daemon merges a firing when its capture job ends, the
 * file is listed from the moment it is written) is one firing of its problem, on the host its header names; a
 * counted one adds no firing, only its snapshot. */
START_TEST(test_problems_of_snapshots_name_their_host) {
        _cleanup_(archive_freep) Archive *a = NULL;
        _cleanup_(problem_table_done) ProblemTable t = {};
        _cleanup_free_ char *id1 = NULL, *id2 = NULL;
        const char *counted = "00000000000000aa", *fresh = "00000000000000bb";
        ArchiveSummary in = summary_at(T0, 4242), *s = NULL;
        char *dir = tmpdir_new();
        Problem *p;
        size_t n = 0;

        ck_assert_int_eq(archive_open(dir, &a), 0);
        in.host = (char *) "db-7";
        in.signature = (char *) counted;
        in.title = (char *) "sleeper blocked in read";
        ck_assert_int_eq(archive_write(a, "{}", 2, &in, NULL, NULL, &id1), 0);
        in.timestamp_usec = T0 + SEC;
        in.signature = (char *) fresh;
        ck_assert_int_eq(archive_write(a, "{}", 2, &in, NULL, NULL, &id2), 0);

        Problem f = problem_of_firing(counted, "sleeper blocked in read", T0, 4242, "sleeper", "db-7", id1);
        ck_assert_int_eq(problem_table_merge(&t, &f), 0);
        list(a, &s, &n, NULL);
        ck_assert_uint_eq(n, 2);
        ck_assert_int_eq(problem_table_add_snapshots(&t, s, n), 0);
        archive_summaries_free(s, n);

        ck_assert_uint_eq(t.n, 2);
        ck_assert_ptr_nonnull(p = problem_table_find(&t, counted));
        ck_assert_uint_eq(p->count, 1);
        ck_assert_uint_eq(p->snapshots, 1);
        ck_assert_str_eq(p->latest_id, id1);
        ck_assert_ptr_nonnull(p = problem_table_find(&t, fresh));
        ck_assert_uint_eq(p->count, 1);
        ck_assert_uint_eq(p->snapshots, 1);
        ck_assert_str_eq(p->latest_id, id2);
        ck_assert_ptr_nonnull(p->hosts);
        ck_assert_str_eq(p->hosts[0], "db-7");
        ck_assert_ptr_null(p->hosts[1]);
        tmpdir_free(dir);
}
END_TEST

START_TEST(test_null_summary_fields) {
        _cleanup_(archive_freep) Archive *a = NULL;
        _cleanup_free_ char *id = NULL;
        ArchiveSummary in = { .timestamp_usec = T0, .pid = 1 }, *s = NULL;
        char *dir = tmpdir_new();
        size_t n = 0;

        ck_assert_int_eq(archive_open(dir, &a), 0);
        ck_assert_int_eq(archive_write(a, "{}", 2, &in, NULL, NULL, &id), 0);
        list(a, &s, &n, NULL);
        ck_assert_uint_eq(n, 1);
        ck_assert_ptr_null(s[0].comm);
        ck_assert_ptr_null(s[0].rule);
        ck_assert_ptr_null(s[0].klass);
        archive_summaries_free(s, n);
        tmpdir_free(dir);
}
END_TEST

START_TEST(test_id_collision) {
        _cleanup_(archive_freep) Archive *a = NULL;
        char *dir = tmpdir_new(), *ids[4];
        ArchiveSummary *s = NULL;
        size_t n = 0;

        ck_assert_int_eq(archive_open(dir, &a), 0);
        for (size_t i = 0; i < ELEMENTSOF(ids); i++) {
                char doc[32];
                snprintf(doc, sizeof doc, "{\"n\":%zu}", i);
                ids[i] = put(a, doc, T0, 77);
        }
        ck_assert_str_eq(ids[0], "20240102T030405.000006Z-77");
        ck_assert_str_eq(ids[1], "20240102T030405.000006Z-77-2");
        ck_assert_str_eq(ids[2], "20240102T030405.000006Z-77-3");
        ck_assert_str_eq(ids[3], "20240102T030405.000006Z-77-4");
        list(a, &s, &n, NULL);
        ck_assert_uint_eq(n, 4);
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *json = NULL;
                char doc[32];

                ck_assert_str_eq(s[i].id, ids[i]);
                snprintf(doc, sizeof doc, "{\"n\":%zu}", i);
                ck_assert_int_eq(archive_read(a, ids[i], &json, NULL, NULL), 0);
                ck_assert_str_eq(json, doc);
                free(ids[i]);
        }
        archive_summaries_free(s, n);
        tmpdir_free(dir);
}
END_TEST

START_TEST(test_sort_by_time) {
        _cleanup_(archive_freep) Archive *a = NULL;
        /* Written out of order; pids that sort differently as strings and as numbers. */
        const uint64_t ts[] = { T0 + 5 * SEC, T0, T0 + 1, T0 + 400 * 24 * HOUR, T0 + 3 * SEC, T0 + 3 * SEC };
        const int pids[] = { 1, 9, 100, 5, 100, 99 };
        const char *want[] = {
                "20240102T030405.000006Z-9",   "20240102T030405.000007Z-100", "20240102T030408.000006Z-99",
                "20240102T030408.000006Z-100", "20240102T030410.000006Z-1",   "20250205T030405.000006Z-5",
        };
        char *dir = tmpdir_new();
        ArchiveSummary *s = NULL;
        size_t n = 0;

        ck_assert_int_eq(archive_open(dir, &a), 0);
        for (size_t i = 0; i < ELEMENTSOF(ts); i++)
                free(put(a, "{}", ts[i], pids[i]));
        list(a, &s, &n, NULL);
        ck_assert_uint_eq(n, ELEMENTSOF(want));
        for (size_t i = 0; i < n; i++) {
                ck_assert_str_eq(s[i].id, want[i]);
                if (i > 0)
                        ck_assert_uint_ge(s[i].timestamp_usec, s[i - 1].timestamp_usec);
        }
        archive_summaries_free(s, n);

        /* The comparison itself: time first, then pid and suffix as numbers. */
        ck_assert_int_lt(archive_id_compare("20240102T030405.000006Z-99", "20240102T030405.000006Z-100"), 0);
        ck_assert_int_lt(archive_id_compare("20240102T030405.000006Z-7-2", "20240102T030405.000006Z-7-10"), 0);
        ck_assert_int_lt(archive_id_compare("20240102T030405.000006Z-7", "20240102T030405.000006Z-7-2"), 0);
        ck_assert_int_gt(archive_id_compare("20240102T030405.000007Z-1", "20240102T030405.000006Z-7"), 0);
        ck_assert_int_eq(archive_id_compare("20240102T030405.000006Z-7-3", "20240102T030405.000006Z-7-3"), 0);
        tmpdir_free(dir);
}
END_TEST

START_TEST(test_latest) {
        _cleanup_(archive_freep) Archive *a = NULL;
        _cleanup_free_ char *json = NULL;
        ArchiveSummary s = {};
        char *dir = tmpdir_new();

        ck_assert_int_eq(archive_open(dir, &a), 0);
        ck_assert_int_eq(archive_read(a, "latest", &json, NULL, NULL), -ENOENT);
        ck_assert_int_eq(archive_read(a, "20240102T030405.000006Z-1", &json, NULL, NULL), -ENOENT);
        /* The newest by time, not the last written. */
        free(put(a, "{\"n\":1}", T0 + 10 * SEC, 1));
        free(put(a, "{\"n\":2}", T0 + 20 * SEC, 2));
        free(put(a, "{\"n\":3}", T0, 3));
        ck_assert_int_eq(archive_read(a, "latest", &json, NULL, &s), 0);
        ck_assert_str_eq(json, "{\"n\":2}");
        ck_assert_str_eq(s.id, "20240102T030425.000006Z-2");
        archive_summary_done(&s);
        ck_assert_ptr_null(s.id);
        tmpdir_free(dir);
}
END_TEST

/* ---- ids at the boundary ---- */

START_TEST(test_id_validation) {
        static const char *good[] = {
                "20240102T030405.000006Z-1",
                "20240102T030405.000006Z-4194304",
                "20240102T030405.000006Z-42-2",
                "20240102T030405.000006Z-42-100",
                "99991231T235959.999999Z-4194304-100", /* the longest: ARCHIVE_ID_MAX */
        };
        static const char *bad[] = {
                "",
                "latest",
                "20240102T030405.000006Z",
                "20240102T030405.000006Z-",
                "20240102T030405.000006Z-0",
                "20240102T030405.000006Z-042",
                "20240102T030405.000006Z-4194305",
                "20240102T030405.000006Z-12345678",
                "20240102T030405.000006Z-42-1",
                "20240102T030405.000006Z-42-02",
                "20240102T030405.000006Z-42-101",
                "20240102T030405.000006Z-42-",
                "20240102T030405.000006Z-42-2-2",
                "20240102T030405.000006Z-42.json.zst",
                "20240102T030405.000006Z-42/",
                "20240102T030405.000006Z-42/../x",
                "20240102 030405.000006Z-42",
                "2024010xT030405.000006Z-42",
                "20240102T030405,000006Z-42",
                "20240102T030405.000006-42",
                "20240102T030405.00006Z-42",
                "../20240102T030405.000006Z-42",
                "/20240102T030405.000006Z-42",
                " 20240102T030405.000006Z-42",
                "20240102T030405.000006Z-42 ",
                "20240102T030405.000006Z-+42",
        };

        for (size_t i = 0; i < ELEMENTSOF(good); i++)
                ck_assert_msg(archive_id_is_valid(good[i]), "%s", good[i]);
        ck_assert_uint_eq(strlen(good[4]), ARCHIVE_ID_MAX);
        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                ck_assert_msg(!archive_id_is_valid(bad[i]), "%s", bad[i]);
        ck_assert(!archive_id_is_valid(NULL));
}
END_TEST

START_TEST(test_hostile_ids) {
        _cleanup_(archive_freep) Archive *a = NULL, *inner = NULL;
        _cleanup_free_ char *id = NULL, *inner_dir = NULL, *evil = NULL, *src = NULL, *dst = NULL;
        char long_id[600], *dir = tmpdir_new();
        const char *hostile[] = {
                "../etc/passwd", "/abs", "", "x.json.zst/../", long_id, "/etc/passwd", "..", ".", "a/b",
                NULL, /* filled with "../<a real id>" below */
        };
        char *json = NULL;
        size_t len = 0;

        memset(long_id, '1', sizeof long_id - 1);
        long_id[sizeof long_id - 1] = '\0';
        /* A real snapshot one directory up from an archive: "../<id>" would find it if ids reached the file system. */
        ck_assert_int_eq(archive_open(dir, &a), 0);
        id = put(a, "{\"secret\":1}", T0, 5);
        inner_dir = path_join(dir, "inner");
        ck_assert_int_eq(archive_open(inner_dir, &inner), 0);
        ck_assert_int_gt(asprintf(&evil, "../%s", id), 0);
        hostile[ELEMENTSOF(hostile) - 1] = evil;

        for (size_t i = 0; i < ELEMENTSOF(hostile); i++) {
                ck_assert_msg(archive_read(inner, hostile[i], &json, &len, NULL) == -EINVAL, "%s", hostile[i]);
                ck_assert_ptr_null(json);
        }
        ck_assert_int_eq(archive_read(inner, NULL, &json, &len, NULL), -EINVAL);
        /* A valid id that is a symlink out of the archive is not followed. */
        src = path_join(dir, "20240102T030405.000006Z-5.json.zst");
        dst = path_join(inner_dir, "20240102T030405.000006Z-5.json.zst");
        ck_assert_int_eq(symlink(src, dst), 0);
        ck_assert_int_eq(archive_read(inner, id, &json, &len, NULL), -EBADMSG);
        ck_assert_ptr_null(json);
        tmpdir_free(dir);
}
END_TEST

/* ---- foreign and corrupt files ---- */

START_TEST(test_foreign_files) {
        _cleanup_(archive_freep) Archive *a = NULL;
        const ArchiveLimits everything = { .keep_free = UINT64_MAX };
        const char *foreign[] = {
                "README", "core", "x.json.zst", "20240102T030405.000006Z-42.json", "20240102T030405.000006Z-42.zst",
                ".20240102T030405.000006Z-42.json.zst", "20240102T030405.000006Z-42.json.zst~", ".tmp-foo",
        };
        char *dir = tmpdir_new(), *sub;
        ArchiveSummary *s = NULL;
        size_t n = 0, skipped = 99;

        ck_assert_int_eq(archive_open(dir, &a), 0);
        for (size_t i = 0; i < ELEMENTSOF(foreign); i++)
                file_put(dir, foreign[i], "hello", 5);
        sub = path_join(dir, "subdir");
        ck_assert_int_eq(mkdir(sub, 0700), 0);
        free(sub);
        free(put(a, "{}", T0, 1));

        list(a, &s, &n, &skipped);
        ck_assert_uint_eq(n, 1);
        ck_assert_uint_eq(skipped, 0);
        archive_summaries_free(s, n);
        /* The only snapshot is the newest, which a vacuum keeps; an older one goes, the foreign files stay. */
        ck_assert_int_eq(archive_vacuum(a, &everything, T0), 0);
        free(put(a, "{}", T0 + SEC, 2));
        ck_assert_int_eq(archive_vacuum(a, &everything, T0), 1);
        for (size_t i = 0; i < ELEMENTSOF(foreign); i++)
                ck_assert_msg(file_exists(dir, foreign[i]), "%s", foreign[i]);
        ck_assert(file_exists(dir, "subdir"));
        ck_assert_uint_eq(count_entries(dir, ""), ELEMENTSOF(foreign) + 2);
        tmpdir_free(dir);
}
END_TEST

/* Rewrite the header of the snapshot file NAME in DIR with PAYLOAD, keeping its zstd frame. */
static void header_replace(const char *dir, const char *name, const char *payload) {
        _cleanup_free_ char *p = path_join(dir, name);
        _cleanup_free_ uint8_t *raw = NULL, *out = NULL;
        size_t n = file_get(p, &raw), h = 8 + get_le32(raw + 4), k = strlen(payload);

        out = malloc(8 + k + n - h);
        ck_assert_ptr_nonnull(out);
        put_le32(out, ARCHIVE_HEADER_MAGIC);
        put_le32(out + 4, (uint32_t) k);
        memcpy(out + 8, payload, k);
        memcpy(out + 8 + k, raw + h, n - h);
        file_put(dir, name, out, 8 + k + n - h);
}

START_TEST(test_corrupt_files) {
        _cleanup_(archive_freep) Archive *a = NULL;
        _cleanup_free_ char *good = NULL, *tail_id = NULL, *p = NULL;
        _cleanup_free_ uint8_t *raw = NULL;
        const ArchiveLimits everything = { .keep_free = UINT64_MAX };
        /* Each name is ours; what is inside is not a header we wrote. */
        struct {
                const char *name;
                const char *data;
                size_t len;
        } junk[] = {
                { "20240101T000000.000000Z-1.json.zst", "", 0 },
                { "20240101T000000.000000Z-2.json.zst", "garbage", 7 },
                { "20240101T000000.000000Z-3.json.zst", "\x50\x2a\x4d\x18\xff\xff\x00\x00{", 9 }, /* huge length */
                { "20240101T000000.000000Z-4.json.zst", "\x50\x2a\x4d\x18\x10\x00\x00\x00{\"id\":", 14 }, /* short */
                { "20240101T000000.000000Z-5.json.zst", "\x28\xb5\x2f\xfd\x00\x00", 6 }, /* a bare zstd frame */
        };
        char *dir = tmpdir_new(), *json = NULL;
        ArchiveSummary *s = NULL;
        size_t n = 0, skipped = 0, raw_len;

        ck_assert_int_eq(archive_open(dir, &a), 0);
        for (size_t i = 0; i < ELEMENTSOF(junk); i++)
                file_put(dir, junk[i].name, junk[i].data, junk[i].len);
        /* Valid zstd behind headers that lie: another id, another pid, another time, another schema. */
        free(put(a, "{}", T0, 6));
        header_replace(dir, "20240102T030405.000006Z-6.json.zst",
                       "{\"schema\":\"stackwatch.archive/1\",\"id\":\"20240102T030405.000006Z-7\",\"timestamp_usec\":"
                       "1704164645000006,\"pid\":6,\"size\":2}");
        free(put(a, "{}", T0, 8));
        header_replace(dir, "20240102T030405.000006Z-8.json.zst",
                       "{\"schema\":\"stackwatch.archive/1\",\"id\":\"20240102T030405.000006Z-8\",\"timestamp_usec\":"
                       "1704164645000006,\"pid\":9,\"size\":2}");
        free(put(a, "{}", T0, 10));
        header_replace(dir, "20240102T030405.000006Z-10.json.zst",
                       "{\"schema\":\"stackwatch.archive/1\",\"id\":\"20240102T030405.000006Z-10\",\"timestamp_usec\":"
                       "1704164645000007,\"pid\":10,\"size\":2}");
        free(put(a, "{}", T0, 11));
        header_replace(dir, "20240102T030405.000006Z-11.json.zst",
                       "{\"schema\":\"stackwatch.archive/2\",\"id\":\"20240102T030405.000006Z-11\",\"timestamp_usec\":"
                       "1704164645000006,\"pid\":11,\"size\":2}");
        free(put(a, "{}", T0, 12));
        header_replace(dir, "20240102T030405.000006Z-12.json.zst",
                       "{\"schema\":\"stackwatch.archive/1\",\"id\":\"20240102T030405.000006Z-12\",\"timestamp_usec\":"
                       "-1,\"pid\":12,\"size\":2}");
        free(put(a, "{}", T0, 13));
        header_replace(dir, "20240102T030405.000006Z-13.json.zst",
                       "{\"schema\":\"stackwatch.archive/1\",\"id\":\"20240102T030405.000006Z-13\",\"timestamp_usec\":"
                       "1704164645000006,\"pid\":13,\"size\":2}{}");
        free(put(a, "{}", T0, 14));
        header_replace(dir, "20240102T030405.000006Z-14.json.zst",
                       "{\"schema\":\"stackwatch.archive/1\",\"id\":\"20240102T030405.000006Z-14\",\"timestamp_usec\":"
                       "1704164645000006,\"pid\":14,\"size\":2,\"comm\":5}");
        /* A symlink named like ours, to a valid snapshot. */
        p = path_join(dir, "20240102T030405.000006Z-15.json.zst");
        ck_assert_int_eq(symlink("20240102T030405.000006Z-99.json.zst", p), 0);
        /* A valid header whose document is cut short: listed (the header is fine), unreadable. */
        tail_id = put(a, "{\"tail\":\"cut short\"}", T0 + SEC, 16);
        free(p);
        p = path_join(dir, "20240102T030406.000006Z-16.json.zst");
        raw_len = file_get(p, &raw);
        ck_assert_int_eq(truncate(p, (off_t) raw_len - 3), 0);
        good = put(a, "{\"good\":true}", T0 + 2 * SEC, 99);

        list(a, &s, &n, &skipped);
        ck_assert_uint_eq(skipped, ELEMENTSOF(junk) + 7 + 1);
        ck_assert_uint_eq(n, 2);
        ck_assert_str_eq(s[0].id, tail_id);
        ck_assert_str_eq(s[1].id, good);
        archive_summaries_free(s, n);

        ck_assert_int_eq(archive_read(a, "20240101T000000.000000Z-2", &json, NULL, NULL), -EBADMSG);
        ck_assert_int_eq(archive_read(a, "20240102T030405.000006Z-6", &json, NULL, NULL), -EBADMSG);
        ck_assert_int_eq(archive_read(a, tail_id, &json, NULL, NULL), -EBADMSG);
        ck_assert_ptr_null(json);
        ck_assert_int_eq(archive_read(a, good, &json, NULL, NULL), 0);
        free(json);

        /* Vacuum deletes only what list() returned, but the newest; the damaged files stay for a human to look at.
         * Deleting the newest takes making room for a new one. */
        ck_assert_int_eq(archive_vacuum(a, &everything, T0), 1);
        ck_assert_int_eq(archive_vacuum_make_room(a, &everything, 1, T0), 1);
        ck_assert_uint_eq(count_entries(dir, ""), ELEMENTSOF(junk) + 7 + 1);
        for (size_t i = 0; i < ELEMENTSOF(junk); i++)
                ck_assert(file_exists(dir, junk[i].name));
        list(a, &s, &n, &skipped);
        ck_assert_uint_eq(n, 0);
        ck_assert_uint_eq(skipped, ELEMENTSOF(junk) + 7 + 1);
        archive_summaries_free(s, n);
        tmpdir_free(dir);
}
END_TEST

/* ---- vacuum ---- */

START_TEST(test_vacuum_max_snapshots) {
        _cleanup_(archive_freep) Archive *a = NULL;
        const ArchiveLimits l = { .max_snapshots = 2 };
        char *dir = tmpdir_new(), *ids[5];
        ArchiveSummary *s = NULL;
        size_t n = 0;

        ck_assert_int_eq(archive_open(dir, &a), 0);
        for (size_t i = 0; i < ELEMENTSOF(ids); i++)
                ids[i] = put(a, "{}", T0 + i * SEC, 1);
        ck_assert_int_eq(archive_vacuum(a, NULL, T0), 0);
        ck_assert_int_eq(archive_vacuum(a, &(ArchiveLimits) {}, T0), 0);
        ck_assert_int_eq(archive_vacuum(a, &l, T0), 3);
        ck_assert_int_eq(archive_vacuum(a, &l, T0), 0);
        list(a, &s, &n, NULL);
        ck_assert_uint_eq(n, 2);
        ck_assert_str_eq(s[0].id, ids[3]);
        ck_assert_str_eq(s[1].id, ids[4]);
        archive_summaries_free(s, n);
        for (size_t i = 0; i < ELEMENTSOF(ids); i++)
                free(ids[i]);
        tmpdir_free(dir);
}
END_TEST

START_TEST(test_vacuum_max_size) {
        _cleanup_(archive_freep) Archive *a = NULL;
        ArchiveSummary *s = NULL;
        char *dir = tmpdir_new();
        uint64_t keep;
        size_t n = 0;

        ck_assert_int_eq(archive_open(dir, &a), 0);
        for (size_t i = 0; i < 5; i++) {
                _cleanup_free_ char *doc = doc_new(2000 + 500 * i, i + 1);
                free(put(a, doc, T0 + i * SEC, 1));
        }
        list(a, &s, &n, NULL);
        ck_assert_uint_eq(n, 5);
        /* Room for exactly the two newest. */
        keep = s[3].file_size + s[4].file_size;
        archive_summaries_free(s, n);
        ck_assert_int_eq(archive_vacuum(a, &(ArchiveLimits) { .max_size = keep + 1 }, T0), 3);
        list(a, &s, &n, NULL);
        ck_assert_uint_eq(n, 2);
        ck_assert_uint_eq(s[0].timestamp_usec, T0 + 3 * SEC);
        ck_assert_uint_le(s[0].file_size + s[1].file_size, keep + 1);
        archive_summaries_free(s, n);
        ck_assert_int_eq(archive_vacuum(a, &(ArchiveLimits) { .max_size = keep - 1 }, T0), 1);
        tmpdir_free(dir);
}
END_TEST

START_TEST(test_vacuum_max_age) {
        _cleanup_(archive_freep) Archive *a = NULL;
        const uint64_t now = T0 + 100 * HOUR;
        const ArchiveLimits l = { .max_age_usec = 2 * HOUR };
        ArchiveSummary *s = NULL;
        char *dir = tmpdir_new();
        size_t n = 0;

        ck_assert_int_eq(archive_open(dir, &a), 0);
        free(put(a, "{}", now - 10 * HOUR, 1));
        free(put(a, "{}", now - 5 * HOUR, 2));
        free(put(a, "{}", now - 2 * HOUR - 1, 3));
        free(put(a, "{}", now - 2 * HOUR, 4)); /* exactly max_age: stays */
        free(put(a, "{}", now - 1 * HOUR, 5));
        free(put(a, "{}", now + 1 * HOUR, 6)); /* from the future (clock stepped back): stays */
        ck_assert_int_eq(archive_vacuum(a, &l, now), 3);
        list(a, &s, &n, NULL);
        ck_assert_uint_eq(n, 3);
        ck_assert_int_eq(s[0].pid, 4);
        ck_assert_int_eq(s[1].pid, 5);
        ck_assert_int_eq(s[2].pid, 6);
        archive_summaries_free(s, n);
        tmpdir_free(dir);
}
END_TEST

START_TEST(test_vacuum_keep_free) {
        _cleanup_(archive_freep) Archive *a = NULL;
        ArchiveSummary *s = NULL;
        char *dir = tmpdir_new();
        size_t n = 0;

        ck_assert_int_eq(archive_open(dir, &a), 0);
        for (size_t i = 0; i < 4; i++)
                free(put(a, "{}", T0 + i * SEC, 1));
        file_put(dir, "README", "x", 1);
        /* A small keep_free is met already; no file system has UINT64_MAX bytes free, so everything of ours goes
         * but the newest snapshot. */
        ck_assert_int_eq(archive_vacuum(a, &(ArchiveLimits) { .keep_free = 1 }, T0), 0);
        ck_assert_int_eq(archive_vacuum(a, &(ArchiveLimits) { .keep_free = UINT64_MAX }, T0), 3);
        list(a, &s, &n, NULL);
        ck_assert_uint_eq(n, 1);
        ck_assert_uint_eq(s[0].timestamp_usec, T0 + 3 * SEC);
        archive_summaries_free(s, n);
        ck_assert(file_exists(dir, "README"));
        ck_assert_int_eq(archive_vacuum(a, &(ArchiveLimits) { .keep_free = UINT64_MAX }, T0), 0);
        tmpdir_free(dir);
}
END_TEST

/* ---- atomicity ---- */

START_TEST(test_no_tmp_left) {
        _cleanup_(archive_freep) Archive *a = NULL;
        _cleanup_free_ char *doc = doc_new(100000, 7);
        char *dir = tmpdir_new();
        ArchiveSummary *s = NULL;
        size_t n = 0, skipped = 0;

        ck_assert_int_eq(archive_open(dir, &a), 0);
        for (size_t i = 0; i < 5; i++)
                free(put(a, doc, T0, 3));
        ck_assert(!a->no_tmpfile); /* tmpfs and ext4 both have O_TMPFILE */
        /* The fallback for file systems without O_TMPFILE: a named temporary file, renamed. */
        a->no_tmpfile = true;
        for (size_t i = 0; i < 5; i++)
                free(put(a, doc, T0, 3));
        ck_assert_uint_eq(count_entries(dir, ".tmp-"), 0);
        ck_assert_uint_eq(count_entries(dir, ""), 10);
        list(a, &s, &n, &skipped);
        ck_assert_uint_eq(n, 10);
        ck_assert_uint_eq(skipped, 0);
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *json = NULL;
                ck_assert_int_eq(archive_read(a, s[i].id, &json, NULL, NULL), 0);
                ck_assert_str_eq(json, doc);
        }
        ck_assert_str_eq(s[9].id, "20240102T030405.000006Z-3-10");
        archive_summaries_free(s, n);
        tmpdir_free(dir);
}
END_TEST

/* Without /proc (a chroot) an O_TMPFILE cannot be named: the write falls back to a temporary name by itself. */
START_TEST(test_no_proc_fallback) {
        _cleanup_(archive_freep) Archive *a = NULL;
        _cleanup_free_ char *json = NULL;
        char *dir, result = 'x';
        int p[2];
        pid_t pid;

        if (geteuid() != 0) {
                printf("test_no_proc_fallback: not root, skipped\n");
                return;
        }
        dir = tmpdir_new();
        ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                /* The result goes through a pipe, not the exit status, which valgrind may claim for itself. */
                Archive *b = NULL;
                ArchiveSummary s = summary_at(T0, 2);

                /* Hide /proc in a mount namespace of this child only. */
                if (unshare(CLONE_NEWNS) < 0 || mount("none", "/", "none", MS_REC | MS_PRIVATE, NULL) < 0 ||
                    mount("tmpfs", "/proc", "tmpfs", 0, "size=4k") < 0)
                        result = 's';
                else if (archive_open(dir, &b) < 0 || archive_write(b, "{\"noproc\":1}", 12, &s, NULL, NULL, NULL) < 0)
                        result = 'e';
                else
                        result = b->no_tmpfile ? 'y' : 'n';
                archive_free(b);
                (void) !write(p[1], &result, 1);
                _exit(0);
        }
        close(p[1]);
        ck_assert_int_eq(read(p[0], &result, 1), 1);
        close(p[0]);
        ck_assert_int_eq(waitpid(pid, NULL, 0), pid);
        if (result == 's') {
                printf("test_no_proc_fallback: no mount namespace, skipped\n");
                tmpdir_free(dir);
                return;
        }
        ck_assert_int_eq(result, 'y');
        ck_assert_uint_eq(count_entries(dir, ".tmp-"), 0);
        ck_assert_int_eq(archive_open(dir, &a), 0);
        ck_assert_int_eq(archive_read(a, "20240102T030405.000006Z-2", &json, NULL, NULL), 0);
        ck_assert_str_eq(json, "{\"noproc\":1}");
        tmpdir_free(dir);
}
END_TEST

/* Writers killed at arbitrary points, in both modes, leave only complete snapshots under snapshot names. */
START_TEST(test_kill_during_writes) {
        _cleanup_free_ char *doc = doc_new(512 * 1024, 11);
        char *dir = tmpdir_new();
        size_t complete = 0, left;

        for (int mode = 0; mode < 2; mode++)
                for (int round = 0; round < 6; round++) {
                        size_t before = count_entries(dir, "");
                        pid_t pid = fork();

                        ck_assert_int_ge(pid, 0);
                        if (pid == 0) {
                                Archive *a = NULL;

                                if (archive_open(dir, &a) < 0)
                                        _exit(1);
                                a->no_tmpfile = mode == 1;
                                for (uint64_t i = 0;; i++) {
                                        ArchiveSummary s = summary_at(T0 + i, 1000 + 10 * mode + round);
                                        char *id = NULL;
                                        if (archive_write(a, doc, strlen(doc), &s, NULL, NULL, &id) < 0)
                                                _exit(1);
                                        free(id);
                                }
                        }
                        /* Wait (with a deadline, valgrind is slow) until the child has made its first file,
                         * then let it run a little longer each round, so that the kill lands in varying places. */
                        for (int ms = 0; count_entries(dir, "") <= before; ms++) {
                                ck_assert_int_lt(ms, 60000);
                                usleep(1000);
                        }
                        usleep((useconds_t) round * 1700);
                        ck_assert_int_eq(kill(pid, SIGKILL), 0);
                        ck_assert_int_eq(waitpid(pid, NULL, 0), pid);
                }

        {
                _cleanup_(archive_freep) Archive *a = NULL;
                ArchiveSummary *s = NULL;
                size_t n = 0, skipped = 99;

                ck_assert_int_eq(archive_open(dir, &a), 0);
                list(a, &s, &n, &skipped);
                ck_assert_uint_eq(skipped, 0);
                for (size_t i = 0; i < n; i++) {
                        _cleanup_free_ char *json = NULL;
                        ck_assert_int_eq(archive_read(a, s[i].id, &json, NULL, NULL), 0);
                        ck_assert_str_eq(json, doc);
                }
                complete = n;
                /* Everything in the directory is a complete snapshot or a named temporary of the fallback... */
                ck_assert_uint_eq(count_entries(dir, ""), n + count_entries(dir, ".tmp-"));
                /* ...and the sweep removes every one of those at once: no killed writer holds its lock. */
                left = count_entries(dir, ".tmp-");
                ck_assert_int_eq(archive_sweep_tmp(a, T0), (int) left);
                ck_assert_uint_eq(count_entries(dir, ".tmp-"), 0);
                ck_assert_uint_eq(count_entries(dir, ""), n);
                archive_summaries_free(s, n);
        }
        ck_assert_uint_gt(complete, 0);
        tmpdir_free(dir);
}
END_TEST

START_TEST(test_stale_tmp) {
        _cleanup_(archive_freep) Archive *a = NULL;
        const char *old_ours = ".tmp-20240102T030405.000006Z-42-Ab3xZ9";
        const char *new_ours = ".tmp-20240102T030405.000006Z-43-Qq1234";
        const char *live_ours = ".tmp-20240102T030405.000006Z-45-Live00";
        const char *old_foreign[] = { ".tmp-notes", ".tmp-20240102T030405.000006Z-42-abc", ".tmpfile" };
        struct timespec two_hours_ago[2];
        char *dir = tmpdir_new(), *sub, *live_path;
        int dfd, live_fd;

        clock_gettime(CLOCK_REALTIME, &two_hours_ago[0]);
        two_hours_ago[0].tv_sec -= 2 * 3600;
        two_hours_ago[1] = two_hours_ago[0];
        dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ck_assert_int_ge(dfd, 0);
        file_put(dir, old_ours, "partial", 7);
        file_put(dir, new_ours, "killed", 6);
        ck_assert_int_eq(utimensat(dfd, old_ours, two_hours_ago, 0), 0);
        for (size_t i = 0; i < ELEMENTSOF(old_foreign); i++) {
                file_put(dir, old_foreign[i], "x", 1);
                ck_assert_int_eq(utimensat(dfd, old_foreign[i], two_hours_ago, 0), 0);
        }
        /* A write in progress: its writer holds the lock, however old the file is. */
        file_put(dir, live_ours, "writing", 7);
        ck_assert_int_eq(utimensat(dfd, live_ours, two_hours_ago, 0), 0);
        live_path = path_join(dir, live_ours);
        live_fd = open(live_path, O_WRONLY | O_CLOEXEC);
        ck_assert_int_ge(live_fd, 0);
        ck_assert_int_eq(flock(live_fd, LOCK_EX | LOCK_NB), 0);
        /* An old directory with our temporary pattern is not a file we wrote. */
        sub = path_join(dir, ".tmp-20240102T030405.000006Z-44-dirdir");
        ck_assert_int_eq(mkdir(sub, 0700), 0);
        ck_assert_int_eq(utimensat(AT_FDCWD, sub, two_hours_ago, 0), 0);
        free(sub);
        close(dfd);

        ck_assert_int_eq(archive_open(dir, &a), 0);
        /* Opening sweeps nothing (stackctl opens archives it does not own)... */
        ck_assert(file_exists(dir, old_ours));
        /* ...the sweep removes both unlocked files of ours, old and young, and nothing else. */
        ck_assert_int_eq(archive_sweep_tmp(a, now_usec(CLOCK_REALTIME)), 2);
        ck_assert(!file_exists(dir, old_ours));
        ck_assert(!file_exists(dir, new_ours));
        ck_assert(file_exists(dir, live_ours));
        for (size_t i = 0; i < ELEMENTSOF(old_foreign); i++)
                ck_assert_msg(file_exists(dir, old_foreign[i]), "%s", old_foreign[i]);
        ck_assert(file_exists(dir, ".tmp-20240102T030405.000006Z-44-dirdir"));
        /* The writer is gone: its file is the next sweep's. */
        close(live_fd);
        ck_assert_int_eq(archive_sweep_tmp(a, now_usec(CLOCK_REALTIME)), 1);
        ck_assert(!file_exists(dir, live_ours));
        ck_assert_int_eq(archive_sweep_tmp(a, now_usec(CLOCK_REALTIME)), 0);
        ck_assert(archive_tmp_name_is_ours(old_ours));
        ck_assert(!archive_tmp_name_is_ours(".tmp-../20240102T030405.000006Z-42-Ab3xZ9"));
        ck_assert(!archive_tmp_name_is_ours(".tmp-20240102T030405.000006Z-42-Ab3x/9"));
        ck_assert(!archive_tmp_name_is_ours("20240102T030405.000006Z-42.json.zst"));
        free(live_path);
        tmpdir_free(dir);
}
END_TEST

/* A sweep that removes a writer's file between its creation and its lock costs the writer a name, not the write. */
START_TEST(test_sweep_races_writer) {
        _cleanup_(archive_freep) Archive *a = NULL;
        _cleanup_free_ char *doc = doc_new(20000, 3);
        char *dir = tmpdir_new();
        pid_t pid;
        size_t n = 0, skipped = 0;
        ArchiveSummary *s = NULL;

        ck_assert_int_eq(archive_open(dir, &a), 0);
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                Archive *b = NULL;
                if (archive_open(dir, &b) < 0)
                        _exit(1);
                for (;;)
                        (void) archive_sweep_tmp(b, T0);
        }
        a->no_tmpfile = true;
        for (uint64_t i = 0; i < 300; i++) {
                ArchiveSummary sum = summary_at(T0 + i, 7);
                char *id = NULL;
                ck_assert_int_eq(archive_write(a, doc, strlen(doc), &sum, NULL, NULL, &id), 0);
                free(id);
        }
        ck_assert_int_eq(kill(pid, SIGKILL), 0);
        ck_assert_int_eq(waitpid(pid, NULL, 0), pid);
        list(a, &s, &n, &skipped);
        ck_assert_uint_eq(n, 300);
        ck_assert_uint_eq(skipped, 0);
        archive_summaries_free(s, n);
        ck_assert_uint_eq(count_entries(dir, ".tmp-"), 0);
        tmpdir_free(dir);
}
END_TEST

START_TEST(test_zstd_cli) {
        _cleanup_(archive_freep) Archive *a = NULL;
        _cleanup_free_ char *zstd = find_zstd(), *doc = doc_new(300000, 5), *id = NULL, *path = NULL, *name = NULL;
        _cleanup_free_ char *out = NULL;
        char *dir = tmpdir_new();
        size_t have = 0, alloc = 1 << 20;
        int p[2], status;
        pid_t pid;

        if (!zstd) {
                printf("test_zstd_cli: no zstd program, skipped\n");
                tmpdir_free(dir);
                return;
        }
        ck_assert_int_eq(archive_open(dir, &a), 0);
        id = put(a, doc, T0, 1);
        ck_assert_int_gt(asprintf(&name, "%s" ARCHIVE_SUFFIX, id), 0);
        path = path_join(dir, name);

        ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                dup2(p[1], STDOUT_FILENO);
                execl(zstd, "zstd", "-d", "-c", "-q", path, (char *) NULL);
                _exit(127);
        }
        close(p[1]);
        out = malloc(alloc);
        ck_assert_ptr_nonnull(out);
        for (;;) {
                ssize_t n = read(p[0], out + have, alloc - have);
                ck_assert_int_ge(n, 0);
                if (n == 0)
                        break;
                have += (size_t) n;
                ck_assert_uint_lt(have, alloc);
        }
        close(p[0]);
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        ck_assert_uint_eq(have, strlen(doc));
        ck_assert_mem_eq(out, doc, have);
        tmpdir_free(dir);
}
END_TEST

START_TEST(test_open_creates_dir) {
        _cleanup_(archive_freep) Archive *a = NULL;
        _cleanup_free_ char *sub = NULL, *file = NULL, *nested = NULL;
        Archive *b = NULL;
        char *dir = tmpdir_new();
        mode_t old = umask(022);
        struct stat st;

        sub = path_join(dir, "archive");
        ck_assert_int_eq(archive_open(sub, &a), 0);
        ck_assert_int_eq(stat(sub, &st), 0);
        ck_assert(S_ISDIR(st.st_mode));
        ck_assert_uint_eq(st.st_mode & 07777, 0750);
        ck_assert_int_ge(archive_dir_fd(a), 0);
        ck_assert_int_eq(archive_dir_fd(NULL), -EBADF);
        /* Opening again is fine; a file in the way and a missing parent are errors, and RET stays untouched. */
        ck_assert_int_eq(archive_open(sub, &b), 0);
        b = archive_free(b);
        ck_assert_ptr_null(archive_free(NULL));
        file = path_join(dir, "file");
        file_put(dir, "file", "x", 1);
        ck_assert_int_eq(archive_open(file, &b), -ENOTDIR);
        nested = path_join(dir, "missing/archive");
        ck_assert_int_eq(archive_open(nested, &b), -ENOENT);
        ck_assert_ptr_null(b);
        umask(old);
        tmpdir_free(dir);
}
END_TEST

START_TEST(test_bad_args) {
        _cleanup_(archive_freep) Archive *a = NULL;
        _cleanup_free_ char *big = NULL;
        ArchiveSummary s = summary_at(T0, 1);
        char *dir = tmpdir_new(), *id = NULL, *json = NULL;

        ck_assert_int_eq(archive_open(dir, &a), 0);
        ck_assert_int_eq(archive_write(NULL, "{}", 2, &s, NULL, NULL, &id), -EINVAL);
        ck_assert_int_eq(archive_write(a, NULL, 2, &s, NULL, NULL, &id), -EINVAL);
        ck_assert_int_eq(archive_write(a, "{}", 0, &s, NULL, NULL, &id), -EINVAL);
        ck_assert_int_eq(archive_write(a, "{}", 2, NULL, NULL, NULL, &id), -EINVAL);
        s.pid = 0;
        ck_assert_int_eq(archive_write(a, "{}", 2, &s, NULL, NULL, &id), -EINVAL);
        s.pid = -5;
        ck_assert_int_eq(archive_write(a, "{}", 2, &s, NULL, NULL, &id), -EINVAL);
        s.pid = 4194305;
        ck_assert_int_eq(archive_write(a, "{}", 2, &s, NULL, NULL, &id), -EINVAL);
        s.pid = 1;
        s.timestamp_usec = UINT64_MAX; /* past year 9999 */
        ck_assert_int_eq(archive_write(a, "{}", 2, &s, NULL, NULL, &id), -EINVAL);
        s.timestamp_usec = T0;
        /* A summary that does not fit the header. */
        big = malloc(ARCHIVE_HEADER_MAX + 1);
        ck_assert_ptr_nonnull(big);
        memset(big, 'r', ARCHIVE_HEADER_MAX);
        big[ARCHIVE_HEADER_MAX] = '\0';
        s.rule = big;
        ck_assert_int_eq(archive_write(a, "{}", 2, &s, NULL, NULL, &id), -E2BIG);
        ck_assert_ptr_null(id);
        ck_assert_uint_eq(count_entries(dir, ""), 0);
        /* Timestamp 0 means now; the id shows this year, not 1970. */
        s = summary_at(0, 1);
        ck_assert_int_eq(archive_write(a, "{}", 2, &s, NULL, NULL, NULL), 0);
        ck_assert_int_eq(archive_read(a, "latest", &json, NULL, &s), 0);
        ck_assert_uint_gt(s.timestamp_usec, T0);
        ck_assert(!startswith(s.id, "1970"));
        archive_summary_done(&s);
        free(json);
        ck_assert_int_eq(archive_list(a, NULL, NULL, NULL), -EINVAL);
        ck_assert_int_eq(archive_read(a, "latest", NULL, NULL, NULL), -EINVAL);
        tmpdir_free(dir);
}
END_TEST

/* ---- ENOSPC ---- */

static uint64_t free_bytes(const char *dir) {
        struct statvfs sv;

        ck_assert_int_eq(statvfs(dir, &sv), 0);
        return (uint64_t) sv.f_bavail * sv.f_frsize;
}

/* Fill the small file system under DIR with snapshots until ENOSPC and check every way out of it. Leaves two
 * snapshots behind for the integration test to check from outside. */
static void enospc_run(const char *dir) {
        _cleanup_(archive_freep) Archive *a = NULL;
        _cleanup_free_ char *doc = doc_new(24 * 1024, 3), *first = NULL, *id = NULL, *json = NULL;
        const ArchiveLimits none = {}, keep = { .keep_free = 96 * 1024 };
        ArchiveSummary *s = NULL, sum;
        size_t n = 0, skipped = 99, written = 0, made_room;
        ArchiveRoom room;
        _cleanup_close_ int filler = -EBADF;
        char block[4096];
        int r;

        ck_assert_int_eq(archive_open(dir, &a), 0);
        ck_assert_uint_eq(count_entries(dir, ""), 0);

        /* 1. Without limits nothing is deleted: writes succeed until the file system is full, then -ENOSPC. */
        for (uint64_t i = 0;; i++) {
                ck_assert_uint_lt(i, 1000);
                sum = summary_at(T0 + i * SEC, 100);
                r = archive_write(a, doc, strlen(doc), &sum, NULL, NULL, &id);
                if (r == -ENOSPC)
                        break;
                ck_assert_int_eq(r, 0);
                if (!first)
                        first = TAKE_PTR(id);
                free(TAKE_PTR(id));
                written++;
        }
        ck_assert_ptr_null(id);
        ck_assert_uint_ge(written, 3);
        /* No partial file: the failed write left nothing, not even a temporary. */
        ck_assert_uint_eq(count_entries(dir, ""), written);
        list(a, &s, &n, &skipped);
        ck_assert_uint_eq(n, written);
        ck_assert_uint_eq(skipped, 0);
        archive_summaries_free(s, n);

        /* 2. The named-temporary fallback cleans up after ENOSPC too. */
        a->no_tmpfile = true;
        sum = summary_at(T0 + 5000 * SEC, 100);
        ck_assert_int_eq(archive_write(a, doc, strlen(doc), &sum, NULL, NULL, &id), -ENOSPC);
        ck_assert_uint_eq(count_entries(dir, ".tmp-"), 0);
        ck_assert_uint_eq(count_entries(dir, ""), written);
        a->no_tmpfile = false;

        /* 3. With limits (even all 0) the oldest make room for the newest, and the retry succeeds. */
        sum = summary_at(T0 + 6000 * SEC, 101);
        ck_assert_int_eq(archive_write_rotating(a, doc, strlen(doc), &sum, &none, &id, &room), 0);
        ck_assert(room.full);
        ck_assert_str_eq(id, "20240102T044405.000006Z-101");
        ck_assert_int_eq(archive_read(a, id, &json, NULL, NULL), 0);
        ck_assert_str_eq(json, doc);
        free(TAKE_PTR(json));
        ck_assert_int_eq(archive_read(a, first, &json, NULL, NULL), -ENOENT);
        list(a, &s, &n, &skipped);
        ck_assert_uint_lt(n, written + 1);
        ck_assert_uint_eq(skipped, 0);
        made_room = written + 1 - n;
        /* The caller is told what was removed for it (and logs it: lib/ does not). */
        ck_assert_int_eq(room.removed, (int) made_room);
        ck_assert_str_eq(s[n - 1].id, id);
        archive_summaries_free(s, n);
        free(TAKE_PTR(id));

        /* 4. keep_free by itself. */
        ck_assert_uint_lt(free_bytes(dir), keep.keep_free);
        r = archive_vacuum(a, &keep, T0);
        ck_assert_int_gt(r, 0);
        ck_assert_uint_ge(free_bytes(dir), keep.keep_free);
        sum = summary_at(T0 + 7000 * SEC, 102);
        ck_assert_int_eq(archive_write_rotating(a, doc, strlen(doc), &sum, &keep, NULL, NULL), 0);

        /* 5. Full of someone else's data: vacuum deletes all of ours but the newest, making room takes that one
         * too, still no room, -ENOSPC, foreign data kept. */
        ck_assert_int_gt(archive_vacuum(a, &(ArchiveLimits) { .keep_free = UINT64_MAX }, T0), 0);
        ck_assert_uint_eq(count_entries(dir, ""), 1);
        ck_assert_int_eq(archive_vacuum_make_room(a, NULL, 1, T0), 1);
        ck_assert_uint_eq(count_entries(dir, ""), 0);
        memset(block, 'f', sizeof block);
        filler = openat(archive_dir_fd(a), "filler", O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        ck_assert_int_ge(filler, 0);
        for (;;) {
                ssize_t k = write(filler, block, sizeof block);
                if (k < 0) {
                        ck_assert_int_eq(errno, ENOSPC);
                        break;
                }
        }
        /* A last few bytes of room: the header fits, the document does not. */
        ck_assert_int_eq(ftruncate(filler, lseek(filler, 0, SEEK_CUR) - 4096), 0);
        sum = summary_at(T0 + 8000 * SEC, 103);
        ck_assert_int_eq(archive_write_rotating(a, doc, strlen(doc), &sum, &none, &id, NULL), -ENOSPC);
        ck_assert_ptr_null(id);
        ck_assert_uint_eq(count_entries(dir, ""), 1);
        ck_assert(file_exists(dir, "filler"));
        filler = safe_close(filler); /* an open file keeps its space after unlink */
        ck_assert_int_eq(unlinkat(archive_dir_fd(a), "filler", 0), 0);

        /* 6. Two snapshots for the integration test to check with the zstd program. */
        for (int i = 0; i < 2; i++) {
                sum = summary_at(T0 + (9000 + (uint64_t) i) * SEC, 104);
                ck_assert_int_eq(archive_write_rotating(a, doc, strlen(doc), &sum, &keep, NULL, &room), 0);
                ck_assert(!room.full);
        }
        /* 7. A snapshot larger than the whole file system: deleting every old one could not make room for it, so
         * none is deleted (they are the evidence we have) and the write fails at once. */
        {
                size_t big_len = 512 * 1024, kept = count_entries(dir, "");
                char *big = malloc(big_len + 16);
                uint64_t x = 88172645463325252ULL;

                ck_assert_ptr_nonnull(big);
                /* Incompressible: xorshift letters, so zstd cannot shrink it below the 256 KiB file system. */
                memcpy(big, "{\"x\":\"", 6);
                for (size_t i = 6; i < big_len; i++) {
                        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                        big[i] = (char) ('a' + x % 26);
                }
                memcpy(big + big_len, "\"}", 3);
                ck_assert_uint_ge(kept, 2);
                sum = summary_at(T0 + 9500 * SEC, 105);
                ck_assert_int_eq(archive_write_rotating(a, big, strlen(big), &sum, &none, &id, &room), -ENOSPC);
                ck_assert(room.full);
                ck_assert_int_eq(room.removed, -EFBIG);
                ck_assert_ptr_null(id);
                ck_assert_uint_eq(count_entries(dir, ""), kept);
                ck_assert_uint_eq(count_entries(dir, ".tmp-"), 0);
                free(big);
        }

        printf("archive-enospc: ok: %zu snapshot(s) fit before ENOSPC, %zu removed to make room, %" PRIu64
               " bytes free\n", written, made_room, free_bytes(dir));
        fflush(stdout);
}

START_TEST(test_enospc) {
        const char *env = getenv("STACKWATCH_TEST_ENOSPC_DIR");
        char *dir, *archive;

        if (env) {
                /* The integration test mounted a small tmpfs for us and checks the result afterwards. */
                enospc_run(env);
                return;
        }
        if (geteuid() != 0) {
                printf("test_enospc: not root, skipped\n");
                return;
        }
        /* A private mount namespace: the tmpfs goes away with this process, even when an assertion ends it. */
        if (unshare(CLONE_NEWNS) < 0 || mount("none", "/", "none", MS_REC | MS_PRIVATE, NULL) < 0) {
                printf("test_enospc: no mount namespace (%s), skipped\n", strerror(errno));
                return;
        }
        dir = tmpdir_new();
        if (mount("tmpfs", dir, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=256k,mode=0700") < 0) {
                printf("test_enospc: cannot mount a tmpfs (%s), skipped\n", strerror(errno));
                tmpdir_free(dir);
                return;
        }
        archive = path_join(dir, "archive");
        enospc_run(archive);
        free(archive);
        ck_assert_int_eq(umount(dir), 0);
        tmpdir_free(dir);
}
END_TEST

UNIT_TEST_MAIN("archive", test_round_trip, test_file_bytes_round_trip, test_problems_of_snapshots_name_their_host,
               test_null_summary_fields, test_id_collision,
               test_sort_by_time, test_latest,
               test_id_validation, test_hostile_ids, test_foreign_files, test_corrupt_files, test_vacuum_max_snapshots,
               test_vacuum_max_size, test_vacuum_max_age, test_vacuum_keep_free, test_no_tmp_left, test_no_proc_fallback,
               test_kill_during_writes, test_stale_tmp, test_sweep_races_writer, test_zstd_cli, test_open_creates_dir,
               test_bad_args,
               test_enospc)
