/* owed.h: which parked waits something owes. A thread asleep in one syscall with no progress is only "blocked" when
 * its wait cannot end by itself: a mutex another thread holds, a peer at the other end of its pipe or socket that is
 * stopped, frozen or blocked itself, a child that is stuck, a deadlock (processes or threads that wait only on each
 * other), a pipe whose only writer is its own single thread. Any other parked wait (a terminal, an idle peer waiting
 * for input, a runtime's idle park) is "waiting", however long. The verdict comes from the same wait-chain walk a
 * dump prints, done after the scan for processes whose threads have been parked a while, within a budget per poll,
 * and set on the threads' classes (classify_set_owed()), so that every daemon classes a thread the same whatever
 * its rules. */
#pragma once

#include <stdint.h>
#include <sys/types.h>

#include "base/time-util.h"
#include "scan.h"

/* A parked wait is judged once it has lasted this long: a read that gets its data a moment later is never walked. */
#define OWED_MIN_PARKED_USEC (2 * USEC_PER_SEC)
/* A process's verdict holds this long, then its waits are walked again (a stopped peer may have been continued). A
 * walk that cost more than 1/COST_SHARE of that (2% of a core) holds its verdict COST_SHARE times its cost: a
 * process of 10,000 threads parked on a pipe cost some 150 ms a walk here, 3% of a core every 5 s, on top of a scan
 * that costs 1.5% with BPF. */
#define OWED_RECHECK_USEC (5 * USEC_PER_SEC)
#define OWED_COST_SHARE 50
/* Walks per poll: each reads the machine's fd tables once per poll and the process's waits. The processes walked are
 * those whose last walk is the oldest (never walked first): a machine with more parked processes than a recheck
 * period's walks takes them in turn, and a new wait is judged before an old one is judged again. */
#define OWED_WALKS_PER_POLL 4U
/* Hops a walk follows: enough to close a cycle through three processes and to see a peer's own wait. */
#define OWED_DEPTH 3U

typedef struct OwedCheck {
        pid_t pid;
        uint64_t starttime;
        uint64_t checked_usec;
        uint64_t recheck_usec;          /* OWED_RECHECK_USEC, or longer after a costly walk */
} OwedCheck;

typedef struct Owed {
        OwedCheck *checks;
        size_t n_checks, n_checks_allocated;
        uint64_t walks;                 /* ever */
        uint64_t walk_usec;             /* the time they took */
        uint64_t owed;                  /* waits found owed, ever */
} Owed;

void owed_done(Owed *o);
/* After a scan at NOW: walk the waits of processes whose threads have been parked OWED_MIN_PARKED_USEC in a wait
 * that may be owed, and set the verdict on those threads' classes (and the scan's counts by class). */
void owed_update(Owed *o, Scanner *s, uint64_t now);
