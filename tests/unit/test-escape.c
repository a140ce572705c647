/* test-escape.c: what a hostile process name turns into on a terminal. */
#include "unit.h"
#include <stdlib.h>
#include <string.h>

#include "escape.h"

START_TEST(test_escape_table) {
        static const struct {
                const char *in;
                size_t len;
                const char *out;
        } cases[] = {
                { "plain", 5, "plain" },
                { "\033[2J", 4, "\\e[2J" },
                { "a\nb\tc\r", 6, "a\\nb\\tc\\r" },
                { "back\\slash", 10, "back\\\\slash" },
                { "\x7f\x01", 2, "\\x7f\\x01" },
                { "a) b (c", 7, "a) b (c" },
                { "caf\xc3\xa9", 5, "caf\xc3\xa9" },      /* valid UTF-8 stays */
                { "\xc3", 1, "\\xc3" },                     /* truncated sequence */
                { "\xc2\x9b" "31m", 5, "\\xc2\\x9b31m" },   /* C1 CSI, a terminal control */
                { "\xc0\xaf", 2, "\\xc0\\xaf" },            /* overlong '/' */
                { "\xed\xa0\x80", 3, "\\xed\\xa0\\x80" },   /* surrogate */
                { "nul\0in", 6, "nul\\x00in" },
        };
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
                char *e = escape_cstring(cases[i].in, cases[i].len);
                ck_assert_ptr_nonnull(e);
                ck_assert_str_eq(e, cases[i].out);
                free(e);
        }
}
END_TEST

START_TEST(test_escape_null_and_all_bytes) {
        char *e = escape_string(NULL), all[256];

        ck_assert_str_eq(e, "(null)");
        free(e);
        /* No byte below 0x20 or 0x7f survives raw. */
        for (int i = 0; i < 256; i++)
                all[i] = (char) i;
        e = escape_cstring(all, sizeof all);
        for (const char *p = e; *p; p++)
                ck_assert_msg((unsigned char) *p >= 0x20 && *p != 0x7f, "raw control byte 0x%02x", *p);
        free(e);
}
END_TEST

UNIT_TEST_MAIN("escape", test_escape_table, test_escape_null_and_all_bytes)
