/* node-tables.c: V8's source position and baseline offset tables, decoded (v8/src/codegen/source-position-table.cc
 * and v8/src/baseline/bytecode-offset-iterator.cc describe them). */
#include <errno.h>

#include "runtime/node-tables.h"

/* One VLQ number at TABLE[*I..N): 7 bits a byte, low first, the high bit says more follow. -EBADMSG at the end. */
static int vlq(const uint8_t *table, size_t n, size_t *i, uint64_t *ret) {
        uint64_t x = 0;
        unsigned shift = 0;
        uint8_t b;

        do {
                if (*i >= n || shift > 63)
                        return -EBADMSG;
                b = table[(*i)++];
                x |= (uint64_t) (b & 0x7f) << shift;
                shift += 7;
        } while (b & 0x80);
        *ret = x;
        return 0;
}

static int64_t zigzag(uint64_t x) {
        return (int64_t) (x >> 1) ^ -(int64_t) (x & 1);
}

int node_position_for_offset(const uint8_t *table, size_t n, int64_t offset, int64_t *ret_position) {
        /* The deltas count from the function's entry, offset -1 (kFunctionEntryBytecodeOffset). */
        int64_t code = -1, position = 0, found = -1;
        size_t i = 0;

        while (i < n) {
                uint64_t a, b;
                int64_t delta;

                if (vlq(table, n, &i, &a) < 0 || vlq(table, n, &i, &b) < 0)
                        return -EBADMSG;
                delta = zigzag(a);
                /* A non-statement entry's delta is stored as -delta - 1. */
                if (__builtin_add_overflow(code, delta >= 0 ? delta : -(delta + 1), &code) ||
                    __builtin_add_overflow(position, zigzag(b), &position))
                        return -EBADMSG;
                if (code > offset)
                        break;
                found = position;
        }
        if (found < 0)
                return -ENOENT;
        /* SourcePosition: bit 0 says external; the script offset + 1 in the 30 bits above; the inlined function's
         * index + 1 in the 16 above those (0: the code's own function). */
        if (found & 1)
                return -EBADMSG;
        if ((found >> 31) & 0xffff)
                return -EXDEV;
        *ret_position = ((found >> 1) & ((INT64_C(1) << 30) - 1)) - 1;
        return *ret_position >= 0 ? 0 : -ENOENT;
}

int node_baseline_offset(const uint8_t *table, size_t n, const uint8_t *codes, size_t n_codes, const uint8_t *sizes,
                         size_t n_bytecodes, uint64_t pc_offset, int64_t *ret_offset) {
        uint64_t pc_end = 0, delta;
        int64_t current = -1;
        size_t i = 0, next = 0;

        if (pc_offset == 0) {
                *ret_offset = -1;
                return 0;
        }
        /* The prologue's length, then each bytecode's. */
        if (vlq(table, n, &i, &delta) < 0)
                return -EBADMSG;
        pc_end = delta;
        while (pc_end < pc_offset) {
                unsigned scale = 0, op;

                if (i >= n || next >= n_codes)
                        return -ERANGE;
                if (vlq(table, n, &i, &delta) < 0)
                        return -EBADMSG;
                current = (int64_t) next;
                op = codes[next];
                if (op < NODE_BYTECODE_PREFIXES) {
                        scale = op % 2 == 0 ? 1 : 2;
                        if (++next >= n_codes)
                                return -EBADMSG;
                        op = codes[next];
                }
                if (op >= n_bytecodes || sizes[scale * n_bytecodes + op] == 0)
                        return -EBADMSG;
                next += sizes[scale * n_bytecodes + op];
                if (delta > UINT64_MAX - pc_end)
                        return -EBADMSG;
                pc_end += delta;
        }
        *ret_offset = current;
        return 0;
}
