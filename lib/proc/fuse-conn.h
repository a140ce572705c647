/* fuse-conn.h: FUSE mounts as a process sees them, and whether the daemon behind one would answer a request now.
 * Nothing here sends a FUSE request: a stat() or open() of a file whose daemon does not answer waits with it, and
 * once the daemon has read the request, in D state, where no signal reaches. */
#pragma once

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "proc/peers-tables.h"

typedef struct FuseMount {
        int mnt_id;
        unsigned major, minor;          /* the mount's device: st_dev of its files, as maps shows it */
        char mountpoint[PATH_MAX];      /* as the process sees it, unescaped */
        char fstype[64];                /* fuse, fuse.NAME or fuseblk */
} FuseMount;

/* The connection of a mount, as the kernel numbers it (/sys/fs/fuse/connections/N, the fuse_connection of
 * /dev/fuse's fdinfo): the device of its superblock. */
static inline unsigned fuse_mount_connection(const FuseMount *m) {
        return m->major << 20 | m->minor;
}

/* The FUSE mounts of a mountinfo TEXT (NUL-terminated, cut up in place), in its order (none: *RET NULL and 0). */
int fuse_mounts_parse(char *text, FuseMount **ret, size_t *ret_n);
/* PID's FUSE mounts, from its mountinfo. */
int fuse_mounts_load(pid_t pid, FuseMount **ret, size_t *ret_n);

/* The mount on device MAJOR:MINOR, or NULL. */
const FuseMount *fuse_mounts_by_dev(const FuseMount *m, size_t n, unsigned major, unsigned minor);
/* The mount that holds PATH (absolute, as the process sees it): the longest mount point that is a prefix of it at a
 * component boundary; NULL when it is on no FUSE mount. Mounts over a FUSE mount's subtree are not told apart. */
const FuseMount *fuse_mounts_by_path(const FuseMount *m, size_t n, const char *path);

/* The fds of distinct processes holding /dev/fuse for CONNECTION in R's fd pass (loaded if it was not), up to MAX
 * in RET: how many. *RET_UNKNOWN says that some /dev/fuse fd does not name its connection (a kernel without
 * fuse_connection in fdinfo), so a holder may be missing. */
int fuse_connection_holders(PeerResolver *r, unsigned connection, const FdOwner **ret, size_t max,
                            bool *ret_unknown);

/* A file on a FUSE mount is read only through this: a daemon can take requests (a thread of it waits in /dev/fuse,
 * so fuse_connection_answering() says yes) and answer none of them (a dead sshfs whose idle reader thread still
 * waits), and then an open(), a stat() or a read of a page not in memory waits for it, uninterruptibly once the
 * daemon has read the request. A child opens PATH and copies it into a memfd that comes back over a socket, while
 * we wait at most TIMEOUT_USEC; past that the child is killed and left (it may stay in D until the daemon answers;
 * we never do). WANT, when not NULL, is the file expected (its st_dev and st_ino: the one mapped). 0 and *RET_FD (the
 * memfd, at offset 0); -ETIMEDOUT; -ESTALE for another file; -EFBIG past FUSE_COPY_MAX; or the child's errno. */
#define FUSE_COPY_MAX (256U * 1024 * 1024)
#define FUSE_COPY_TIMEOUT_USEC (1000U * 1000)
int fuse_copy_file(const char *path, const struct stat *want, uint64_t timeout_usec, int *ret_fd);

/* Whether the daemon of CONNECTION would take a request now: 1 when one of the processes holding /dev/fuse for it
 * (all of them, where the kernel does not say which) has a thread asleep waiting for requests, or when nobody holds
 * it (the kernel then fails every request at once); 0 when none has (stopped, hung, or busy with every thread),
 * with WHY saying so in a few words. */
int fuse_connection_answering(PeerResolver *r, unsigned connection, char *why, size_t why_len);
