/* proc-read.c: /proc access with dir fds, openat and pread; no stdio, no allocation on the small-file path. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "base/alloc-util.h"
#include "base/io-util.h"
#include "base/macro.h"
#include "base/parse-util.h"
#include "proc/proc-read.h"

int proc_open_dir(pid_t pid, pid_t tid, int *ret_fd) {
        char path[64];
        int fd;

        if (tid > 0)
                snprintf(path, sizeof path, "/proc/%d/task/%d", (int) pid, (int) tid);
        else
                snprintf(path, sizeof path, "/proc/%d", (int) pid);
        fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return proc_errno(negative_errno());
        *ret_fd = fd;
        return 0;
}

int proc_open_task(int pid_dirfd, pid_t tid, int *ret_fd) {
        char path[32];
        int fd;

        snprintf(path, sizeof path, "task/%d", (int) tid);
        fd = openat(pid_dirfd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return proc_errno(negative_errno());
        *ret_fd = fd;
        return 0;
}

ssize_t proc_pread(int fd, char *buf, size_t size) {
        ssize_t n;

        if (size == 0)
                return -EINVAL;
        /* seq_file files return short reads on record boundaries: loop_pread() goes on until EOF or full. */
        n = loop_pread(fd, buf, size - 1, 0);
        if (n < 0)
                return proc_errno((int) n);
        buf[n] = '\0';
        return n;
}

ssize_t proc_read_small(int dirfd, const char *name, char *buf, size_t size) {
        _cleanup_close_ int fd = -EBADF;

        fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return proc_errno(negative_errno());
        return proc_pread(fd, buf, size);
}

int proc_read_full(int dirfd, const char *name, size_t max, char **ret, size_t *ret_size) {
        _cleanup_close_ int fd = -EBADF;
        int r;

        fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return proc_errno(negative_errno());
        r = read_full_fd(fd, max, ret, ret_size);
        return r == -ENOMEM || r == -EFBIG ? r : proc_errno(r);
}

int proc_readlink(int dirfd, const char *name, char **ret) {
        char buf[4097];
        ssize_t n;
        char *s;

        n = readlinkat(dirfd, name, buf, sizeof buf - 1);
        if (n < 0)
                return proc_errno(negative_errno());
        buf[n] = '\0';
        s = strdup(buf);
        if (!s)
                return -ENOMEM;
        *ret = s;
        return 0;
}

static int cmp_int(const void *a, const void *b) {
        int x = *(const int *) a, y = *(const int *) b;
        return (x > y) - (x < y);
}

int proc_list_numeric(int dirfd, const char *name, int **ret, size_t *ret_n) {
        _cleanup_closedir_ DIR *d = NULL;
        _cleanup_free_ int *list = NULL;
        size_t n = 0, alloc = 0;
        struct dirent *de;
        int fd;

        fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return proc_errno(negative_errno());
        d = fdopendir(fd);
        if (!d) {
                safe_close(fd);
                return -ENOMEM;
        }
        while ((errno = 0, de = readdir(d))) {
                uint64_t v;

                if (safe_atou64(de->d_name, &v) < 0 || v > INT32_MAX)
                        continue;
                if (!GREEDY_REALLOC(list, alloc, n + 1))
                        return -ENOMEM;
                list[n++] = (int) v;
        }
        if (errno != 0)
                return proc_errno(negative_errno());
        if (n > 0) /* qsort() wants a non-NULL array even for 0 elements (UBSan) */
                qsort(list, n, sizeof *list, cmp_int);
        *ret = TAKE_PTR(list);
        *ret_n = n;
        return 0;
}

int proc_read_fds(int pid_dirfd, ProcFd **ret, size_t *ret_n) {
        _cleanup_close_ int fddir = -EBADF;
        _cleanup_free_ int *fds = NULL;
        ProcFd *out;
        size_t n = 0, k = 0;
        int r;

        r = proc_list_numeric(pid_dirfd, "fd", &fds, &n);
        if (r < 0)
                return r;
        fddir = openat(pid_dirfd, "fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (fddir < 0)
                return proc_errno(negative_errno());
        out = calloc(n ?: 1, sizeof *out);
        if (!out)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                char name[16];

                snprintf(name, sizeof name, "%d", fds[i]);
                r = proc_readlink(fddir, name, &out[k].target);
                if (r == -ENOMEM) {
                        proc_fds_free(out, k);
                        return r;
                }
                if (r < 0)
                        continue; /* closed meanwhile */
                out[k++].fd = fds[i];
        }
        *ret = out;
        *ret_n = k;
        return 0;
}

void proc_fds_free(ProcFd *fds, size_t n) {
        for (size_t i = 0; fds && i < n; i++)
                free(fds[i].target);
        free(fds);
}

ssize_t proc_mem_read_upto(pid_t pid, uint64_t addr, void *buf, size_t n) {
        struct iovec local = { .iov_base = buf, .iov_len = n };
        struct iovec remote = { .iov_base = (void *) (uintptr_t) addr, .iov_len = n };
        ssize_t k;

        if (addr == 0 || addr + n < addr)
                return -EFAULT;
        k = process_vm_readv(pid, &local, 1, &remote, 1, 0);
        if (k < 0)
                return errno == ENOENT ? -ESRCH : negative_errno();
        return k > 0 || n == 0 ? k : -EFAULT;
}

int proc_mem_read(pid_t pid, uint64_t addr, void *buf, size_t n) {
        ssize_t k = proc_mem_read_upto(pid, addr, buf, n);

        if (k < 0)
                return (int) k;
        return (size_t) k == n ? 0 : -EFAULT;
}

ssize_t proc_mem_readv(pid_t pid, const ProcMemBlock *blocks, size_t n, bool *ok) {
        struct iovec local[PROC_MEM_BATCH], remote[PROC_MEM_BATCH];
        size_t total = 0, n_ok = 0;

        for (size_t i = 0; i < n;) {
                size_t k = MIN(n - i, (size_t) PROC_MEM_BATCH), want = 0, whole = 0;
                ssize_t got;

                for (size_t j = 0; j < k; j++) {
                        const ProcMemBlock *b = &blocks[i + j];

                        local[j] = (struct iovec) { .iov_base = b->buf, .iov_len = b->size };
                        remote[j] = (struct iovec) { .iov_base = (void *) (uintptr_t) b->addr, .iov_len = b->size };
                        want += b->size;
                }
                got = process_vm_readv(pid, local, k, remote, k, 0);
                if (got < 0 && errno != EFAULT) {
                        /* Gone, or not ours to read: no block will do better. */
                        int r = errno == ENOENT ? -ESRCH : negative_errno();

                        if (!ok)
                                return total > 0 ? (ssize_t) total : r;
                        for (size_t j = i; j < n; j++)
                                ok[j] = false;
                        return r;
                }
                if (!ok) {
                        total += (size_t) MAX(got, (ssize_t) 0);
                        if (got < 0 || (size_t) got < want)
                                break;
                        i += k;
                        continue;
                }
                /* The blocks read whole, then the one the read stopped at: marked, and skipped. */
                for (size_t left = got < 0 ? 0 : (size_t) got; whole < k && blocks[i + whole].size <= left; whole++) {
                        left -= blocks[i + whole].size;
                        ok[i + whole] = true;
                }
                n_ok += whole;
                if (whole < k)
                        ok[i + whole++] = false;
                i += whole;
        }
        if (!ok)
                return total > 0 || n == 0 ? (ssize_t) total : -EFAULT;
        return (ssize_t) n_ok;
}
