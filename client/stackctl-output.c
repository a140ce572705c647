/* stackctl-output.c: what stackctl's output does on a terminal (a pager, colour) and how it writes JSON. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/json-util.h"
#include "base/log.h"
#include "base/macro.h"
#include "base/process-util.h"
#include "stackctl-args.h"
#include "stackctl-output.h"

static pid_t pager_pid;

static const char *pager_command(void) {
        const char *p = getenv("STACKCTL_PAGER");

        if (!p)
                p = getenv("PAGER");
        if (!p)
                p = "less";
        return p;
}

void pager_open(void) {
        const char *cmd = pager_command();
        int fds[2], r;
        pid_t pid;

        if (arg.no_pager || pager_pid > 0 || !isatty(STDOUT_FILENO) || !cmd[0] || streq(cmd, "cat"))
                return;
        if (pipe2(fds, O_CLOEXEC) < 0)
                return;
        fflush(stdout);
        /* It dies with us: a pager left behind would hold the terminal. */
        r = fork_child(&(ForkOptions) { .flags = FORK_DEATHSIG | FORK_RESET_SIGNALS }, &pid);
        if (r < 0) {
                close(fds[0]);
                close(fds[1]);
                return;
        }
        if (r == 0) {
                /* The pager: reads the pipe, writes to the terminal. Quit at once on one screen (F), keep colour (R),
                 * no termcap init/deinit (X), as systemd's tools set it. */
                (void) dup2(fds[0], STDIN_FILENO);
                (void) setenv("LESS", "FRSXMK", 0);
                (void) setenv("LESSCHARSET", "utf-8", 0);
                execl("/bin/sh", "sh", "-c", cmd, (char *) NULL);
                _exit(127);
        }
        /* A pager that quits early must not kill us with SIGPIPE before pager_close(). */
        (void) signal(SIGPIPE, SIG_IGN);
        if (dup2(fds[1], STDOUT_FILENO) < 0)
                log_debug_errno(errno, "Failed to redirect stdout into the pager: %m");
        close(fds[0]);
        close(fds[1]);
        pager_pid = pid;
}

void pager_close(void) {
        if (pager_pid <= 0)
                return;
        fflush(stdout);
        (void) close(STDOUT_FILENO);
        (void) process_wait(pager_pid, NULL);
        pager_pid = 0;
}

const char *ansi_bold(void) {
        return arg.colour ? "\x1b[1m" : "";
}

const char *ansi_class(const char *klass) {
        if (!arg.colour || !klass)
                return "";
        if (streq(klass, "blocked"))
                return "\x1b[0;1;31m";
        if (streq(klass, "busy-loop") || streq(klass, "syscall-spin"))
                return "\x1b[0;1;33m";
        return "";
}

const char *ansi_normal(void) {
        return arg.colour ? "\x1b[0m" : "";
}

RenderOptions render_options_from_args(void) {
        return (RenderOptions) {
                .kernel = arg.capture.kernel,
                .modules = arg.modules,
                .locks = arg.locks,
                .raw_names = arg.no_demangle,
                .no_group = arg.no_group,
                .json_flags = arg.json_flags,
                .picture = arg.svg_picture,
                .icicle = arg.icicle,
        };
}

int json_print(json_object *o) {
        int r = json_fputs(o, arg.json_flags, stdout);

        if (r == -ENOMEM)
                return log_oom(), EXIT_FAIL;
        if (r < 0 || putchar('\n') == EOF)
                return log_error_errno(errno, "Failed to write: %m"), EXIT_FAIL;
        return EXIT_OK;
}
