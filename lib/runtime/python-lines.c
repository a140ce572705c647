/* python-lines.c: line tables of CPython code objects: 3.8-3.9's co_lnotab, 3.10's co_linetable (both described in
 * that version's Objects/lnotab_notes.txt) and the 3.11+ location table (Objects/locations.md). */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>

#include "runtime/python-lines.h"

/* 3.8-3.9 co_lnotab: pairs of an unsigned byte offset increment and a signed line increment (signed since 3.6),
 * each pair saying that from the offset reached the line moves by the increment; large steps are split into pairs
 * of (255, 0) or (offset, ±127/-128) then (0, rest). This is 3.8's PyCode_Addr2Line(): a pair applies when its
 * offset is at or before OFFSET. The table does not say where the code ends, the last line runs to its end: so
 * an odd length is all that shows a malformed table, besides a line that leaves the range of an int. */
static int lines_lnotab(const uint8_t *t, size_t len, int firstlineno, uint64_t offset) {
        uint64_t addr = 0;
        int64_t line = firstlineno;

        if (len % 2 != 0)
                return -EBADMSG;
        for (size_t pos = 0; pos < len; pos += 2) {
                addr += t[pos];
                if (addr > offset)
                        break;
                line += (int8_t) t[pos + 1];
                if (line < 0 || line > INT_MAX)
                        return -EBADMSG;
        }
        return (int) line;
}

/* 3.10 co_linetable: pairs of an unsigned byte length of a range of code and a signed line delta, -128 for a range
 * with no line (that leaves the running line as it was); ranges of length 0 only carry a delta too large for one
 * pair. This is 3.10's _PyCode_CheckLineNumber() walking forward: an offset past the last range has no line in
 * CPython either, and here means the table ends too soon. */
static int lines_linetable(const uint8_t *t, size_t len, int firstlineno, uint64_t offset) {
        uint64_t end = 0;
        int64_t line = firstlineno;

        if (len % 2 != 0)
                return -EBADMSG;
        for (size_t pos = 0; pos < len; pos += 2) {
                int8_t delta = (int8_t) t[pos + 1];
                bool has_line = delta != -128;

                end += t[pos];
                if (has_line) {
                        line += delta;
                        if (line < 0 || line > INT_MAX)
                                return -EBADMSG;
                }
                if (offset < end)
                        return has_line ? (int) line : -ENOENT;
        }
        return -EBADMSG;
}

/* Objects/locations.md: a varint is 6-bit chunks, least significant first, bit 6 set on all but the last. CPython
 * writes lines and columns, ints, so six chunks hold any of them: a longer varint is malformed, and is refused
 * rather than let its high chunks be shifted out into a small, plausible value. */
static int read_varint(const uint8_t *t, size_t len, size_t *pos, uint64_t *ret) {
        uint64_t v = 0;
        unsigned shift = 0;

        for (;;) {
                uint8_t b;

                if (*pos >= len || shift > 30)
                        return -EBADMSG;
                b = t[(*pos)++];
                v |= (uint64_t) (b & 63) << shift;
                shift += 6;
                if (!(b & 64))
                        break;
        }
        *ret = v;
        return 0;
}

static int read_svarint(const uint8_t *t, size_t len, size_t *pos, int64_t *ret) {
        uint64_t v;
        int r = read_varint(t, len, pos, &v);

        if (r < 0)
                return r;
        *ret = (v & 1) ? -(int64_t) (v >> 1) : (int64_t) (v >> 1);
        return 0;
}

/* Each entry: a first byte with bit 7 set, the code in bits 3-6 and the length in code units minus one in bits
 * 0-2; then per code: 15 no location, 14 long form (svarint line delta, varint end line delta, column, end
 * column), 13 no column (svarint line delta), 10-12 one line (line delta code-10, then column and end column bytes),
 * 0-9 short form (line delta 0, one byte of columns). */
static int lines_locations(const uint8_t *t, size_t len, int firstlineno, uint64_t offset) {
        uint64_t unit = offset / 2, at = 0;
        int64_t line = firstlineno;
        size_t pos = 0;

        while (pos < len) {
                uint8_t first = t[pos++];
                unsigned code = (first >> 3) & 15, n = (first & 7) + 1;
                bool has_line = true;
                int64_t delta = 0;
                uint64_t skip;

                if (!(first & 128))
                        return -EBADMSG;
                switch (code) {
                case 15:
                        has_line = false;
                        break;
                case 14:
                        if (read_svarint(t, len, &pos, &delta) < 0 || read_varint(t, len, &pos, &skip) < 0 ||
                            read_varint(t, len, &pos, &skip) < 0 || read_varint(t, len, &pos, &skip) < 0)
                                return -EBADMSG;
                        break;
                case 13:
                        if (read_svarint(t, len, &pos, &delta) < 0)
                                return -EBADMSG;
                        break;
                case 10:
                case 11:
                case 12:
                        delta = code - 10;
                        if (pos + 2 > len)
                                return -EBADMSG;
                        pos += 2;
                        break;
                default:
                        if (pos + 1 > len)
                                return -EBADMSG;
                        pos += 1;
                }
                /* Lines are ints in CPython: a table that leaves that range is not one it wrote, and keeping line
                 * within it keeps the sum from overflowing however many entries follow. */
                line += delta;
                if (line < 0 || line > INT_MAX)
                        return -EBADMSG;
                if (unit < at + n)
                        return has_line ? (int) line : -ENOENT;
                at += n;
        }
        return -EBADMSG;
}

int py_line_for_offset(PyLineTable kind, const uint8_t *table, size_t len, int firstlineno, uint64_t offset) {
        switch (kind) {
        case PY_LINES_LNOTAB:
                return lines_lnotab(table, len, firstlineno, offset);
        case PY_LINES_LINETABLE:
                return lines_linetable(table, len, firstlineno, offset);
        case PY_LINES_LOCATIONS:
                return lines_locations(table, len, firstlineno, offset);
        default:
                return -EPROTONOSUPPORT;
        }
}
