/* cgroup-freeze.c: a process's freezer, from the cgroup file systems (see cgroup-freeze.h). */
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statfs.h>

#include "base/macro.h"
#include "model/proc-parse.h"
#include "proc/cgroup-freeze.h"
#include "proc/proc-read.h"

/* One cgroup's answer, for the current scan. */
typedef struct Answer {
        unsigned version;
        char *path;
        CgroupFrozen frozen;    /* version 0: not frozen */
} Answer;

static char *hierarchy_root(const char *path, long magic) {
        struct statfs st;

        return statfs(path, &st) >= 0 && st.f_type == magic ? strdup(path) : NULL;
}

int cgroup_freezers_new(CgroupFreezers **ret) {
        CgroupFreezers *f = calloc(1, sizeof *f);

        if (!f)
                return -ENOMEM;
        /* The unified hierarchy alone (cgroup v2), or beside the v1 ones (systemd's hybrid layout). */
        f->v2_root = hierarchy_root("/sys/fs/cgroup", CGROUP2_SUPER_MAGIC) ?:
                     hierarchy_root("/sys/fs/cgroup/unified", CGROUP2_SUPER_MAGIC);
        f->v1_root = hierarchy_root("/sys/fs/cgroup/freezer", CGROUP_SUPER_MAGIC);
        *ret = f;
        return 0;
}

void cgroup_freezers_forget(CgroupFreezers *f) {
        for (size_t i = 0; i < f->cache.size; i++)
                if (f->cache.keys[i] > 0) {
                        Answer *a = f->cache.values[i];

                        free(a->path);
                        free(a);
                }
        intmap_done(&f->cache);
}

CgroupFreezers *cgroup_freezers_free(CgroupFreezers *f) {
        if (!f)
                return NULL;
        cgroup_freezers_forget(f);
        free(f->v1_root);
        free(f->v2_root);
        free(f);
        return NULL;
}

void cgroup_place_done(CgroupPlace *p) {
        p->v1 = mfree(p->v1);
        p->v2 = mfree(p->v2);
}

int cgroup_place_read(const CgroupFreezers *f, pid_t pid, CgroupPlace *ret) {
        _cleanup_close_ int dirfd = -EBADF;
        _cleanup_free_ char *text = NULL;
        CgroupPlace p = {};
        size_t len;
        int r;

        r = proc_open_dir(pid, 0, &dirfd);
        if (r < 0)
                return r;
        r = proc_read_full(dirfd, "cgroup", 16384, &text, &len);
        if (r < 0)
                return r;
        if ((f->v1_root && proc_parse_cgroup_hierarchy(text, len, "freezer", &p.v1) == -ENOMEM) ||
            (f->v2_root && proc_parse_cgroup_hierarchy(text, len, "", &p.v2) == -ENOMEM)) {
                cgroup_place_done(&p);
                return -ENOMEM;
        }
        *ret = p;
        return 0;
}

/* FNV-1a of the version and the path: the cache's key (> 0, as IntMap wants). */
static int answer_key(unsigned version, const char *path) {
        uint32_t h = 2166136261u ^ version;

        for (const char *c = path; *c; c++)
                h = (h ^ (uint8_t) *c) * 16777619u;
        h &= INT32_MAX;
        return h ? (int) h : 1;
}

/* The first word of ROOT/PATH/NAME, "" when it cannot be read (the cgroup went away, a kernel without the file). */
static void read_word(const char *root, const char *path, const char *name, char *buf, size_t size) {
        char file[PATH_MAX];
        ssize_t n;

        buf[0] = '\0';
        if ((size_t) snprintf(file, sizeof file, "%s%s/%s", root, streq(path, "/") ? "" : path, name) >= sizeof file)
                return;
        n = proc_read_small(AT_FDCWD, file, buf, size);
        if (n < 0)
                buf[0] = '\0';
        buf[strcspn(buf, " \n")] = '\0';
}

/* PATH's parent into BUF ("/" for a top-level cgroup); false for the root itself. */
static bool parent_of(const char *path, char *buf, size_t size) {
        const char *slash = strrchr(path, '/');

        if (!slash || streq(path, "/") || (size_t) (slash - path) + 2 > size)
                return false;
        if (slash == path)
                snprintf(buf, size, "/");
        else
                snprintf(buf, size, "%.*s", (int) (slash - path), path);
        return true;
}

static int check(CgroupFreezers *f, unsigned version, const char *path, CgroupFrozen *ret);

/* Read the answer for cgroup PATH: v1 from its effective freezer.state, naming the nearest cgroup (itself or an
 * ancestor) that froze itself; v2 from cgroup.freeze, its own or, through the cache, its parent's. */
static int answer_read(CgroupFreezers *f, unsigned version, const char *path, CgroupFrozen *ret) {
        char word[32], parent[CGROUP_FROZEN_PATH_MAX], at[CGROUP_FROZEN_PATH_MAX];

        *ret = (CgroupFrozen) {};
        if (version == 1) {
                read_word(f->v1_root, path, "freezer.state", word, sizeof word);
                if (!streq(word, "FROZEN") && !streq(word, "FREEZING"))
                        return 0;
                *ret = (CgroupFrozen) { .version = 1 };
                snprintf(ret->cgroup, sizeof ret->cgroup, "%s", path);
                snprintf(at, sizeof at, "%s", path);
                for (;;) {
                        read_word(f->v1_root, at, "freezer.self_freezing", word, sizeof word);
                        if (streq(word, "1")) {
                                snprintf(ret->cgroup, sizeof ret->cgroup, "%s", at);
                                break;
                        }
                        if (!parent_of(at, parent, sizeof parent))
                                break;
                        memcpy(at, parent, sizeof at);
                }
                return 1;
        }
        read_word(f->v2_root, path, "cgroup.freeze", word, sizeof word);
        if (streq(word, "1")) {
                *ret = (CgroupFrozen) { .version = 2 };
                snprintf(ret->cgroup, sizeof ret->cgroup, "%s", path);
                return 1;
        }
        if (!parent_of(path, parent, sizeof parent))
                return 0;
        return check(f, 2, parent, ret);
}

static int check(CgroupFreezers *f, unsigned version, const char *path, CgroupFrozen *ret) {
        int key = answer_key(version, path);
        Answer *a = intmap_get(&f->cache, key);
        int r;

        if (a && a->version == version && streq(a->path, path)) {
                *ret = a->frozen;
                return a->frozen.version > 0;
        }
        r = answer_read(f, version, path, ret);
        if (r < 0)
                return r;
        /* Kept unless another cgroup has the slot (a hash collision): then this one is read again next time. */
        if (!a) {
                a = calloc(1, sizeof *a);
                if (!a)
                        return -ENOMEM;
                *a = (Answer) { .version = version, .path = strdup(path), .frozen = *ret };
                if (!a->path || intmap_put(&f->cache, key, a) < 0) {
                        free(a->path);
                        free(a);
                        return -ENOMEM;
                }
        }
        return r;
}

int cgroup_freezers_check(CgroupFreezers *f, const CgroupPlace *p, CgroupFrozen *ret) {
        int r;

        *ret = (CgroupFrozen) {};
        if (p->v1 && f->v1_root) {
                r = check(f, 1, p->v1, ret);
                if (r != 0)
                        return r;
        }
        if (p->v2 && f->v2_root)
                return check(f, 2, p->v2, ret);
        return 0;
}

int cgroup_frozen_read(pid_t pid, CgroupFrozen *ret) {
        CgroupFreezers *f = NULL;
        CgroupPlace p = {};
        int r;

        r = cgroup_freezers_new(&f);
        if (r < 0)
                return r;
        r = cgroup_place_read(f, pid, &p);
        if (r >= 0)
                r = cgroup_freezers_check(f, &p, ret);
        cgroup_place_done(&p);
        cgroup_freezers_free(f);
        return r;
}
