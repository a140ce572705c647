/* archive-vacuum.c: delete the oldest snapshots until the archive is within its limits. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "base/alloc-util.h"
#include "base/log.h"
#include "base/macro.h"
#include "base/time-util.h"
#include "store/archive-vacuum.h"

/* Why the oldest remaining snapshot S must go, with N snapshots of TOTAL bytes still there and FREED bytes deleted
 * so far: a reason for the debug log in *RET_REASON, or NULL when every limit holds (and so holds for every newer
 * snapshot too). */
static int vacuum_reason(int dir_fd, const ArchiveLimits *l, const ArchiveSummary *s, size_t n, uint64_t total,
                         uint64_t freed, uint64_t make_room, uint64_t now, const char **ret_reason) {
        const char *reason = NULL;

        if (l->max_snapshots > 0 && n > l->max_snapshots)
                reason = "max_snapshots";
        else if (l->max_size > 0 && total > l->max_size)
                reason = "max_size";
        else if (l->max_age_usec > 0 && now > s->timestamp_usec && now - s->timestamp_usec > l->max_age_usec)
                reason = "max_age";
        else if (freed < make_room)
                reason = "making room";
        else if (l->keep_free > 0) {
                struct statvfs sv;

                /* Asked again after every deletion: the space comes back as files go, whoever else writes. */
                if (fstatvfs(dir_fd, &sv) < 0)
                        return negative_errno();
                if ((uint64_t) sv.f_bavail * sv.f_frsize < l->keep_free)
                        reason = "keep_free";
        }
        *ret_reason = reason;
        return 0;
}

static const ArchiveSummary *sort_list;

static int cmp_by_signature(const void *a, const void *b) {
        size_t x = *(const size_t *) a, y = *(const size_t *) b;
        int c = strcmp(sort_list[x].signature ?: "", sort_list[y].signature ?: "");

        return c != 0 ? c : x < y ? -1 : x > y;
}

/* The order snapshots go in, into ORDER[0..N): first those that are neither the first nor the latest of their
 * problem, oldest first; then the first and latest of each problem (and those without a signature), oldest first.
 * A frequent problem rotating the archive keeps a rare one's snapshot, and its own first one. */
static int deletion_order(const ArchiveSummary *s, size_t n, size_t *order) {
        _cleanup_free_ size_t *by_sig = NULL;
        _cleanup_free_ bool *kept = NULL;
        size_t k = 0;

        if (n == 0)
                return 0;
        by_sig = calloc(n, sizeof *by_sig);
        kept = calloc(n, sizeof *kept);
        if (!by_sig || !kept)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++)
                by_sig[i] = i;
        sort_list = s;
        qsort(by_sig, n, sizeof *by_sig, cmp_by_signature);
        for (size_t i = 0; i < n; i++) {
                const char *sig = s[by_sig[i]].signature;
                bool first = i == 0 || !streq_ptr(s[by_sig[i - 1]].signature, sig);
                bool last = i == n - 1 || !streq_ptr(s[by_sig[i + 1]].signature, sig);

                kept[by_sig[i]] = !sig || first || last;
        }
        for (int pass = 0; pass < 2; pass++)
                for (size_t i = 0; i < n; i++)
                        if (kept[i] == (pass == 1))
                                order[k++] = i;
        return 0;
}

int archive_vacuum_make_room(Archive *a, const ArchiveLimits *limits, uint64_t make_room, uint64_t now) {
        const ArchiveLimits l = limits ? *limits : (ArchiveLimits) {};
        ArchiveSummary *s = NULL;
        _cleanup_free_ size_t *order = NULL;
        uint64_t total = 0, freed = 0;
        size_t n = 0, i;
        int r, deleted = 0, dir_fd = archive_dir_fd(a);

        if (!a)
                return -EINVAL;
        if (l.max_snapshots == 0 && l.max_size == 0 && l.max_age_usec == 0 && l.keep_free == 0 && make_room == 0)
                return 0;
        if (now == 0)
                now = now_usec(CLOCK_REALTIME);
        /* The list holds only files with our name and a valid header, oldest first: the only ones we may delete. */
        r = archive_list(a, &s, &n, NULL);
        if (r < 0)
                return r;
        for (i = 0; i < n; i++)
                total += s[i].file_size;
        order = calloc(MAX(n, 1U), sizeof *order);
        if (!order || deletion_order(s, n, order) < 0) {
                archive_summaries_free(s, n);
                return -ENOMEM;
        }

        /* Room that even an empty archive would not have is not worth the evidence we hold: keep it all. The
         * bound counts the blocks reserved for root (the daemon's), so it errs towards trying. */
        if (make_room > 0) {
                struct statvfs sv;

                if (fstatvfs(dir_fd, &sv) == 0 &&
                    (uint64_t) sv.f_bfree * sv.f_frsize + total < make_room) {
                        log_debug("A new snapshot needs %" PRIu64 " bytes; the file system has %" PRIu64
                                  " free and our %zu snapshot(s) hold %" PRIu64 ": keeping them.",
                                  make_room, (uint64_t) sv.f_bfree * sv.f_frsize, n, total);
                        archive_summaries_free(s, n);
                        return -EFBIG;
                }
        }

        /* A plain vacuum never deletes the newest snapshot, whatever the limits say: a keep_free the file system
         * cannot satisfy would otherwise empty the archive right after every write. Making room for a new one may
         * take them all. */
        for (size_t k = 0, left = n; k < n; k++) {
                char name[ARCHIVE_ID_MAX + sizeof(ARCHIVE_SUFFIX)];
                const char *reason;

                i = order[k];
                if (make_room == 0 && i == n - 1)
                        continue;
                r = vacuum_reason(dir_fd, &l, &s[i], left, total, freed, make_room, now, &reason);
                if (r < 0) {
                        log_debug_errno(r, "Failed to check the free space of the archive: %m");
                        break;
                }
                /* Not this one; an older one later in the order may be past max_age. */
                if (!reason)
                        continue;
                left--;
                if ((size_t) snprintf(name, sizeof name, "%s" ARCHIVE_SUFFIX, s[i].id) >= sizeof name)
                        continue; /* cannot happen: archive_list() returns valid ids only */
                if (unlinkat(dir_fd, name, 0) < 0) {
                        r = negative_errno();
                        if (r != -ENOENT) {
                                log_debug_errno(r, "Failed to remove snapshot '%s' (%s): %m", s[i].id, reason);
                                break;
                        }
                        r = 0; /* already gone: someone else's vacuum got there first */
                } else {
                        log_debug("Removed snapshot '%s' (%s).", s[i].id, reason);
                        deleted++;
                }
                total -= s[i].file_size;
                freed += s[i].file_size;
        }
        archive_summaries_free(s, n);
        return r < 0 && deleted == 0 ? r : deleted;
}

int archive_vacuum(Archive *a, const ArchiveLimits *limits, uint64_t now) {
        return archive_vacuum_make_room(a, limits, 0, now);
}

typedef struct RoomRequest {
        const ArchiveLimits *limits;
        ArchiveRoom room;
} RoomRequest;

static int make_room(Archive *a, uint64_t need, void *userdata) {
        RoomRequest *q = userdata;

        q->room = (ArchiveRoom) { .full = true,
                                  .removed = archive_vacuum_make_room(a, q->limits, need, now_usec(CLOCK_REALTIME)) };
        return q->room.removed;
}

int archive_write_rotating(Archive *a, const char *json, size_t len, const ArchiveSummary *summary,
                           const ArchiveLimits *limits, char **ret_id, ArchiveRoom *ret_room) {
        RoomRequest q = { .limits = limits };
        int r = archive_write(a, json, len, summary, limits ? make_room : NULL, &q, ret_id);

        if (ret_room)
                *ret_room = q.room;
        return r;
}
