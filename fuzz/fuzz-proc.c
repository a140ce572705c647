/* fuzz-proc.c: the parsers of /proc text, one harness: the first byte of an input names the file, the rest is
 * its contents (a seed is a real file with its tag in front). They are one family (short kernel-written text,
 * parsed with the same bounded scanners), so one corpus lets what the fuzzer learns about one help the others. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/strv.h"
#include "model/proc-parse.h"
#include "proc/fuse-conn.h"
#include "proc/peers-tables.h"
#include "fuzz.h"

/* The parsers that take a length get a copy of exactly LEN bytes, so that ASan sees a read past the end; those that
 * take a C string (the readers NUL-terminate what they read) get it NUL-terminated. */

static void fuzz_stat(char *buf, size_t len) {
        ProcStat st;

        if (proc_parse_stat(buf, len, &st) >= 0 && strnlen(st.comm, sizeof st.comm) == sizeof st.comm)
                abort(); /* comm must come back NUL-terminated */
}

static void fuzz_status(char *buf, size_t len) {
        ProcStatus st;

        (void) proc_parse_status(buf, len, &st);
}

static void fuzz_syscall(char *buf, size_t len) {
        ProcSyscall sc, again;

        if (proc_parse_syscall(buf, len, &sc) < 0)
                return;
        (void) syscall_name(sc.nr);
        if (proc_parse_syscall(buf, len, &again) < 0 || !proc_syscall_same_place(&sc, &again))
                abort(); /* a pure parser gives the same answer twice */
}

static void fuzz_schedstat(char *buf, size_t len) {
        ProcSchedstat st;

        (void) proc_parse_schedstat(buf, len, &st);
}

static void fuzz_io(char *buf, size_t len) {
        ProcIo io;

        (void) proc_parse_io(buf, len, &io);
}

static void fuzz_fdinfo(char *buf, size_t len) {
        int fds[32];
        unsigned flags;

        (void) proc_parse_fdinfo_flags(buf, len, &flags);
        (void) proc_parse_fdinfo_field(buf, len, "fuse_connection", 10, &(uint64_t) { 0 });
        (void) proc_parse_fdinfo_tfds(buf, len, fds, ELEMENTSOF(fds));
        (void) proc_parse_fdinfo_tfds(buf, len, NULL, 0);
}

static void fuzz_kstack(char *buf, size_t len) {
        ProcKernelFrame frames[16];
        int n = proc_parse_kstack(buf, len, frames, ELEMENTSOF(frames));

        if (n < 0 || (size_t) n > ELEMENTSOF(frames))
                abort();
        for (int i = 0; i < n; i++)
                if (strnlen(frames[i].function, sizeof frames[i].function) == sizeof frames[i].function ||
                    strnlen(frames[i].module, sizeof frames[i].module) == sizeof frames[i].module)
                        abort();
}

static void fuzz_maps(char *buf, size_t len) {
        _cleanup_free_ ProcMap *maps = NULL;
        size_t n = 0;

        if (proc_parse_maps(buf, len, &maps, &n) < 0)
                return;
        for (size_t i = 0; i < n; i++) {
                const ProcMap *m = &maps[i];

                /* Every path points into the buffer, NUL-terminated there. */
                if (m->path < buf || m->path > buf + len || m->end <= m->start)
                        abort();
                (void) strlen(m->path);
                /* Lookups as the unwinder makes them (it relies on the kernel's order; a hostile order must not
                 * make the search read outside the array). */
                (void) proc_maps_find(maps, n, m->start);
                (void) proc_maps_find(maps, n, m->end - 1);
                (void) proc_maps_find(maps, n, m->end);
        }
}

static void fuzz_cmdline(char *buf, size_t len) {
        _cleanup_strv_free_ char **argv = NULL;

        if (proc_parse_cmdline(buf, len, &argv) < 0)
                return;
        for (char **a = argv; *a; a++)
                (void) strlen(*a);
}

static void fuzz_cgroup(char *buf, size_t len) {
        _cleanup_free_ char *path = NULL, *unit = NULL, *again = NULL;

        if (proc_parse_cgroup(buf, len, &path, &unit) < 0)
                return;
        (void) cgroup_path_get_unit(path, &again);
}

static void fuzz_locks(char *buf, size_t len) {
        _cleanup_free_ LockLine *locks = NULL;
        size_t n = 0;

        if (peer_tables_parse_locks(buf, &locks, &n) < 0)
                return;
        for (size_t i = 0; i < n; i++)
                if (strnlen(locks[i].type, sizeof locks[i].type) == sizeof locks[i].type || locks[i].inode == 0)
                        abort();
}

static void fuzz_mountinfo(char *buf, size_t len) {
        _cleanup_free_ FuseMount *mounts = NULL;
        size_t n = 0;

        if (fuse_mounts_parse(buf, &mounts, &n) < 0)
                return;
        for (size_t i = 0; i < n; i++)
                if (strnlen(mounts[i].mountpoint, sizeof mounts[i].mountpoint) == sizeof mounts[i].mountpoint ||
                    !startswith(mounts[i].fstype, "fuse"))
                        abort();
}

static void fuzz_fd_link(char *buf, size_t len) {
        uint64_t inode;

        (void) peer_tables_fd_link_parse(buf, &inode);
}

static const struct {
        char tag;
        const char *file;       /* what the seeds are copies of */
        void (*parse)(char *buf, size_t len);
        bool string;            /* takes a NUL-terminated string */
} parsers[] = {
        { 't', "stat", fuzz_stat },
        { 'S', "status", fuzz_status },
        { 'y', "syscall", fuzz_syscall },
        { 'd', "schedstat", fuzz_schedstat },
        { 'i', "io", fuzz_io },
        { 'f', "fdinfo/FD", fuzz_fdinfo },
        { 'k', "stack", fuzz_kstack },
        { 'm', "maps", fuzz_maps, true },
        { 'a', "cmdline", fuzz_cmdline },
        { 'g', "cgroup", fuzz_cgroup },
        { 'l', "/proc/locks", fuzz_locks, true },
        { 'L', "fd/FD (the link)", fuzz_fd_link, true },
        { 'M', "mountinfo (its FUSE mounts)", fuzz_mountinfo, true },
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_free_ char *buf = NULL;

        if (size < 1)
                return 0;
        for (size_t i = 0; i < ELEMENTSOF(parsers); i++)
                if (parsers[i].tag == (char) data[0]) {
                        buf = parsers[i].string ? fuzz_strndup(data + 1, size - 1) : fuzz_memdup(data + 1, size - 1);
                        parsers[i].parse(buf, size - 1);
                        return 0;
                }
        return 0;
}
