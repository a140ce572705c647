/* test-symcache.c: the debuginfo cache on real files: the block-read fixture's separate debuginfo, compressed as
 * Debian ships debuginfo, is stored inflated and found again; damaged, foreign and stale files are not used; the
 * size bound removes the least recently used entries first. */
#include "unit.h"
#include <fcntl.h>
#include <gelf.h>
#include <glob.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "unwind/symcache.h"

static char *tmpdir_new(void) {
        char *d;

        ck_assert_int_ge(asprintf(&d, "%s/test-symcache.XXXXXX", getenv("TMPDIR") ?: "/tmp"), 0);
        ck_assert_ptr_nonnull(mkdtemp(d));
        return d;
}

static void tmpdir_free(char *d) {
        char *cmd;

        ck_assert_int_ge(asprintf(&cmd, "rm -rf '%s'", d), 0);
        ck_assert_int_eq(system(cmd), 0);
        free(cmd);
        free(d);
}

/* The fixture's debuginfo (the build makes it with --compress-debug-sections) and its build-id, from its path. */
static char *fixture_debuginfo(char bid[static 128]) {
        const char *b = getenv("STACKWATCH_BUILDDIR") ?: ".";
        char *pattern, *path;
        glob_t g;

        ck_assert_int_ge(asprintf(&pattern, "%s/tests/fixtures/debug/.build-id/*/*.debug", b), 0);
        ck_assert_msg(glob(pattern, 0, NULL, &g) == 0 && g.gl_pathc >= 1, "no fixture debuginfo at %s (make fixtures)",
                      pattern);
        path = strdup(g.gl_pathv[0]);
        globfree(&g);
        free(pattern);
        /* .../.build-id/xx/rest.debug */
        const char *rest = strrchr(path, '/') + 1, *xx = rest - 3;
        snprintf(bid, 128, "%.2s%.*s", xx, (int) (strlen(rest) - strlen(".debug")), rest);
        return path;
}

static unsigned compressed_sections(int fd) {
        Elf *elf;
        unsigned n = 0;

        (void) elf_version(EV_CURRENT);
        elf = elf_begin(fd, ELF_C_READ, NULL);
        ck_assert_ptr_nonnull(elf);
        for (Elf_Scn *scn = elf_nextscn(elf, NULL); scn; scn = elf_nextscn(elf, scn)) {
                GElf_Shdr sh;
                ck_assert_ptr_nonnull(gelf_getshdr(scn, &sh));
                n += !!(sh.sh_flags & SHF_COMPRESSED);
        }
        elf_end(elf);
        return n;
}

static off_t file_size(const char *path) {
        struct stat st;

        return stat(path, &st) < 0 ? -1 : st.st_size;
}

static char *entry_path(const char *dir, const char *bid) {
        char *p;

        ck_assert_int_ge(asprintf(&p, "%s/%s.debug", dir, bid), 0);
        return p;
}

static void copy_file(const char *from, const char *to) {
        char *cmd;

        ck_assert_int_ge(asprintf(&cmd, "cp '%s' '%s'", from, to), 0);
        ck_assert_int_eq(system(cmd), 0);
        free(cmd);
}

START_TEST(test_store_and_open) {
        char bid[128], *dir = tmpdir_new(), *cache, *src = fixture_debuginfo(bid), *path = NULL, *entry;
        SymCache *c;
        int fd;

        ck_assert_int_ge(asprintf(&cache, "%s/a/b/symbols", dir), 0);
        ck_assert_int_eq(symcache_new(cache, SYMCACHE_MAX_SIZE_DEFAULT, &c), 0); /* parents created */
        ck_assert_int_eq(symcache_open(c, bid, NULL), -ENOENT);

        fd = open(src, O_RDONLY);
        ck_assert_uint_gt(compressed_sections(fd), 0); /* the fixture is what Debian ships */
        close(fd);

        ck_assert_int_eq(symcache_store(c, bid, src), 1);
        entry = entry_path(cache, bid);
        ck_assert_int_gt(file_size(entry), file_size(src));
        fd = symcache_open(c, bid, &path);
        ck_assert_int_ge(fd, 0);
        ck_assert_str_eq(path, entry);
        ck_assert_uint_eq(compressed_sections(fd), 0);
        ck_assert(symcache_elf_valid(fd, bid));
        close(fd);
        free(path);

        /* A second writer of the same build-id replaces it with the same bytes. */
        off_t size = file_size(entry);
        ck_assert_int_eq(symcache_store(c, bid, src), 1);
        ck_assert_int_eq(file_size(entry), size);

        /* A build-id the file does not have, or a name that is not a build-id, stores nothing. */
        ck_assert_int_eq(symcache_store(c, "00112233445566778899aabbccddeeff00112233", src), 0);
        ck_assert_int_eq(symcache_store(c, "../../etc/passwd", src), 0);
        ck_assert_int_eq(symcache_open(c, "../../etc/passwd", NULL), -ENOENT);
        ck_assert_int_eq(symcache_store(c, bid, "/nonexistent.debug"), -ENOENT);

        free(entry);
        symcache_free(c);
        free(cache);
        free(src);
        tmpdir_free(dir);
}
END_TEST

/* An uncompressed file gains nothing from a copy: it is not stored. */
START_TEST(test_nothing_to_gain) {
        char bid[128], *dir = tmpdir_new(), *src = fixture_debuginfo(bid), *plain, *cmd;
        SymCache *c;

        ck_assert_int_ge(asprintf(&plain, "%s/plain.debug", dir), 0);
        ck_assert_int_ge(asprintf(&cmd, "objcopy --decompress-debug-sections '%s' '%s'", src, plain), 0);
        ck_assert_int_eq(system(cmd), 0);
        ck_assert_int_eq(symcache_new(dir, SYMCACHE_MAX_SIZE_DEFAULT, &c), 0);
        ck_assert_int_eq(symcache_store(c, bid, plain), 0);
        ck_assert_int_eq(symcache_open(c, bid, NULL), -ENOENT);
        symcache_free(c);
        free(cmd);
        free(plain);
        free(src);
        tmpdir_free(dir);
}
END_TEST

/* Damaged entries are never handed to libdw: truncated, garbage, or another build's file under this name. */
START_TEST(test_damaged_entries) {
        char bid[128], *dir = tmpdir_new(), *src = fixture_debuginfo(bid), *entry = entry_path(dir, bid);
        static const char *other = "0123456789abcdef0123456789abcdef01234567";
        char *other_entry = entry_path(dir, other);
        SymCache *c;
        int fd;

        ck_assert_int_eq(symcache_new(dir, SYMCACHE_MAX_SIZE_DEFAULT, &c), 0);

        ck_assert_int_eq(symcache_store(c, bid, src), 1);
        ck_assert_int_eq(truncate(entry, file_size(entry) / 2), 0);
        ck_assert_int_eq(symcache_open(c, bid, NULL), -ENOENT);
        ck_assert_int_eq(access(entry, F_OK), -1); /* removed, so that the next store replaces it */

        fd = open(entry, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(write(fd, "\177ELF garbage, not an ELF file at all", 36), 36);
        close(fd);
        ck_assert_int_eq(symcache_open(c, bid, NULL), -ENOENT);
        ck_assert_int_eq(access(entry, F_OK), -1);

        ck_assert_int_eq(symcache_store(c, bid, src), 1);
        copy_file(entry, other_entry);
        ck_assert_int_eq(symcache_open(c, other, NULL), -ENOENT);
        ck_assert_int_eq(access(other_entry, F_OK), -1);
        fd = symcache_open(c, bid, NULL);
        ck_assert_int_ge(fd, 0);
        close(fd);

        symcache_free(c);
        free(other_entry);
        free(entry);
        free(src);
        tmpdir_free(dir);
}
END_TEST

static void make_file(const char *dir, const char *name, size_t mib, time_t mtime) {
        char *p;
        int fd;

        ck_assert_int_ge(asprintf(&p, "%s/%s", dir, name), 0);
        fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(posix_fallocate(fd, 0, (off_t) mib << 20), 0);
        ck_assert_int_eq(futimens(fd, (struct timespec[2]) { { .tv_sec = mtime }, { .tv_sec = mtime } }), 0);
        close(fd);
        free(p);
}

static bool exists(const char *dir, const char *name) {
        char *p;
        bool r;

        ck_assert_int_ge(asprintf(&p, "%s/%s", dir, name), 0);
        r = access(p, F_OK) == 0;
        free(p);
        return r;
}

/* Over the bound, the least recently used entries go first; writers' temporary files go once stale. */
START_TEST(test_trim) {
        char *dir = tmpdir_new();
        time_t now = time(NULL);
        SymCache *c;

        make_file(dir, "a0.pcs", 1, now - 4000);         /* resolved addresses: in the same bound and order */
        make_file(dir, "aa.debug", 6, now - 3000);
        make_file(dir, "bb.debug", 6, now - 2000);
        make_file(dir, "cc.debug", 6, now - 1000);
        make_file(dir, "dd.debug", 6, now);
        make_file(dir, ".tmp-ee.XXXXXX", 1, now - 7200); /* a writer killed two hours ago */
        make_file(dir, ".tmp-ff.XXXXXX", 1, now);        /* one writing now */
        make_file(dir, "unrelated", 1, now - 9000);       /* not ours: never touched */
        ck_assert_int_eq(symcache_new(dir, SYMCACHE_MAX_SIZE_MIN, &c), 0);
        ck_assert_int_eq(symcache_trim(c), 3);
        ck_assert(!exists(dir, "a0.pcs"));
        ck_assert(!exists(dir, "aa.debug"));
        ck_assert(!exists(dir, "bb.debug"));
        ck_assert(exists(dir, "cc.debug"));
        ck_assert(exists(dir, "dd.debug"));
        ck_assert(!exists(dir, ".tmp-ee.XXXXXX"));
        ck_assert(exists(dir, ".tmp-ff.XXXXXX"));
        ck_assert(exists(dir, "unrelated"));
        ck_assert_int_eq(symcache_trim(c), 0);
        symcache_free(c);
        tmpdir_free(dir);
}
END_TEST

/* A build-id's resolved addresses: written whole, read whole, replaced, removed; nothing else read under the name. */
START_TEST(test_pcs) {
        char *dir = tmpdir_new(), *buf = NULL, *p;
        const char *bid = "0123456789abcdef0123456789abcdef01234567";
        size_t size;
        SymCache *c;

        ck_assert_int_eq(symcache_new(dir, SYMCACHE_MAX_SIZE_MIN, &c), 0);
        ck_assert_int_eq(symcache_read_pcs(c, bid, &buf, &size), -ENOENT);
        ck_assert_int_eq(symcache_write_pcs(c, bid, "first", 5), 0);
        ck_assert_int_eq(symcache_write_pcs(c, bid, "second\0x", 8), 0);
        ck_assert_int_eq(symcache_read_pcs(c, bid, &buf, &size), 0);
        ck_assert_uint_eq(size, 8);
        ck_assert_mem_eq(buf, "second\0x", 8);
        free(buf);
        /* Not a build-id: no file name made of it. */
        ck_assert_int_eq(symcache_write_pcs(c, "../x", "y", 1), -EINVAL);
        ck_assert_int_eq(symcache_read_pcs(c, "ABC", &buf, &size), -ENOENT);
        symcache_remove_pcs(c, bid);
        ck_assert_int_eq(symcache_read_pcs(c, bid, &buf, &size), -ENOENT);
        /* Over the bound: not read, and removed. */
        ck_assert_int_ge(asprintf(&p, "%s.pcs", bid), 0);
        make_file(dir, p, SYMCACHE_PCS_MAX_SIZE / (1 << 20) + 1, time(NULL));
        ck_assert_int_eq(symcache_read_pcs(c, bid, &buf, &size), -EFBIG);
        ck_assert(!exists(dir, p));
        /* A symbolic link under the name is not followed. */
        char *link;
        ck_assert_int_ge(asprintf(&link, "%s/%s", dir, p), 0);
        ck_assert_int_eq(symlink("/etc/passwd", link), 0);
        ck_assert_int_lt(symcache_read_pcs(c, bid, &buf, &size), 0);
        free(link);
        free(p);
        symcache_free(c);
        tmpdir_free(dir);
}
END_TEST

START_TEST(test_default_dir) {
        char *d = NULL;

        ck_assert_int_eq(setenv("STACKWATCH_CACHE_DIR", "/x/y", 1), 0);
        ck_assert_int_eq(symcache_default_dir(&d), 0);
        ck_assert_str_eq(d, "/x/y");
        free(d);
        ck_assert_int_eq(setenv("STACKWATCH_CACHE_DIR", "off", 1), 0);
        ck_assert_int_eq(symcache_default_dir(&d), 0);
        ck_assert_ptr_null(d);
        ck_assert_int_eq(unsetenv("STACKWATCH_CACHE_DIR"), 0);
        ck_assert_int_eq(symcache_default_dir(&d), 0);
        if (geteuid() == 0)
                ck_assert_str_eq(d, SYMCACHE_DIR_DEFAULT);
        free(d);
        /* Not a directory: refused, not created. */
        SymCache *c;
        ck_assert_int_eq(symcache_new("relative/dir", SYMCACHE_MAX_SIZE_DEFAULT, &c), -EINVAL);
        ck_assert_int_lt(symcache_new("/dev/null/symbols", SYMCACHE_MAX_SIZE_DEFAULT, &c), 0);
}
END_TEST

UNIT_TEST_MAIN("symcache", test_store_and_open, test_nothing_to_gain, test_damaged_entries, test_trim, test_pcs,
               test_default_dir)
