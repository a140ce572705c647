/* test-python-lines.c: line tables of real code objects (bytes and lines as CPython itself gives them, from
 * co_linetable and dis.get_instructions()), and malformed tables that must give no line. */
#include "unit.h"
#include <errno.h>

#include "capture/python-lines.h"

/* 3.11.2: def sample(a, b) on line 2 of a file, its co_linetable and each instruction's line (dis). */
static const uint8_t table311[] = {
        0x80, 0x00, 0xd8, 0x08, 0x09, 0x88, 0x41, 0x89, 0x05, 0x80, 0x41, 0xd8, 0x07, 0x08, 0x88, 0x31, 0x82, 0x75,
        0x80, 0x75, 0xd8, 0x0c, 0x21, 0xd0, 0x0c, 0x21, 0x9d, 0x05, 0x98, 0x61, 0x99, 0x08, 0x9c, 0x08, 0xd0, 0x0c,
        0x21, 0xd1, 0x0c, 0x21, 0xd4, 0x0c, 0x21, 0x88, 0x01, 0x88, 0x01, 0xe0, 0x0c, 0x10, 0x88, 0x01, 0xe0, 0x0c,
        0x0d, 0xd8, 0x0c, 0x0d, 0xf0, 0x03, 0x01, 0x0c, 0x0f, 0xf0, 0x00, 0x01, 0x05, 0x0f,
};
static const struct {
        unsigned offset;
        int line;
} lines311[] = {
        { 0, 2 },  { 2, 3 },  { 4, 3 },  { 6, 3 },  { 10, 3 }, { 12, 4 }, { 14, 4 }, { 16, 4 }, { 22, 4 },
        { 24, 5 }, { 26, 5 }, { 28, 5 }, { 40, 5 }, { 42, 5 }, { 46, 5 }, { 56, 5 }, { 58, 5 }, { 62, 5 },
        { 72, 5 }, { 74, 5 }, { 76, 7 }, { 78, 7 }, { 80, 9 }, { 82, 10 }, { 84, 9 }, { 86, 9 },
};

START_TEST(test_locations_311) {
        for (size_t i = 0; i < sizeof lines311 / sizeof lines311[0]; i++)
                ck_assert_int_eq(py_line_for_offset(PY_LINES_LOCATIONS, table311, sizeof table311, 2,
                                                    lines311[i].offset),
                                 lines311[i].line);
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

UNIT_TEST_MAIN("python-lines", test_locations_311)
