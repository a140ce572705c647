/* snapshot.h: the snapshot model (stackwatch.snapshot/1): a process, its threads, their frames, modules. */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "proc-parse.h"

/* How the registers of a thread were obtained. */
typedef enum CaptureMethod {
        CAPTURE_METHOD_AUTO,    /* requested only: passive where it is enough, ptrace otherwise */
        CAPTURE_METHOD_PASSIVE, /* /proc/…/syscall SP+PC and a stack copy, the thread never stopped */
        CAPTURE_METHOD_PTRACE,  /* PTRACE_SEIZE + PTRACE_INTERRUPT, full registers, detached at once */
        CAPTURE_METHOD_NONE,    /* no user registers could be had (see the thread's error) */
        _CAPTURE_METHOD_MAX,
        _CAPTURE_METHOD_INVALID = -EINVAL,
} CaptureMethod;

const char *capture_method_to_string(CaptureMethod m);
CaptureMethod capture_method_from_string(const char *s);

/* How a user frame was found. */
typedef enum FrameMethod {
        FRAME_METHOD_INITIAL,   /* frame #0, from the registers */
        FRAME_METHOD_CFI,       /* DWARF call frame information */
        FRAME_METHOD_FP,        /* frame-pointer chain */
        FRAME_METHOD_SCAN,      /* stack scan for return addresses: a guess */
        _FRAME_METHOD_MAX,
        _FRAME_METHOD_INVALID = -EINVAL,
} FrameMethod;

const char *frame_method_to_string(FrameMethod m);
FrameMethod frame_method_from_string(const char *s);

typedef struct KernelFrame {
        char *function;
        uint64_t offset;
        uint64_t size;
        char *module;           /* NULL for vmlinux */
} KernelFrame;

typedef struct UserFrame {
        uint64_t pc;
        bool activation;        /* pc is the interrupted instruction (frame #0, signal frames), not a return address */
        bool inlined;           /* a call site inlined at the same pc as the next frame */
        FrameMethod method;
        int module;             /* index into Snapshot.modules, -1 when no module covers pc */
        char *function;         /* NULL when unknown */
        uint64_t function_offset;
        char *file;             /* NULL without line information */
        unsigned line;
        unsigned column;
} UserFrame;

typedef struct ThreadSnapshot {
        pid_t tid;
        char *comm;
        char state;             /* /proc stat field 3 */
        ProcSyscall syscall;
        char *wchan;            /* NULL when not sleeping in the kernel */
        pid_t tracer_pid;       /* 0 when not traced */
        uint64_t utime, stime;  /* clock ticks */
        uint64_t voluntary_ctxt_switches, nonvoluntary_ctxt_switches;

        KernelFrame *kframes;
        size_t n_kframes;
        UserFrame *frames;
        size_t n_frames;

        CaptureMethod method;
        double pause_us;        /* how long the thread was held stopped; 0 for passive */
        uint64_t stack_bytes;   /* bytes of stack copied */
        char *unwind_end;       /* why the user unwind ended ("end of stack", "max frames", an error) */
        char *error;            /* set when this thread's capture is partial: the reason */
        bool truncated;         /* a budget cut this thread's frames or stack */
} ThreadSnapshot;

typedef struct ModuleInfo {
        char *path;
        char *build_id;         /* lowercase hex, NULL when the module has none */
        uint64_t start, end;    /* address range in the process */
        uint64_t bias;          /* load bias: pc - bias is the ELF virtual address */
        bool debuginfo;         /* DWARF debuginfo was found (file:line available) */
} ModuleInfo;

/* Why the daemon took a snapshot: the rule, the thread that matched, its class and the evidence for it. */
typedef struct SnapshotTrigger {
        char *rule;
        char *klass;            /* thread_class_to_string() */
        pid_t tid;
        char state;
        uint64_t duration_usec; /* how long the class had held */
        double cpu_percent;
        int64_t syscall_nr;     /* -1 when unknown */
        char *wchan;
        double syscalls_per_sec; /* read/write-family syscalls, from /proc/…/io */
        double bytes_per_sec;
        /* The rule's syscall probe (probe_window_usec 0: none): the syscall the thread returned from most often in
         * the window, with which result, how often, out of how many syscalls. */
        uint64_t probe_window_usec;
        unsigned probe_syscalls;
        int64_t probe_nr;       /* -1: no syscall returned in the window */
        int64_t probe_result;
        unsigned probe_count;
} SnapshotTrigger;

typedef struct Snapshot {
        uint64_t timestamp_usec;        /* CLOCK_REALTIME at the start of the capture */
        char *hostname;

        pid_t pid;
        pid_t ppid;
        uid_t uid;
        char state;
        bool kernel_thread;     /* no user address space */
        char *comm;
        char *exe;
        char **cmdline;         /* NULL-terminated; NULL when unavailable (kernel threads, zombies) */
        char *cgroup;
        char *unit;

        ThreadSnapshot *threads;
        size_t n_threads;
        size_t threads_total;   /* threads seen, including those cut by the budget */
        ModuleInfo *modules;
        size_t n_modules;

        /* capture metadata */
        CaptureMethod method_requested;
        char *unwinder;
        uint64_t duration_usec;
        double max_pause_us;
        bool truncated;
        bool partial;
        char **errors;          /* process-level errors, NULL-terminated (may be NULL) */

        SnapshotTrigger *trigger; /* NULL for on-demand dumps */
} Snapshot;

Snapshot *snapshot_new(void);
Snapshot *snapshot_free(Snapshot *s);
void snapshot_freep(Snapshot **s);
#define _cleanup_snapshot_free_ __attribute__((cleanup(snapshot_freep)))

/* Grow the thread/frame/module arrays by one zeroed element; NULL on OOM. */
ThreadSnapshot *snapshot_add_thread(Snapshot *s);
ModuleInfo *snapshot_add_module(Snapshot *s);
UserFrame *thread_add_frame(ThreadSnapshot *t);
KernelFrame *thread_add_kframe(ThreadSnapshot *t);
/* Add a process-level error message (printf-style); marks the snapshot partial. */
int snapshot_add_error(Snapshot *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Set a thread's error (replacing any earlier one) and mark the snapshot partial. */
int thread_set_error(Snapshot *s, ThreadSnapshot *t, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

ThreadSnapshot *snapshot_find_thread(Snapshot *s, pid_t tid);
/* Human name of a /proc state letter ("sleeping", "disk sleep", …). */
const char *thread_state_to_string(char state);
