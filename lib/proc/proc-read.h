/* proc-read.h: openat/pread access to /proc without stdio; a vanished process or thread reads as -ESRCH. */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Open /proc/PID (tid = 0) or /proc/PID/task/TID as an O_DIRECTORY fd. -ESRCH when it is gone. */
int proc_open_dir(pid_t pid, pid_t tid, int *ret_fd);
/* Open a task directory below an open /proc/PID directory. */
int proc_open_task(int pid_dirfd, pid_t tid, int *ret_fd);

/* Read NAME below DIRFD into BUF (at most SIZE-1 bytes, NUL-terminated) with one open and as few reads as
 * it takes. Returns the length, or -ESRCH (gone), -EACCES/-EPERM, or another -errno. */
ssize_t proc_read_small(int dirfd, const char *name, char *buf, size_t size);
/* Re-read an already open proc file from offset 0 (the kept-descriptor path). */
ssize_t proc_pread(int fd, char *buf, size_t size);
/* Read NAME fully into a malloc'd, NUL-terminated buffer of at most MAX bytes; -EFBIG if larger. */
int proc_read_full(int dirfd, const char *name, size_t max, char **ret, size_t *ret_size);
/* readlink() NAME below DIRFD into a malloc'd string. */
int proc_readlink(int dirfd, const char *name, char **ret);

/* List the numeric entries of a directory below DIRFD ("task", "fd", or "." of /proc) in ascending order. */
int proc_list_numeric(int dirfd, const char *name, int **ret, size_t *ret_n);

/* One open file descriptor of a process and what its /proc/PID/fd link says ("pipe:[123]", "socket:[456]", a path). */
typedef struct ProcFd {
        int fd;
        char *target;
} ProcFd;

/* N bytes at ADDR of process PID's memory (process_vm_readv: the process is not stopped). -EFAULT when not all of
 * them could be read (or ADDR is 0, or the range wraps), else -errno (-ESRCH, -EPERM). */
int proc_mem_read(pid_t pid, uint64_t addr, void *buf, size_t n);
/* Up to N bytes at ADDR: the bytes read from ADDR on until the first that cannot be (a mapping's end), or -errno
 * (-EFAULT when none could, -ESRCH when the process is gone). */
ssize_t proc_mem_read_upto(pid_t pid, uint64_t addr, void *buf, size_t n);

/* One block of another process's memory to read: SIZE bytes at ADDR into BUF. */
typedef struct ProcMemBlock {
        uint64_t addr;
        void *buf;
        size_t size;
} ProcMemBlock;

/* Blocks per process_vm_readv call (the kernel takes at most UIO_MAXIOV, 1024). */
#define PROC_MEM_BATCH 512U

/* Read N blocks of PID's memory, PROC_MEM_BATCH a system call, the process not stopped.
 * With OK: every block is tried, OK[i] says whether block i was read whole (a read stops at the first block it
 * cannot read, which is marked and skipped, and goes on after it); returns the number read whole, or -errno when
 * no block can be (-ESRCH: the process is gone, -EPERM), every block then marked unread. Without OK: the blocks are one run, read until the first byte that cannot be; returns the
 * bytes read from the first block on, or -errno (-EFAULT when none could be). */
ssize_t proc_mem_readv(pid_t pid, const ProcMemBlock *blocks, size_t n, bool *ok);

/* Read every /proc/PID/fd link below an open /proc/PID directory. Descriptors closed while we read are skipped. */
int proc_read_fds(int pid_dirfd, ProcFd **ret, size_t *ret_n);
void proc_fds_free(ProcFd *fds, size_t n);

/* Map ENOENT/ESRCH (the normal races of /proc) to -ESRCH; other errors pass through. */
static inline int proc_errno(int r) {
        return r == -ENOENT || r == -ESRCH ? -ESRCH : r;
}
