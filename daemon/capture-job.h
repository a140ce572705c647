/* capture-job.h: a snapshot taken in a short-lived child process, reaped by the event loop. */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <systemd/sd-event.h>

#include "base/process-util.h"
#include "capture/capture.h"
#include "config/config.h"
#include "model/snapshot.h"
#include "render/render.h"
#include "store/archive.h"
#include "unwind/symbolize.h"

typedef struct CaptureJob CaptureJob;

/* The peers an archived capture reports at most (CaptureJobResult.peers). */
#define CAPTURE_JOB_PEERS_MAX 16

/* A thread's innermost Python frame, as an archived capture reports it. */
typedef struct CaptureJobPython {
        pid_t pid, tid;
        char *frame;                    /* "inner (app.py:12)", escaped (snapshot_top_runtime_frame()) */
        bool cycle;                     /* the thread is one of the deadlock the snapshot's wait chain found */
} CaptureJobPython;

/* What a job reports when it ends. */
typedef struct CaptureJobResult {
        int error;                      /* 0, or -errno (-ECHILD: the child crashed, -ETIME: killed at its timeout;
                                         * a render: -ENOENT, -EBADMSG with the reason in OUTPUT_FD, -ENOMEM) */
        const char *id;                 /* the archived snapshot's id; NULL for live captures and on error */
        double max_pause_us;            /* the longest a thread was held stopped */
        uint64_t duration_usec;         /* of the capture, in the child */
        unsigned threads;
        unsigned fallback_stops;        /* threads (of the process and its peers) the auto method had to stop */
        char **cmdline;                 /* an archived capture: the process's command line; NULL when unknown */
        char **frames;                  /* and the top of the trigger thread's stack (snapshot_top_frames()) */
        char *stack;                    /* and that thread's kernel and user stack as text; NULL when unknown */
        CaptureJobPython *python;       /* and the threads of the process and its peers that run Python code: the
                                         * trigger thread first, then a deadlock's cycle in wait order, then the
                                         * others by TID, at most CAPTURE_JOB_PYTHON_MAX; NULL when none */
        size_t n_python;
        char *goroutines;               /* a Go program's: its largest group of blocked goroutines and where they are
                                         * (goroutines_summary()); NULL when none */
        char *signature, *title;        /* the problem the snapshot shows (render/signature.h); NULL when unknown */
        bool duplicate;                 /* it is one of the spec's open_signatures: not stored (ID NULL), the
                                         * problem's snapshot stands */
        pid_t peers[CAPTURE_JOB_PEERS_MAX]; /* the processes its wait chain reached and captured */
        size_t n_peers;
} CaptureJobResult;

/* Thread TID's entry of RES->python (the innermost Python frame it runs), NULL when it has none there. */
const CaptureJobPython *capture_job_result_python(const CaptureJobResult *res, pid_t tid);

/* How many frames of the trigger thread a job reports (CaptureJobResult.frames). */
#define CAPTURE_JOB_TOP_FRAMES 8
/* And the bounds on what it reports: bytes of command line (the arguments past it are left out, the last one cut),
 * bytes of one frame (cut with "…"). */
#define CAPTURE_JOB_CMDLINE_MAX 2048
#define CAPTURE_JOB_FRAME_MAX 256
/* And of the trigger thread's whole stack as text (CaptureJobResult.stack), for the journal record. */
#define CAPTURE_JOB_STACK_MAX (12 * 1024)
/* And of the threads whose Python frame it reports (CaptureJobResult.python), each cut at CAPTURE_JOB_FRAME_MAX. */
#define CAPTURE_JOB_PYTHON_MAX 32

/* How the daemon starts a child for a job (fork_child()): it dies with the daemon, takes the default signal mask,
 * and keeps no fd above stderr but those it is given. */
#define FORK_CHILD_OF_DAEMON (FORK_DEATHSIG | FORK_RESET_SIGNALS | FORK_CLOSE_FDS | FORK_KEEP_STDIO)

/* Called in the daemon when the job ended. */
typedef void (*CaptureJobDone)(CaptureJob *job, const CaptureJobResult *result, void *userdata);

typedef struct CaptureJobSpec {
        pid_t pid;
        const char *archive_dir;
        ArchiveLimits limits;
        CaptureOptions options;
        SymbolizerSettings symbols;     /* the debuginfo cache, debuginfod */
        SnapshotTrigger trigger;        /* copied into the snapshot */
        const char *comm;               /* for the archive summary */
        uint64_t timeout_usec;          /* the child is killed after this */
        uint64_t probe_usec;            /* > 0: first trace the trigger thread's syscalls this long */
        unsigned peers;                 /* > 0: follow the wait chain this deep and capture the peers too */
        pid_t chain_tid;                /* the thread the chain starts at; 0: every waiting thread */
        int output_fd;                  /* >= 0: a live capture, rendered into this file (a memfd) in FORMAT and not
                                         * archived; < 0: archived */
        RenderFormat format;
        SvgPicture picture;             /* with RENDER_SVG */
        bool resymbolize;               /* a render: frames resolved again with the debuginfo found now */
        char *const *open_signatures;   /* the problems open on this process: a capture that shows one of them is
                                         * not stored (CaptureJobResult.duplicate); NULL-terminated, NULL: none */
        const char *render_id;          /* set: no capture; the stored snapshot of this id (or "latest") in
                                         * ARCHIVE_DIR is read and rendered into OUTPUT_FD in FORMAT, within
                                         * the CAPTURE_JOB_RENDER_MEMORY_* budget */
} CaptureJobSpec;

/* Memory (RLIMIT_DATA) a render of a stored snapshot may add to the child's, once the document is read: BASE plus PER_BYTE
 * for each of its bytes, at most MAX; past it, the render fails with -ENOMEM. json-c's tree of a real snapshot takes
 * ~16.5 times the document (a 35 MB one, 4,000 threads × 64 frames: 578 MB resident), so MAX is reached at ~80 MB
 * of JSON, three times the 2,000-thread worst case the capture writes. */
#define CAPTURE_JOB_RENDER_MEMORY_BASE (64ULL << 20)
#define CAPTURE_JOB_RENDER_MEMORY_PER_BYTE 24ULL
#define CAPTURE_JOB_RENDER_MEMORY_MAX (2048ULL << 20)

/* Fork a child that captures SPEC->pid, writes the snapshot to the archive (or renders it into SPEC->output_fd)
 * and exits. */
int capture_job_start(sd_event *e, const CaptureJobSpec *spec, CaptureJobDone done, void *userdata,
                      CaptureJob **ret);
/* Kill (if still running) and free. */
CaptureJob *capture_job_free(CaptureJob *j);
pid_t capture_job_target(const CaptureJob *j);
const char *capture_job_rule(const CaptureJob *j);

/* A job's symbolizer settings from the configuration's symbols section (its cache directory already settled). */
void capture_job_symbols(const Config *c, SymbolizerSettings *ret);
