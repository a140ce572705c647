/* test-python-lines.c: line tables of real code objects (their bytes, and the line of each instruction as CPython
 * itself gives it), and malformed tables that must give no line. */
#include "unit.h"
#include <errno.h>
#include <limits.h>

#include "base/macro.h"
#include "runtime/python-lines.h"

typedef struct LineCase {
        unsigned offset;        /* bytes into the code, as dis shows it */
        int line;               /* or -ENOENT where CPython gives the instruction no line */
} LineCase;

static void check_lines(PyLineTable kind, const uint8_t *table, size_t len, int firstlineno, const LineCase *cases,
                        size_t n) {
        for (size_t i = 0; i < n; i++)
                ck_assert_msg(py_line_for_offset(kind, table, len, firstlineno, cases[i].offset) == cases[i].line,
                              "offset %u: line %d, CPython says %d", cases[i].offset,
                              py_line_for_offset(kind, table, len, firstlineno, cases[i].offset), cases[i].line);
}

/* One function, sample() below, compiled by each CPython (3.8.18, 3.9.18, 3.10.13, 3.11.7, 3.12.1, 3.13.0) as line
 * 211 of a file, after 210 comment lines, so that its lines are past 200 and its table starts with a delta from 211:
 *
 *     def sample(items, limit):                                       # 211
 *         total = 0
 *         for x in items:                                             # branches
 *             if x > limit:
 *                 total += x
 *             elif x < 0:
 *                 total -= x
 *             else:
 *                 continue
 *         squares = [y * y for y in items if y % 2]                   # a comprehension (inlined from 3.12)
 *         t = (total + 1, total + 2, ..., total + 45)                 # 221: 3.8-3.10 only, over 255 bytes of code;
 *                                                                     #      3.11+ get t = (total, limit)
 *         value = (total +                                            # 222: a multi-line expression, whose
 *                  # continued 1 ... # continued 140                  #      operands are 141 lines apart: deltas
 *                  len(squares) -                                     # 363  of +141 and -141
 *                  limit)
 *         try:
 *             value = value // len(t)
 *         except ZeroDivisionError as err:                            # its cleanup has no line (3.10+)
 *             value = err.args
 *         return value                                                # 369
 *
 * The table is the function's co_lnotab (3.8-3.9) or co_linetable (3.10+), as bytes.hex() printed it. The lines are
 * those of every instruction dis.get_instructions() shows (3.11+ hide their inline CACHE entries): the last
 * starts_line at or before it (3.8-3.9), or the line of the co_lines() range holding its offset (3.10+, None being
 * -ENOENT); each was also checked against that CPython's own PyCode_Addr2Line() (through ctypes) when generated. */

/* 3.11.7: sample()'s co_linetable, and its lines. */
static const uint8_t table311_sample[] = {
        0x80, 0x00, 0xd8, 0x0c, 0x0d, 0x80, 0x45, 0xd8, 0x0d, 0x12, 0xf0, 0x00, 0x06, 0x05, 0x15, 0xf0, 0x00, 0x06,
        0x05, 0x15, 0x88, 0x01, 0xd8, 0x0b, 0x0c, 0x88, 0x75, 0x8a, 0x39, 0x88, 0x39, 0xd8, 0x0c, 0x11, 0x90, 0x51,
        0x89, 0x4a, 0x88, 0x45, 0x88, 0x45, 0xd8, 0x0d, 0x0e, 0x90, 0x11, 0x8a, 0x55, 0x88, 0x55, 0xd8, 0x0c, 0x11,
        0x90, 0x51, 0x89, 0x4a, 0x88, 0x45, 0x88, 0x45, 0xe0, 0x0c, 0x14, 0xd8, 0x0e, 0x2d, 0xd0, 0x0e, 0x2d, 0x98,
        0x65, 0xd0, 0x0e, 0x2d, 0xd1, 0x0e, 0x2d, 0xd4, 0x0e, 0x2d, 0x80, 0x47, 0xd8, 0x09, 0x0e, 0x90, 0x05, 0x88,
        0x0e, 0x80, 0x41, 0xd8, 0x0d, 0x12, 0xf5, 0x5a, 0x04, 0x00, 0x0e, 0x11, 0x90, 0x17, 0x89, 0x5c, 0x8c, 0x5c,
        0xf1, 0x5b, 0x04, 0x4d, 0x02, 0x0e, 0x1a, 0xf0, 0x5c, 0x04, 0x00, 0x0e, 0x13, 0xf1, 0x5d, 0x04, 0x4e, 0x02,
        0x0e, 0x13, 0x80, 0x45, 0xf0, 0x5e, 0x04, 0x03, 0x05, 0x19, 0xd8, 0x10, 0x15, 0x9d, 0x13, 0x98, 0x51, 0x99,
        0x16, 0x9c, 0x16, 0x91, 0x0f, 0x88, 0x05, 0x88, 0x05, 0xf8, 0xdd, 0x0b, 0x1c, 0xf0, 0x00, 0x01, 0x05, 0x19,
        0xf0, 0x00, 0x01, 0x05, 0x19, 0xf0, 0x00, 0x01, 0x05, 0x19, 0xd8, 0x10, 0x13, 0x94, 0x08, 0x88, 0x05, 0x88,
        0x05, 0x88, 0x05, 0x88, 0x05, 0x88, 0x05, 0x88, 0x05, 0xf8, 0xf8, 0xf8, 0xf8, 0xf0, 0x03, 0x01, 0x05, 0x19,
        0xf8, 0xf8, 0xf8, 0xe0, 0x0b, 0x10, 0x80, 0x4c,
};
static const LineCase lines311_sample[] = {
        { 0, 211 }, { 2, 212 }, { 4, 212 }, { 6, 213 }, { 8, 213 }, { 10, 213 }, { 12, 213 }, { 14, 214 },
        { 16, 214 }, { 18, 214 }, { 24, 214 }, { 26, 215 }, { 28, 215 }, { 30, 215 }, { 34, 215 }, { 36, 215 },
        { 38, 216 }, { 40, 216 }, { 42, 216 }, { 48, 216 }, { 50, 217 }, { 52, 217 }, { 54, 217 }, { 58, 217 },
        { 60, 217 }, { 62, 219 }, { 64, 220 }, { 66, 220 }, { 68, 220 }, { 70, 220 }, { 72, 220 }, { 76, 220 },
        { 86, 220 }, { 88, 221 }, { 90, 221 }, { 92, 221 }, { 94, 221 }, { 96, 222 }, { 98, 363 }, { 110, 363 },
        { 112, 363 }, { 116, 363 }, { 126, 222 }, { 130, 364 }, { 132, 222 }, { 136, 222 }, { 138, 365 },
        { 140, 366 }, { 142, 366 }, { 154, 366 }, { 156, 366 }, { 160, 366 }, { 170, 366 }, { 174, 366 },
        { 176, 366 }, { 178, -ENOENT }, { 180, 367 }, { 192, 367 }, { 194, 367 }, { 196, 367 }, { 198, 368 },
        { 200, 368 }, { 210, 368 }, { 212, 368 }, { 214, 368 }, { 216, 368 }, { 218, 368 }, { 220, 368 },
        { 222, -ENOENT }, { 224, -ENOENT }, { 226, -ENOENT }, { 228, -ENOENT }, { 230, 367 }, { 232, -ENOENT },
        { 234, -ENOENT }, { 236, -ENOENT }, { 238, 369 }, { 240, 369 },
};

/* 3.11.2: def sample(a, b) on line 2 of a file, its co_linetable and each instruction's line (dis). */
static const uint8_t table311[] = {
        0x80, 0x00, 0xd8, 0x08, 0x09, 0x88, 0x41, 0x89, 0x05, 0x80, 0x41, 0xd8, 0x07, 0x08, 0x88, 0x31, 0x82, 0x75,
        0x80, 0x75, 0xd8, 0x0c, 0x21, 0xd0, 0x0c, 0x21, 0x9d, 0x05, 0x98, 0x61, 0x99, 0x08, 0x9c, 0x08, 0xd0, 0x0c,
        0x21, 0xd1, 0x0c, 0x21, 0xd4, 0x0c, 0x21, 0x88, 0x01, 0x88, 0x01, 0xe0, 0x0c, 0x10, 0x88, 0x01, 0xe0, 0x0c,
        0x0d, 0xd8, 0x0c, 0x0d, 0xf0, 0x03, 0x01, 0x0c, 0x0f, 0xf0, 0x00, 0x01, 0x05, 0x0f,
};
static const LineCase lines311[] = {
        { 0, 2 },  { 2, 3 },  { 4, 3 },  { 6, 3 },  { 10, 3 }, { 12, 4 }, { 14, 4 }, { 16, 4 }, { 22, 4 },
        { 24, 5 }, { 26, 5 }, { 28, 5 }, { 40, 5 }, { 42, 5 }, { 46, 5 }, { 56, 5 }, { 58, 5 }, { 62, 5 },
        { 72, 5 }, { 74, 5 }, { 76, 7 }, { 78, 7 }, { 80, 9 }, { 82, 10 }, { 84, 9 }, { 86, 9 },
};

START_TEST(test_locations_311) {
        check_lines(PY_LINES_LOCATIONS, table311, sizeof table311, 2, lines311, ELEMENTSOF(lines311));
        check_lines(PY_LINES_LOCATIONS, table311_sample, sizeof table311_sample, 211, lines311_sample,
                    ELEMENTSOF(lines311_sample));
        /* Past the end of the code, and a table cut short: no line, not a guess. */
        ck_assert_int_eq(py_line_for_offset(PY_LINES_LOCATIONS, table311, sizeof table311, 2, 4096), -EBADMSG);
        ck_assert_int_eq(py_line_for_offset(PY_LINES_LOCATIONS, table311, 3, 2, 80), -EBADMSG);
        /* An entry without the start bit: malformed. */
        static const uint8_t bad[] = { 0x00, 0x00 };
        ck_assert_int_eq(py_line_for_offset(PY_LINES_LOCATIONS, bad, sizeof bad, 2, 0), -EBADMSG);
        /* Code 15: no location. */
        static const uint8_t none[] = { 0xf8 };
        ck_assert_int_eq(py_line_for_offset(PY_LINES_LOCATIONS, none, sizeof none, 2, 0), -ENOENT);
        /* A varint that never ends. */
        static const uint8_t endless[] = { 0xe8, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f };
        ck_assert_int_eq(py_line_for_offset(PY_LINES_LOCATIONS, endless, sizeof endless, 2, 0), -EBADMSG);
        /* Seven chunks: more than an int, whose high chunks would otherwise be shifted out. */
        static const uint8_t wide[] = { 0xe8, 0x40, 0x40, 0x40, 0x40, 0x40, 0x40, 0x04 };
        ck_assert_int_eq(py_line_for_offset(PY_LINES_LOCATIONS, wide, sizeof wide, 2, 0), -EBADMSG);
        /* Line deltas that leave the range of an int (+2^31), or go below line 0 (-3 from line 2). */
        static const uint8_t huge[] = { 0xe8, 0x40, 0x40, 0x40, 0x40, 0x40, 0x04 };
        ck_assert_int_eq(py_line_for_offset(PY_LINES_LOCATIONS, huge, sizeof huge, 2, 0), -EBADMSG);
        static const uint8_t negative[] = { 0xe8, 0x07 };
        ck_assert_int_eq(py_line_for_offset(PY_LINES_LOCATIONS, negative, sizeof negative, 2, 0), -EBADMSG);
}
END_TEST

/* 3.8.18: sample()'s co_lnotab, and its lines. */
static const uint8_t table38[] = {
        0x00, 0x01, 0x04, 0x01, 0x08, 0x01, 0x08, 0x01, 0x0a, 0x01, 0x08, 0x01, 0x0a, 0x02, 0x04, 0x01, 0x0e, 0x01,
        0xff, 0x00, 0x13, 0x01, 0x02, 0x7f, 0x00, 0x0e, 0x06, 0x80, 0x00, 0xf3, 0x02, 0x7f, 0x00, 0x0f, 0x02, 0x80,
        0x00, 0xf2, 0x04, 0x7f, 0x00, 0x10, 0x02, 0x01, 0x10, 0x01, 0x12, 0x01, 0x18, 0x01,
};
static const LineCase lines38[] = {
        { 0, 212 }, { 2, 212 }, { 4, 213 }, { 6, 213 }, { 8, 213 }, { 10, 213 }, { 12, 214 }, { 14, 214 },
        { 16, 214 }, { 18, 214 }, { 20, 215 }, { 22, 215 }, { 24, 215 }, { 26, 215 }, { 28, 215 }, { 30, 216 },
        { 32, 216 }, { 34, 216 }, { 36, 216 }, { 38, 217 }, { 40, 217 }, { 42, 217 }, { 44, 217 }, { 46, 217 },
        { 48, 219 }, { 50, 219 }, { 52, 220 }, { 54, 220 }, { 56, 220 }, { 58, 220 }, { 60, 220 }, { 62, 220 },
        { 64, 220 }, { 66, 221 }, { 68, 221 }, { 70, 221 }, { 72, 221 }, { 74, 221 }, { 76, 221 }, { 78, 221 },
        { 80, 221 }, { 82, 221 }, { 84, 221 }, { 86, 221 }, { 88, 221 }, { 90, 221 }, { 92, 221 }, { 94, 221 },
        { 96, 221 }, { 98, 221 }, { 100, 221 }, { 102, 221 }, { 104, 221 }, { 106, 221 }, { 108, 221 }, { 110, 221 },
        { 112, 221 }, { 114, 221 }, { 116, 221 }, { 118, 221 }, { 120, 221 }, { 122, 221 }, { 124, 221 },
        { 126, 221 }, { 128, 221 }, { 130, 221 }, { 132, 221 }, { 134, 221 }, { 136, 221 }, { 138, 221 },
        { 140, 221 }, { 142, 221 }, { 144, 221 }, { 146, 221 }, { 148, 221 }, { 150, 221 }, { 152, 221 },
        { 154, 221 }, { 156, 221 }, { 158, 221 }, { 160, 221 }, { 162, 221 }, { 164, 221 }, { 166, 221 },
        { 168, 221 }, { 170, 221 }, { 172, 221 }, { 174, 221 }, { 176, 221 }, { 178, 221 }, { 180, 221 },
        { 182, 221 }, { 184, 221 }, { 186, 221 }, { 188, 221 }, { 190, 221 }, { 192, 221 }, { 194, 221 },
        { 196, 221 }, { 198, 221 }, { 200, 221 }, { 202, 221 }, { 204, 221 }, { 206, 221 }, { 208, 221 },
        { 210, 221 }, { 212, 221 }, { 214, 221 }, { 216, 221 }, { 218, 221 }, { 220, 221 }, { 222, 221 },
        { 224, 221 }, { 226, 221 }, { 228, 221 }, { 230, 221 }, { 232, 221 }, { 234, 221 }, { 236, 221 },
        { 238, 221 }, { 240, 221 }, { 242, 221 }, { 244, 221 }, { 246, 221 }, { 248, 221 }, { 250, 221 },
        { 252, 221 }, { 254, 221 }, { 256, 221 }, { 258, 221 }, { 260, 221 }, { 262, 221 }, { 264, 221 },
        { 266, 221 }, { 268, 221 }, { 270, 221 }, { 272, 221 }, { 274, 221 }, { 276, 221 }, { 278, 221 },
        { 280, 221 }, { 282, 221 }, { 284, 221 }, { 286, 221 }, { 288, 221 }, { 290, 221 }, { 292, 221 },
        { 294, 221 }, { 296, 221 }, { 298, 221 }, { 300, 221 }, { 302, 221 }, { 304, 221 }, { 306, 221 },
        { 308, 221 }, { 310, 221 }, { 312, 221 }, { 314, 221 }, { 316, 221 }, { 318, 221 }, { 320, 221 },
        { 322, 221 }, { 324, 221 }, { 326, 221 }, { 328, 221 }, { 330, 221 }, { 332, 221 }, { 334, 221 },
        { 336, 221 }, { 338, 221 }, { 340, 222 }, { 342, 363 }, { 344, 363 }, { 346, 363 }, { 348, 222 },
        { 350, 364 }, { 352, 222 }, { 354, 222 }, { 356, 365 }, { 358, 366 }, { 360, 366 }, { 362, 366 },
        { 364, 366 }, { 366, 366 }, { 368, 366 }, { 370, 366 }, { 372, 366 }, { 374, 367 }, { 376, 367 },
        { 378, 367 }, { 380, 367 }, { 382, 367 }, { 384, 367 }, { 386, 367 }, { 388, 367 }, { 390, 367 },
        { 392, 368 }, { 394, 368 }, { 396, 368 }, { 398, 368 }, { 400, 368 }, { 402, 368 }, { 404, 368 },
        { 406, 368 }, { 408, 368 }, { 410, 368 }, { 412, 368 }, { 414, 368 }, { 416, 369 }, { 418, 369 },
};

/* 3.9.18: sample()'s co_lnotab, and its lines. */
static const uint8_t table39[] = {
        0x00, 0x01, 0x04, 0x01, 0x08, 0x01, 0x08, 0x01, 0x0a, 0x01, 0x08, 0x01, 0x0a, 0x02, 0x04, 0x01, 0x0e, 0x01,
        0xff, 0x00, 0x13, 0x01, 0x02, 0x7f, 0x00, 0x0e, 0x06, 0x80, 0x00, 0xf3, 0x02, 0x7f, 0x00, 0x0f, 0x02, 0x80,
        0x00, 0xf2, 0x04, 0x7f, 0x00, 0x10, 0x02, 0x01, 0x10, 0x01, 0x10, 0x01, 0x1c, 0x01,
};
static const LineCase lines39[] = {
        { 0, 212 }, { 2, 212 }, { 4, 213 }, { 6, 213 }, { 8, 213 }, { 10, 213 }, { 12, 214 }, { 14, 214 },
        { 16, 214 }, { 18, 214 }, { 20, 215 }, { 22, 215 }, { 24, 215 }, { 26, 215 }, { 28, 215 }, { 30, 216 },
        { 32, 216 }, { 34, 216 }, { 36, 216 }, { 38, 217 }, { 40, 217 }, { 42, 217 }, { 44, 217 }, { 46, 217 },
        { 48, 219 }, { 50, 219 }, { 52, 220 }, { 54, 220 }, { 56, 220 }, { 58, 220 }, { 60, 220 }, { 62, 220 },
        { 64, 220 }, { 66, 221 }, { 68, 221 }, { 70, 221 }, { 72, 221 }, { 74, 221 }, { 76, 221 }, { 78, 221 },
        { 80, 221 }, { 82, 221 }, { 84, 221 }, { 86, 221 }, { 88, 221 }, { 90, 221 }, { 92, 221 }, { 94, 221 },
        { 96, 221 }, { 98, 221 }, { 100, 221 }, { 102, 221 }, { 104, 221 }, { 106, 221 }, { 108, 221 }, { 110, 221 },
        { 112, 221 }, { 114, 221 }, { 116, 221 }, { 118, 221 }, { 120, 221 }, { 122, 221 }, { 124, 221 },
        { 126, 221 }, { 128, 221 }, { 130, 221 }, { 132, 221 }, { 134, 221 }, { 136, 221 }, { 138, 221 },
        { 140, 221 }, { 142, 221 }, { 144, 221 }, { 146, 221 }, { 148, 221 }, { 150, 221 }, { 152, 221 },
        { 154, 221 }, { 156, 221 }, { 158, 221 }, { 160, 221 }, { 162, 221 }, { 164, 221 }, { 166, 221 },
        { 168, 221 }, { 170, 221 }, { 172, 221 }, { 174, 221 }, { 176, 221 }, { 178, 221 }, { 180, 221 },
        { 182, 221 }, { 184, 221 }, { 186, 221 }, { 188, 221 }, { 190, 221 }, { 192, 221 }, { 194, 221 },
        { 196, 221 }, { 198, 221 }, { 200, 221 }, { 202, 221 }, { 204, 221 }, { 206, 221 }, { 208, 221 },
        { 210, 221 }, { 212, 221 }, { 214, 221 }, { 216, 221 }, { 218, 221 }, { 220, 221 }, { 222, 221 },
        { 224, 221 }, { 226, 221 }, { 228, 221 }, { 230, 221 }, { 232, 221 }, { 234, 221 }, { 236, 221 },
        { 238, 221 }, { 240, 221 }, { 242, 221 }, { 244, 221 }, { 246, 221 }, { 248, 221 }, { 250, 221 },
        { 252, 221 }, { 254, 221 }, { 256, 221 }, { 258, 221 }, { 260, 221 }, { 262, 221 }, { 264, 221 },
        { 266, 221 }, { 268, 221 }, { 270, 221 }, { 272, 221 }, { 274, 221 }, { 276, 221 }, { 278, 221 },
        { 280, 221 }, { 282, 221 }, { 284, 221 }, { 286, 221 }, { 288, 221 }, { 290, 221 }, { 292, 221 },
        { 294, 221 }, { 296, 221 }, { 298, 221 }, { 300, 221 }, { 302, 221 }, { 304, 221 }, { 306, 221 },
        { 308, 221 }, { 310, 221 }, { 312, 221 }, { 314, 221 }, { 316, 221 }, { 318, 221 }, { 320, 221 },
        { 322, 221 }, { 324, 221 }, { 326, 221 }, { 328, 221 }, { 330, 221 }, { 332, 221 }, { 334, 221 },
        { 336, 221 }, { 338, 221 }, { 340, 222 }, { 342, 363 }, { 344, 363 }, { 346, 363 }, { 348, 222 },
        { 350, 364 }, { 352, 222 }, { 354, 222 }, { 356, 365 }, { 358, 366 }, { 360, 366 }, { 362, 366 },
        { 364, 366 }, { 366, 366 }, { 368, 366 }, { 370, 366 }, { 372, 366 }, { 374, 367 }, { 376, 367 },
        { 378, 367 }, { 380, 367 }, { 382, 367 }, { 384, 367 }, { 386, 367 }, { 388, 367 }, { 390, 368 },
        { 392, 368 }, { 394, 368 }, { 396, 368 }, { 398, 368 }, { 400, 368 }, { 402, 368 }, { 404, 368 },
        { 406, 368 }, { 408, 368 }, { 410, 368 }, { 412, 368 }, { 414, 368 }, { 416, 368 }, { 418, 369 },
        { 420, 369 },
};

START_TEST(test_lnotab) {
        check_lines(PY_LINES_LNOTAB, table38, sizeof table38, 211, lines38, ELEMENTSOF(lines38));
        check_lines(PY_LINES_LNOTAB, table39, sizeof table39, 211, lines39, ELEMENTSOF(lines39));
        /* The table does not say where the code ends: past its last pair, the last line (CPython says the same). */
        ck_assert_int_eq(py_line_for_offset(PY_LINES_LNOTAB, table38, sizeof table38, 211, 4096), 369);
        /* No pairs at all: every instruction on the first line (a one-line lambda's table). */
        ck_assert_int_eq(py_line_for_offset(PY_LINES_LNOTAB, table38, 0, 7, 10), 7);
        /* A pair cut in half: malformed, even for an offset before it. */
        ck_assert_int_eq(py_line_for_offset(PY_LINES_LNOTAB, table38, sizeof table38 - 1, 211, 0), -EBADMSG);
        /* Below line 0 (-3 from line 2), or past the largest int. */
        static const uint8_t negative[] = { 0x00, 0xfd };
        ck_assert_int_eq(py_line_for_offset(PY_LINES_LNOTAB, negative, sizeof negative, 2, 0), -EBADMSG);
        static const uint8_t over[] = { 0x00, 0x01 };
        ck_assert_int_eq(py_line_for_offset(PY_LINES_LNOTAB, over, sizeof over, INT_MAX, 0), -EBADMSG);
        /* A pair past OFFSET does not count, however wrong its delta. */
        static const uint8_t later[] = { 0x00, 0x01, 0x08, 0x80, 0x00, 0x80 };
        ck_assert_int_eq(py_line_for_offset(PY_LINES_LNOTAB, later, sizeof later, 2, 6), 3);
}
END_TEST

/* 3.10.13: sample()'s co_linetable, and its lines. */
static const uint8_t table310[] = {
        0x04, 0x01, 0x08, 0x01, 0x08, 0x01, 0x0a, 0x01, 0x08, 0x01, 0x0a, 0x01, 0x02, 0x02, 0x0e, 0x01, 0xfe, 0x01,
        0x70, 0x00, 0x02, 0x01, 0x00, 0x7f, 0x06, 0x0e, 0x00, 0x81, 0x02, 0xf2, 0x00, 0x7f, 0x02, 0x0f, 0x00, 0x81,
        0x04, 0xf1, 0x00, 0x7f, 0x02, 0x10, 0x0e, 0x01, 0x04, 0x03, 0x0e, 0xfe, 0x10, 0x01, 0x04, 0x01, 0x08, 0x80,
        0x02, 0xfe,
};
static const LineCase lines310[] = {
        { 0, 212 }, { 2, 212 }, { 4, 213 }, { 6, 213 }, { 8, 213 }, { 10, 213 }, { 12, 214 }, { 14, 214 },
        { 16, 214 }, { 18, 214 }, { 20, 215 }, { 22, 215 }, { 24, 215 }, { 26, 215 }, { 28, 215 }, { 30, 216 },
        { 32, 216 }, { 34, 216 }, { 36, 216 }, { 38, 217 }, { 40, 217 }, { 42, 217 }, { 44, 217 }, { 46, 217 },
        { 48, 219 }, { 50, 220 }, { 52, 220 }, { 54, 220 }, { 56, 220 }, { 58, 220 }, { 60, 220 }, { 62, 220 },
        { 64, 221 }, { 66, 221 }, { 68, 221 }, { 70, 221 }, { 72, 221 }, { 74, 221 }, { 76, 221 }, { 78, 221 },
        { 80, 221 }, { 82, 221 }, { 84, 221 }, { 86, 221 }, { 88, 221 }, { 90, 221 }, { 92, 221 }, { 94, 221 },
        { 96, 221 }, { 98, 221 }, { 100, 221 }, { 102, 221 }, { 104, 221 }, { 106, 221 }, { 108, 221 }, { 110, 221 },
        { 112, 221 }, { 114, 221 }, { 116, 221 }, { 118, 221 }, { 120, 221 }, { 122, 221 }, { 124, 221 },
        { 126, 221 }, { 128, 221 }, { 130, 221 }, { 132, 221 }, { 134, 221 }, { 136, 221 }, { 138, 221 },
        { 140, 221 }, { 142, 221 }, { 144, 221 }, { 146, 221 }, { 148, 221 }, { 150, 221 }, { 152, 221 },
        { 154, 221 }, { 156, 221 }, { 158, 221 }, { 160, 221 }, { 162, 221 }, { 164, 221 }, { 166, 221 },
        { 168, 221 }, { 170, 221 }, { 172, 221 }, { 174, 221 }, { 176, 221 }, { 178, 221 }, { 180, 221 },
        { 182, 221 }, { 184, 221 }, { 186, 221 }, { 188, 221 }, { 190, 221 }, { 192, 221 }, { 194, 221 },
        { 196, 221 }, { 198, 221 }, { 200, 221 }, { 202, 221 }, { 204, 221 }, { 206, 221 }, { 208, 221 },
        { 210, 221 }, { 212, 221 }, { 214, 221 }, { 216, 221 }, { 218, 221 }, { 220, 221 }, { 222, 221 },
        { 224, 221 }, { 226, 221 }, { 228, 221 }, { 230, 221 }, { 232, 221 }, { 234, 221 }, { 236, 221 },
        { 238, 221 }, { 240, 221 }, { 242, 221 }, { 244, 221 }, { 246, 221 }, { 248, 221 }, { 250, 221 },
        { 252, 221 }, { 254, 221 }, { 256, 221 }, { 258, 221 }, { 260, 221 }, { 262, 221 }, { 264, 221 },
        { 266, 221 }, { 268, 221 }, { 270, 221 }, { 272, 221 }, { 274, 221 }, { 276, 221 }, { 278, 221 },
        { 280, 221 }, { 282, 221 }, { 284, 221 }, { 286, 221 }, { 288, 221 }, { 290, 221 }, { 292, 221 },
        { 294, 221 }, { 296, 221 }, { 298, 221 }, { 300, 221 }, { 302, 221 }, { 304, 221 }, { 306, 221 },
        { 308, 221 }, { 310, 221 }, { 312, 221 }, { 314, 221 }, { 316, 221 }, { 318, 221 }, { 320, 221 },
        { 322, 221 }, { 324, 221 }, { 326, 221 }, { 328, 221 }, { 330, 221 }, { 332, 221 }, { 334, 221 },
        { 336, 221 }, { 338, 221 }, { 340, 221 }, { 342, 221 }, { 344, 221 }, { 346, 221 }, { 348, 221 },
        { 350, 221 }, { 352, 221 }, { 354, 221 }, { 356, 221 }, { 358, 221 }, { 360, 221 }, { 362, 221 },
        { 364, 221 }, { 366, 221 }, { 368, 221 }, { 370, 221 }, { 372, 221 }, { 374, 221 }, { 376, 221 },
        { 378, 221 }, { 380, 221 }, { 382, 221 }, { 384, 221 }, { 386, 221 }, { 388, 221 }, { 390, 221 },
        { 392, 221 }, { 394, 221 }, { 396, 221 }, { 398, 221 }, { 400, 221 }, { 402, 221 }, { 404, 221 },
        { 406, 221 }, { 408, 221 }, { 410, 221 }, { 412, 221 }, { 414, 221 }, { 416, 221 }, { 418, 221 },
        { 420, 221 }, { 422, 221 }, { 424, 221 }, { 426, 221 }, { 428, 221 }, { 430, 222 }, { 432, 363 },
        { 434, 363 }, { 436, 363 }, { 438, 222 }, { 440, 364 }, { 442, 222 }, { 444, 222 }, { 446, 365 },
        { 448, 366 }, { 450, 366 }, { 452, 366 }, { 454, 366 }, { 456, 366 }, { 458, 366 }, { 460, 366 },
        { 462, 369 }, { 464, 369 }, { 466, 367 }, { 468, 367 }, { 470, 367 }, { 472, 367 }, { 474, 367 },
        { 476, 367 }, { 478, 367 }, { 480, 368 }, { 482, 368 }, { 484, 368 }, { 486, 368 }, { 488, 368 },
        { 490, 368 }, { 492, 368 }, { 494, 368 }, { 496, 369 }, { 498, 369 }, { 500, -ENOENT }, { 502, -ENOENT },
        { 504, -ENOENT }, { 506, -ENOENT }, { 508, 367 },
};

START_TEST(test_linetable_310) {
        check_lines(PY_LINES_LINETABLE, table310, sizeof table310, 211, lines310, ELEMENTSOF(lines310));
        /* Past the end of the code, a table cut short, a pair cut in half: no line, not a guess. */
        ck_assert_int_eq(py_line_for_offset(PY_LINES_LINETABLE, table310, sizeof table310, 211, 4096), -EBADMSG);
        ck_assert_int_eq(py_line_for_offset(PY_LINES_LINETABLE, table310, 4, 211, 12), -EBADMSG);
        ck_assert_int_eq(py_line_for_offset(PY_LINES_LINETABLE, table310, 3, 211, 0), -EBADMSG);
        ck_assert_int_eq(py_line_for_offset(PY_LINES_LINETABLE, table310, 0, 211, 0), -EBADMSG);
        /* -128: a range with no line, which leaves the running line as it was for the next range. */
        static const uint8_t noline[] = { 0x02, 0x01, 0x04, 0x80, 0x02, 0x01 };
        ck_assert_int_eq(py_line_for_offset(PY_LINES_LINETABLE, noline, sizeof noline, 10, 0), 11);
        ck_assert_int_eq(py_line_for_offset(PY_LINES_LINETABLE, noline, sizeof noline, 10, 4), -ENOENT);
        ck_assert_int_eq(py_line_for_offset(PY_LINES_LINETABLE, noline, sizeof noline, 10, 6), 12);
        /* Empty ranges only carry a delta too large for one pair: 127 then 14, for the range after them. */
        static const uint8_t split[] = { 0x00, 0x7f, 0x06, 0x0e };
        ck_assert_int_eq(py_line_for_offset(PY_LINES_LINETABLE, split, sizeof split, 10, 0), 151);
        /* Below line 0, or past the largest int. */
        static const uint8_t negative[] = { 0x02, 0xfd };
        ck_assert_int_eq(py_line_for_offset(PY_LINES_LINETABLE, negative, sizeof negative, 2, 0), -EBADMSG);
        static const uint8_t over[] = { 0x02, 0x01 };
        ck_assert_int_eq(py_line_for_offset(PY_LINES_LINETABLE, over, sizeof over, INT_MAX, 0), -EBADMSG);
}
END_TEST

/* 3.12.1: sample()'s co_linetable, and its lines. */
static const uint8_t table312[] = {
        0x80, 0x00, 0xd8, 0x0c, 0x0d, 0x80, 0x45, 0xd8, 0x0d, 0x12, 0xf2, 0x00, 0x06, 0x05, 0x15, 0x88, 0x01, 0xd8,
        0x0b, 0x0c, 0x88, 0x75, 0x8a, 0x39, 0xd8, 0x0c, 0x11, 0x90, 0x51, 0x89, 0x4a, 0x89, 0x45, 0xd8, 0x0d, 0x0e,
        0x90, 0x11, 0x8a, 0x55, 0xd8, 0x0c, 0x11, 0x90, 0x51, 0x89, 0x4a, 0x89, 0x45, 0xe0, 0x0c, 0x14, 0xf0, 0x0d,
        0x06, 0x05, 0x15, 0xf0, 0x0e, 0x00, 0x1f, 0x24, 0xd6, 0x0e, 0x2d, 0x98, 0x11, 0xa0, 0x71, 0xa8, 0x31, 0xa3,
        0x75, 0x88, 0x71, 0x90, 0x31, 0x8b, 0x75, 0xd0, 0x0e, 0x2d, 0x80, 0x47, 0xd0, 0x0e, 0x2d, 0xd8, 0x09, 0x0e,
        0x90, 0x05, 0x88, 0x0e, 0x80, 0x41, 0xd8, 0x0d, 0x12, 0xf4, 0x5a, 0x04, 0x00, 0x0e, 0x11, 0x90, 0x17, 0x8b,
        0x5c, 0xf1, 0x5b, 0x04, 0x4d, 0x02, 0x0e, 0x1a, 0xf0, 0x5c, 0x04, 0x00, 0x0e, 0x13, 0xf1, 0x5d, 0x04, 0x4e,
        0x02, 0x0e, 0x13, 0x80, 0x45, 0xf0, 0x5e, 0x04, 0x03, 0x05, 0x19, 0xd8, 0x10, 0x15, 0x9c, 0x13, 0x98, 0x51,
        0x9b, 0x16, 0x91, 0x0f, 0x88, 0x05, 0xf0, 0x06, 0x00, 0x0c, 0x11, 0x80, 0x4c, 0xf9, 0xf2, 0x6b, 0x04, 0x00,
        0x0f, 0x2e, 0xf8, 0xf4, 0x66, 0x04, 0x00, 0x0c, 0x1d, 0xf2, 0x00, 0x01, 0x05, 0x19, 0xd8, 0x10, 0x13, 0x97,
        0x08, 0x91, 0x08, 0x8c, 0x05, 0xd8, 0x0b, 0x10, 0x80, 0x4c, 0xfb, 0xf0, 0x05, 0x01, 0x05, 0x19, 0xfa,
};
static const LineCase lines312[] = {
        { 0, 211 }, { 2, 212 }, { 4, 212 }, { 6, 213 }, { 8, 213 }, { 10, 213 }, { 14, 213 }, { 16, 214 },
        { 18, 214 }, { 20, 214 }, { 24, 214 }, { 26, 215 }, { 28, 215 }, { 30, 215 }, { 34, 215 }, { 36, 215 },
        { 38, 216 }, { 40, 216 }, { 42, 216 }, { 46, 216 }, { 48, 217 }, { 50, 217 }, { 52, 217 }, { 56, 217 },
        { 58, 217 }, { 60, 219 }, { 62, 213 }, { 64, 220 }, { 66, 220 }, { 68, 220 }, { 70, 220 }, { 72, 220 },
        { 74, 220 }, { 76, 220 }, { 80, 220 }, { 82, 220 }, { 84, 220 }, { 86, 220 }, { 90, 220 }, { 92, 220 },
        { 94, 220 }, { 96, 220 }, { 98, 220 }, { 102, 220 }, { 104, 220 }, { 106, 220 }, { 108, 220 }, { 110, 220 },
        { 112, 221 }, { 114, 221 }, { 116, 221 }, { 118, 221 }, { 120, 222 }, { 122, 363 }, { 132, 363 },
        { 134, 363 }, { 142, 222 }, { 146, 364 }, { 148, 222 }, { 152, 222 }, { 154, 365 }, { 156, 366 },
        { 158, 366 }, { 168, 366 }, { 170, 366 }, { 178, 366 }, { 182, 366 }, { 184, 369 }, { 186, 369 },
        { 188, -ENOENT }, { 190, -ENOENT }, { 192, 220 }, { 194, 220 }, { 196, 220 }, { 198, -ENOENT }, { 200, 367 },
        { 210, 367 }, { 212, 367 }, { 214, 367 }, { 216, 368 }, { 218, 368 }, { 238, 368 }, { 240, 368 },
        { 242, 368 }, { 244, 368 }, { 246, 368 }, { 248, 369 }, { 250, 369 }, { 252, -ENOENT }, { 254, -ENOENT },
        { 256, -ENOENT }, { 258, -ENOENT }, { 260, 367 }, { 262, -ENOENT }, { 264, -ENOENT }, { 266, -ENOENT },
};

/* 3.13.0: sample()'s co_linetable, and its lines. */
static const uint8_t table313[] = {
        0x80, 0x00, 0xd8, 0x0c, 0x0d, 0x80, 0x45, 0xdb, 0x0d, 0x12, 0x88, 0x01, 0xd8, 0x0b, 0x0c, 0x8b, 0x39, 0xd8,
        0x0c, 0x11, 0x89, 0x4a, 0x8a, 0x45, 0xd8, 0x0d, 0x0e, 0x90, 0x11, 0x8b, 0x55, 0xd8, 0x0c, 0x11, 0x89, 0x4a,
        0x8a, 0x45, 0xe1, 0x0c, 0x14, 0xf1, 0x0d, 0x00, 0x0e, 0x13, 0xf1, 0x0e, 0x00, 0x1f, 0x24, 0xd3, 0x0e, 0x2d,
        0x99, 0x65, 0x98, 0x11, 0xa8, 0x31, 0xa5, 0x75, 0x8b, 0x75, 0x88, 0x71, 0x8c, 0x75, 0x99, 0x65, 0x80, 0x47,
        0xd0, 0x0e, 0x2d, 0xd8, 0x09, 0x0e, 0x88, 0x0e, 0x80, 0x41, 0xd8, 0x0d, 0x12, 0xf4, 0x5a, 0x04, 0x00, 0x0e,
        0x11, 0x90, 0x17, 0x8b, 0x5c, 0xf1, 0x5b, 0x04, 0x4d, 0x02, 0x0e, 0x1a, 0xf0, 0x5c, 0x04, 0x00, 0x0e, 0x13,
        0xf1, 0x5d, 0x04, 0x4e, 0x02, 0x0e, 0x13, 0x80, 0x45, 0xf0, 0x5e, 0x04, 0x03, 0x05, 0x19, 0xd8, 0x10, 0x15,
        0x9c, 0x13, 0x98, 0x51, 0x9b, 0x16, 0x91, 0x0f, 0x88, 0x05, 0xf0, 0x06, 0x00, 0x0c, 0x11, 0x80, 0x4c, 0xf9,
        0xf2, 0x6b, 0x04, 0x00, 0x0f, 0x2e, 0xf8, 0xf4, 0x66, 0x04, 0x00, 0x0c, 0x1d, 0xf3, 0x00, 0x01, 0x05, 0x19,
        0xd8, 0x10, 0x13, 0x97, 0x08, 0x91, 0x08, 0x8c, 0x05, 0xd8, 0x0b, 0x10, 0x80, 0x4c, 0xfb, 0xf0, 0x05, 0x01,
        0x05, 0x19, 0xfa,
};
static const LineCase lines313[] = {
        { 0, 211 }, { 2, 212 }, { 4, 212 }, { 6, 213 }, { 8, 213 }, { 10, 213 }, { 14, 213 }, { 16, 214 },
        { 18, 214 }, { 22, 214 }, { 26, 215 }, { 28, 215 }, { 32, 215 }, { 34, 215 }, { 38, 216 }, { 40, 216 },
        { 42, 216 }, { 46, 216 }, { 50, 217 }, { 52, 217 }, { 56, 217 }, { 58, 217 }, { 62, 219 }, { 66, 213 },
        { 68, 213 }, { 70, 220 }, { 72, 220 }, { 74, 220 }, { 76, 220 }, { 78, 220 }, { 80, 220 }, { 82, 220 },
        { 86, 220 }, { 88, 220 }, { 90, 220 }, { 94, 220 }, { 102, 220 }, { 106, 220 }, { 110, 220 }, { 112, 220 },
        { 116, 220 }, { 118, 220 }, { 122, 220 }, { 124, 220 }, { 126, 220 }, { 128, 220 }, { 130, 221 },
        { 132, 221 }, { 134, 221 }, { 136, 222 }, { 138, 363 }, { 148, 363 }, { 150, 363 }, { 158, 222 },
        { 162, 364 }, { 164, 222 }, { 168, 222 }, { 170, 365 }, { 172, 366 }, { 174, 366 }, { 184, 366 },
        { 186, 366 }, { 194, 366 }, { 198, 366 }, { 200, 369 }, { 202, 369 }, { 204, -ENOENT }, { 206, -ENOENT },
        { 208, 220 }, { 210, 220 }, { 212, 220 }, { 214, -ENOENT }, { 216, 367 }, { 226, 367 }, { 228, 367 },
        { 232, 367 }, { 234, 368 }, { 236, 368 }, { 256, 368 }, { 258, 368 }, { 260, 368 }, { 262, 368 },
        { 264, 368 }, { 266, 369 }, { 268, 369 }, { 270, -ENOENT }, { 272, -ENOENT }, { 274, -ENOENT },
        { 276, -ENOENT }, { 278, 367 }, { 280, -ENOENT }, { 282, -ENOENT }, { 284, -ENOENT },
};

START_TEST(test_locations_312_313) {
        check_lines(PY_LINES_LOCATIONS, table312, sizeof table312, 211, lines312, ELEMENTSOF(lines312));
        check_lines(PY_LINES_LOCATIONS, table313, sizeof table313, 211, lines313, ELEMENTSOF(lines313));
        /* Past the end of the code, and tables cut short (in an entry, between entries): no line, not a guess. */
        ck_assert_int_eq(py_line_for_offset(PY_LINES_LOCATIONS, table312, sizeof table312, 211, 4096), -EBADMSG);
        ck_assert_int_eq(py_line_for_offset(PY_LINES_LOCATIONS, table313, sizeof table313, 211, 4096), -EBADMSG);
        ck_assert_int_eq(py_line_for_offset(PY_LINES_LOCATIONS, table312, 3, 211, 266), -EBADMSG);
        ck_assert_int_eq(py_line_for_offset(PY_LINES_LOCATIONS, table313, 2, 211, 284), -EBADMSG);
        ck_assert_int_eq(py_line_for_offset(PY_LINES_LOCATIONS, table313, 0, 211, 0), -EBADMSG);
        /* A continuation byte where an entry should start. */
        static const uint8_t stray[] = { 0x80, 0x00, 0x00, 0x80, 0x00 };
        ck_assert_int_eq(py_line_for_offset(PY_LINES_LOCATIONS, stray, sizeof stray, 2, 2), -EBADMSG);
        /* An unknown kind of table. */
        ck_assert_int_eq(py_line_for_offset((PyLineTable) 42, table313, sizeof table313, 211, 0), -EPROTONOSUPPORT);
}
END_TEST

UNIT_TEST_MAIN("python-lines", test_lnotab, test_linetable_310, test_locations_311, test_locations_312_313)
