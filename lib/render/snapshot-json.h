/* snapshot-json.h: the stackwatch.snapshot/1 JSON form of a Snapshot (json-c), both directions. */
#pragma once

#include <json-c/json.h>

#include "model/snapshot.h"

/* Schema history:
 *   stackwatch.snapshot/1  first version: process, capture, threads (kernel_stack, frames), modules.
 *                          additive: trigger (the daemon's firings); wait_chain (edges, deadlock, cycle) and peers
 *                          (one snapshot per process the chain reached, without a chain of its own). Readers
 *                          ignore keys they do not know, so these did not need a new version; capture.symbolize_us
 *                          (time spent resolving symbols and source lines); Python (issue 27): frames of
 *                          "kind": "python" (function, file, line; no pc) among the native ones, a native frame's
 *                          "interpreter": true where it runs the Python frames before it, a thread's "python"
 *                          (thread_state, holds_gil, note), the process's "python" (version, gil_holder). A reader
 *                          of the first version skips nothing: a Python frame reads as a frame without a pc. Node.js
 *                          (issue 43): frames of "kind": "js" (function, file, line, and "column" where known),
 *                          a thread's "node" (known, state: what its event loop does, note), the process's "node"
 *                          (error when its JavaScript frames could not be read).
 * Addresses are hex strings ("0x…"): JSON numbers lose precision above 2^53. */
#define SNAPSHOT_SCHEMA "stackwatch.snapshot/1"

/* Build the JSON object for S; NULL on OOM. */
json_object *snapshot_to_json(const Snapshot *s);
/* Parse a JSON object back into a snapshot. -EINVAL (with a static reason in *ret_error) on a document that is not
 * a stackwatch.snapshot/1, -ENOMEM on OOM. */
int snapshot_from_json(json_object *j, Snapshot **ret, const char **ret_error);
