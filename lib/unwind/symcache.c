/* symcache.c: debuginfo by build-id, stored uncompressed (see symcache.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <elfutils/libdwelf.h>

#include "base/alloc-util.h"
#include "base/io-util.h"
#include "base/log.h"
#include "base/time-util.h"
#include "unwind/symcache.h"

/* A temporary file this old is what is left of a writer that was killed. */
#define SYMCACHE_TMP_MAX_AGE_USEC (3600ULL * USEC_PER_SEC)
/* An entry used is marked used again (its mtime, the LRU order) when its mark is older than this: not at every
 * use, which would write to the file system at every dump. */
#define SYMCACHE_TOUCH_USEC (600ULL * USEC_PER_SEC)
/* Entries looked at by a trim; a cache with more is trimmed of what it sees. */
#define SYMCACHE_ENTRIES_MAX 65536
#define SYMCACHE_SUFFIX ".debug"
#define SYMCACHE_PCS_SUFFIX ".pcs"
#define SYMCACHE_TMP_PREFIX ".tmp-"
/* Build-ids are 20 bytes (sha1) for GNU ld, 16 for some linkers, up to 64 in the note format we accept. */
#define SYMCACHE_BID_HEX_MAX 128

struct SymCache {
        int dir_fd;
        uint64_t max_size;
};

typedef struct SymCacheEntry {
        char *name;
        uint64_t size;
        uint64_t mtime_usec;
} SymCacheEntry;

static int mkdir_parents(const char *dir) {
        _cleanup_free_ char *p = strdup(dir);

        if (!p)
                return -ENOMEM;
        for (char *s = strchr(p + 1, '/');; s = strchr(s + 1, '/')) {
                if (s)
                        *s = 0;
                if (mkdir(p, 0755) < 0 && errno != EEXIST)
                        return negative_errno();
                if (!s)
                        return 0;
                *s = '/';
        }
}

int symcache_default_dir(char **ret) {
        const char *e = getenv("STACKWATCH_CACHE_DIR"), *home;
        char *d = NULL;

        if (e) {
                if (e[0] && !streq(e, "off") && !(d = strdup(e)))
                        return -ENOMEM;
        } else if (geteuid() == 0) {
                if (!(d = strdup(SYMCACHE_DIR_DEFAULT)))
                        return -ENOMEM;
        } else if ((e = getenv("XDG_CACHE_HOME")) && e[0] == '/') {
                if (asprintf(&d, "%s/stackwatch/symbols", e) < 0)
                        return -ENOMEM;
        } else if ((home = getenv("HOME")) && home[0] == '/') {
                if (asprintf(&d, "%s/.cache/stackwatch/symbols", home) < 0)
                        return -ENOMEM;
        }
        *ret = d;
        return 0;
}

int symcache_new(const char *dir, uint64_t max_size, SymCache **ret) {
        SymCache *c;
        int r, fd;

        if (!dir || dir[0] != '/')
                return -EINVAL;
        (void) elf_version(EV_CURRENT);
        r = mkdir_parents(dir);
        if (r < 0)
                return r;
        fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        c = calloc(1, sizeof *c);
        if (!c) {
                close(fd);
                return -ENOMEM;
        }
        c->dir_fd = fd;
        c->max_size = MAX(max_size, SYMCACHE_MAX_SIZE_MIN);
        *ret = c;
        return 0;
}

SymCache *symcache_free(SymCache *c) {
        if (!c)
                return NULL;
        safe_close(c->dir_fd);
        free(c);
        return NULL;
}

/* A build-id as a file name: lowercase hex, nothing else. */
static bool bid_ok(const char *bid) {
        size_t n = bid ? strlen(bid) : 0;

        if (n < 2 || n > SYMCACHE_BID_HEX_MAX || n % 2)
                return false;
        return strspn(bid, "0123456789abcdef") == n;
}

static bool elf_bid_is(Elf *elf, const char *bid) {
        const unsigned char *bits;
        ssize_t len = dwelf_elf_gnu_build_id(elf, (const void **) &bits);
        char hex[SYMCACHE_BID_HEX_MAX + 1];

        if (len <= 0 || (size_t) len * 2 > SYMCACHE_BID_HEX_MAX)
                return false;
        for (ssize_t i = 0; i < len; i++)
                snprintf(hex + 2 * i, 3, "%02x", bits[i]);
        return streq(hex, bid);
}

bool symcache_elf_valid(int fd, const char *bid) {
        struct stat st;
        GElf_Ehdr eh;
        size_t shnum;
        Elf *elf;
        bool ok = false;

        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
                return false;
        (void) elf_version(EV_CURRENT);
        elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
        if (!elf)
                return false;
        /* libelf bounds what it reads by the file's size, but libdw maps the file again: a section that reaches past
         * the end (a truncated file) would fault there rather than fail here. */
        if (elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &eh) || elf_getshdrnum(elf, &shnum) < 0 ||
            eh.e_shoff + (uint64_t) shnum * eh.e_shentsize > (uint64_t) st.st_size)
                goto out;
        for (Elf_Scn *scn = elf_nextscn(elf, NULL); scn; scn = elf_nextscn(elf, scn)) {
                GElf_Shdr sh;

                if (!gelf_getshdr(scn, &sh))
                        goto out;
                if (sh.sh_type != SHT_NOBITS && (sh.sh_offset > (uint64_t) st.st_size ||
                                                 sh.sh_size > (uint64_t) st.st_size - sh.sh_offset))
                        goto out;
        }
        ok = !bid || elf_bid_is(elf, bid);
out:
        elf_end(elf);
        return ok;
}

int symcache_open(SymCache *c, const char *bid, char **ret_path) {
        char name[SYMCACHE_BID_HEX_MAX + sizeof SYMCACHE_SUFFIX];
        struct stat st;
        int fd;

        if (!bid_ok(bid))
                return -ENOENT;
        snprintf(name, sizeof name, "%s" SYMCACHE_SUFFIX, bid);
        fd = openat(c->dir_fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return negative_errno();
        if (!symcache_elf_valid(fd, bid)) {
                log_debug("Symbol cache entry '%s' is damaged or not what its name says; removing it.", name);
                close(fd);
                (void) unlinkat(c->dir_fd, name, 0);
                return -ENOENT;
        }
        if (fstat(fd, &st) >= 0 && timespec_load(&st.st_mtim) + SYMCACHE_TOUCH_USEC < now_usec(CLOCK_REALTIME))
                (void) futimens(fd, NULL);
        if (ret_path) {
                char path[64];
                char *p;

                /* The fd's own name: the entry may be renamed over by another writer meanwhile. */
                snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
                p = realpath(path, NULL);
                if (!p) {
                        close(fd);
                        return -ENOMEM;
                }
                *ret_path = p;
        }
        return fd;
}

/* What inflating SRC's compressed sections would make of it: its size then, and whether there is any. */
static int inflated_size(int fd, const char *bid, uint64_t *ret_size) {
        struct stat st;
        uint64_t size;
        bool any = false;
        Elf *elf;
        int r = 0;

        if (fstat(fd, &st) < 0)
                return negative_errno();
        elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
        if (!elf)
                return -EBADMSG;
        size = (uint64_t) st.st_size;
        if (!elf_bid_is(elf, bid))
                r = -EBADMSG;
        for (Elf_Scn *scn = elf_nextscn(elf, NULL); r == 0 && scn; scn = elf_nextscn(elf, scn)) {
                GElf_Shdr sh;
                GElf_Chdr ch;

                if (!gelf_getshdr(scn, &sh))
                        r = -EBADMSG;
                else if (sh.sh_flags & SHF_COMPRESSED) {
                        if (!gelf_getchdr(scn, &ch))
                                r = -EBADMSG;
                        else {
                                size += ch.ch_size;
                                any = true;
                        }
                }
        }
        elf_end(elf);
        if (r < 0)
                return r;
        *ret_size = any ? size : 0;
        return 0;
}

static int copy_fd(int from, int to) {
        for (;;) {
                ssize_t n = copy_file_range(from, NULL, to, NULL, 1U << 30, 0);

                if (n == 0)
                        return 0;
                if (n > 0)
                        continue;
                if (errno == EINTR)
                        continue;
                if (errno != EXDEV && errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP)
                        return negative_errno();
                break;
        }
        /* A file system pair copy_file_range() does not serve: copy through a buffer. */
        char buf[64 * 1024];
        for (;;) {
                ssize_t n = read(from, buf, sizeof buf);
                int r;

                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return negative_errno();
                if (n == 0)
                        return 0;
                r = loop_write(to, buf, (size_t) n);
                if (r < 0)
                        return r;
        }
}

/* Inflate every compressed section of the ELF file FD, in place (libelf lays the file out again). */
static int inflate_in_place(int fd) {
        Elf *elf = elf_begin(fd, ELF_C_RDWR, NULL);
        int r = 0;

        if (!elf)
                return -EBADMSG;
        for (Elf_Scn *scn = elf_nextscn(elf, NULL); r == 0 && scn; scn = elf_nextscn(elf, scn)) {
                GElf_Shdr sh;

                if (!gelf_getshdr(scn, &sh))
                        r = -EBADMSG;
                else if ((sh.sh_flags & SHF_COMPRESSED) && elf_compress(scn, 0, 0) < 0)
                        r = -EBADMSG;
        }
        errno = 0;
        if (r == 0 && elf_update(elf, ELF_C_WRITE) < 0) {
                /* libelf has its own error codes; a failed write leaves the system's in errno. */
                r = errno > 0 ? -errno : -EIO;
                log_debug("Failed to write the inflated debuginfo: %s", elf_errmsg(-1));
        }
        elf_end(elf);
        return r;
}

#define SYMCACHE_TMP_NAME_MAX (sizeof SYMCACHE_TMP_PREFIX + SYMCACHE_BID_HEX_MAX + 8)

/* A new temporary file in the cache for an entry of BID, its name in TMP: the entry is renamed into place whole. */
static int tmp_create(SymCache *c, const char *bid, char tmp[static SYMCACHE_TMP_NAME_MAX]) {
        char path[PATH_MAX];
        int fd;

        snprintf(tmp, SYMCACHE_TMP_NAME_MAX, SYMCACHE_TMP_PREFIX "%s.XXXXXX", bid);
        /* mkostemp() works relative to the cwd: name the directory through its fd. */
        snprintf(path, sizeof path, "/proc/self/fd/%d/%s", c->dir_fd, tmp);
        fd = mkostemp(path, O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        memcpy(tmp, strrchr(path, '/') + 1, strlen(strrchr(path, '/') + 1) + 1);
        (void) fchmod(fd, 0644);
        return fd;
}

int symcache_store(SymCache *c, const char *bid, const char *src) {
        char tmp[SYMCACHE_TMP_NAME_MAX];
        char name[SYMCACHE_BID_HEX_MAX + sizeof SYMCACHE_SUFFIX];
        _cleanup_close_ int sfd = -EBADF, tfd = -EBADF;
        uint64_t size;
        int r;

        if (!bid_ok(bid))
                return 0;
        sfd = open(src, O_RDONLY | O_CLOEXEC);
        if (sfd < 0)
                return negative_errno();
        r = inflated_size(sfd, bid, &size);
        if (r == -EBADMSG)
                return 0;
        if (r < 0)
                return r;
        if (size == 0 || size > c->max_size)
                return 0;
        snprintf(name, sizeof name, "%s" SYMCACHE_SUFFIX, bid);
        tfd = tmp_create(c, bid, tmp);
        if (tfd < 0)
                return tfd;
        r = copy_fd(sfd, tfd);
        if (r >= 0)
                r = inflate_in_place(tfd);
        if (r >= 0 && !symcache_elf_valid(tfd, bid))
                r = -EBADMSG;
        if (r >= 0 && renameat(c->dir_fd, tmp, c->dir_fd, name) < 0)
                r = negative_errno();
        if (r < 0) {
                (void) unlinkat(c->dir_fd, tmp, 0);
                return r;
        }
        (void) symcache_trim(c);
        return 1;
}

#define SYMCACHE_PCS_NAME_MAX (SYMCACHE_BID_HEX_MAX + sizeof SYMCACHE_PCS_SUFFIX)

/* The file name of BID's resolved addresses in NAME; false when BID is not a build-id (no name made of it). */
static bool pcs_name(const char *bid, char name[static SYMCACHE_PCS_NAME_MAX]) {
        if (!bid_ok(bid))
                return false;
        snprintf(name, SYMCACHE_PCS_NAME_MAX, "%s" SYMCACHE_PCS_SUFFIX, bid);
        return true;
}

int symcache_read_pcs(SymCache *c, const char *bid, char **ret, size_t *ret_size) {
        char name[SYMCACHE_PCS_NAME_MAX];
        _cleanup_close_ int fd = -EBADF;
        struct stat st;
        int r;

        if (!pcs_name(bid, name))
                return -ENOENT;
        fd = openat(c->dir_fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
        if (fd < 0)
                return negative_errno();
        if (fstat(fd, &st) < 0)
                return negative_errno();
        if (!S_ISREG(st.st_mode))
                return -ENOENT;
        r = read_full_fd(fd, SYMCACHE_PCS_MAX_SIZE, ret, ret_size);
        if (r == -EFBIG)
                (void) unlinkat(c->dir_fd, name, 0);
        if (r < 0)
                return r;
        if (timespec_load(&st.st_mtim) + SYMCACHE_TOUCH_USEC < now_usec(CLOCK_REALTIME))
                (void) futimens(fd, NULL);
        return 0;
}

int symcache_write_pcs(SymCache *c, const char *bid, const void *data, size_t size) {
        char tmp[SYMCACHE_TMP_NAME_MAX];
        char name[SYMCACHE_PCS_NAME_MAX];
        _cleanup_close_ int fd = -EBADF;
        int r;

        if (!pcs_name(bid, name) || size > SYMCACHE_PCS_MAX_SIZE)
                return -EINVAL;
        fd = tmp_create(c, bid, tmp);
        if (fd < 0)
                return fd;
        r = loop_write(fd, data, size);
        if (r >= 0 && renameat(c->dir_fd, tmp, c->dir_fd, name) < 0)
                r = negative_errno();
        if (r < 0)
                (void) unlinkat(c->dir_fd, tmp, 0);
        return r;
}

void symcache_remove_pcs(SymCache *c, const char *bid) {
        char name[SYMCACHE_PCS_NAME_MAX];

        if (pcs_name(bid, name))
                (void) unlinkat(c->dir_fd, name, 0);
}

/* Whether NAME is an entry of the cache, debuginfo or resolved addresses. */
static bool entry_name(const char *name) {
        return endswith(name, SYMCACHE_SUFFIX) || endswith(name, SYMCACHE_PCS_SUFFIX);
}

static int entry_cmp(const void *a, const void *b) {
        const SymCacheEntry *x = a, *y = b;

        return x->mtime_usec < y->mtime_usec ? -1 : x->mtime_usec > y->mtime_usec;
}

int symcache_trim(SymCache *c) {
        _cleanup_free_ SymCacheEntry *e = NULL;
        size_t n = 0, n_alloc = 0;
        uint64_t total = 0, now = now_usec(CLOCK_REALTIME);
        int dfd, removed = 0;
        struct dirent *de;
        DIR *d;

        dfd = openat(c->dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                return negative_errno();
        d = fdopendir(dfd);
        if (!d) {
                close(dfd);
                return negative_errno();
        }
        while ((de = readdir(d)) && n < SYMCACHE_ENTRIES_MAX) {
                struct stat st;

                if (fstatat(c->dir_fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
                        continue;
                if (startswith(de->d_name, SYMCACHE_TMP_PREFIX)) {
                        if (timespec_load(&st.st_mtim) + SYMCACHE_TMP_MAX_AGE_USEC < now)
                                (void) unlinkat(c->dir_fd, de->d_name, 0);
                        continue;
                }
                if (!entry_name(de->d_name))
                        continue;
                if (!GREEDY_REALLOC(e, n_alloc, n + 1))
                        break;
                e[n] = (SymCacheEntry) { .name = strdup(de->d_name), .size = (uint64_t) st.st_blocks * 512,
                                         .mtime_usec = timespec_load(&st.st_mtim) };
                if (!e[n].name)
                        break;
                total += e[n++].size;
        }
        closedir(d);
        if (n > 0)
                qsort(e, n, sizeof *e, entry_cmp);
        for (size_t i = 0; i < n; i++) {
                if (total > c->max_size && unlinkat(c->dir_fd, e[i].name, 0) >= 0) {
                        log_debug("Symbol cache over %llu bytes: removed '%s'.", (unsigned long long) c->max_size,
                                  e[i].name);
                        total -= MIN(total, e[i].size);
                        removed++;
                }
                free(e[i].name);
        }
        return removed;
}
