/* python-lines.h: the source line of an instruction, from a code object's line table (every form since 3.8). Pure
 * functions of the bytes read from the target: bounded, and an unreadable table gives no line, never a wrong one. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "runtime/python-offsets.h"

/* The line of the instruction at byte offset OFFSET into the code (co_code, or co_code_adaptive from 3.11: the
 * instruction that runs), from the table TABLE[0..LEN) of kind KIND, the code object's first line FIRSTLINENO.
 * Returns the line (>= 0), or -ENOENT when the table gives the instruction no line, -EBADMSG when the table is
 * malformed or ends before OFFSET (a 3.8-3.9 lnotab cannot: its last line runs to the end of the code, whatever
 * OFFSET), -EPROTONOSUPPORT for a KIND we do not know. */
int py_line_for_offset(PyLineTable kind, const uint8_t *table, size_t len, int firstlineno, uint64_t offset);
