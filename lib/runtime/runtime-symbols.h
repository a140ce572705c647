/* runtime-symbols.h: the module a language runtime's interpreter is, found by the symbols it exports (V8's
 * post-mortem constants, Ruby's VM pointer): for the runtimes' readers, which the runtime table (runtime.h) lists. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/runtime-kind.h"
#include "unwind/symbolize.h"
#include "unwind/unwind.h"

/* Among UP's modules named as runtime K's interpreter (RuntimeTraits.interpreter_modules), the one whose exported
 * symbols (found with SYM) hold the most of NAMES[0..N): *RET_MOD, and each name's address in RET_ADDRS[0..N) (0: not
 * there). Returns how many of them it holds: 0 when none does, or no module is named so (*RET_SEEN false then);
 * -ENOMEM. */
int runtime_find_exported(UnwindProcess *up, Symbolizer *sym, RuntimeKind k, const char *const *names, size_t n,
                          Dwfl_Module **ret_mod, uint64_t *ret_addrs, bool *ret_seen);
