/* test-escape.c: what a hostile process name turns into on a terminal. */
#include "unit.h"
#include <stdlib.h>
#include <string.h>

#include "base/alloc-util.h"
#include "base/escape.h"
#include "base/json-util.h"
#include "base/macro.h"

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
                { "exe\xe2\x80\xaetxt", 9, "exe\\xe2\\x80\\xaetxt" },  /* U+202E turns the rest around */
                { "a\xe2\x80\xa8" "b", 5, "a\\xe2\\x80\\xa8b" },       /* U+2028, a line separator */
                { "\xe2\x80\x99", 3, "\xe2\x80\x99" },                /* U+2019, a quote, stays */
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

/* fputs_escaped() and fputs_folded() write what escape_string() gives (folded: ';' and ' ' replaced), whether the
 * string is plain (written without a copy) or turns unplain anywhere. */
START_TEST(test_fputs_escaped_same_as_escape_string) {
        static const char *const cases[] = {
                "", "plain", "/usr/lib/python3.11/threading.py", "Thread._bootstrap_inner", "a b;c",
                "\033[2J", "tail\n", "back\\slash", "caf\xc3\xa9", "x\xc3", "ok\xe2\x80\xaetxt", "\x7f", NULL,
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_free_ char *e = escape_string(cases[i]), *out = NULL, *folded = NULL;
                size_t n = 0, m = 0;
                FILE *f = open_memstream(&out, &n), *g = open_memstream(&folded, &m);

                ck_assert_ptr_nonnull(f);
                ck_assert_ptr_nonnull(g);
                fputs_escaped(cases[i], f);
                fputs_folded(cases[i], g);
                ck_assert_int_eq(fclose(f), 0);
                ck_assert_int_eq(fclose(g), 0);
                ck_assert_str_eq(out, e);
                for (char *p = e; *p; p++)
                        *p = *p == ';' ? ':' : *p == ' ' ? '_' : *p;
                ck_assert_str_eq(folded, e);
        }
}
END_TEST

/* Invalid bytes in JSON text become \udcNN, which json_parse_bounded() turns back into the bytes. */
START_TEST(test_json_bytes_round_trip) {
        static const char raw[] = "c\033\n\xff\xfe;\x07 \\ caf\xc3\xa9 \xed\xa0\x80 \xc3";
        _cleanup_(json_object_putp) json_object *o = json_object_new_object(), *back = NULL;
        _cleanup_free_ char *text = NULL;
        const char *why = NULL;
        size_t len;

        ck_assert_int_eq(json_add_string(o, "comm", raw), 0);
        /* A pair whose second half is in the \udcNN range stays a pair; an escaped backslash is no escape. */
        ck_assert_int_eq(json_add_string(o, "pair", "\xf0\x90\x82\x80"), 0);
        ck_assert_int_eq(json_to_text(o, JSON_C_TO_STRING_PLAIN, &text, &len), 0);
        ck_assert_uint_eq(strlen(text), len);
        for (size_t i = 0, n; i < len; i += n) {
                n = utf8_sequence_len(text + i, len - i, NULL);
                ck_assert_msg(n > 0, "invalid UTF-8 at %zu of %s", i, text);
        }
        ck_assert_ptr_nonnull(strstr(text, "\\udcff\\udcfe"));
        ck_assert_ptr_nonnull(strstr(text, "\\udced\\udca0\\udc80"));
        ck_assert_int_eq(json_parse_bounded(text, len, &back, &why), 0);
        ck_assert_str_eq(json_get_string(back, "comm"), raw);
        ck_assert_str_eq(json_get_string(back, "pair"), "\xf0\x90\x82\x80");
        json_object_put(back);
        back = NULL;
        {
                static const char in[] = "{\"a\":\"\\ud800\\udc80\",\"b\":\"\\\\udcff\",\"c\":\"\\udcff\"}";
                ck_assert_int_eq(json_parse_bounded(in, strlen(in), &back, &why), 0);
                ck_assert_str_eq(json_get_string(back, "a"), "\xf0\x90\x82\x80");
                ck_assert_str_eq(json_get_string(back, "b"), "\\udcff");
                ck_assert_str_eq(json_get_string(back, "c"), "\xff");
        }
}
END_TEST

UNIT_TEST_MAIN("escape", test_escape_table, test_escape_null_and_all_bytes,
               test_fputs_escaped_same_as_escape_string, test_json_bytes_round_trip)
