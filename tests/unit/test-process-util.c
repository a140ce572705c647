/* test-process-util.c: a child started by fork_child() is what its flags promise, and ends when told. */
#include "unit.h"
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/macro.h"
#include "base/process-util.h"

/* The child reports one fact by its exit status. */
static int child_status(const ForkOptions *o, int (*fact)(void *), void *arg) {
        pid_t pid;
        int r, status;

        r = fork_child(o, &pid);
        ck_assert_int_ge(r, 0);
        if (r == 0)
                _exit(fact(arg));
        ck_assert_int_eq(process_wait(pid, &status), pid);
        ck_assert(WIFEXITED(status));
        return WEXITSTATUS(status);
}

static int fd_open(void *arg) {
        return fcntl(*(int *) arg, F_GETFD) >= 0;
}

START_TEST(test_fds_closed_but_the_kept_ones) {
        int kept[2], gone[2];

        ck_assert_int_eq(pipe(kept), 0);
        ck_assert_int_eq(pipe(gone), 0);
        /* Not close-on-exec, and no exec: only the flag closes them. */
        ForkOptions o = { .flags = FORK_CLOSE_FDS | FORK_KEEP_STDIO, .keep_fds = (const int[]) { -1, kept[1] },
                          .n_keep_fds = 2 };
        ck_assert_int_eq(child_status(&o, fd_open, &kept[1]), 1);
        ck_assert_int_eq(child_status(&o, fd_open, &gone[1]), 0);
        ck_assert_int_eq(child_status(&o, fd_open, &kept[0]), 0);
        ck_assert_int_eq(child_status(&o, fd_open, &(int) { STDERR_FILENO }), 1);
        o.flags = FORK_CLOSE_FDS;
        ck_assert_int_eq(child_status(&o, fd_open, &(int) { STDERR_FILENO }), 0);
        ck_assert_int_eq(child_status(&o, fd_open, &kept[1]), 1);
        /* Without the flag the child has them all. */
        o.flags = 0;
        ck_assert_int_eq(child_status(&o, fd_open, &gone[1]), 1);
        for (size_t i = 0; i < 2; i++) {
                close(kept[i]);
                close(gone[i]);
        }
}
END_TEST

static int usr1_blocked(void *arg) {
        sigset_t now;

        (void) arg;
        sigprocmask(SIG_SETMASK, NULL, &now);
        return sigismember(&now, SIGUSR1);
}

START_TEST(test_signal_mask_reset) {
        sigset_t usr1, old;

        sigemptyset(&usr1);
        sigaddset(&usr1, SIGUSR1);
        ck_assert_int_eq(sigprocmask(SIG_BLOCK, &usr1, &old), 0);
        ck_assert_int_eq(child_status(&(ForkOptions) { .flags = FORK_RESET_SIGNALS }, usr1_blocked, NULL), 0);
        ck_assert_int_eq(child_status(&(ForkOptions) { 0 }, usr1_blocked, NULL), 1);
        ck_assert_int_eq(sigprocmask(SIG_SETMASK, &old, NULL), 0);
}
END_TEST

static int ids_are(void *arg) {
        const uid_t *want = arg;

        return getuid() == want[0] && geteuid() == want[0] && getgid() == want[1] && getegid() == want[1] &&
               getgroups(0, NULL) == 0;
}

START_TEST(test_another_user) {
        uid_t want[2] = { 65534, 65534 };

        if (geteuid() != 0)
                return; /* only root can take another user */
        ck_assert_int_eq(child_status(&(ForkOptions) { .flags = FORK_SET_USER, .uid = 65534, .gid = 65534 }, ids_are,
                                      want),
                         1);
        /* Root's own ids are no change: the child stays root, and its parent was never anyone else. */
        want[0] = want[1] = 0;
        ck_assert_int_eq(child_status(&(ForkOptions) { .flags = FORK_SET_USER }, ids_are, want), 1);
        ck_assert_int_eq(getuid(), 0);
}
END_TEST

/* Forks a child with FORK_DEATHSIG that sleeps, writes its pid to FD and exits: the orphan must die too. */
static int middle(void *arg) {
        int fd = *(int *) arg;
        pid_t pid;
        int r = fork_child(&(ForkOptions) { .flags = FORK_DEATHSIG }, &pid);

        if (r == 0) {
                pause();
                _exit(0);
        }
        return r > 0 && write(fd, &pid, sizeof pid) == sizeof pid ? 0 : 1;
}

/* A process's state letter, or 0 when it is gone. */
static char proc_state(pid_t pid) {
        char path[64], state = 0;
        FILE *f;

        snprintf(path, sizeof path, "/proc/%d/stat", (int) pid);
        f = fopen(path, "re");
        if (!f)
                return 0;
        if (fscanf(f, "%*d (%*[^)]) %c", &state) != 1)
                state = 0;
        fclose(f);
        return state;
}

START_TEST(test_a_child_dies_with_its_parent) {
        int p[2];
        pid_t orphan = 0;
        char state;

        ck_assert_int_eq(pipe(p), 0);
        ck_assert_int_eq(child_status(&(ForkOptions) { 0 }, middle, &p[1]), 0);
        ck_assert_int_eq(read(p[0], &orphan, sizeof orphan), sizeof orphan);
        /* It got SIGKILL when its parent exited: gone (or a zombie its new parent has not reaped) within 5 s. */
        for (int i = 0; i < 500; i++) {
                state = proc_state(orphan);
                if (state == 0 || state == 'Z')
                        break;
                usleep(10000);
        }
        ck_assert_msg(state == 0 || state == 'Z', "pid %d outlived its parent (state %c)", (int) orphan, state);
        close(p[0]);
        close(p[1]);
}
END_TEST

static int do_nothing(void *arg) {
        (void) arg;
        return 7;
}

START_TEST(test_kill_and_reap) {
        pid_t pid;
        int r, status;

        r = fork_child(&(ForkOptions) { 0 }, &pid);
        ck_assert_int_ge(r, 0);
        if (r == 0) {
                pause();
                _exit(0);
        }
        process_kill(pid, true);
        /* Reaped: no child of that pid is left to wait for. */
        ck_assert_int_eq(waitpid(pid, &status, WNOHANG), -1);
        ck_assert_int_eq(errno, ECHILD);
        {
                _cleanup_(process_kill_and_reapp) pid_t p2 = 0;

                r = fork_child(&(ForkOptions) { 0 }, &p2);
                if (r == 0)
                        _exit(do_nothing(NULL));
                ck_assert_int_eq(r, 1);
        }
        ck_assert_int_eq(waitpid(-1, &status, WNOHANG), -1);
        ck_assert_int_eq(errno, ECHILD);
        process_kill(0, true); /* nothing to do */
}
END_TEST

UNIT_TEST_MAIN("process-util", test_fds_closed_but_the_kept_ones, test_signal_mask_reset, test_another_user,
               test_a_child_dies_with_its_parent, test_kill_and_reap)
