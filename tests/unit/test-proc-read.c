/* test-proc-read.c: the /proc readers against this very process: files, links, fds, and vanished entries. */
#include "unit.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
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

/* A child's memory read in blocks: 3 pages, the middle one unreadable, and more blocks than one batch holds. */
START_TEST(test_mem_readv_blocks) {
        size_t page = (size_t) sysconf(_SC_PAGESIZE), n = PROC_MEM_BATCH + 100;
        uint8_t *map = mmap(NULL, 3 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        uint64_t *words = calloc(n, sizeof *words), *got = calloc(n, sizeof *got);
        ProcMemBlock *b = calloc(n, sizeof *b);
        bool *ok = calloc(n, sizeof *ok);
        int p[2];
        pid_t child;

        ck_assert_ptr_ne(map, MAP_FAILED);
        ck_assert(words && got && b && ok);
        for (size_t i = 0; i < 3 * page; i++)
                map[i] = (uint8_t) (i / page + 1);
        for (size_t i = 0; i < n; i++)
                words[i] = 1000 + i;
        ck_assert_int_eq(mprotect(map + page, page, PROT_NONE), 0);
        ck_assert_int_eq(pipe(p), 0);
        child = fork();
        ck_assert_int_ge(child, 0);
        if (child == 0) {
                char c;

                close(p[1]);
                (void) read(p[0], &c, 1); /* until the parent is done */
                _exit(0);
        }
        /* The words, with every 100th block pointing into the unreadable page. */
        for (size_t i = 0; i < n; i++)
                b[i] = (ProcMemBlock) { .addr = i % 100 == 7 ? (uint64_t) (uintptr_t) (map + page)
                                                              : (uint64_t) (uintptr_t) &words[i],
                                        .buf = &got[i], .size = sizeof got[i] };
        ck_assert_int_eq(proc_mem_readv(child, b, n, ok), (ssize_t) (n - (n + 92) / 100));
        for (size_t i = 0; i < n; i++) {
                ck_assert_msg(ok[i] == (i % 100 != 7), "block %zu", i);
                if (ok[i])
                        ck_assert_uint_eq(got[i], 1000 + i);
        }
        /* One run without OK: it stops at the first byte it cannot read. */
        {
                uint8_t buf[3 * 4096];
                ProcMemBlock run[3];

                ck_assert_uint_le(page, 4096);
                for (size_t i = 0; i < 3; i++)
                        run[i] = (ProcMemBlock) { .addr = (uint64_t) (uintptr_t) (map + i * page), .buf = buf + i * page,
                                                  .size = page };
                ck_assert_int_eq(proc_mem_readv(child, run, 3, NULL), (ssize_t) page);
                ck_assert_uint_eq(buf[0], 1);
                ck_assert_int_eq(proc_mem_readv(child, run + 1, 2, NULL), -EFAULT);
                ck_assert_int_eq(proc_mem_read_upto(child, (uint64_t) (uintptr_t) map, buf, 2 * page), (ssize_t) page);
                ck_assert_int_eq(proc_mem_read(child, (uint64_t) (uintptr_t) map, buf, 2 * page), -EFAULT);
                ck_assert_int_eq(proc_mem_read(child, (uint64_t) (uintptr_t) (map + 2 * page), buf, page), 0);
                ck_assert_uint_eq(buf[page - 1], 3);
        }
        close(p[1]);
        ck_assert_int_eq(waitpid(child, NULL, 0), child);
        /* Gone: -ESRCH, and every block marked unread. */
        ck_assert_int_eq(proc_mem_readv(child, b, n, ok), -ESRCH);
        for (size_t i = 0; i < n; i++)
                ck_assert(!ok[i]);
        close(p[0]);
        munmap(map, 3 * page);
        free(words);
        free(got);
        free(b);
        free(ok);
}
END_TEST

UNIT_TEST_MAIN("proc-read", test_read_self, test_fd_links, test_vanished_is_esrch, test_list_tasks,
               test_mem_readv_blocks)
