/* ruby.h: a CRuby (MRI) process's own frames, read from outside with process_vm_readv, never stopping a thread for
 * them: the VM found by its exported ruby_current_vm_ptr, its main ractor's threads matched to TIDs, each thread's
 * control frames copied in the moment of its native stack (instruction sequence, pc, frame flags), later named as
 * Ruby's own backtraces name them (label, path, line; a C method by its name, at its caller's line) and merged into
 * the native stack where the VM runs them. What a thread waits for in Ruby's terms: the GVL's holder, the Mutex it
 * waits to lock and the thread that owns it (a cycle of them is a deadlock), the thread it joins. */
#pragma once

#include <stdint.h>

#include "runtime/runtime-ops.h"

/* Ruby frames per thread at most (a deeper recursion is cut, and says so). */
#define RUBY_FRAMES_MAX 1024U

extern const RuntimeOps ruby_runtime_ops;

/* Ruby's line table (VM_INSN_INFO_TABLE_IMPL 2, iseq.c): the succinct bit vector that maps an instruction position
 * to its iseq_insn_info_entry. The part of the table POS is ranked in: its size, and its *RET_OFFSET from the table's
 * start (the immediate part, 48 bytes, or the block of 80 that holds POS). */
size_t ruby_succ_index_part(uint32_t pos, uint64_t *ret_offset);
/* That part, PART[0..N), copied: *RET the index of POS's entry (its rank - 1). -EBADMSG when N is too short, or the
 * rank is 0 (no entry at or before POS). */
int ruby_succ_index_lookup(const uint8_t *part, size_t n, uint32_t pos, uint32_t *ret);
