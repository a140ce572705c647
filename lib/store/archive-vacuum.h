/* archive-vacuum.h: rotation of the snapshot archive by count, total size, age and free space. */
#pragma once

#include <stdint.h>

#include "store/archive.h"

/* Delete snapshots until the archive is within every limit of LIMITS: first the oldest of those that are neither the
 * first nor the latest of their problem (ArchiveSummary.signature), then the oldest of the rest, so that a frequent
 * problem does not rotate out a rare one. Within every limit of LIMITS (NULL, or all 0: no limit): at
 * most max_snapshots, at most max_size bytes on disk, none older than max_age_usec before NOW_USEC (0 = now), and
 * at least keep_free bytes available to unprivileged users on the file system (statvfs f_bavail * f_frsize), as
 * systemd-coredump's MaxUse= and KeepFree=. Only files with our name and a valid header are ever deleted; what
 * archive_list() skips or ignores stays, and the newest snapshot always stays. Returns the number deleted, or -errno when nothing could be deleted. */
int archive_vacuum(Archive *a, const ArchiveLimits *limits, uint64_t now_usec);

/* archive_vacuum(), and on top of LIMITS delete the oldest snapshots until their files add up to at least
 * MAKE_ROOM bytes: what archive_write() does on ENOSPC. Counting freed bytes rather than asking statvfs() keeps
 * this from emptying the archive on a file system whose root-reserved blocks hide the space from f_bavail.
 * When MAKE_ROOM exceeds the free blocks plus all our snapshots (the write cannot fit even in an empty archive),
 * nothing is deleted and -EFBIG is returned. */
int archive_vacuum_make_room(Archive *a, const ArchiveLimits *limits, uint64_t make_room, uint64_t now_usec);

/* What archive_write_rotating() did to find room, for its caller to tell. */
typedef struct ArchiveRoom {
        bool full;      /* the file system was full at the first try */
        int removed;    /* then: the old snapshots removed for this one, or -errno (-EFBIG: it would not fit even in
                         * an empty archive, and nothing was removed) */
} ArchiveRoom;

/* archive_write() that rotates: on ENOSPC with LIMITS set, the archive is vacuumed with LIMITS and the oldest
 * snapshots make room for this one (archive_vacuum_make_room()), then the write is retried once. RET_ROOM
 * (optional) says whether that happened and what it removed. */
int archive_write_rotating(Archive *a, const char *json, size_t len, const ArchiveSummary *summary,
                           const ArchiveLimits *limits, char **ret_id, ArchiveRoom *ret_room);
