/* snapshot-pprof.h: a snapshot as a pprof profile (github.com/google/pprof/proto/profile.proto, gzipped), for
 * `go tool pprof`, Pyroscope, speedscope and the other readers of that format. */
#pragma once

#include <stdio.h>

#include "model/snapshot.h"

/* One sample per group of threads alike (thread-groups.h), its value the number of threads ("threads"/"count"),
 * labelled with the group's state, class (where the snapshot knows it), TIDs ("12-15,20"), thread names, syscall,
 * PID and the rule (on its thread's group); the peers the wait chain reached are samples of their own, told apart
 * by their "pid" label. Frames leaf first, kernel frames (function name, file "[kernel]") before user ones; runtime
 * frames (Python, Java) as functions with their file and line and no address. Names are written as the snapshot
 * has them: a profile's strings are any bytes, escaping is for its reader to do. -ENOMEM, -EIO when F fails. */
int snapshot_write_pprof(const Snapshot *s, FILE *f);
