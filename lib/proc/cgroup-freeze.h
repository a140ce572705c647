/* cgroup-freeze.h: whether a process is held by a cgroup freezer, v1 (freezer.state) or v2 (cgroup.freeze and
 * cgroup.events), read from the cgroup file systems without touching the process. /proc cannot say it: since Linux
 * 6.1 a task frozen by the v1 freezer is TASK_FROZEN, shown as D with the wait channel it had (hrtimer_nanosleep for
 * a frozen sleep), no longer parked in __refrigerator; a task of a frozen v2 cgroup shows as S. A paused container
 * looks hung on v1 and idle on v2; its cgroup says what it is. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/intmap.h"

#define CGROUP_FROZEN_PATH_MAX 256

/* The freezer that holds a process. */
typedef struct CgroupFrozen {
        unsigned version;                       /* 1 or 2; 0: not frozen */
        char cgroup[CGROUP_FROZEN_PATH_MAX];    /* the cgroup whose freezer holds it, in its hierarchy (an ancestor of
                                                 * the process's own when that froze it) */
} CgroupFrozen;

/* Where a process sits, in the hierarchies that can freeze it. */
typedef struct CgroupPlace {
        char *v1;               /* its cgroup in the v1 freezer hierarchy; NULL when none is mounted or listed */
        char *v2;               /* its cgroup in the unified hierarchy; NULL likewise */
} CgroupPlace;

/* The mounted hierarchies (found at systemd's places: /sys/fs/cgroup, /sys/fs/cgroup/unified and
 * /sys/fs/cgroup/freezer, each checked to be the file system it should) and the answers of one scan, by cgroup. */
typedef struct CgroupFreezers {
        char *v1_root, *v2_root;        /* NULL when that hierarchy is not mounted there */
        IntMap cache;                   /* per cgroup (by its path's hash), what the current scan read */
} CgroupFreezers;

int cgroup_freezers_new(CgroupFreezers **ret);
CgroupFreezers *cgroup_freezers_free(CgroupFreezers *f);
/* A new scan: the answers read so far are dropped, a cgroup's freezer may have changed since. */
void cgroup_freezers_forget(CgroupFreezers *f);

/* Where PID sits (from /proc/PID/cgroup), in the hierarchies F has. -ESRCH when it is gone. */
int cgroup_place_read(const CgroupFreezers *f, pid_t pid, CgroupPlace *ret);
void cgroup_place_done(CgroupPlace *p);

/* Whether a process at P is frozen: 1 with *RET saying by which cgroup, 0 when not (or when no file says). A cgroup
 * is read once between two cgroup_freezers_forget(). v1: freezer.state FROZEN or FREEZING (its effective state:
 * a frozen ancestor makes it so; the one that froze it is the nearest with self_freezing 1). v2: cgroup.freeze 1 on
 * it or an ancestor (freezing, or frozen: cgroup.events says which). */
int cgroup_freezers_check(CgroupFreezers *f, const CgroupPlace *p, CgroupFrozen *ret);

/* One look at PID with no answers kept (a capture's). */
int cgroup_frozen_read(pid_t pid, CgroupFrozen *ret);
