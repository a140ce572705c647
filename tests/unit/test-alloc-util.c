/* test-alloc-util.c: GREEDY_REALLOC and the read/write loops of io-util, on real pipes with short writers. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "unit.h"

#include "base/alloc-util.h"
#include "base/io-util.h"
#include "base/macro.h"

START_TEST(test_greedy_realloc_appends) {
        _cleanup_free_ uint32_t *a = NULL;
        size_t n_allocated = 0, reallocs = 0;
        void *last = NULL;

        /* 100k appends one at a time keep every element and reallocate O(log n) times, not n times. */
        for (uint32_t i = 0; i < 100000; i++) {
                ck_assert(GREEDY_REALLOC(a, n_allocated, (size_t) i + 1));
                ck_assert_uint_ge(n_allocated, (size_t) i + 1);
                if (a != last || i == 0)
                        reallocs++;
                last = a;
                a[i] = i * 7;
        }
        for (uint32_t i = 0; i < 100000; i++)
                ck_assert_uint_eq(a[i], i * 7);
        ck_assert_uint_le(n_allocated, 2 * 100000);
        /* At most one growth per doubling (a realloc in place is not seen, so this bounds from above). */
        ck_assert_uint_le(reallocs, 20);
}
END_TEST

START_TEST(test_greedy_realloc_bounds) {
        _cleanup_free_ char *p = NULL;
        uint64_t *big = NULL;
        size_t n_allocated = 0, n_big = 0;

        /* Asking for no more than there is changes nothing. */
        ck_assert(GREEDY_REALLOC(p, n_allocated, 10));
        ck_assert_uint_eq(n_allocated, 20);
        ck_assert_ptr_eq(greedy_realloc((void **) &p, &n_allocated, 5, 1), p);
        ck_assert_uint_eq(n_allocated, 20);
        /* need × size overflowing size_t is refused, with the array untouched. */
        ck_assert(!GREEDY_REALLOC(big, n_big, SIZE_MAX / 4));
        ck_assert_ptr_null(big);
        ck_assert_uint_eq(n_big, 0);
        /* Zero-sized elements are refused rather than divided by. */
        ck_assert_ptr_null(greedy_realloc((void **) &p, &n_allocated, 100, 0));
        ck_assert_uint_eq(n_allocated, 20);
}
END_TEST

/* A child writing LEN bytes of a pattern to FD in chunks of CHUNK, pausing between them so reads come back short. */
static pid_t short_writer(int fd, size_t len, size_t chunk) {
        pid_t pid = fork();

        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                char buf[4096];

                for (size_t i = 0; i < sizeof buf; i++)
                        buf[i] = (char) ('a' + i % 26);
                for (size_t off = 0; off < len; off += chunk) {
                        size_t n = MIN(chunk, len - off);

                        if (write(fd, buf + off % 26, n) != (ssize_t) n)
                                _exit(1);
                        usleep(1000);
                }
                _exit(0);
        }
        return pid;
}

START_TEST(test_loop_read_short_writes) {
        char buf[1000] = {};
        int p[2];
        pid_t pid;
        int status;

        ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        pid = short_writer(p[1], 700, 7);
        close(p[1]);
        /* 100 short writes of 7 bytes: one call gets all 700, then EOF. */
        ck_assert_int_eq(loop_read(p[0], buf, sizeof buf), 700);
        for (size_t i = 0; i < 700; i++)
                ck_assert_int_eq(buf[i], 'a' + (int) ((i % 7 + (i / 7) * 7 % 26) % 26));
        ck_assert_int_eq(loop_read(p[0], buf, sizeof buf), 0);
        close(p[0]);
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        ck_assert_int_eq(loop_read(-1, buf, 1), -EBADF);
}
END_TEST

START_TEST(test_read_full_fd) {
        _cleanup_free_ char *s = NULL;
        size_t n = 0;
        int p[2];
        pid_t pid;

        /* 10000 bytes in short writes through a growing buffer, NUL-terminated. */
        ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        pid = short_writer(p[1], 10000, 333);
        close(p[1]);
        ck_assert_int_eq(read_full_fd(p[0], 10000, &s, &n), 0);
        ck_assert_uint_eq(n, 10000);
        ck_assert_uint_eq(strlen(s), 10000);
        close(p[0]);
        waitpid(pid, NULL, 0);
        s = mfree(s);

        /* One byte over the limit is -EFBIG, not a silently cut file. */
        ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        pid = short_writer(p[1], 10001, 333);
        close(p[1]);
        ck_assert_int_eq(read_full_fd(p[0], 10000, &s, &n), -EFBIG);
        ck_assert_ptr_null(s);
        close(p[0]);
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);

        /* An empty file is an empty string. */
        ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        close(p[1]);
        ck_assert_int_eq(read_full_fd(p[0], 16, &s, &n), 0);
        ck_assert_uint_eq(n, 0);
        ck_assert_str_eq(s, "");
        close(p[0]);
}
END_TEST

START_TEST(test_loop_write_pread) {
        char path[] = "/tmp/test-io-XXXXXX", buf[64];
        int fd = mkstemp(path);

        ck_assert_int_ge(fd, 0);
        unlink(path);
        ck_assert_int_eq(loop_write(fd, "0123456789", 10), 0);
        ck_assert_int_eq(loop_pread(fd, buf, sizeof buf, 3), 7);
        ck_assert_int_eq(memcmp(buf, "3456789", 7), 0);
        ck_assert_int_eq(loop_pread(fd, buf, sizeof buf, 10), 0);
        close(fd);
}
END_TEST

UNIT_TEST_MAIN("alloc-util", test_greedy_realloc_appends, test_greedy_realloc_bounds, test_loop_read_short_writes,
               test_read_full_fd, test_loop_write_pread)
