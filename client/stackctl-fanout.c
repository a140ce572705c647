/* stackctl-fanout.c: one GET to several daemons at once (ps and status with more than one --host): a child per
 * host does the request as a single-host stackctl would, within --timeout, and reports its exit code, the reply
 * and its last error line through pipes; a host that does not answer in time is killed and reported, never waited
 * for past the deadline. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/escape.h"
#include "base/io-util.h"
#include "base/log.h"
#include "base/process-util.h"
#include "base/time-util.h"
#include "stackctl-args.h"
#include "stackctl-daemon.h"
#include "stackctl-fanout.h"

/* A reply holds a whole /processes document: bounded, as the single-host client is by libcurl's buffer. */
#define FANOUT_REPLY_MAX (64U * 1024U * 1024U)
#define FANOUT_ERROR_MAX 4096U

void fanout_replies_free(FanoutReply *r, size_t n) {
        for (size_t i = 0; r && i < n; i++) {
                free(r[i].body);
                free(r[i].error);
        }
        free(r);
}

int fanout_exit_status(const FanoutReply *r, size_t n) {
        int ret = EXIT_OK;

        for (size_t i = 0; i < n; i++) {
                if (r[i].exit == EXIT_OK)
                        continue;
                if (ret == EXIT_OK)
                        ret = r[i].exit;
                else if (ret != r[i].exit)
                        return EXIT_FAIL;
        }
        return ret;
}

static void child(size_t host, const char *path, uint64_t timeout_usec, long also_ok, int out, int err) {
        _cleanup_(http_response_done) HttpResponse resp = {};
        int r;

        (void) dup2(err, STDERR_FILENO);
        if (host_select(host) < 0)
                _exit(EXIT_USAGE);
        r = daemon_get(path, timeout_usec, also_ok, &resp);
        if (r == EXIT_OK && loop_write(out, resp.body, resp.size) < 0)
                _exit(EXIT_FAIL);
        _exit(r);
}

/* Read what is there on FD into *BUF (growing, at most MAX); false at EOF or error. */
static bool drain(int fd, char **buf, size_t *size, size_t max) {
        char chunk[65536];
        ssize_t n = read(fd, chunk, sizeof chunk);

        if (n <= 0)
                return n < 0 && errno == EAGAIN;
        if (*size + (size_t) n > max)
                return true; /* the rest is dropped; the reply will not parse */
        char *nb = realloc(*buf, *size + (size_t) n + 1);
        if (!nb)
                return false;
        memcpy(nb + *size, chunk, (size_t) n);
        *size += (size_t) n;
        nb[*size] = 0;
        *buf = nb;
        return true;
}

int fanout_get(const char *path, uint64_t timeout_usec, long also_ok, FanoutReply **ret, size_t *ret_n) {
        size_t n = arg.n_hosts;
        FanoutReply *r = calloc(n, sizeof *r);
        struct pollfd *p = calloc(2 * n, sizeof *p);
        pid_t *pids = calloc(n, sizeof *pids);
        uint64_t deadline = now_usec(CLOCK_MONOTONIC) + timeout_usec + USEC_PER_SEC;
        size_t open_fds = 0;

        if (!r || !p || !pids) {
                free(r);
                free(p);
                free(pids);
                return log_oom(), EXIT_FAIL;
        }
        fflush(stdout);
        fflush(stderr);
        for (size_t i = 0; i < n; i++) {
                int out[2], err[2], k;

                r[i].host = arg.hosts[i].name;
                r[i].exit = EXIT_FAIL;
                if (pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0) {
                        r[i].error = strdup("cannot create a pipe");
                        continue;
                }
                k = fork_child(&(ForkOptions) { .flags = FORK_DEATHSIG | FORK_RESET_SIGNALS | FORK_CLOSE_FDS |
                                                          FORK_KEEP_STDIO,
                                                .keep_fds = (const int[]) { out[1], err[1] }, .n_keep_fds = 2 },
                               &pids[i]);
                if (k == 0)
                        child(i, path, timeout_usec, also_ok, out[1], err[1]);
                close(out[1]);
                close(err[1]);
                if (k < 0) {
                        close(out[0]);
                        close(err[0]);
                        r[i].error = strdup("cannot fork");
                        continue;
                }
                (void) fcntl(out[0], F_SETFL, O_NONBLOCK);
                (void) fcntl(err[0], F_SETFL, O_NONBLOCK);
                p[2 * i] = (struct pollfd) { .fd = out[0], .events = POLLIN };
                p[2 * i + 1] = (struct pollfd) { .fd = err[0], .events = POLLIN };
                open_fds += 2;
        }
        /* Every host at once, until each has said all, or the deadline. */
        while (open_fds > 0) {
                uint64_t now = now_usec(CLOCK_MONOTONIC);
                int k;

                if (now >= deadline)
                        break;
                k = poll(p, 2 * n, (int) ((deadline - now) / USEC_PER_MSEC) + 1);
                if (k < 0 && errno != EINTR)
                        break;
                for (size_t i = 0; k > 0 && i < 2 * n; i++) {
                        FanoutReply *x = &r[i / 2];
                        bool more;

                        if (p[i].fd < 0 || !p[i].revents)
                                continue;
                        more = i % 2 == 0 ? drain(p[i].fd, &x->body, &x->size, FANOUT_REPLY_MAX)
                                          : drain(p[i].fd, &x->error, &(size_t) { x->error ? strlen(x->error) : 0 },
                                                  FANOUT_ERROR_MAX);
                        if (!more) {
                                close(p[i].fd);
                                p[i].fd = -1;
                                open_fds--;
                        }
                }
        }
        for (size_t i = 0; i < n; i++) {
                int status;

                if (p[2 * i].fd >= 0 || p[2 * i + 1].fd >= 0) {
                        /* Past the deadline: this host is a line that says so, not a wait. */
                        if (pids[i] > 0)
                                (void) kill(pids[i], SIGKILL);
                        free(r[i].error);
                        r[i].error = strdup("no answer within the timeout");
                }
                for (size_t k = 0; k < 2; k++)
                        if (p[2 * i + k].fd >= 0)
                                close(p[2 * i + k].fd);
                if (pids[i] > 0 && process_wait(pids[i], &status) == pids[i] && WIFEXITED(status) &&
                    !(r[i].error && strstr(r[i].error, "within the timeout")))
                        r[i].exit = WEXITSTATUS(status);
                /* The last line of what the child said on stderr is the reason, escaped for the terminal. */
                if (r[i].error) {
                        char *e = r[i].error, *nl;
                        size_t len = strlen(e);

                        while (len > 0 && e[len - 1] == '\n')
                                e[--len] = 0;
                        nl = strrchr(e, '\n');
                        char *esc = escape_string(nl ? nl + 1 : e);
                        free(r[i].error);
                        r[i].error = esc;
                }
        }
        free(p);
        free(pids);
        *ret = r;
        *ret_n = n;
        return EXIT_OK;
}
