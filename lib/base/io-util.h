/* io-util.h: read and write loops that finish the job: short transfers and EINTR are retried here, once. */
#pragma once

#include <stddef.h>
#include <sys/types.h>

/* read() into BUF until SIZE bytes or end of file; returns the bytes read, or -errno. */
ssize_t loop_read(int fd, void *buf, size_t size);
/* The same with pread() from OFFSET (seq_file /proc files hand out one record per read). */
ssize_t loop_pread(int fd, void *buf, size_t size, off_t offset);
/* write() all SIZE bytes; 0, or -errno (-EIO when the file takes nothing). */
int loop_write(int fd, const void *buf, size_t size);
/* Read FD to its end into a NUL-terminated buffer of at most MAX bytes (plus the NUL); -EFBIG past MAX. */
int read_full_fd(int fd, size_t max, char **ret, size_t *ret_size);
