/* task-regs.c: loading the BPF register reader and reading one thread's record (see task-regs.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "base/macro.h"
#include "proc/bpf-log.h"
#include "proc/task-regs.h"

#ifdef HAVE_BPF
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

/* bpftool's generated code does not meet our warnings. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wsign-conversion"
#include "proc/task-regs.skel.h"
#pragma GCC diagnostic pop

_Static_assert(sizeof(TaskRegsRecord) == 16 + 8 * SW_TASK_REGS_MAX, "the BPF record's layout moved");

struct TaskRegs {
        struct task_regs_bpf *skel;
};

static int fail(int r, char **ret_why, const char *what) {
        if (ret_why && asprintf(ret_why, "%s: %s", what, strerror(-r)) < 0)
                *ret_why = NULL;
        return r;
}

int task_regs_new(TaskRegs **ret, char **ret_why) {
        TaskRegs *t;
        int r;

        if (ret_why)
                *ret_why = NULL;
        bpf_log_to_debug();
        t = calloc(1, sizeof *t);
        if (!t)
                return -ENOMEM;
        t->skel = task_regs_bpf__open();
        if (!t->skel) {
                r = -errno ?: -ENOMEM;
                free(t);
                return fail(r, ret_why, "opening the BPF object");
        }
        /* Attached by hand, one thread at a time. */
        bpf_program__set_autoattach(t->skel->progs.stackwatch_regs, false);
        r = task_regs_bpf__load(t->skel);
        if (r < 0) {
                task_regs_free(t);
                return fail(r, ret_why, r == -EPERM || r == -EACCES
                                                ? "loading the BPF program (it needs CAP_BPF and CAP_PERFMON)"
                                                : "loading the BPF program (it needs Linux 5.15 or later, with BTF)");
        }
        *ret = t;
        return 0;
}

TaskRegs *task_regs_free(TaskRegs *t) {
        if (!t)
                return NULL;
        task_regs_bpf__destroy(t->skel);
        free(t);
        return NULL;
}

int task_regs_fd(const TaskRegs *t) {
        return bpf_program__fd(t->skel->progs.stackwatch_regs);
}

int task_regs_read(TaskRegs *t, pid_t tid, TaskRegsRecord *ret) {
        union bpf_iter_link_info info = { .task.tid = (uint32_t) tid };
        LIBBPF_OPTS(bpf_iter_attach_opts, opts, .link_info = &info, .link_info_len = sizeof info);
        struct bpf_link *link;
        ssize_t n;
        int fd, r = 0;

        link = bpf_program__attach_iter(t->skel->progs.stackwatch_regs, &opts);
        if (!link)
                return -errno;
        fd = bpf_iter_create(bpf_link__fd(link));
        if (fd < 0) {
                r = -errno;
                bpf_link__destroy(link);
                return r;
        }
        do
                n = read(fd, ret, sizeof *ret);
        while (n < 0 && errno == EINTR);
        if (n < 0)
                r = -errno;
        else if (n == 0)
                r = -ESRCH;
        else if ((size_t) n != sizeof *ret || ret->n == 0)
                r = -EBADMSG;
        else
                ret->tid = (uint32_t) tid;
        close(fd);
        bpf_link__destroy(link);
        return r;
}

#else /* !HAVE_BPF */

struct TaskRegs {
        int unused;
};

int task_regs_new(TaskRegs **ret, char **ret_why) {
        if (ret_why)
                *ret_why = strdup("this build has no BPF (configure --with-bpf)");
        return -EOPNOTSUPP;
}

TaskRegs *task_regs_free(TaskRegs *t) {
        free(t);
        return NULL;
}

int task_regs_fd(const TaskRegs *t) {
        return -EBADF;
}

int task_regs_read(TaskRegs *t, pid_t tid, TaskRegsRecord *ret) {
        return -EOPNOTSUPP;
}

#endif
