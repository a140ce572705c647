/* process-util.c: one way to start a child of ours, and one way to end it. */
#include <errno.h>
#include <grp.h>
#include <linux/close_range.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/macro.h"
#include "base/process-util.h"

static int cmp_int(const void *a, const void *b) {
        int x = *(const int *) a, y = *(const int *) b;

        return (x > y) - (x < y);
}

/* Close every fd from LO up but the N in KEEP (sorted here), from the top of the table down to none left. */
static void close_all_but(unsigned lo, int *keep, size_t n) {
        qsort(keep, n, sizeof *keep, cmp_int);
        for (size_t i = 0; i < n; i++) {
                if (keep[i] < 0 || (unsigned) keep[i] < lo)
                        continue;
                if ((unsigned) keep[i] > lo)
                        (void) close_range(lo, (unsigned) keep[i] - 1, 0);
                lo = (unsigned) keep[i] + 1;
        }
        (void) close_range(lo, ~0U, 0);
}

static _Noreturn void setup_failed(const ForkOptions *o) {
        _exit(o->setup_failed_status ?: EXIT_FAILURE);
}

static void child_setup(const ForkOptions *o, pid_t parent) {
        if (o->flags & FORK_DEATHSIG) {
                (void) prctl(PR_SET_PDEATHSIG, SIGKILL);
                /* The parent died before the line above: no signal will come. */
                if (getppid() != parent)
                        setup_failed(o);
        }
        if (o->flags & FORK_RESET_SIGNALS) {
                sigset_t none;

                sigemptyset(&none);
                (void) sigprocmask(SIG_SETMASK, &none, NULL);
        }
        if (o->flags & FORK_CLOSE_FDS) {
                /* Copied: the caller's array is its own, and the sort must not touch it. */
                int keep[FORK_KEEP_FDS_MAX];

                if (o->n_keep_fds > ELEMENTSOF(keep))
                        setup_failed(o);
                for (size_t i = 0; i < o->n_keep_fds; i++)
                        keep[i] = o->keep_fds[i];
                close_all_but(o->flags & FORK_KEEP_STDIO ? 3 : 0, keep, o->n_keep_fds);
        }
        if ((o->flags & FORK_SET_USER) && geteuid() == 0 && (o->uid != 0 || o->gid != 0)) {
                (void) setgroups(0, NULL);
                if (setresgid(o->gid, o->gid, o->gid) < 0 || setresuid(o->uid, o->uid, o->uid) < 0)
                        setup_failed(o);
        }
}

int fork_child(const ForkOptions *o, pid_t *ret_pid) {
        pid_t parent = getpid(), pid;

        pid = fork();
        if (pid < 0)
                return negative_errno();
        if (pid == 0) {
                child_setup(o, parent);
                return 0;
        }
        *ret_pid = pid;
        return 1;
}

int process_wait(pid_t pid, int *ret_status) {
        int status = 0;
        pid_t r;

        while ((r = waitpid(pid, &status, 0)) < 0)
                if (errno != EINTR)
                        return negative_errno();
        if (ret_status)
                *ret_status = status;
        return (int) r;
}

void process_kill(pid_t pid, bool wait) {
        if (pid <= 0)
                return;
        (void) kill(pid, SIGKILL);
        if (wait)
                (void) process_wait(pid, NULL);
        else
                (void) waitpid(pid, NULL, WNOHANG);
}
