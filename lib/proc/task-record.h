/* task-record.h: the record the BPF task iterator (task-iter.bpf.c) writes for every thread, one fixed-size binary
 * struct each, read by task-iter.c. Shared by the BPF program and user space, so only fixed-width kernel types and
 * no padding the two compilers could lay out differently (every field is naturally aligned, the size a multiple of
 * 8; task-iter.c checks the size). */
#pragma once

#ifndef __bpf__
#include <linux/types.h>
#endif

#define SW_TASK_COMM_LEN 16
/* The wait channel as /proc/PID/wchan prints it ("%ps" of the first frame outside the scheduler and the lock
 * functions); kernel symbol names are longer than this only in rare modules, cut then. */
#define SW_TASK_WCHAN_LEN 48

enum {
        SW_TASK_HAVE_REGS = 1U << 0,    /* syscall_nr, args, sp, pc: its saved user registers (asleep, alive) */
        SW_TASK_HAVE_IO = 1U << 1,      /* rchar … syscw: the kernel keeps I/O accounting (CONFIG_TASK_XACCT) */
        SW_TASK_HAVE_WCHAN = 1U << 2,   /* wchan was looked for (D, frozen, or in restart_syscall); "" is none */
        SW_TASK_CGROUP_FROZEN = 1U << 3,/* cgroup v2's freezer holds it (JOBCTL_TRAP_FREEZE: in its trap) */
        SW_TASK_ON_CPU = 1U << 4,       /* on a CPU as the iterator passed it */
};

/* A pass writes three kinds of record, each starting with its kind: a thread that is new, ran, or changed its state
 * since the last pass gets its whole record; one that did none of these only its tid, as struct sw_task_same (its
 * facts are those of its last whole record); or, from the one-shot walk, which meets a process's threads one after
 * the other, only a count of them per process, as struct sw_task_group. A pass asked for everything writes whole
 * records only. */
enum {
        SW_RECORD_FULL = 0x46554c4cU,   /* "FULL" */
        SW_RECORD_SAME = 0x53414d45U,   /* "SAME" */
        SW_RECORD_GROUP = 0x47525550U,  /* "GRUP" */
};

struct sw_task_same {
        __u32 kind;                     /* SW_RECORD_SAME */
        __u32 tid;
};

struct sw_task_group {
        __u32 kind;                     /* SW_RECORD_GROUP */
        __u32 tgid;
        __u32 same;                     /* its threads that did not move (none of them has a record of its own) */
        __u32 unused;
};

struct sw_task_record {
        __u32 kind;                     /* SW_RECORD_FULL */
        __u32 tid, tgid;
        __u32 ppid;                     /* the tgid of its real parent (what /proc's stat calls ppid) */
        __u32 state;                    /* task_struct.__state (.state before 5.14): the raw TASK_* bits */
        __u32 exit_state;               /* EXIT_ZOMBIE, EXIT_DEAD */
        __u32 flags;                    /* PF_* */
        __u32 num_threads;              /* signal->nr_threads */
        __u32 have;                     /* SW_TASK_* */
        __u32 unused;
        __u64 start_boottime;           /* ns after boot, suspend included: /proc's starttime in ns */
        __u64 utime, stime;             /* ns, as the tick accounts them (user space scales them as /proc does) */
        __u64 sum_exec_runtime;         /* ns on a CPU (schedstat's first field) */
        __u64 run_delay;                /* ns runnable waiting for a CPU (schedstat's second) */
        __u64 pcount;                   /* times it got a CPU (schedstat's third) */
        __u64 nvcsw, nivcsw;            /* voluntary and involuntary context switches */
        __u64 min_flt, maj_flt;
        __u64 rchar, wchar, syscr, syscw;
        __s64 syscall_nr;               /* -1: not in a syscall */
        __u64 args[6];
        __u64 sp, pc;
        char comm[SW_TASK_COMM_LEN];
        char wchan[SW_TASK_WCHAN_LEN];
};
