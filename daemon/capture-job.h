/* capture-job.h: a snapshot taken in a short-lived child process, reaped by the event loop. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <systemd/sd-event.h>

#include "archive.h"
#include "capture.h"
#include "snapshot.h"

typedef struct CaptureJob CaptureJob;

/* Called in the daemon when the job ended: ID is the archived snapshot's id, or NULL with ERROR (-errno) set. */
typedef void (*CaptureJobDone)(CaptureJob *job, const char *id, int error, void *userdata);

typedef struct CaptureJobSpec {
        pid_t pid;
        const char *archive_dir;
        ArchiveLimits limits;
        CaptureOptions options;
        SnapshotTrigger trigger;        /* copied into the snapshot */
        const char *comm;               /* for the archive summary */
        uint64_t timeout_usec;          /* the child is killed after this */
        uint64_t probe_usec;            /* > 0: first trace the trigger thread's syscalls this long */
} CaptureJobSpec;

/* Fork a child that captures SPEC->pid, writes the snapshot to the archive and exits. */
int capture_job_start(sd_event *e, const CaptureJobSpec *spec, CaptureJobDone done, void *userdata,
                      CaptureJob **ret);
/* Kill (if still running) and free. */
CaptureJob *capture_job_free(CaptureJob *j);
pid_t capture_job_target(const CaptureJob *j);
const char *capture_job_rule(const CaptureJob *j);
