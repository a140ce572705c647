/* archive.c: the snapshot archive: atomic zstd writes (O_TMPFILE or temp name, fsync, link, dir fsync), list, read. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>
#include <zstd_errors.h>

#include "base/alloc-util.h"
#include "base/io-util.h"
#include "base/json-util.h"
#include "base/log.h"
#include "base/macro.h"
#include "base/time-util.h"
#include "store/archive.h"

/* zstd's default level: fast enough for the capture child, 5-10x on snapshot JSON. */
#define ARCHIVE_ZSTD_LEVEL 3
/* Where flock() cannot say (a file system without it): a temporary file this old is not a write in progress. */
#define ARCHIVE_TMP_MAX_AGE_USEC (3600ULL * USEC_PER_SEC)
/* Snapshots of one pid within one microsecond get "-2" … "-100"; beyond that something is wrong. */
#define ARCHIVE_COLLISIONS_MAX 100U
/* On ENOSPC, the room to make beyond the file's own bytes: a directory block, rounding up to blocks. */
#define ARCHIVE_ENOSPC_SLACK (8U * 1024U)
/* Tries at a temporary file before giving up: a random name taken (62^6 names), or the file removed by another
 * daemon's sweep between its creation and our lock on it. Each try costs an open and a lock; a sweeper that loops
 * won 16 tries in a row once on a loaded CI machine (test_sweep_races_writer). */
#define ARCHIVE_TMP_ATTEMPTS 64
/* PID_MAX_LIMIT: the largest pid the kernel hands out. */
#define ARCHIVE_PID_MAX 4194304
/* The last second with a four-digit year, 9999-12-31T23:59:59Z: ids are fixed-width up to there. */
#define ARCHIVE_TIME_MAX_SEC 253402300799ULL

/* The skippable frame's own header: magic and payload length, both little-endian u32. */
#define FRAME_HEADER_SIZE 8U
/* "YYYYMMDDTHHMMSS.uuuuuuZ", the fixed-width time part of an id, then "-<pid>" and maybe "-<N>". */
#define ID_TIME_LEN 23U
#define ID_PID_DIGITS_MAX 7U
#define ID_SUFFIX_DIGITS_MAX 3U
/* Room for "<id>.json.zst" and ".tmp-<id>-XXXXXX" with their NUL. */
#define NAME_SIZE 64U
#define TMP_PREFIX ".tmp-"
#define TMP_RANDOM_LEN 6U

assert_cc(ID_TIME_LEN + 1 + ID_PID_DIGITS_MAX + 1 + ID_SUFFIX_DIGITS_MAX == ARCHIVE_ID_MAX);
assert_cc(sizeof(TMP_PREFIX) - 1 + ARCHIVE_ID_MAX + 1 + TMP_RANDOM_LEN < NAME_SIZE);
assert_cc(ARCHIVE_ID_MAX + sizeof(ARCHIVE_SUFFIX) <= NAME_SIZE);

struct Archive {
        int dir_fd;
        /* Set once O_TMPFILE (or naming its fd through /proc) failed as unsupported here: from then on every write
         * goes through a named temporary file without trying again. */
        bool no_tmpfile;
};

DEFINE_TRIVIAL_CLEANUP_FUNC(json_tokener *, json_tokener_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(ZSTD_CCtx *, ZSTD_freeCCtx);

static void put_le32(uint8_t *p, uint32_t v) {
        p[0] = (uint8_t) v;
        p[1] = (uint8_t) (v >> 8);
        p[2] = (uint8_t) (v >> 16);
        p[3] = (uint8_t) (v >> 24);
}

static uint32_t get_le32(const uint8_t *p) {
        return (uint32_t) p[0] | (uint32_t) p[1] << 8 | (uint32_t) p[2] << 16 | (uint32_t) p[3] << 24;
}

/* ---- ids and names ---- */

static bool all_digits(const char *s, size_t n) {
        /* A NUL is not a digit, so this never reads past the end of a shorter string. */
        for (size_t i = 0; i < n; i++)
                if (s[i] < '0' || s[i] > '9')
                        return false;
        return true;
}

/* The length of the run of 1 … MAX decimal digits without a leading zero at S, or 0 if there is none. */
static size_t number_len(const char *s, size_t max) {
        size_t n = 0;

        if (s[0] < '1' || s[0] > '9')
                return 0;
        while (s[n] >= '0' && s[n] <= '9')
                if (++n > max)
                        return 0;
        return n;
}

/* The value of N digits at S; N is at most 7 here, so nothing overflows. */
static uint64_t digits_value(const char *s, size_t n) {
        uint64_t v = 0;

        for (size_t i = 0; i < n; i++)
                v = v * 10 + (uint64_t) (s[i] - '0');
        return v;
}

bool archive_id_is_valid(const char *s) {
        size_t n;

        if (!s || strnlen(s, ARCHIVE_ID_MAX + 1) > ARCHIVE_ID_MAX)
                return false;
        /* Each test fails on the NUL of a short string before looking further. */
        if (!all_digits(s, 8) || s[8] != 'T' || !all_digits(s + 9, 6) || s[15] != '.' || !all_digits(s + 16, 6) ||
            s[22] != 'Z' || s[23] != '-')
                return false;
        s += ID_TIME_LEN + 1;
        n = number_len(s, ID_PID_DIGITS_MAX);
        if (n == 0 || digits_value(s, n) > ARCHIVE_PID_MAX)
                return false;
        s += n;
        if (*s == '\0')
                return true;
        if (*s != '-')
                return false;
        s++;
        n = number_len(s, ID_SUFFIX_DIGITS_MAX);
        if (n == 0 || s[n] != '\0')
                return false;
        /* "-1" is never written: the first snapshot of a microsecond has no suffix. */
        return digits_value(s, n) >= 2 && digits_value(s, n) <= ARCHIVE_COLLISIONS_MAX;
}

/* The pid and collision suffix (1 when there is none) of a valid id. */
static void id_split(const char *id, uint64_t *ret_pid, uint64_t *ret_suffix) {
        const char *p = id + ID_TIME_LEN + 1;
        size_t n = strspn(p, "0123456789");

        *ret_pid = digits_value(p, n);
        p += n;
        *ret_suffix = *p == '-' ? digits_value(p + 1, strlen(p + 1)) : 1;
}

int archive_id_compare(const char *a, const char *b) {
        uint64_t pid_a, pid_b, suffix_a, suffix_b;
        int c;

        /* Plain strcmp() would put "-100" before "-99" and "-10" before "-2". */
        if (!archive_id_is_valid(a) || !archive_id_is_valid(b))
                return strcmp(strna(a), strna(b));
        c = memcmp(a, b, ID_TIME_LEN);
        if (c != 0)
                return c < 0 ? -1 : 1;
        id_split(a, &pid_a, &suffix_a);
        id_split(b, &pid_b, &suffix_b);
        if (pid_a != pid_b)
                return pid_a < pid_b ? -1 : 1;
        return suffix_a < suffix_b ? -1 : suffix_a > suffix_b;
}

/* Format the id for TIMESTAMP_USEC and PID into BUF, with "-SUFFIX" when SUFFIX > 1. */
static int archive_format_id(uint64_t timestamp_usec, int pid, unsigned suffix, char buf[static NAME_SIZE]) {
        time_t sec = (time_t) (timestamp_usec / USEC_PER_SEC);
        struct tm tm;
        int n;

        if (timestamp_usec / USEC_PER_SEC > ARCHIVE_TIME_MAX_SEC || pid <= 0 || pid > ARCHIVE_PID_MAX ||
            suffix == 0 || suffix > ARCHIVE_COLLISIONS_MAX)
                return -EINVAL;
        if (!gmtime_r(&sec, &tm))
                return -EINVAL;
        n = snprintf(buf, NAME_SIZE, "%04d%02d%02dT%02d%02d%02d.%06" PRIu64 "Z-%d", tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (uint64_t) (timestamp_usec % USEC_PER_SEC), pid);
        if (suffix > 1 && n > 0 && (size_t) n < NAME_SIZE)
                n += snprintf(buf + n, NAME_SIZE - (size_t) n, "-%u", suffix);
        if (n < 0 || (size_t) n > ARCHIVE_ID_MAX)
                return -EINVAL;
        return 0;
}

/* If NAME is "<id>.json.zst" with a valid id, copy the id into BUF and return true: the names we own. */
static bool archive_name_to_id(const char *name, char buf[static NAME_SIZE]) {
        size_t n = strnlen(name, NAME_SIZE), k = strlen(ARCHIVE_SUFFIX);

        if (n >= NAME_SIZE || n <= k || !streq(name + n - k, ARCHIVE_SUFFIX))
                return false;
        memcpy(buf, name, n - k);
        buf[n - k] = '\0';
        return archive_id_is_valid(buf);
}

static int archive_id_to_name(const char *id, char buf[static NAME_SIZE]) {
        int n = snprintf(buf, NAME_SIZE, "%s" ARCHIVE_SUFFIX, id);
        return n < 0 || (size_t) n >= NAME_SIZE ? -EINVAL : 0;
}

/* Whether NAME is ".tmp-<id>-XXXXXX", a temporary file this module creates, and so one it may remove. */
static bool archive_tmp_name_is_ours(const char *name) {
        size_t p = strlen(TMP_PREFIX), n = strnlen(name, NAME_SIZE);
        char id[NAME_SIZE];

        if (n >= NAME_SIZE || n < p + 1 + TMP_RANDOM_LEN + 1 || !startswith(name, TMP_PREFIX) ||
            name[n - TMP_RANDOM_LEN - 1] != '-')
                return false;
        for (size_t i = n - TMP_RANDOM_LEN; i < n; i++)
                if (!((name[i] >= 'a' && name[i] <= 'z') || (name[i] >= 'A' && name[i] <= 'Z') ||
                      (name[i] >= '0' && name[i] <= '9')))
                        return false;
        memcpy(id, name + p, n - p - TMP_RANDOM_LEN - 1);
        id[n - p - TMP_RANDOM_LEN - 1] = '\0';
        return archive_id_is_valid(id);
}

/* TMP_RANDOM_LEN letters and digits for a temporary name; O_EXCL, not this, is what makes the name unique. */
static void random_name_part(char buf[static TMP_RANDOM_LEN + 1]) {
        static const char alphabet[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
        uint8_t r[TMP_RANDOM_LEN];

        if (getrandom(r, sizeof r, GRND_NONBLOCK) != (ssize_t) sizeof r) {
                /* No entropy yet (early boot) or no getrandom(): the clock varies between tries, good enough. */
                struct timespec ts;
                uint64_t x;

                clock_gettime(CLOCK_MONOTONIC, &ts);
                x = (uint64_t) ts.tv_nsec * 0x9E3779B97F4A7C15ULL ^ (uint64_t) ts.tv_sec ^ (uint64_t) getpid() << 40;
                for (size_t i = 0; i < sizeof r; i++)
                        r[i] = (uint8_t) (x >> (8 * i));
        }
        for (size_t i = 0; i < TMP_RANDOM_LEN; i++)
                buf[i] = alphabet[r[i] % (sizeof alphabet - 1)];
        buf[TMP_RANDOM_LEN] = '\0';
}

int archive_remove(Archive *a, const char *id) {
        char name[ARCHIVE_ID_MAX + sizeof(ARCHIVE_SUFFIX)];

        if (!archive_id_is_valid(id))
                return -EINVAL;
        snprintf(name, sizeof name, "%s" ARCHIVE_SUFFIX, id);
        return unlinkat(archive_dir_fd(a), name, 0) < 0 ? negative_errno() : 0;
}

/* ---- the summary header ---- */

bool archive_signature_is_valid(const char *s) {
        return s && strlen(s) == ARCHIVE_SIGNATURE_LENGTH && strspn(s, "0123456789abcdef") == ARCHIVE_SIGNATURE_LENGTH;
}

void archive_summary_done(ArchiveSummary *s) {
        if (!s)
                return;
        free(s->id);
        free(s->comm);
        free(s->rule);
        free(s->klass);
        free(s->exe);
        free(s->unit);
        free(s->signature);
        free(s->title);
        free(s->host);
        *s = (ArchiveSummary) {};
}

json_object *archive_summary_to_json(const ArchiveSummary *s) {
        json_object *o = json_object_new_object();

        if (!o)
                return NULL;
        if (json_add_string(o, "id", s->id) < 0 || json_add_u64(o, "timestamp_usec", s->timestamp_usec) < 0 ||
            json_add_int64(o, "pid", s->pid) < 0 || json_add_string(o, "comm", s->comm) < 0 ||
            json_add_string(o, "exe", s->exe) < 0 || json_add_string(o, "unit", s->unit) < 0 ||
            json_add_string(o, "rule", s->rule) < 0 || json_add_string(o, "class", s->klass) < 0 ||
            json_add_u64(o, "size", s->size) < 0 || json_add_u64(o, "file_size", s->file_size) < 0 ||
            json_add_string(o, "signature", s->signature) < 0 || json_add_string(o, "title", s->title) < 0 ||
            json_add_string(o, "host", s->host) < 0) {
                json_object_put(o);
                return NULL;
        }
        return o;
}

int archive_summary_from_json(json_object *o, ArchiveSummary *ret) {
        ArchiveSummary s = {};
        const char *id = json_get_string(o, "id");

        if (!json_object_is_type(o, json_type_object) || !id || !archive_id_is_valid(id))
                return -EBADMSG;
        s.timestamp_usec = json_get_u64(o, "timestamp_usec");
        s.pid = (int) json_get_u64(o, "pid");
        s.size = json_get_u64(o, "size");
        s.file_size = json_get_u64(o, "file_size");
        if (!(s.id = strdup(id)) || json_dup_string(o, "comm", &s.comm) < 0 || json_dup_string(o, "exe", &s.exe) < 0 ||
            json_dup_string(o, "unit", &s.unit) < 0 || json_dup_string(o, "rule", &s.rule) < 0 ||
            json_dup_string(o, "class", &s.klass) < 0 || json_dup_string(o, "title", &s.title) < 0 ||
            json_dup_string(o, "signature", &s.signature) < 0 || json_dup_string(o, "host", &s.host) < 0) {
                archive_summary_done(&s);
                return -ENOMEM;
        }
        if (s.signature && !archive_signature_is_valid(s.signature))
                s.signature = mfree(s.signature);
        *ret = s;
        return 0;
}

void archive_summaries_free(ArchiveSummary *s, size_t n) {
        if (!s)
                return;
        for (size_t i = 0; i < n; i++)
                archive_summary_done(&s[i]);
        free(s);
}

/* Build the skippable frame (frame header and JSON payload) that leads the file of snapshot ID. */
static int archive_header_build(const char *id, uint64_t timestamp_usec, const ArchiveSummary *summary,
                                uint64_t size, uint8_t **ret, size_t *ret_size) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        _cleanup_free_ char *s = NULL;
        uint8_t *buf;
        size_t n;
        int r;

        o = json_object_new_object();
        if (!o)
                return -ENOMEM;
        if ((r = json_add_string(o, "schema", ARCHIVE_SCHEMA)) < 0 || (r = json_add_string(o, "id", id)) < 0 ||
            (r = json_add_u64(o, "timestamp_usec", timestamp_usec)) < 0 ||
            (r = json_add_u64(o, "pid", (uint64_t) summary->pid)) < 0 ||
            (r = json_add_string(o, "comm", summary->comm)) < 0 ||
            (r = json_add_string(o, "rule", summary->rule)) < 0 ||
            (r = json_add_string(o, "class", summary->klass)) < 0 || (r = json_add_u64(o, "size", size)) < 0)
                return r;
        /* Optional, for matches by executable or unit; a path too long to fit is left out, never the write. */
        if (summary->exe && strlen(summary->exe) <= ARCHIVE_HEADER_FIELD_MAX &&
            (r = json_add_string(o, "exe", summary->exe)) < 0)
                return r;
        if (summary->unit && strlen(summary->unit) <= ARCHIVE_HEADER_FIELD_MAX &&
            (r = json_add_string(o, "unit", summary->unit)) < 0)
                return r;
        if (summary->signature && archive_signature_is_valid(summary->signature) &&
            (r = json_add_string(o, "signature", summary->signature)) < 0)
                return r;
        if (summary->signature && summary->title && strlen(summary->title) <= ARCHIVE_HEADER_FIELD_MAX &&
            (r = json_add_string(o, "title", summary->title)) < 0)
                return r;
        if (summary->host && strlen(summary->host) <= ARCHIVE_HEADER_FIELD_MAX &&
            (r = json_add_string(o, "host", summary->host)) < 0)
                return r;
        /* json-c escapes control characters, so a comm like "\e[2J" stays inert in the header. */
        r = json_to_text(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &s, &n);
        if (r < 0)
                return r;
        if (n > ARCHIVE_HEADER_MAX)
                return -E2BIG;
        buf = malloc(FRAME_HEADER_SIZE + n);
        if (!buf)
                return -ENOMEM;
        put_le32(buf, ARCHIVE_HEADER_MAGIC);
        put_le32(buf + 4, (uint32_t) n);
        memcpy(buf + FRAME_HEADER_SIZE, s, n);
        *ret = buf;
        *ret_size = FRAME_HEADER_SIZE + n;
        return 0;
}

/* Parse the header payload P (N bytes) of the file named for ID. Anything unexpected is -EBADMSG: the header must
 * be ours, of our schema, and agree with the name (time, pid, id). */
static int archive_header_parse(const char *p, size_t n, const char *id, ArchiveSummary *ret) {
        _cleanup_(json_tokener_freep) json_tokener *tok = NULL;
        _cleanup_(json_object_putp) json_object *o = NULL;
        _cleanup_(archive_summary_done) ArchiveSummary s = {};
        _cleanup_free_ char *restored = NULL;
        char expect[NAME_SIZE];
        json_object *v;
        uint64_t pid;
        size_t k;
        int r;

        r = json_text_restore_bytes(p, n, &restored, &n);
        if (r < 0)
                return r;
        if (restored)
                p = restored;
        tok = json_tokener_new();
        if (!tok)
                return -ENOMEM;
        o = json_tokener_parse_ex(tok, p, (int) n);
        if (!o || json_tokener_get_error(tok) != json_tokener_success || json_tokener_get_parse_end(tok) != n ||
            !json_object_is_type(o, json_type_object))
                return -EBADMSG;
        if (!json_object_object_get_ex(o, "schema", &v) || !json_object_is_type(v, json_type_string) ||
            !streq(json_object_get_string(v), ARCHIVE_SCHEMA))
                return -EBADMSG;
        /* ID NULL: a file without a name (a journal field): its header names it, and must name a valid id. */
        if (!json_object_object_get_ex(o, "id", &v) || !json_object_is_type(v, json_type_string) ||
            (id ? !streq(json_object_get_string(v), id) : !archive_id_is_valid(json_object_get_string(v))))
                return -EBADMSG;
        id = json_object_get_string(v);
        if (json_require_u64(o, "timestamp_usec", &s.timestamp_usec) < 0 || json_require_u64(o, "pid", &pid) < 0 ||
            json_require_u64(o, "size", &s.size) < 0 || pid == 0 || pid > ARCHIVE_PID_MAX)
                return -EBADMSG;
        s.pid = (int) pid;
        /* The id was made from the time and pid: a header copied under another name does not pass. */
        if (archive_format_id(s.timestamp_usec, s.pid, 1, expect) < 0)
                return -EBADMSG;
        k = strlen(expect);
        if (strncmp(id, expect, k) != 0 || (id[k] != '\0' && id[k] != '-'))
                return -EBADMSG;
        if ((r = json_require_string(o, "comm", &s.comm)) < 0 || (r = json_require_string(o, "rule", &s.rule)) < 0 ||
            (r = json_require_string(o, "class", &s.klass)) < 0 || (r = json_dup_string(o, "exe", &s.exe)) < 0 ||
            (r = json_dup_string(o, "unit", &s.unit)) < 0 || (r = json_dup_string(o, "signature", &s.signature)) < 0 ||
            (r = json_dup_string(o, "title", &s.title)) < 0 || (r = json_dup_string(o, "host", &s.host)) < 0)
                return r;
        /* A signature not of our form is no signature: it is a key in lookups and paths of the page. */
        if (s.signature && !archive_signature_is_valid(s.signature))
                s.signature = mfree(s.signature);
        s.id = strdup(id);
        if (!s.id)
                return -ENOMEM;
        *ret = s;
        s = (ArchiveSummary) {};
        return 0;
}

/* Open the snapshot file NAME for reading: a regular file only, never through a symlink, never a device. */
static int archive_open_file(int dir_fd, const char *name, int *ret_fd) {
        struct stat st;
        int fd;

        if (fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return negative_errno();
        if (!S_ISREG(st.st_mode))
                return -EBADMSG;
        fd = openat(dir_fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
        if (fd < 0) {
                int r = negative_errno();
                return r == -ELOOP ? -EBADMSG : r;
        }
        *ret_fd = fd;
        return 0;
}

/* Read and check the header of the open snapshot file FD named for ID: one pread() of at most a page, whatever
 * the size of the document behind it. RET_HEADER_SIZE (optional) gets where the document's frame starts. */
static int archive_header_read(int fd, const char *id, ArchiveSummary *ret, size_t *ret_header_size) {
        uint8_t buf[FRAME_HEADER_SIZE + ARCHIVE_HEADER_MAX];
        ArchiveSummary s;
        struct stat st;
        uint32_t len;
        ssize_t n;
        int r;

        if (fstat(fd, &st) < 0)
                return negative_errno();
        if (!S_ISREG(st.st_mode))
                return -EBADMSG;
        n = loop_pread(fd, buf, sizeof buf, 0);
        if (n < 0)
                return (int) n;
        if ((size_t) n < FRAME_HEADER_SIZE || get_le32(buf) != ARCHIVE_HEADER_MAGIC)
                return -EBADMSG;
        len = get_le32(buf + 4);
        if (len > ARCHIVE_HEADER_MAX || FRAME_HEADER_SIZE + len > (size_t) n)
                return -EBADMSG;
        r = archive_header_parse((const char *) buf + FRAME_HEADER_SIZE, len, id, &s);
        if (r < 0)
                return r;
        s.file_size = (uint64_t) st.st_size;
        *ret = s;
        if (ret_header_size)
                *ret_header_size = FRAME_HEADER_SIZE + len;
        return 0;
}

/* ---- open, free ---- */

/* Remove the temporary file NAME (modified at MTIME) if it is what a killed write left: one no writer holds locked,
 * or, where locks do not work, one older than any write. Returns 1 if removed. The unlink happens under the lock,
 * and a writer checks after taking it that its file is still linked (archive_tmp_lock()), so a write that has
 * created its file but not yet locked it loses only the name, and tries another. */
static int archive_tmp_remove_orphan(Archive *a, const char *name, uint64_t mtime, uint64_t now) {
        _cleanup_close_ int fd = -EBADF;

        /* O_RDWR: NFS emulates flock() with byte-range locks, and an exclusive one needs a writable fd. */
        fd = openat(a->dir_fd, name, O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK);
        if (fd < 0)
                return 0;
        if (flock(fd, LOCK_EX | LOCK_NB) < 0 && (errno == EWOULDBLOCK || mtime + ARCHIVE_TMP_MAX_AGE_USEC > now))
                return 0;
        if (unlinkat(a->dir_fd, name, 0) < 0) {
                if (errno != ENOENT)
                        log_debug_errno(negative_errno(), "Failed to remove stale '%s', ignoring: %m", name);
                return 0;
        }
        log_debug("Removed stale temporary file '%s' from the archive.", name);
        return 1;
}

/* Take the writer's lock on the new temporary file FD: -ESTALE when archive_tmp_remove_orphan() removed it first.
 * Where flock() does not work the file's age protects it instead. */
static int archive_tmp_lock(int fd) {
        struct stat st;

        if (flock(fd, LOCK_EX) < 0)
                return 0;
        if (fstat(fd, &st) < 0)
                return negative_errno();
        return st.st_nlink == 0 ? -ESTALE : 0;
}

int archive_sweep_tmp(Archive *a, uint64_t now) {
        _cleanup_closedir_ DIR *d = NULL;
        struct dirent *de;
        int fd, removed = 0;

        if (!a)
                return -EINVAL;
        fd = openat(a->dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        d = fdopendir(fd);
        if (!d) {
                safe_close(fd);
                return negative_errno();
        }
        while ((de = readdir(d))) {
                struct stat st;
                uint64_t mtime;

                if (!archive_tmp_name_is_ours(de->d_name))
                        continue;
                if (fstatat(a->dir_fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
                        continue;
                mtime = (uint64_t) st.st_mtim.tv_sec * USEC_PER_SEC + (uint64_t) st.st_mtim.tv_nsec / NSEC_PER_USEC;
                removed += archive_tmp_remove_orphan(a, de->d_name, mtime, now);
        }
        return removed;
}

int archive_open(const char *dir, Archive **ret) {
        _cleanup_(archive_freep) Archive *a = NULL;

        if (!ret)
                return -EINVAL;
        dir = dir ?: ARCHIVE_DIR_DEFAULT;
        /* An existing directory gives EEXIST even where we may not create one (read-only stackctl). */
        if (mkdir(dir, 0750) < 0 && errno != EEXIST)
                return negative_errno();
        a = calloc(1, sizeof *a);
        if (!a)
                return -ENOMEM;
        a->dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (a->dir_fd < 0)
                return negative_errno();
        *ret = TAKE_PTR(a);
        return 0;
}

Archive *archive_free(Archive *a) {
        if (!a)
                return NULL;
        safe_close(a->dir_fd);
        free(a);
        return NULL;
}

int archive_dir_fd(const Archive *a) {
        return a ? a->dir_fd : -EBADF;
}

/* ---- write ---- */

/* The bytes of one snapshot file: the header frame (which names the id) and the compressed document. */
typedef struct ArchiveFile {
        const uint8_t *header;
        size_t header_size;
        const uint8_t *frame;
        size_t frame_size;
} ArchiveFile;

/* Write F to FD and make it durable: it gets its final name only after this. */
static int archive_file_write(int fd, const ArchiveFile *f) {
        int r;

        r = loop_write(fd, f->header, f->header_size);
        if (r < 0)
                return r;
        r = loop_write(fd, f->frame, f->frame_size);
        if (r < 0)
                return r;
        if (fsync(fd) < 0)
                return negative_errno();
        return 0;
}

/* Write F as a nameless O_TMPFILE and link it in as NAME: it has no name until it is complete and on disk, and a
 * crash at any point leaves nothing to clean up. -EOPNOTSUPP when the kernel, the file system or a missing /proc
 * cannot do this; -EEXIST when NAME is taken. */
static int archive_commit_tmpfile(Archive *a, const char *name, const ArchiveFile *f) {
        _cleanup_close_ int fd = -EBADF;
        char path[64];
        int r;

        fd = openat(a->dir_fd, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0640);
        if (fd < 0) {
                r = negative_errno();
                /* EISDIR: a kernel that predates O_TMPFILE; EOPNOTSUPP: a file system without it. */
                return r == -EISDIR ? -EOPNOTSUPP : r;
        }
        r = archive_file_write(fd, f);
        if (r < 0)
                return r;
        /* AT_EMPTY_PATH would need CAP_DAC_READ_SEARCH; the /proc link works for everyone. */
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
        if (linkat(AT_FDCWD, path, a->dir_fd, name, AT_SYMLINK_FOLLOW) < 0) {
                r = negative_errno();
                /* No /proc (a chroot): the fd cannot be named, so write the data again under a temporary name. */
                return r == -ENOENT ? -EOPNOTSUPP : r;
        }
        return 0;
}

/* renameat() that fails with -EEXIST instead of replacing TO. */
static int rename_noreplace(int dir_fd, const char *from, const char *to) {
        struct stat st;

        if (renameat2(dir_fd, from, dir_fd, to, RENAME_NOREPLACE) >= 0)
                return 0;
        if (errno != EINVAL && errno != ENOSYS)
                return negative_errno();
        /* A file system without RENAME_NOREPLACE (the same old ones that lack O_TMPFILE): check, then rename.
         * Only a writer of the same pid in the same microsecond could slip in between. */
        if (fstatat(dir_fd, to, &st, AT_SYMLINK_NOFOLLOW) >= 0)
                return -EEXIST;
        if (errno != ENOENT)
                return negative_errno();
        if (renameat(dir_fd, from, dir_fd, to) < 0)
                return negative_errno();
        return 0;
}

/* The fallback: write F to ".tmp-<ID>-XXXXXX" under flock(), fsync, rename to NAME. A crash leaves at most the
 * temporary file, unlocked, which archive_sweep_tmp() removes. */
static int archive_commit_named(Archive *a, const char *id, const char *name, const ArchiveFile *f) {
        _cleanup_close_ int fd = -EBADF;
        char tmp[NAME_SIZE];
        int r;

        for (int i = 0;; i++) {
                char rnd[TMP_RANDOM_LEN + 1];
                int n;

                if (i >= ARCHIVE_TMP_ATTEMPTS)
                        return -EBUSY;
                random_name_part(rnd);
                n = snprintf(tmp, sizeof tmp, TMP_PREFIX "%s-%s", id, rnd);
                if (n < 0 || (size_t) n >= sizeof tmp)
                        return -EINVAL;
                fd = openat(a->dir_fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY, 0640);
                if (fd < 0) {
                        if (errno != EEXIST)
                                return negative_errno();
                        continue;
                }
                /* The sign of a live writer for archive_sweep_tmp(), held until FD closes after the rename. */
                r = archive_tmp_lock(fd);
                if (r >= 0)
                        break;
                fd = safe_close(fd);
                if (r != -ESTALE) {
                        (void) unlinkat(a->dir_fd, tmp, 0);
                        return r;
                }
        }
        r = archive_file_write(fd, f);
        if (r >= 0)
                r = rename_noreplace(a->dir_fd, tmp, name);
        if (r < 0) {
                (void) unlinkat(a->dir_fd, tmp, 0);
                return r;
        }
        return 0;
}

/* One attempt to store the compressed document FRAME under the first free id for TIMESTAMP_USEC and the pid. */
static int archive_write_once(Archive *a, const uint8_t *frame, size_t frame_size, const ArchiveSummary *summary,
                              uint64_t timestamp_usec, uint64_t size, char **ret_id) {
        int r;

        for (unsigned k = 1; k <= ARCHIVE_COLLISIONS_MAX; k++) {
                _cleanup_free_ uint8_t *header = NULL;
                _cleanup_free_ char *dup = NULL;
                char id[NAME_SIZE], name[NAME_SIZE];
                ArchiveFile f;
                struct stat st;

                r = archive_format_id(timestamp_usec, summary->pid, k, id);
                if (r < 0)
                        return r;
                r = archive_id_to_name(id, name);
                if (r < 0)
                        return r;
                /* The cheap check; linkat() and renameat2() decide for real without ever replacing a file. */
                if (fstatat(a->dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) >= 0)
                        continue;
                if (errno != ENOENT)
                        return negative_errno();
                /* Allocate everything before the file has a name, so that success cannot turn into -ENOMEM. */
                dup = strdup(id);
                if (!dup)
                        return -ENOMEM;
                f = (ArchiveFile) { .frame = frame, .frame_size = frame_size };
                r = archive_header_build(id, timestamp_usec, summary, size, &header, &f.header_size);
                if (r < 0)
                        return r;
                f.header = header;

                r = -EOPNOTSUPP;
                if (!a->no_tmpfile) {
                        r = archive_commit_tmpfile(a, name, &f);
                        if (r == -EOPNOTSUPP) {
                                log_debug("O_TMPFILE is not usable in the archive directory, using temporary names.");
                                a->no_tmpfile = true;
                        }
                }
                if (r == -EOPNOTSUPP)
                        r = archive_commit_named(a, id, name, &f);
                if (r == -EEXIST)
                        continue;
                if (r < 0)
                        return r;
                if (fsync(a->dir_fd) < 0) {
                        r = negative_errno();
                        /* The name might not survive a crash; take it back, so that a failed write leaves nothing. */
                        (void) unlinkat(a->dir_fd, name, 0);
                        return r;
                }
                *ret_id = TAKE_PTR(dup);
                return 0;
        }
        return -EEXIST;
}

/* Compress the document into one zstd frame with its content size (checked on read) and a checksum. */
static int archive_compress(const char *json, size_t len, uint8_t **ret, size_t *ret_size) {
        _cleanup_(ZSTD_freeCCtxp) ZSTD_CCtx *cctx = NULL;
        _cleanup_free_ uint8_t *buf = NULL;
        size_t bound = ZSTD_compressBound(len), n;

        cctx = ZSTD_createCCtx();
        buf = malloc(bound);
        if (!cctx || !buf)
                return -ENOMEM;
        if (ZSTD_isError(ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, ARCHIVE_ZSTD_LEVEL)) ||
            ZSTD_isError(ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1)))
                return -EIO;
        n = ZSTD_compress2(cctx, buf, bound, json, len);
        if (ZSTD_isError(n)) {
                log_debug("zstd compression failed: %s", ZSTD_getErrorName(n));
                return ZSTD_getErrorCode(n) == ZSTD_error_memory_allocation ? -ENOMEM : -EIO;
        }
        *ret = TAKE_PTR(buf);
        *ret_size = n;
        return 0;
}

int archive_write(Archive *a, const char *json, size_t len, const ArchiveSummary *summary, ArchiveMakeRoom make_room,
                  void *userdata, char **ret_id) {
        _cleanup_free_ uint8_t *frame = NULL;
        _cleanup_free_ char *id = NULL;
        uint64_t timestamp_usec;
        size_t frame_size;
        int r;

        if (!a || !json || len == 0 || !summary || summary->pid <= 0 || summary->pid > ARCHIVE_PID_MAX)
                return -EINVAL;
        if (len > ARCHIVE_DOCUMENT_MAX)
                return -EFBIG;
        timestamp_usec = summary->timestamp_usec ?: now_usec(CLOCK_REALTIME);
        if (timestamp_usec / USEC_PER_SEC > ARCHIVE_TIME_MAX_SEC)
                return -EINVAL;

        r = archive_compress(json, len, &frame, &frame_size);
        if (r < 0)
                return r;
        r = archive_write_once(a, frame, frame_size, summary, timestamp_usec, len, &id);
        if (r == -ENOSPC) {
                int k = 0;

                if (make_room) {
                        /* The newest snapshot is the one that matters: make room for it at the cost of the oldest,
                         * whatever the limits say. The header's bytes are bounded, not yet known. */
                        uint64_t need = (uint64_t) frame_size + FRAME_HEADER_SIZE + ARCHIVE_HEADER_MAX +
                                        ARCHIVE_ENOSPC_SLACK;

                        k = make_room(a, need, userdata);
                }
                if (k == -EFBIG)
                        return r; /* it would not fit even in an empty archive: the old snapshots stay */
                log_debug_errno(r, "No room in the archive for a snapshot of pid %d (%m); removed %d old "
                                "snapshot(s)%s, retrying.",
                                summary->pid, MAX(k, 0), k < 0 ? " (vacuum failed)" : "");
                r = archive_write_once(a, frame, frame_size, summary, timestamp_usec, len, &id);
        }
        if (r < 0)
                return r;
        if (ret_id)
                *ret_id = TAKE_PTR(id);
        return 0;
}

/* ---- list, read ---- */

/* A growing array of summaries that frees what it holds unless taken. */
typedef struct SummaryArray {
        ArchiveSummary *items;
        size_t n, alloc;
} SummaryArray;

static void summary_array_done(SummaryArray *s) {
        archive_summaries_free(s->items, s->n);
        *s = (SummaryArray) {};
}

static int summary_compare(const void *a, const void *b) {
        return archive_id_compare(((const ArchiveSummary *) a)->id, ((const ArchiveSummary *) b)->id);
}

int archive_list(Archive *a, ArchiveSummary **ret, size_t *ret_n, size_t *ret_skipped) {
        _cleanup_(summary_array_done) SummaryArray list = {};
        _cleanup_closedir_ DIR *d = NULL;
        size_t skipped = 0;
        int fd, r;

        if (!a || !ret || !ret_n)
                return -EINVAL;
        /* A fresh open file description: readdir() positions must not be shared with a->dir_fd. */
        fd = openat(a->dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        d = fdopendir(fd);
        if (!d) {
                r = negative_errno();
                safe_close(fd);
                return r;
        }
        for (;;) {
                _cleanup_close_ int file_fd = -EBADF;
                char id[NAME_SIZE];
                struct dirent *de;

                errno = 0;
                de = readdir(d);
                if (!de) {
                        if (errno != 0)
                                return negative_errno();
                        break;
                }
                /* Names that are not ours (README, core, editor backups) are not ours to read or report. */
                if (!archive_name_to_id(de->d_name, id))
                        continue;
                if (!GREEDY_REALLOC(list.items, list.alloc, list.n + 1))
                        return -ENOMEM;
                r = archive_open_file(a->dir_fd, de->d_name, &file_fd);
                if (r >= 0)
                        r = archive_header_read(file_fd, id, &list.items[list.n], NULL);
                if (r == -ENOENT)
                        continue; /* removed since readdir(): a vacuum running elsewhere, not damage */
                if (r == -ENOMEM)
                        return r;
                if (r < 0) {
                        skipped++;
                        log_debug_errno(r, "Skipping '%s' in the archive, its header is unreadable: %m", de->d_name);
                        continue;
                }
                list.n++;
        }
        if (list.n > 0) /* qsort(NULL, 0, …) is undefined */
                qsort(list.items, list.n, sizeof *list.items, summary_compare);
        *ret = TAKE_PTR(list.items);
        *ret_n = list.n;
        list = (SummaryArray) {};
        if (ret_skipped)
                *ret_skipped = skipped;
        return 0;
}

/* The id of the newest snapshot with a readable header. */
static int archive_latest_id(Archive *a, char **ret) {
        ArchiveSummary *s = NULL;
        size_t n = 0;
        char *id;
        int r;

        r = archive_list(a, &s, &n, NULL);
        if (r < 0)
                return r;
        if (n == 0) {
                archive_summaries_free(s, n);
                return -ENOENT;
        }
        id = TAKE_PTR(s[n - 1].id);
        archive_summaries_free(s, n);
        *ret = id;
        return 0;
}

/* The document frame BUF (N bytes) of a file whose header S says how large the document is: exactly one frame, of
 * that size, no truncation, no trailing bytes; decompressed and NUL-terminated into *RET. */
static int archive_document_decode(const uint8_t *buf, size_t n, const ArchiveSummary *s, char **ret) {
        _cleanup_free_ char *out = NULL;
        unsigned long long c;
        size_t d;

        if (s->size > ARCHIVE_DOCUMENT_MAX || n > ZSTD_compressBound(ARCHIVE_DOCUMENT_MAX))
                return -EFBIG;
        c = ZSTD_getFrameContentSize(buf, n);
        if (c == ZSTD_CONTENTSIZE_ERROR || c == ZSTD_CONTENTSIZE_UNKNOWN || c != s->size ||
            ZSTD_findFrameCompressedSize(buf, n) != n)
                return -EBADMSG;
        out = malloc((size_t) s->size + 1);
        if (!out)
                return -ENOMEM;
        d = ZSTD_decompress(out, (size_t) s->size, buf, n);
        if (ZSTD_isError(d) || d != s->size) {
                log_debug("Snapshot '%s' does not decompress: %s", s->id,
                          ZSTD_isError(d) ? ZSTD_getErrorName(d) : "short");
                return ZSTD_isError(d) && ZSTD_getErrorCode(d) == ZSTD_error_memory_allocation ? -ENOMEM : -EBADMSG;
        }
        out[s->size] = '\0';
        *ret = TAKE_PTR(out);
        return 0;
}

int archive_decode(const uint8_t *file, size_t size, char **ret_json, size_t *ret_len, ArchiveSummary *ret_summary) {
        _cleanup_(archive_summary_done) ArchiveSummary s = {};
        _cleanup_free_ char *out = NULL;
        uint32_t len;
        int r;

        if (size < FRAME_HEADER_SIZE || get_le32(file) != ARCHIVE_HEADER_MAGIC)
                return -EBADMSG;
        len = get_le32(file + 4);
        if (len > ARCHIVE_HEADER_MAX || FRAME_HEADER_SIZE + len > size)
                return -EBADMSG;
        r = archive_header_parse((const char *) file + FRAME_HEADER_SIZE, len, NULL, &s);
        if (r < 0)
                return r;
        s.file_size = size;
        r = archive_document_decode(file + FRAME_HEADER_SIZE + len, size - FRAME_HEADER_SIZE - len, &s, &out);
        if (r < 0)
                return r;
        *ret_json = TAKE_PTR(out);
        if (ret_len)
                *ret_len = (size_t) s.size;
        if (ret_summary) {
                *ret_summary = s;
                s = (ArchiveSummary) {};
        }
        return 0;
}

int archive_read_file(Archive *a, const char *id, uint64_t max, uint8_t **ret, size_t *ret_size) {
        _cleanup_free_ uint8_t *buf = NULL;
        _cleanup_close_ int fd = -EBADF;
        char name[NAME_SIZE];
        struct stat st;
        ssize_t k;
        int r;

        if (!a || !archive_id_is_valid(id))
                return -EINVAL;
        r = archive_id_to_name(id, name);
        if (r < 0)
                return r;
        r = archive_open_file(a->dir_fd, name, &fd);
        if (r < 0)
                return r;
        if (fstat(fd, &st) < 0)
                return negative_errno();
        *ret_size = (size_t) st.st_size;
        if ((uint64_t) st.st_size > max)
                return -EFBIG;
        buf = malloc(MAX((size_t) st.st_size, 1U));
        if (!buf)
                return -ENOMEM;
        k = loop_pread(fd, buf, (size_t) st.st_size, 0);
        if (k < 0)
                return (int) k;
        if ((size_t) k != (size_t) st.st_size)
                return -EBADMSG;
        *ret = TAKE_PTR(buf);
        return 0;
}

int archive_read(Archive *a, const char *id, char **ret_json, size_t *ret_len, ArchiveSummary *ret_summary) {
        _cleanup_(archive_summary_done) ArchiveSummary s = {};
        _cleanup_free_ char *latest = NULL, *out = NULL;
        _cleanup_free_ uint8_t *buf = NULL;
        _cleanup_close_ int fd = -EBADF;
        char name[NAME_SIZE];
        size_t header_size, n;
        ssize_t k;
        int r;

        if (!a || !ret_json)
                return -EINVAL;
        /* The id is checked before it comes near the file system: "../x", "/abs", "a/b" never reach openat(). */
        if (streq(id, "latest")) {
                r = archive_latest_id(a, &latest);
                if (r < 0)
                        return r;
                id = latest;
        } else if (!archive_id_is_valid(id))
                return -EINVAL;

        r = archive_id_to_name(id, name);
        if (r < 0)
                return r;
        r = archive_open_file(a->dir_fd, name, &fd);
        if (r < 0)
                return r;
        r = archive_header_read(fd, id, &s, &header_size);
        if (r < 0)
                return r;
        if (s.file_size < header_size)
                return -EBADMSG; /* shrank under us */
        if (s.size > ARCHIVE_DOCUMENT_MAX || s.file_size - header_size > ZSTD_compressBound(ARCHIVE_DOCUMENT_MAX))
                return -EFBIG;
        n = (size_t) (s.file_size - header_size);
        buf = malloc(MAX(n, 1U));
        if (!buf)
                return -ENOMEM;
        k = loop_pread(fd, buf, n, (off_t) header_size);
        if (k < 0)
                return (int) k;
        if ((size_t) k != n)
                return -EBADMSG;
        r = archive_document_decode(buf, n, &s, &out);
        if (r < 0)
                return r;

        *ret_json = TAKE_PTR(out);
        if (ret_len)
                *ret_len = (size_t) s.size;
        if (ret_summary) {
                *ret_summary = s;
                s = (ArchiveSummary) {};
        }
        return 0;
}
