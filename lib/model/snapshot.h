/* snapshot.h: the snapshot model (stackwatch.snapshot/1): a process, its threads, their frames, modules. */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "model/proc-parse.h"
#include "model/runtime-kind.h"

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
        FRAME_METHOD_PCLNTAB,   /* a Go binary's own frame sizes (.gopclntab), as Go's traceback unwinds */
        _FRAME_METHOD_MAX,
        _FRAME_METHOD_INVALID = -EINVAL,
} FrameMethod;

const char *frame_method_to_string(FrameMethod m);
FrameMethod frame_method_from_string(const char *s);

/* What a runtime's thread does with a lock, in the words of the runtime's own thread dump (a JVM's, java.h). */
typedef enum RuntimeLockKind {
        RUNTIME_LOCK_LOCKED,            /* "- locked <0x…>": a monitor it holds (synchronized) */
        RUNTIME_LOCK_WAITING_TO_LOCK,   /* "- waiting to lock <0x…>": a monitor another thread holds */
        RUNTIME_LOCK_WAITING_ON,        /* "- waiting on <0x…>": Object.wait(), the monitor released */
        RUNTIME_LOCK_WAITING_TO_RELOCK, /* "- waiting to re-lock in wait() <0x…>": notified, wants it back */
        RUNTIME_LOCK_PARKING,           /* "- parking to wait for <0x…>": a java.util.concurrent lock or condition */
        RUNTIME_LOCK_OWNS,              /* "Locked ownable synchronizers: - <0x…>": a ReentrantLock … it holds */
        _RUNTIME_LOCK_MAX,
        _RUNTIME_LOCK_INVALID = -EINVAL,
} RuntimeLockKind;

const char *runtime_lock_to_string(RuntimeLockKind k);
RuntimeLockKind runtime_lock_from_string(const char *s);

/* A lock a runtime's thread holds or waits for, as the runtime names it. */
typedef struct RuntimeLock {
        RuntimeLockKind kind;
        uint64_t address;
        char *klass;            /* its class ("java.lang.Object"), NULL when the runtime names none */
        pid_t owner;            /* the thread holding it (a lock waited for), 0 when none is named */
} RuntimeLock;

/* What a runtime's thread parked in a futex waits for, read from the runtime (python.h). */
typedef enum RuntimeWaitKind {
        RUNTIME_WAIT_NONE,
        RUNTIME_WAIT_GIL,       /* the runtime's global lock (Python's GIL): its holder is the owner */
        RUNTIME_WAIT_RLOCK,     /* a lock that records its owner (threading.RLock) */
        RUNTIME_WAIT_LOCK,      /* a lock that records none (threading.Lock) */
        RUNTIME_WAIT_CONDITION, /* a condition (threading.Condition/Event.wait()): any thread may notify it */
        RUNTIME_WAIT_JOIN,      /* a thread's end (Thread.join(), its tstate lock) */
        _RUNTIME_WAIT_MAX,
        _RUNTIME_WAIT_INVALID = -EINVAL,
} RuntimeWaitKind;

const char *runtime_wait_to_string(RuntimeWaitKind k);
RuntimeWaitKind runtime_wait_from_string(const char *s);

/* What a thread parked in a futex waits on inside a language runtime, as its runtime records it. */
typedef struct RuntimeWait {
        RuntimeWaitKind kind;
        RuntimeKind runtime;    /* whose (set by the resolver that asked it) */
        pid_t owner;            /* the global lock's holder, the lock's owner (TID); 0 when none or not known */
        uint64_t object;        /* the lock object's address (RUNTIME_WAIT_RLOCK, _LOCK) */
} RuntimeWait;

/* What a language runtime knows of one thread: one shape for every runtime, each filling what it has. */
typedef struct ThreadRuntime {
        RuntimeKind kind;
        bool known;             /* the runtime has the thread (a Python thread state, a thread a JVM's dump lists) */
        bool holds_global_lock; /* it holds the runtime's global lock (RuntimeTraits.global_lock: Python's GIL) */
        char *name;             /* its name in the runtime (a Java thread's); NULL */
        char *state;            /* the runtime's words for what it does ("BLOCKED (on object monitor)"); NULL */
        char *note;             /* why it shows none of the runtime's frames, or fewer than it runs; NULL: all read */
        RuntimeWait wait;       /* what it waits on as the runtime records it (Python's GIL and locks) */
        RuntimeLock *locks;     /* the locks it holds and waits for, as the runtime's thread dump names them */
        size_t n_locks;
} ThreadRuntime;

typedef struct KernelFrame {
        char *function;
        uint64_t offset;
        uint64_t size;
        char *module;           /* NULL for vmlinux */
} KernelFrame;

typedef struct UserFrame {
        FrameKind kind;
        bool interpreter;       /* a native frame of an interpreter, standing for the runtime frames just before it */
        uint64_t pc;
        bool activation;        /* pc is the interrupted instruction (frame #0, signal frames), not a return address */
        bool inlined;           /* a call site inlined at the same pc as the next frame */
        FrameMethod method;
        int module;             /* index into Snapshot.modules, -1 when no module covers pc */
        char *function;         /* NULL when unknown; demangled (C++, Rust) unless the capture was asked not to */
        char *linkage_name;     /* the name as the binary has it, when FUNCTION is its demangled form; else NULL */
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
        char *stopped_because;  /* auto mode stopped it after a passive look (a fall-back): why; NULL otherwise */
        bool truncated;         /* a budget cut this thread's frames or stack */

        ThreadRuntime *runtimes; /* what the language runtimes in the process know of it, one each at most */
        size_t n_runtimes;
} ThreadSnapshot;

/* What runtime K knows of T; NULL when it knows nothing. */
ThreadRuntime *thread_runtime(const ThreadSnapshot *t, RuntimeKind k);
/* The same, added zeroed (of kind K) when there is none; NULL on OOM. */
ThreadRuntime *thread_runtime_add(ThreadSnapshot *t, RuntimeKind k);
/* Append a zeroed lock to R; NULL on OOM. */
RuntimeLock *thread_runtime_add_lock(ThreadRuntime *r);

typedef struct ModuleInfo {
        char *path;
        char *build_id;         /* lowercase hex, NULL when the module has none */
        uint64_t start, end;    /* address range in the process */
        uint64_t bias;          /* load bias: pc - bias is the ELF virtual address */
        bool debuginfo;         /* DWARF debuginfo was found (file:line available) */
        bool missing;           /* the file could not be read as the process sees it: its frames are ??, never
                                 * another file's names */
        char *missing_reason;   /* when MISSING because it was not even tried: why (a FUSE daemon that does not
                                 * answer); NULL for a file that was tried and could not be read */
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

/* What a thread waits on, when it leads to another process. */
typedef enum WaitKind {
        WAIT_KIND_UNIX,         /* a unix socket: the process holding the other end */
        WAIT_KIND_PIPE,         /* a pipe: the processes holding the other end */
        WAIT_KIND_FIFO,         /* a named pipe, likewise */
        WAIT_KIND_TCP,          /* a TCP connection: the local process owning the other end */
        WAIT_KIND_UDP,          /* a connected UDP socket, likewise */
        WAIT_KIND_FLOCK,        /* flock(): the holder, from /proc/locks */
        WAIT_KIND_POSIX_LOCK,   /* fcntl(F_SETLKW): the holder */
        WAIT_KIND_OFD_LOCK,     /* fcntl(F_OFD_SETLKW): the processes holding the locked file open */
        WAIT_KIND_CHILD,        /* wait4()/waitid() or a vfork(): the child */
        WAIT_KIND_TRACER,       /* a traced thread in a tracing stop: the tracer */
        WAIT_KIND_OTHER,        /* an fd we can name but that leads to no process (a listening socket, a timerfd …) */
        WAIT_KIND_MUTEX,        /* a pthread mutex (futex): the thread holding it, by the TID the lock records */
        WAIT_KIND_CONDVAR,      /* a condition variable: no owner, any thread may signal it (from the frames) */
        WAIT_KIND_FUSE,         /* a request to a FUSE file system: the daemon serving its connection */
        WAIT_KIND_GIL,          /* CPython's GIL: the thread holding it (python.h) */
        WAIT_KIND_MONITOR,      /* a Java monitor or java.util.concurrent lock: its owner, as the JVM names it */
        WAIT_KIND_JOIN,         /* pthread_join(): the thread it waits to exit, by the TID its futex word holds */
        WAIT_KIND_PTY,          /* a terminal (a pty's slave side): the processes holding its master side */
        _WAIT_KIND_MAX,
        _WAIT_KIND_INVALID = -EINVAL,
} WaitKind;

const char *wait_kind_to_string(WaitKind k);
WaitKind wait_kind_from_string(const char *s);

/* One edge of a wait chain: thread TID of PID waits on PEER_PID through OBJECT. */
typedef struct WaitEdge {
        pid_t pid, tid;
        char *syscall;          /* the call it waits in ("read", "flock", …) */
        WaitKind kind;
        int fd;                 /* the waiting thread's fd, -1 when the wait has none */
        uint64_t inode;         /* socket, pipe or locked file inode; 0 when none */
        char *object;           /* "unix socket 4711", "pipe 881", "flock /var/lib/x.lock", "127.0.0.1:40022 -> …" */
        bool multiplexed;       /* one of several fds of a poll/select/epoll wait: any of them would wake it */
        pid_t peer_pid;         /* the process at the other end; 0 when none was found (REASON says why) */
        pid_t peer_tid;         /* the peer thread that waits on the other end itself, 0 when none stands out */
        int peer_fd;            /* the peer's fd for the other end, -1 when unknown */
        char *reason;           /* set when PEER_PID is 0, or when the peer was not followed (depth, budget) */
        uint64_t address;       /* a mutex: the lock's address in the waiter's process (a join: the joined
                                 * thread's TID word); 0 for other kinds */
        bool owner_exited;      /* a mutex whose holder is gone: nobody will ever unlock it (not stored) */
        bool runtime;           /* read from a language runtime (the GIL, a Python lock), not from a glibc lock; its
                                 * ADDRESS is the futex waited on (not stored) */
        RuntimeKind runtime_kind; /* which, when RUNTIME (not stored) */
} WaitEdge;

/* The wait chain of a snapshot: the edges from the thread(s) it started at, followed to a depth. */
typedef struct WaitChain {
        pid_t tid;              /* the thread it started from; 0: every thread of the process waiting in a syscall */
        unsigned depth;         /* how many hops were followed at most */
        WaitEdge *edges;
        size_t n_edges;
        bool deadlock;          /* a set of processes that wait only on each other (see wait-chain.h) */
        pid_t *cycle;           /* the processes of one cycle in it, in wait order; the first waits on the second … */
        size_t n_cycle;
        pid_t lock_pid;         /* LOCK_CYCLE's process, 0 when there is none */
        pid_t *lock_cycle;      /* threads of LOCK_PID each waiting for a mutex the next one holds, or to join it:
                                 * a deadlock */
        size_t n_lock_cycle;
        bool truncated;         /* a budget cut it (edges, peers, time) */
        char **errors;          /* NULL-terminated, NULL when none */
        uint64_t resolve_usec;  /* spent finding the peers (not capturing their stacks) */
} WaitChain;

WaitChain *wait_chain_free(WaitChain *c);
static inline void wait_chain_freep(WaitChain **c) {
        wait_chain_free(*c);
}
/* Append one zeroed edge (fd and peer_fd -1); NULL on OOM. */
WaitEdge *wait_chain_add_edge(WaitChain *c);
/* Add a message (printf-style) to the chain's errors: a peer that exited, one we may not read, a budget. */
int wait_chain_add_error(WaitChain *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A goroutine's state: the Go runtime's _G* values (runtime/runtime2.go, the same from 1.17 to 1.23). */
typedef enum GoStatus {
        GO_STATUS_IDLE = 0,
        GO_STATUS_RUNNABLE = 1,
        GO_STATUS_RUNNING = 2,
        GO_STATUS_SYSCALL = 3,
        GO_STATUS_WAITING = 4,
        GO_STATUS_MORIBUND = 5,
        GO_STATUS_DEAD = 6,
        GO_STATUS_ENQUEUE = 7,
        GO_STATUS_COPYSTACK = 8,
        GO_STATUS_PREEMPTED = 9,
        _GO_STATUS_MAX,
        _GO_STATUS_INVALID = -EINVAL,
} GoStatus;

const char *go_status_to_string(GoStatus s);
GoStatus go_status_from_string(const char *s);

/* Frames shared by the goroutines whose stacks are the same (by pc): most of a server's are. */
typedef struct GoStack {
        UserFrame *frames;      /* innermost first, FRAME_KIND_GO */
        size_t n_frames;
        bool truncated;         /* more frames than were walked */
} GoStack;

typedef struct Goroutine {
        uint64_t goid;
        GoStatus status;
        char *wait_reason;      /* the runtime's own words ("chan receive"), NULL unless it waits */
        int64_t wait_usec;      /* how long it has waited; -1 when the runtime has not recorded since when */
        pid_t tid;              /* the thread it runs on, or is locked to; 0 when none */
        bool locked;            /* locked to its thread (runtime.LockOSThread) */
        ssize_t stack;          /* index into GoRuntime.stacks; -1 when its stack was not read */
        char *error;            /* why its stack was not read */
        UserFrame created_by;   /* the go statement that started it (a return address); function NULL when none */
        uint64_t parent_goid;   /* the goroutine that started it (1.21+), 0 when not known */
        char *wait_kind;        /* what it waits on: "channel", "sync.Mutex" …; NULL when not known */
        uint64_t wait_address;  /* that object's address */
} Goroutine;

/* A Go program's goroutines, read from its runtime. */
typedef struct GoRuntime {
        char *version;          /* runtime.buildVersion: "go1.19.8"; NULL when not read */
        char *layout;           /* where runtime.g's layout came from: "dwarf" (the binary's) or "table" */
        char *error;            /* why the goroutines were not read; NULL when they were */
        uint64_t total;         /* goroutines the runtime had (allglen), dead ones included */
        bool truncated;         /* the goroutine budget cut the list */
        size_t unresolved;      /* goroutines left without frames by the time budget (not stored) */
        uint64_t read_usec;     /* time spent reading and decoding them */
        Goroutine *goroutines;  /* by goid */
        size_t n_goroutines;
        GoStack *stacks;
        size_t n_stacks;
} GoRuntime;

GoRuntime *go_runtime_free(GoRuntime *g);
Goroutine *go_runtime_add(GoRuntime *g);
GoStack *go_runtime_add_stack(GoRuntime *g);

/* A language runtime a process runs, for the process as a whole: one shape for every runtime, each filling what it
 * has, and a block of its own for what only it has. */
typedef struct ProcessRuntime {
        RuntimeKind kind;
        char *version;          /* the runtime's own words: CPython's "3.11.2", the JVM's banner; NULL when not read */
        char *error;            /* why its view is missing (attach disabled, no answer in time); NULL */
        uint64_t pause_usec;    /* how long it held the process to answer (a JVM's safepoint) */
        pid_t lock_holder;      /* the thread holding its global lock (Python's GIL); 0: none, or not known */
        unsigned deadlocks;     /* deadlocks the runtime itself reported (a JVM's) */
        GoRuntime *go;          /* Go's own: its goroutines (version and errors in it) */
} ProcessRuntime;

ProcessRuntime *process_runtime_free(ProcessRuntime *r);

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
        char *frozen_cgroup;    /* the cgroup whose freezer holds it (in its hierarchy), NULL when none does */
        unsigned frozen_version; /* that hierarchy: 1 (the v1 freezer) or 2 (unified) */

        ThreadSnapshot *threads;
        size_t n_threads;
        size_t threads_total;   /* threads seen, including those cut by the budget */
        ModuleInfo *modules;
        size_t n_modules;

        /* capture metadata */
        CaptureMethod method_requested;
        char *unwinder;
        uint64_t duration_usec;
        uint64_t symbolize_usec;        /* of duration_usec, resolving symbols, source lines and inlines */
        double max_pause_us;
        bool truncated;
        bool partial;
        char **errors;          /* process-level errors, NULL-terminated (may be NULL) */

        ProcessRuntime *runtime[_RUNTIME_MAX]; /* the language runtimes it runs, by kind; NULL: not that one */

        SnapshotTrigger *trigger; /* NULL for on-demand dumps */
        /* The problem it shows (render/signature.h), for a snapshot a rule took: NULL for a dump */
        char *signature;        /* SIGNATURE_LENGTH hex digits: the same for the same hang, wherever it is caught */
        char *title;            /* what a person reads of it ("python3 blocked in read ← app.py:main ⇄ python3") */
        char *proto_signature;  /* the text the key is a hash of */

        WaitChain *wait_chain;  /* NULL when peers were not asked for */
        struct Snapshot **peers; /* the processes the chain reached, captured with the same engine */
        size_t n_peers;
} Snapshot;

/* Whether a picture of a stack shows frame U: an interpreter's native frame (its eval loop) is what the runtime's
 * frames just before it stand for, and every rendering (text, folded, SVG, pprof, an alert's frames) leaves it out,
 * as a runtime's own tools do. */
static inline bool user_frame_shown(const UserFrame *u) {
        return !u->interpreter;
}

/* The module frame U of S lies in, NULL when it has none (a runtime's frame, a pc no module holds, an index a stored
 * document got wrong). Every reader of a frame's module asks here. */
static inline const ModuleInfo *snapshot_frame_module(const Snapshot *s, const UserFrame *u) {
        return u->module >= 0 && (size_t) u->module < s->n_modules ? &s->modules[u->module] : NULL;
}

/* The comm of PID as the snapshot ROOT and its peers know it; NULL when none of them is PID. */
const char *snapshot_comm_of(const Snapshot *root, pid_t pid);
/* The snapshot of process PID: ROOT or one of its peers; NULL when none of them is PID. */
const Snapshot *snapshot_process_of(const Snapshot *root, pid_t pid);
/* The threads of the deadlock ROOT's wait chain found, in wait order (each waits on the next): the lock cycle's, or
 * for a cycle of processes the thread of each that waits on the next process. At most MAX of them into PIDS and
 * TIDS; returns how many, 0 when the chain holds no deadlock. */
size_t snapshot_deadlock_threads(const Snapshot *root, pid_t *pids, pid_t *tids, size_t max);

Snapshot *snapshot_new(void);
/* Free what a user frame owns and zero it. */
void user_frame_done(UserFrame *f);
Snapshot *snapshot_free(Snapshot *s);
void snapshot_freep(Snapshot **s);
#define _cleanup_snapshot_free_ __attribute__((cleanup(snapshot_freep)))

/* Grow the thread/frame/module arrays by one zeroed element; NULL on OOM. */
ThreadSnapshot *snapshot_add_thread(Snapshot *s);
ModuleInfo *snapshot_add_module(Snapshot *s);
/* Runtime K of S, added zeroed when there is none; NULL on OOM. */
ProcessRuntime *snapshot_add_runtime(Snapshot *s, RuntimeKind k);
/* Runtime K of S; NULL when S does not run it. */
static inline ProcessRuntime *snapshot_runtime(const Snapshot *s, RuntimeKind k) {
        return (int) k >= 0 && k < _RUNTIME_MAX ? s->runtime[k] : NULL;
}
/* Whether S runs a runtime whose frames are its own (RuntimeTraits.machine_frames false: Python, Java). */
static inline bool snapshot_runs_frame_runtime(const Snapshot *s) {
        for (RuntimeKind k = 0; k < _RUNTIME_MAX; k++)
                if (s->runtime[k] && !runtime_traits[k].machine_frames)
                        return true;
        return false;
}
/* The goroutines of S, added empty (with the Go runtime) when there are none; NULL on OOM. */
GoRuntime *snapshot_add_go(Snapshot *s);
/* A Go program's goroutines; NULL when S runs no Go runtime, or none were read. */
static inline GoRuntime *snapshot_go(const Snapshot *s) {
        return s->runtime[RUNTIME_GO] ? s->runtime[RUNTIME_GO]->go : NULL;
}
UserFrame *thread_add_frame(ThreadSnapshot *t);
KernelFrame *thread_add_kframe(ThreadSnapshot *t);
/* Add a process-level error message (printf-style); marks the snapshot partial. */
int snapshot_add_error(Snapshot *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Set a thread's error (replacing any earlier one) and mark the snapshot partial. */
int thread_set_error(Snapshot *s, ThreadSnapshot *t, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

ThreadSnapshot *snapshot_find_thread(Snapshot *s, pid_t tid);
/* The threads of S that the auto method had to stop (ptrace) because the passive capture could not have them: on a
 * CPU, or moving, or blocked where the passive unwind lacked a register. PEERS: those of its peers too. */
size_t snapshot_fallback_stops(const Snapshot *s, bool peers);
/* The name a flame graph gives user frame U of S, unescaped: its function; a runtime frame's (Python, Java) as
 * "function (file)", the file by its base name and without the line, so that a function's threads add up; a frame
 * without a function as "module+0xOFFSET" (the ELF address) or its bare pc. NULL on OOM. */
char *snapshot_frame_name(const Snapshot *s, const UserFrame *u);

/* Human name of a /proc state letter ("sleeping", "disk sleep", …). */
const char *thread_state_to_string(char state);
