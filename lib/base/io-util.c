/* io-util.c: read and write loops that finish the job. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "base/alloc-util.h"
#include "base/io-util.h"
#include "base/macro.h"

/* read() (OFFSET < 0) or pread() from OFFSET until SIZE bytes or end of file. */
static ssize_t loop_read_at(int fd, void *buf, size_t size, off_t offset) {
        size_t have = 0;

        while (have < size) {
                ssize_t n = offset < 0 ? read(fd, (uint8_t *) buf + have, size - have)
                                       : pread(fd, (uint8_t *) buf + have, size - have, offset + (off_t) have);

                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return negative_errno();
                }
                if (n == 0)
                        break;
                have += (size_t) n;
        }
        return (ssize_t) have;
}

ssize_t loop_read(int fd, void *buf, size_t size) {
        return loop_read_at(fd, buf, size, -1);
}

ssize_t loop_pread(int fd, void *buf, size_t size, off_t offset) {
        return offset < 0 ? -EINVAL : loop_read_at(fd, buf, size, offset);
}

int loop_write(int fd, const void *buf, size_t size) {
        const uint8_t *p = buf;

        while (size > 0) {
                ssize_t k = write(fd, p, size);

                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return negative_errno();
                }
                if (k == 0)
                        return -EIO;
                p += k;
                size -= (size_t) k;
        }
        return 0;
}

int read_full_fd(int fd, size_t max, char **ret, size_t *ret_size) {
        _cleanup_free_ char *buf = NULL;
        size_t have = 0, allocated = 0;

        for (;;) {
                ssize_t n;
                size_t room;

                /* Room for one byte past MAX, so that a file longer than MAX is told from one of exactly MAX. */
                if (!GREEDY_REALLOC(buf, allocated, MIN(have + 4096, max + 2)))
                        return -ENOMEM;
                room = MIN(allocated, max + 2) - 1 - have;
                n = loop_read(fd, buf + have, room);
                if (n < 0)
                        return (int) n;
                have += (size_t) n;
                if (have > max)
                        return -EFBIG;
                if ((size_t) n < room)
                        break; /* end of file */
        }
        buf[have] = '\0';
        if (ret_size)
                *ret_size = have;
        *ret = TAKE_PTR(buf);
        return 0;
}
