/* proc-parse.h: pure parsers for /proc/PID[/task/TID] files; no I/O, every field bounds-checked. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* /proc/PID/stat, the fields we use, named by their proc(5) numbers. */
typedef struct ProcStat {
        int pid;                /* (1) */
        char comm[64];          /* (2) the raw bytes between the first '(' and the last ')', NUL-terminated */
        char state;             /* (3) */
        int ppid;               /* (4) */
        uint64_t flags;         /* (9) PF_* */
        uint64_t minflt;        /* (10) */
        uint64_t majflt;        /* (12) */
        uint64_t utime;         /* (14) clock ticks */
        uint64_t stime;         /* (15) */
        int64_t priority;       /* (18) */
        int64_t nice;           /* (19) */
        uint64_t num_threads;   /* (20) */
        uint64_t starttime;     /* (22) clock ticks after boot */
        int processor;          /* (39) */
} ProcStat;

int proc_parse_stat(const char *buf, size_t len, ProcStat *ret);

#define PROC_PF_KTHREAD 0x00200000U

typedef enum ProcSyscallKind {
        PROC_SYSCALL_RUNNING,   /* "running": on a CPU, no registers available */
        PROC_SYSCALL_BLOCKED,   /* "NR a1..a6 sp pc": asleep inside syscall NR */
        PROC_SYSCALL_NONE,      /* "-1 sp pc": blocked, but not in a syscall (stopped, page fault, …) */
} ProcSyscallKind;

/* /proc/PID/task/TID/syscall. */
typedef struct ProcSyscall {
        ProcSyscallKind kind;
        int64_t nr;
        uint64_t args[6];
        uint64_t sp;
        uint64_t pc;
        bool restarted;         /* NR was restart_syscall, and is now the call it continues */
} ProcSyscall;

int proc_parse_syscall(const char *buf, size_t len, ProcSyscall *ret);
/* A thread stopped in poll(), futex() or nanosleep() and continued (SIGSTOP/SIGCONT, Ctrl-Z and fg, a debugger or
 * our own ptrace fall-back) sleeps on in restart_syscall, and /proc shows that number, though the registers still
 * hold the first call's arguments. Given the thread's WCHAN (the kernel function it sleeps in; NULL or "" when not
 * known), turn SC back into the call it continues, and set restarted; left as it is when WCHAN does not say. */
void proc_syscall_resolve_restart(ProcSyscall *sc, const char *wchan);
/* Whether two syscall records show the thread at the same place (same syscall, SP and PC). */
bool proc_syscall_same_place(const ProcSyscall *a, const ProcSyscall *b);

/* /proc/PID/task/TID/schedstat: "run_ns wait_ns timeslices". */
typedef struct ProcSchedstat {
        uint64_t run_ns;        /* time on a CPU */
        uint64_t wait_ns;       /* time runnable, waiting for a CPU */
        uint64_t timeslices;    /* how often it got a CPU */
} ProcSchedstat;

int proc_parse_schedstat(const char *buf, size_t len, ProcSchedstat *ret);

/* /proc/PID/status, the fields we use. */
typedef struct ProcStatus {
        uid_t uid;              /* Uid: real */
        uid_t euid;             /* Uid: effective */
        int tgid;
        int tracer_pid;
        uint64_t voluntary_ctxt_switches;
        uint64_t nonvoluntary_ctxt_switches;
} ProcStatus;

int proc_parse_status(const char *buf, size_t len, ProcStatus *ret);

/* /proc/PID/task/TID/io, the counters we use. */
typedef struct ProcIo {
        uint64_t rchar, wchar;  /* bytes through read/write-like calls */
        uint64_t syscr, syscw;  /* read/write-like calls */
} ProcIo;

int proc_parse_io(const char *buf, size_t len, ProcIo *ret);

/* /proc/PID/fdinfo/FD: the number of field KEY ("mnt_id", "fuse_connection"…) in BASE; -ENOENT when the file has
 * no such field, -EINVAL when it is not a number. */
int proc_parse_fdinfo_field(const char *buf, size_t len, const char *key, unsigned base, uint64_t *ret);
/* /proc/PID/fdinfo/FD: the open flags ("flags:", octal), O_ACCMODE and the rest. */
int proc_parse_fdinfo_flags(const char *buf, size_t len, unsigned *ret_flags);
/* An epoll fd's fdinfo: the fds of its "tfd:" lines, the first MAX into FDS. Returns how many lines there are (may
 * be more than MAX). */
size_t proc_parse_fdinfo_tfds(const char *buf, size_t len, int *fds, size_t max);

/* One line of /proc/PID/task/TID/stack: "[<0>] function+0x2d2/0x3b0 [module]". */
typedef struct ProcKernelFrame {
        char function[128];
        uint64_t offset;
        uint64_t size;
        char module[64];        /* empty for vmlinux */
} ProcKernelFrame;

/* Parse up to MAX frames into FRAMES; returns the number parsed. Malformed lines are skipped. */
int proc_parse_kstack(const char *buf, size_t len, ProcKernelFrame *frames, size_t max);

/* One line of /proc/PID/maps. */
typedef struct ProcMap {
        uint64_t start;
        uint64_t end;
        uint64_t offset;
        uint64_t inode;
        unsigned dev_major, dev_minor;
        bool r, w, x, shared;
        const char *path;       /* points into the parsed buffer (NUL-terminated in place); "" for anon */
} ProcMap;

/* The kernel writes a newline in a mapped file's path as "\012" (seq_file_path(…, "\n")), and nothing else
 * escaped: undo that in place in the NUL-terminated PATH, so that the path opens and prints as the file's name; returns
 * PATH. A name that really holds "\012" comes out as a newline too: the kernel leaves no way to tell them apart. */
char *proc_maps_path_unmangle(char *path);
/* Parse maps in place: BUF is a NUL-terminated string of LEN bytes, and its line ends become NULs, so that each
 * path is a string. ret is malloc'd. */
int proc_parse_maps(char *buf, size_t len, ProcMap **ret, size_t *ret_n);
/* Binary search for the mapping containing ADDR; NULL when none does. */
const ProcMap *proc_maps_find(const ProcMap *maps, size_t n, uint64_t addr);

/* /proc/PID/cmdline (NUL-separated) → NULL-terminated malloc'd string vector. */
int proc_parse_cmdline(const char *buf, size_t len, char ***ret);

/* /proc/PID/cgroup → the unified (v2, "0::") path, and the systemd unit it belongs to (NULL if none). */
int proc_parse_cgroup(const char *buf, size_t len, char **ret_path, char **ret_unit);
/* /proc/PID/cgroup → the path in the v1 hierarchy that has CONTROLLER among its controllers ("4:cpu,freezer:/x"),
 * or, CONTROLLER "", in the unified one ("0::/x"). -ENXIO when there is no such line. */
int proc_parse_cgroup_hierarchy(const char *buf, size_t len, const char *controller, char **ret_path);

/* The systemd unit of a cgroup path: the first component that is not a slice, if it is a unit name. */
int cgroup_path_get_unit(const char *path, char **ret);

/* Name of a syscall number of the architecture we run on; NULL for unknown numbers. */
const char *syscall_name(int64_t nr);
/* The number of the syscall named NAME on the architecture we run on; -1 when it has none of that name. */
int64_t syscall_nr_from_name(const char *name);
