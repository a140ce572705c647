/* process-util.h: one way to start a child of ours, and one way to end it. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

typedef enum ForkFlags {
        /* SIGKILL when the parent dies (a child that holds a thread traced or a file in a FUSE call must not
         * outlive us); a child whose parent is already gone when it starts exits at once. */
        FORK_DEATHSIG = 1 << 0,
        /* An empty signal mask: the parent's blocked set (the daemon blocks what sd-event handles) is not ours. */
        FORK_RESET_SIGNALS = 1 << 1,
        /* Every fd closed but the kept ones: a copy of a client's connection or of a pipe someone waits to see
         * closed must not live on in the child. */
        FORK_CLOSE_FDS = 1 << 2,
        /* With FORK_CLOSE_FDS: stdin, stdout and stderr kept too. */
        FORK_KEEP_STDIO = 1 << 3,
        /* The child takes UID and GID (and no supplementary groups), when it runs as root and they are not root's. */
        FORK_SET_USER = 1 << 4,
} ForkFlags;

#define FORK_KEEP_FDS_MAX 8

typedef struct ForkOptions {
        ForkFlags flags;
        /* With FORK_CLOSE_FDS: the fds the child keeps (negative entries ignored), at most FORK_KEEP_FDS_MAX. */
        const int *keep_fds;
        size_t n_keep_fds;
        /* With FORK_SET_USER. */
        uid_t uid;
        gid_t gid;
        /* The status the child exits with when its set-up fails (its parent gone, the user not taken); 0 means
         * EXIT_FAILURE. */
        int setup_failed_status;
} ForkOptions;

/* fork() and set the child up as O says. In the parent: 1, the child's pid in *RET_PID; or -errno. In the child:
 * 0, set up (it never returns on a failed set-up, it exits with O->setup_failed_status). */
int fork_child(const ForkOptions *o, pid_t *ret_pid);

/* waitpid() for PID, EINTR retried; the pid, or -errno. STATUS may be NULL. */
int process_wait(pid_t pid, int *ret_status);
/* SIGKILL to PID and, when WAIT, reap it; a PID <= 0 is nothing to do. Without WAIT a child that has already died
 * is reaped (WNOHANG), one still in D state (in a FUSE call) is left to exit when the kernel lets it. */
void process_kill(pid_t pid, bool wait);
/* For _cleanup_(): SIGKILL *PID and reap it; *PID is 0 after. */
static inline void process_kill_and_reapp(pid_t *pid) {
        process_kill(*pid, true);
        *pid = 0;
}
