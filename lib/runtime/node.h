/* node.h: a Node.js process's JavaScript frames, read from outside through V8's post-mortem metadata (the v8dbg_
 * constants its module exports), never stopping a thread for them: each thread's JavaScript frames hang off the frame
 * pointers of its native stack, between V8's entry and its innermost exit; each frame is named as Node's own stack
 * traces name it (function, script, line, column), every object checked before it is trusted. */
#pragma once

#include <stdint.h>

#include "runtime/runtime-ops.h"

extern const RuntimeOps node_runtime_ops;
