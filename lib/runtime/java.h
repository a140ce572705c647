/* java.h: a HotSpot JVM's own thread dump, asked for through its attach mechanism (the protocol jcmd and jstack
 * speak: a .attach_pid file and SIGQUIT start its listener, a unix socket in its /tmp answers), parsed and merged
 * into a snapshot: each thread's Java frames, its Java state, the monitors and locks it holds and waits for.
 *
 * It costs the JVM one safepoint (every Java thread paused while the dump is written: a few ms), which is measured.
 * Never asked of a JVM that does not catch SIGQUIT (-Xrs: the signal would kill it) or that was started with
 * -XX:+DisableAttachMechanism (SIGQUIT would print a thread dump on its stdout). */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "model/snapshot.h"
#include "runtime/runtime-ops.h"

/* Whether the JVM's performance data D (N bytes of its hsperfdata file) says it may be attached to: 1, 0 (started
 * with -XX:+DisableAttachMechanism), -ENOENT (no such entry), -EBADMSG (not HotSpot's format). */
int java_perfdata_attachable(const uint8_t *d, size_t n);

/* Whether S is a HotSpot JVM: its libjvm.so is mapped. */
bool java_is_jvm(const Snapshot *s);

/* Ask JVM PID for its thread dump within DEADLINE_USEC (CLOCK_MONOTONIC). 0 with the answer's text in *RET and the
 * time from the request to the end of the answer in *RET_USEC; -ENOMEM; or another negative errno with why in
 * *RET_WHY (a message to free). */
int java_request_threaddump(pid_t pid, uint64_t deadline_usec, char **ret, uint64_t *ret_usec, char **ret_why);

/* Merge the thread dump TEXT into S (threads by their nid, the TID; NS_TIDS, when not NULL, gives each of S's
 * threads its TID in the JVM's pid namespace, which the dump uses): Java frames where the native stack enters Java
 * code, states, locks with their owners, and the VM's banner and own deadlock count into S's Java runtime (added
 * when S has none). -ENOMEM, or 0. */
int java_merge_threaddump(Snapshot *s, const char *text, const pid_t *ns_tids);

/* Both, for S of process PID, within DEADLINE_USEC: S's Java runtime says what was had, or why not. -ENOMEM, or 0. */
int java_capture(Snapshot *s, uint64_t deadline_usec);

/* a HotSpot JVM's row of the runtime table (runtime/runtime.h). */
extern const RuntimeOps java_runtime_ops;
