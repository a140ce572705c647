/* task-iter.h: every thread's scan facts in one pass of a BPF task iterator (task-iter.bpf.c), the source below the
 * /proc floor: one read() returns thousands of fixed-size records, where /proc costs an open or a pread per file
 * per thread. Loaded when the kernel (5.15+, with BTF), the build (--with-bpf) and the privileges (CAP_BPF and
 * CAP_PERFMON, or CAP_SYS_ADMIN) allow it; else the caller keeps to /proc, and task_iter_new() says why.
 *
 * The conversions below turn a record into what the same thread's /proc files would show, so that the scan feeds
 * one classifier the same facts from either source. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/macro.h"
#include "model/proc-parse.h"
#include "proc/task-record.h"

typedef struct sw_task_record TaskRecord;
typedef struct TaskIter TaskIter;

/* Whether this build has the BPF scan at all. */
bool task_iter_built(void);
/* How the passes that need not write everything meet the threads: in one call of the program along the task lists
 * (Linux 6.7's open-coded task iterators), a large process's list along four lanes at once (LANES) or from end to end
 * (LIST); else one call of the program per task (PER_TASK), found by its tid. BEST is the first of those that loads. */
typedef enum TaskIterWalk {
        TASK_ITER_WALK_BEST,
        TASK_ITER_WALK_LANES,
        TASK_ITER_WALK_LIST,
        TASK_ITER_WALK_PER_TASK,
        _TASK_ITER_WALK_MAX,
} TaskIterWalk;

/* Load and attach the iterator. On failure -errno, and *RET_WHY (malloc'd; may be NULL on OOM) says why in words a
 * log line can carry ("the kernel has no BTF (/sys/kernel/btf/vmlinux)", "built without BPF", …). */
int task_iter_new(TaskIter **ret, char **ret_why);
/* The same, with the walk WALK or nothing (BEST: the best that loads). For the benches and tests that compare them. */
int task_iter_new_walk(TaskIter **ret, TaskIterWalk walk, char **ret_why);
TaskIter *task_iter_free(TaskIter *it);
DEFINE_TRIVIAL_CLEANUP_FUNC(TaskIter *, task_iter_free);
typedef struct sw_task_group TaskGroup;

/* What one pass wrote, owned by the TaskIter and valid until its next pass. */
typedef struct TaskPass {
        const TaskRecord *records;      /* the threads that are new, ran, or changed their state */
        size_t n_records;
        const uint32_t *same;           /* the tids of threads that did not */
        size_t n_same;
        const TaskGroup *groups;        /* or, from a walk, how many of each process's threads did not */
        size_t n_groups;
        unsigned n_laned;               /* processes walked along lanes */
        bool overflowed;                /* the walk's ring had no room for every record of a thread that moved: this
                                         * pass wrote every thread's, and the ring grew for the next */
} TaskPass;

/* One pass over every thread the reader's pid namespace sees. With ALL, every thread's whole record; else whole
 * records only for the threads that are new, ran, or changed their state since the pass before, and for the others
 * their tids or, from a one-shot walk (task_iter_walk() not PER_TASK), a count per process (a 10,000-thread pool
 * parked in read() costs one record and no conversion). */
int task_iter_read(TaskIter *it, bool all, TaskPass *ret);
/* Whether the next walks give the tids of process TGID's threads that did not move (WANT), or a count: a reader whose
 * count disagrees with the threads it knows of that process asks for the tids once, to tell which are gone. */
int task_iter_want_tids(TaskIter *it, uint32_t tgid, bool want);

/* How the passes that need not write everything meet the threads (never BEST). */
TaskIterWalk task_iter_walk(const TaskIter *it);
/* The size of the walk's ring buffer (0: no walk): it grows when a pass finds it too small. */
size_t task_iter_ring_bytes(const TaskIter *it);
/* "lanes", "list", "per-task". */
const char *task_iter_walk_to_string(TaskIterWalk w);

/* The state letter of /proc's stat ("RSDTtXZPI"), from the raw bits as the kernel's task_state_index() maps them:
 * a task the freezer holds (TASK_FROZEN, Linux 6.1) shows as its /proc file shows it. */
char task_record_state(const TaskRecord *r);
/* Whether a freezer holds it: TASK_FROZEN (v1, and the system's suspend freezer), or cgroup v2's trap. */
bool task_record_frozen(const TaskRecord *r);
/* stat's fields (pid, comm, state, ppid, flags, faults, utime and stime in clock ticks of HZ scaled as /proc scales
 * the tick's split to the runtime, num_threads, starttime). comm is the task's 16 bytes: a kernel worker's
 * "kworker/0:1-events" suffix, which /proc adds, is not there. */
void task_record_stat(const TaskRecord *r, long hz, ProcStat *ret);
void task_record_schedstat(const TaskRecord *r, ProcSchedstat *ret);
/* false when the kernel keeps no I/O accounting. */
bool task_record_io(const TaskRecord *r, ProcIo *ret);
/* The syscall file's record: running, blocked in NR, or not in a syscall; false when the registers were not read
 * (an exiting task, a kernel thread), where /proc would say "-1" or nothing useful. */
bool task_record_syscall(const TaskRecord *r, ProcSyscall *ret);
/* The wait channel as /proc/…/wchan names it ("" for none); NULL when it was not looked for. */
const char *task_record_wchan(const TaskRecord *r);
