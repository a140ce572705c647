/* archive.h: the snapshot archive: one zstd file per snapshot, written atomically, listed from small headers. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/macro.h"

/* File format (stackwatch.archive/1):
 *   1. a zstd skippable frame (magic ARCHIVE_HEADER_MAGIC, little-endian u32 length, then that many bytes) that
 *      holds the summary as one JSON object: {"schema", "id", "timestamp_usec", "pid", "comm", "rule", "class",
 *      "size", and when known "exe", "unit", "signature", "title" and "host"}, at most ARCHIVE_HEADER_MAX bytes, so
 *      that listing reads one small block per file (exe, unit, title and host are left out when longer than
 *      ARCHIVE_HEADER_FIELD_MAX);
 *   2. one ordinary zstd frame (content size and checksum set) with the snapshot document, "size" bytes.
 * Decoders skip skippable frames, so "zstd -d" yields the document alone.
 * Schema history:
 *   stackwatch.archive/1  first version. */
#define ARCHIVE_SCHEMA "stackwatch.archive/1"
#define ARCHIVE_HEADER_MAGIC 0x184D2A50U
#define ARCHIVE_HEADER_MAX 4096U
#define ARCHIVE_HEADER_FIELD_MAX 1024U
#define ARCHIVE_SUFFIX ".json.zst"
#define ARCHIVE_DIR_DEFAULT "/var/lib/stackwatch"
/* The largest document the archive stores or reads back. */
#define ARCHIVE_DOCUMENT_MAX (256U * 1024U * 1024U)

/* An id is "YYYYMMDDTHHMMSS.uuuuuuZ-<pid>" (UTC) with "-N" (N = 2, 3, …) appended when that name was taken.
 * ARCHIVE_ID_MAX counts the longest id without its NUL. */
#define ARCHIVE_ID_MAX 35U

/* Limits for archive_vacuum(); 0 = no limit. */
typedef struct ArchiveLimits {
        uint64_t max_snapshots;
        uint64_t max_size;     /* bytes on disk of all snapshots */
        uint64_t max_age_usec; /* by the snapshot's own timestamp */
        uint64_t keep_free;    /* bytes that must stay available on the file system */
} ArchiveLimits;

/* What a snapshot's header says, plus its size on disk. For archive_write() only timestamp_usec (0 = now), pid,
 * comm, rule, klass, exe, unit, signature, title and host are read; id, size and file_size are filled in by the archive. */
typedef struct ArchiveSummary {
        char *id;
        uint64_t timestamp_usec; /* CLOCK_REALTIME */
        int pid;
        char *comm;
        char *rule;
        char *klass;             /* "class" in the header */
        char *exe, *unit;        /* NULL when unknown (or written by a version without them) */
        char *signature, *title; /* the problem it shows (render/signature.h); NULL when the header has none: a
                                  * version without them wrote it, read the document for them */
        char *host;              /* the host it was taken on; NULL when unknown */
        uint64_t size;           /* uncompressed document bytes */
        uint64_t file_size;      /* bytes on disk */
} ArchiveSummary;

typedef struct Archive Archive;

/* Open the archive directory DIR (NULL: ARCHIVE_DIR_DEFAULT), creating it (0750) if missing. */
int archive_open(const char *dir, Archive **ret);
/* Remove the temporary files ".tmp-<id>-XXXXXX" that killed writes left behind (only where O_TMPFILE is missing:
 * FUSE, NFS, old kernels): those no writer holds locked; where flock() does not work, those an hour old. Returns
 * how many it removed, or -errno when the directory cannot be read. */
int archive_sweep_tmp(Archive *a, uint64_t now);
/* Close the directory and free; NULL-safe, returns NULL. */
Archive *archive_free(Archive *a);
DEFINE_TRIVIAL_CLEANUP_FUNC(Archive *, archive_free);

/* The archive directory's O_DIRECTORY fd, owned by the archive (for archive-vacuum.c). */
int archive_dir_fd(const Archive *a);

/* What archive_write() calls when the file system is full: free at least NEED bytes of old snapshots. Returns
 * the number of snapshots deleted, or -errno; -EFBIG when no deletion could make the room (then nothing is
 * deleted and the write gives up at once). */
typedef int (*ArchiveMakeRoom)(Archive *a, uint64_t need, void *userdata);

/* Store the document JSON (LEN bytes) with the summary fields of SUMMARY; RET_ID (optional) gets the new id.
 * On ENOSPC, MAKE_ROOM (with USERDATA) is asked to free room for this one, then the write is retried once; with
 * MAKE_ROOM NULL nothing is deleted and the retry only helps if someone else freed space (the rotating writer is
 * archive_write_rotating() in archive-vacuum.h). A failed write leaves no file behind. Returns -ENOSPC when
 * there is still no room, -EINVAL for a bad pid or timestamp, -E2BIG when the summary does not fit
 * ARCHIVE_HEADER_MAX, -EFBIG beyond ARCHIVE_DOCUMENT_MAX. */
int archive_write(Archive *a, const char *json, size_t len, const ArchiveSummary *summary, ArchiveMakeRoom make_room,
                  void *userdata, char **ret_id);

/* List the snapshots, oldest first, from their headers only. Names that are not ours are ignored; files named like
 * ours whose header is unreadable or corrupt are counted in RET_SKIPPED (optional), logged at debug, and left
 * alone. */
int archive_list(Archive *a, ArchiveSummary **ret, size_t *ret_n, size_t *ret_skipped);

/* Read the document of snapshot ID (or "latest") into a malloc'd, NUL-terminated buffer. RET_LEN and RET_SUMMARY
 * are optional. -EINVAL for an id not of our form (checked before the file system is touched), -ENOENT when there
 * is no such snapshot, -EBADMSG when the file is corrupt, -EFBIG beyond ARCHIVE_DOCUMENT_MAX. */
int archive_read(Archive *a, const char *id, char **ret_json, size_t *ret_len, ArchiveSummary *ret_summary);

/* A problem's signature: SIGNATURE_LENGTH (render/signature.h) lowercase hex digits. */
#define ARCHIVE_SIGNATURE_LENGTH 16
bool archive_signature_is_valid(const char *s);

/* Remove snapshot ID (a valid id); -ENOENT when it is not there. */
int archive_remove(Archive *a, const char *id);

/* Whether S is an id of our form (not "latest"): the check for ids from the command line or HTTP. */
bool archive_id_is_valid(const char *s);
/* The bytes of snapshot file ID as they are (header frame and compressed document), for carrying the file elsewhere
 * (the journal); -EFBIG when it is larger than MAX bytes (*RET_SIZE says how large it is). */
int archive_read_file(Archive *a, const char *id, uint64_t max, uint8_t **ret, size_t *ret_size);
/* The document in the bytes of a snapshot file FILE (SIZE) from anywhere (the journal): checked as archive_read()
 * checks a file (its header names its own id); -EBADMSG when anything is off, -EFBIG past ARCHIVE_DOCUMENT_MAX. */
int archive_decode(const uint8_t *file, size_t size, char **ret_json, size_t *ret_len, ArchiveSummary *ret_summary);
/* Order two valid ids: by time, then pid, then collision suffix. */
int archive_id_compare(const char *a, const char *b);

/* Free the strings of one summary and zero it (the struct itself is the caller's); NULL-safe. */
void archive_summary_done(ArchiveSummary *s);
/* S as the API and stackctl list --json show it: {"id", "timestamp_usec", "pid", "comm", "exe", "unit", "rule",
 * "class", "size", "file_size", "signature", "title", "host"} (unknown strings null); NULL on OOM. */
struct json_object *archive_summary_to_json(const ArchiveSummary *s);
/* The other way, for a client of the API: an entry of GET /snapshots into *RET. Lenient about missing strings (NULL)
 * and numbers (0), as a daemon of another version may leave some out; -EBADMSG when O is not an object or its id
 * is not a snapshot id; -ENOMEM. */
int archive_summary_from_json(struct json_object *o, ArchiveSummary *ret);
/* Free an array of N summaries from archive_list(); NULL-safe. */
void archive_summaries_free(ArchiveSummary *s, size_t n);
