/* scan-sources.c: a test helper that reads every thread once through the BPF task iterator, then at once the same
 * threads' /proc files, and prints one JSON line per thread with both views as the scan consumes them, for
 * test_scan_source.py to compare field by field.
 *
 *   scan-sources [PID…]    only the threads of these processes (default: every thread)
 *
 * {"tid":…,"pid":…,"bpf":{"state":"S","ppid":…,"utime":…,"stime":…,"faults":…,"starttime":…,"num_threads":…,
 *  "kthread":…,"comm":…,"run_ns":…,"wait_ns":…,"timeslices":…,"syscall":"…","wchan":…,"io":[…],"frozen":…},
 *  "proc":{the same keys from stat, schedstat, syscall, wchan and io}}
 * A view's missing field is null. Exits 0; 1 with the reason on stderr when the iterator cannot be loaded. */
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/macro.h"
#include "base/parse-util.h"
#include "model/proc-parse.h"
#include "proc/proc-read.h"
#include "proc/task-iter.h"

static json_object *syscall_json(const ProcSyscall *sc) {
        char buf[256];

        if (sc->kind == PROC_SYSCALL_RUNNING)
                return json_object_new_string("running");
        if (sc->kind == PROC_SYSCALL_NONE)
                snprintf(buf, sizeof buf, "-1 0x%llx 0x%llx", (unsigned long long) sc->sp,
                         (unsigned long long) sc->pc);
        else
                snprintf(buf, sizeof buf, "%lld 0x%llx 0x%llx 0x%llx 0x%llx 0x%llx 0x%llx 0x%llx 0x%llx",
                         (long long) sc->nr, (unsigned long long) sc->args[0], (unsigned long long) sc->args[1],
                         (unsigned long long) sc->args[2], (unsigned long long) sc->args[3],
                         (unsigned long long) sc->args[4], (unsigned long long) sc->args[5],
                         (unsigned long long) sc->sp, (unsigned long long) sc->pc);
        return json_object_new_string(buf);
}

static void add_stat(json_object *o, const ProcStat *st) {
        char state[2] = { st->state, '\0' };

        json_object_object_add(o, "state", json_object_new_string(state));
        json_object_object_add(o, "ppid", json_object_new_int(st->ppid));
        json_object_object_add(o, "utime", json_object_new_uint64(st->utime));
        json_object_object_add(o, "stime", json_object_new_uint64(st->stime));
        json_object_object_add(o, "faults", json_object_new_uint64(st->minflt + st->majflt));
        json_object_object_add(o, "starttime", json_object_new_uint64(st->starttime));
        json_object_object_add(o, "num_threads", json_object_new_uint64(st->num_threads));
        json_object_object_add(o, "kthread", json_object_new_boolean(!!(st->flags & PROC_PF_KTHREAD)));
        json_object_object_add(o, "comm", json_object_new_string(st->comm));
}

static void add_sched(json_object *o, const ProcSchedstat *s) {
        json_object_object_add(o, "run_ns", json_object_new_uint64(s->run_ns));
        json_object_object_add(o, "wait_ns", json_object_new_uint64(s->wait_ns));
        json_object_object_add(o, "timeslices", json_object_new_uint64(s->timeslices));
}

static void add_io(json_object *o, const ProcIo *io) {
        json_object *a = json_object_new_array();

        json_object_array_add(a, json_object_new_uint64(io->rchar));
        json_object_array_add(a, json_object_new_uint64(io->wchar));
        json_object_array_add(a, json_object_new_uint64(io->syscr));
        json_object_array_add(a, json_object_new_uint64(io->syscw));
        json_object_object_add(o, "io", a);
}

static ssize_t read_task(int dirfd, const char *name, char *buf, size_t size) {
        _cleanup_close_ int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
        ssize_t n;

        if (fd < 0)
                return -errno;
        n = read(fd, buf, size - 1);
        if (n < 0)
                return -errno;
        buf[n] = '\0';
        return n;
}

static json_object *proc_view(pid_t pid, pid_t tid) {
        _cleanup_close_ int dirfd = -EBADF;
        json_object *o;
        char path[64], buf[4096];
        ProcStat st;
        ProcSchedstat ss;
        ProcSyscall sc;
        ProcIo io;
        ssize_t n;

        snprintf(path, sizeof path, "/proc/%d/task/%d", (int) pid, (int) tid);
        dirfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dirfd < 0)
                return NULL;
        n = read_task(dirfd, "stat", buf, sizeof buf);
        if (n < 0 || proc_parse_stat(buf, (size_t) n, &st) < 0)
                return NULL;
        o = json_object_new_object();
        add_stat(o, &st);
        n = read_task(dirfd, "schedstat", buf, sizeof buf);
        if (n > 0 && proc_parse_schedstat(buf, (size_t) n, &ss) >= 0)
                add_sched(o, &ss);
        n = read_task(dirfd, "syscall", buf, sizeof buf);
        if (n > 0 && proc_parse_syscall(buf, (size_t) n, &sc) >= 0)
                json_object_object_add(o, "syscall", syscall_json(&sc));
        n = read_task(dirfd, "wchan", buf, sizeof buf);
        if (n >= 0)
                json_object_object_add(o, "wchan", json_object_new_string(streq(buf, "0") ? "" : buf));
        n = read_task(dirfd, "io", buf, sizeof buf);
        if (n > 0 && proc_parse_io(buf, (size_t) n, &io) >= 0)
                add_io(o, &io);
        return o;
}

static json_object *bpf_view(const TaskRecord *r) {
        json_object *o = json_object_new_object();
        ProcStat st;
        ProcSchedstat ss;
        ProcSyscall sc;
        ProcIo io;
        const char *wchan;

        task_record_stat(r, sysconf(_SC_CLK_TCK), &st);
        add_stat(o, &st);
        task_record_schedstat(r, &ss);
        add_sched(o, &ss);
        if (task_record_syscall(r, &sc))
                json_object_object_add(o, "syscall", syscall_json(&sc));
        wchan = task_record_wchan(r);
        if (wchan)
                json_object_object_add(o, "wchan", json_object_new_string(wchan));
        if (task_record_io(r, &io))
                add_io(o, &io);
        json_object_object_add(o, "frozen", json_object_new_boolean(task_record_frozen(r)));
        return o;
}

int main(int argc, char *argv[]) {
        _cleanup_(task_iter_freep) TaskIter *it = NULL;
        _cleanup_free_ char *why = NULL;
        TaskPass pass;
        int r;

        r = task_iter_new(&it, &why);
        if (r < 0) {
                fprintf(stderr, "scan-sources: no BPF scan: %s\n", why ?: strerror(-r));
                return 1;
        }
        r = task_iter_read(it, true, &pass);
        if (r < 0) {
                fprintf(stderr, "scan-sources: reading the iterator: %s\n", strerror(-r));
                return 1;
        }
        /* The records are one pass; copy them before /proc is read, which takes longer. */
        for (size_t i = 0; i < pass.n_records; i++) {
                const TaskRecord *t = &pass.records[i];
                json_object *o, *p;
                bool wanted = argc < 2;

                for (int a = 1; a < argc && !wanted; a++)
                        wanted = (unsigned) atoi(argv[a]) == t->tgid;
                if (!wanted)
                        continue;
                o = json_object_new_object();
                json_object_object_add(o, "tid", json_object_new_int((int) t->tid));
                json_object_object_add(o, "pid", json_object_new_int((int) t->tgid));
                json_object_object_add(o, "bpf", bpf_view(t));
                p = proc_view((pid_t) t->tgid, (pid_t) t->tid);
                json_object_object_add(o, "proc", p);
                puts(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
                json_object_put(o);
        }
        return 0;
}
