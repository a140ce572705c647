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
/* Polls come on a timer of 1% accuracy: a look that comes this much early still counts, else a wait parked at one
 * poll would be judged a whole poll after its 2 s. */
#define OWED_PARK_SLACK_USEC (100 * USEC_PER_MSEC)
/* A process's verdict holds until a wait it rests on moves: a thread of it, or of a process its walk read, left the
 * wait it was parked in, parked in a new one, came or went (owed.c keys each process's parked waits); or a process the
 * walk read had a thread come into or out of a stuck class (ProcessEntry.stuck_usec); or a thread of it has been
 * parked long enough to be judged. Work follows change: 10,000 threads parked for good cost no walk at all, and a
 * thread that runs or sleeps next to them (an event loop, a timer) costs none either. Things no scan sees move are
 * looked at again after BACKSTOP_USEC: a process the walk did not reach that took the other end of a pipe (through
 * /proc/PID/fd, or SCM_RIGHTS from a process off the chain). */
#define OWED_BACKSTOP_USEC (60 * USEC_PER_SEC)
/* A walk that cost C holds its verdict at least C * COST_SHARE, changes or not (2% of a core at most): a process
 * whose waits move on every poll (5 % of a 10,000-thread pool waking each second) is not walked on every poll. A
 * process on its chain whose parked threads come and go (a server's workers) is walked again for that only after
 * C * PEER_COST_SHARE (0.2% of a core): it may have closed a deadlock, which its own walk finds then anyway, and that
 * walk's verdict counts at once. */
#define OWED_COST_SHARE 50
#define OWED_PEER_COST_SHARE 500
/* Walks per poll: each reads the machine's fd tables once per poll and the process's waits. The processes walked are
 * those whose last walk is the oldest (never walked first): a machine with more parked processes than walks per poll
 * takes them in turn, and a new wait is judged before an old one is judged again. */
#define OWED_WALKS_PER_POLL 4U
/* Hops a walk follows: enough to close a cycle through three processes and to see a peer's own wait. */
#define OWED_DEPTH 3U
/* The processes one walk can read: the first and its peers (WAIT_CHAIN_PEERS_MAX). */
#define OWED_CHAIN_MAX (WAIT_CHAIN_PEERS_MAX + 1U)

typedef struct OwedCheck {
        pid_t pid;
        uint64_t starttime;
        uint64_t checked_usec;
        uint64_t hold_usec;             /* the verdict holds at least this long after CHECKED_USEC (its cost) */
        uint64_t peer_hold_usec;        /* and this long against processes of its chain that only moved */
        uint64_t due_usec;              /* and at most until then: a thread of it becomes old enough to judge, or
                                         * the backstop */
        pid_t chain[OWED_CHAIN_MAX];    /* the processes its walk reached, itself first */
        uint64_t keys[OWED_CHAIN_MAX];  /* theirs then: what its verdicts rest on in each (a key of the waits of
                                         * its threads), which their other threads may move without */
        unsigned n_chain;
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
/* What the verdicts on P's threads, and on waits that lead to P, rest on in P itself, as one number: each thread in a
 * wait that counts, where it waits and since when, and whether any thread is elsewhere. The same number while only
 * P's other threads move. Made once a scan. */
uint64_t owed_waits_key(Scanner *s, ProcessEntry *p);
