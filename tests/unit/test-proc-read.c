/* test-proc-read.c: the /proc readers against this very process: files, links, fds, and vanished entries. */
#include "unit.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/macro.h"
#include "model/proc-parse.h"
#include "proc/proc-read.h"

START_TEST(test_read_self) {
        _cleanup_close_ int dirfd = -EBADF;
        char buf[1024];
        ProcStat st;
        ssize_t n;

        ck_assert_int_eq(proc_open_dir(getpid(), 0, &dirfd), 0);
        n = proc_read_small(dirfd, "stat", buf, sizeof buf);
        ck_assert_int_gt(n, 0);
        ck_assert_int_eq(proc_parse_stat(buf, (size_t) n, &st), 0);
        ck_assert_int_eq(st.pid, getpid());
        ck_assert_int_eq(st.state, 'R');
        /* A too-small buffer truncates, NUL-terminated, never overflows. */
        ck_assert_int_eq(proc_read_small(dirfd, "stat", buf, 8), 7);
        ck_assert_uint_eq(strlen(buf), 7);
}
END_TEST

START_TEST(test_fd_links) {
        _cleanup_close_ int dirfd = -EBADF;
        ProcFd *fds = NULL;
        size_t n = 0;
        int p[2];
        bool found = false;

        ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        ck_assert_int_eq(proc_open_dir(getpid(), 0, &dirfd), 0);
        ck_assert_int_eq(proc_read_fds(dirfd, &fds, &n), 0);
        ck_assert_uint_gt(n, 2);
        for (size_t i = 0; i < n; i++)
                if (fds[i].fd == p[0]) {
                        found = true;
                        ck_assert_msg(strncmp(fds[i].target, "pipe:[", 6) == 0, "%s", fds[i].target);
                }
        ck_assert(found);
        proc_fds_free(fds, n);
        close(p[0]);
        close(p[1]);
}
END_TEST

START_TEST(test_vanished_is_esrch) {
        _cleanup_close_ int dirfd = -EBADF;
        char buf[64];
        pid_t child = fork();

        if (child == 0)
                _exit(0);
        ck_assert_int_gt(child, 0);
        ck_assert_int_eq(proc_open_dir(child, 0, &dirfd), 0); /* a zombie still has its dir */
        ck_assert_int_eq(waitpid(child, NULL, 0), child);
        ck_assert_int_eq(proc_read_small(dirfd, "stat", buf, sizeof buf), -ESRCH);
        ck_assert_int_eq(proc_open_dir(child, 0, &dirfd), -ESRCH);
        ck_assert_int_eq(proc_open_dir(getpid(), 1, &dirfd), -ESRCH); /* no such thread */
}
END_TEST

START_TEST(test_list_tasks) {
        _cleanup_close_ int dirfd = -EBADF;
        _cleanup_free_ int *tids = NULL;
        size_t n = 0;

        ck_assert_int_eq(proc_open_dir(getpid(), 0, &dirfd), 0);
        ck_assert_int_eq(proc_list_numeric(dirfd, "task", &tids, &n), 0);
        ck_assert_uint_ge(n, 1);
        ck_assert_int_eq(tids[0], getpid());
}
END_TEST

UNIT_TEST_MAIN("proc-read", test_read_self, test_fd_links, test_vanished_is_esrch, test_list_tasks)
