/* capture-sched.h: a capture's place in the run queue. A watchdog captures when the machine is in trouble, often
 * behind the very threads it is looking at: a dump of a process with 50 busy threads on 2 cores got 4 % of a CPU
 * and took 4 s, and the threads it stopped stayed stopped 60 ms each while it waited for the CPU. So a capture's
 * raw pass runs at nice -20 (ahead of ordinary load, not of the machine: CFS still shares), whatever runs while a
 * target thread is stopped runs SCHED_FIFO, which no ordinary load can preempt, and unwinding and symbols run at the
 * caller's priority again, behind the threads just released. But never while a thread is held: a process that holds
 * a target's thread (seized, stopped or about to stop) keeps its raised priority from the first seize until the
 * last detach, the syscall probe included, because if it is killed the kernel releases the thread only once its
 * exit is done, and a dying process at the caller's priority waited for a CPU behind the load while the target
 * waited for it (issue #34). Both within what the process may do:
 * RLIMIT_NICE and RLIMIT_RTPRIO (the unit's LimitNICE=, LimitRTPRIO=) or CAP_SYS_NICE; without them, nothing
 * changes. A real-time window is bounded by RLIMIT_RTTIME, so a bug in it cannot take a CPU for good. */
#pragma once

#include <stdbool.h>

typedef struct CaptureSched {
        bool niced;
        int nice_before;
        bool rt;
} CaptureSched;

/* For a raw pass: nice -20, or as near as RLIMIT_NICE allows. Returns whether the nice changed. */
bool capture_sched_begin(CaptureSched *s);
/* Back to the nice it had. */
void capture_sched_end(CaptureSched *s);

/* For a stop window (threads stopped until it ends): SCHED_FIFO at the lowest real-time priority. Returns whether
 * it is real-time now. */
bool capture_sched_rt_begin(CaptureSched *s);
/* Back to SCHED_OTHER, at the capture's nice. */
void capture_sched_rt_end(CaptureSched *s);
