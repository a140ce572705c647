/* node-tables.h: V8's own tables as a Node.js process holds them, decoded: pure functions of the bytes the reader
 * copies out of the target (which may hold anything: a table that does not decode gives no line, never a wrong read
 * or a wrong line). */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* Prefix bytecodes (Wide, ExtraWide, DebugBreakWide, DebugBreakExtraWide) are V8's first four: each scales the
 * operands of the bytecode after it, double for the even ones, quadruple for the odd. */
#define NODE_BYTECODE_PREFIXES 4U

/* The script offset that code offset OFFSET has in source position table TABLE[0..N) (a ByteArray's bytes: entries
 * of a zigzag VLQ code offset delta, its sign the statement flag, then a zigzag VLQ source position delta, both
 * counted from the function's entry at offset -1): the last entry at or before OFFSET, as V8's
 * AbstractCode::SourcePosition() finds it. -EXDEV when that position is in a function inlined there, -ENOENT when no
 * entry is at or before OFFSET, -EBADMSG when the table does not decode. */
int node_position_for_offset(const uint8_t *table, size_t n, int64_t offset, int64_t *ret_position);

/* The bytecode offset that baseline (Sparkplug) code runs at PC_OFFSET (from its first instruction), as V8's
 * Code::GetBytecodeOffsetForBaselinePC() finds it: the code's bytecode offset table TABLE[0..N) holds the length of
 * the prologue's machine code, then of each bytecode's in turn (unsigned VLQ); the bytecodes CODES[0..N_CODES) are
 * walked with V8's size table SIZES[3][N_BYTECODES] (single, double, quadruple operand scale; prefixes not counted).
 * *RET_OFFSET -1 in the prologue. -ERANGE when the pc is past what the tables cover, -EBADMSG when they do not
 * decode. */
int node_baseline_offset(const uint8_t *table, size_t n, const uint8_t *codes, size_t n_codes, const uint8_t *sizes,
                         size_t n_bytecodes, uint64_t pc_offset, int64_t *ret_offset);
