/* lock-probe.h: confirm that a thread the scanner suspects polls for a lock, by tracing it briefly in a child
 * process (the daemon itself never traces anybody), and hand the verdict back to the scanner. */
#pragma once

#include <systemd/sd-event.h>

#include "base/macro.h"
#include "metrics.h"
#include "scan.h"

/* Probes in flight at once; the scanner asks again next scan for a thread that did not get one. */
#define LOCK_PROBES_MAX 2U
/* How long a probe watches the thread for a lock call that fails (SQLite's busy handler sleeps 100 ms at most between
 * tries), and when its child is killed if it has not ended by then. */
#define LOCK_PROBE_WINDOW_USEC (300 * USEC_PER_MSEC)
#define LOCK_PROBE_TIMEOUT_USEC (5 * USEC_PER_SEC)

typedef struct LockProbes LockProbes;

/* Verdicts go to SCANNER, and are counted in METRICS. */
int lock_probes_new(sd_event *e, Scanner *scanner, Metrics *metrics, LockProbes **ret);
/* Kills the probes in flight (the kernel detaches what they traced). */
LockProbes *lock_probes_free(LockProbes *lp);
DEFINE_TRIVIAL_CLEANUP_FUNC(LockProbes *, lock_probes_free);

/* Start a probe for each thread the last scan asked one for (Scanner.lock_probe_wanted), while there is room. */
void lock_probes_start_wanted(LockProbes *lp);
