/* test-parse-util.c: the bounded number parsers, including overflow and junk. */
#include "unit.h"
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "base/parse-util.h"

START_TEST(test_safe_atou64) {
        static const struct {
                const char *in;
                int ret;
                uint64_t val;
        } cases[] = {
                { "0", 0, 0 },
                { "42", 0, 42 },
                { "18446744073709551615", 0, UINT64_MAX },
                { "18446744073709551616", -ERANGE, 0 },
                { "99999999999999999999999", -ERANGE, 0 },
                { "", -EINVAL, 0 },
                { "-1", -EINVAL, 0 },
                { " 1", -EINVAL, 0 },
                { "1 ", -EINVAL, 0 },
                { "12x", -EINVAL, 0 },
                { "0x10", -EINVAL, 0 },
        };
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
                uint64_t v = 7;
                int r = safe_atou64(cases[i].in, &v);
                ck_assert_msg(r == cases[i].ret, "'%s': %d != %d", cases[i].in, r, cases[i].ret);
                if (r == 0)
                        ck_assert_uint_eq(v, cases[i].val);
                else
                        ck_assert_uint_eq(v, 7); /* untouched on failure */
        }
}
END_TEST

START_TEST(test_base0_and_pid) {
        uint64_t v;
        int pid;

        ck_assert_int_eq(safe_atou64_base("0x7fff", 0, &v), 0);
        ck_assert_uint_eq(v, 0x7fff);
        ck_assert_int_eq(safe_atou64_base("0x", 0, &v), -EINVAL);
        ck_assert_int_eq(parse_pid("1", &pid), 0);
        ck_assert_int_eq(pid, 1);
        ck_assert_int_eq(parse_pid("4194304", &pid), 0);
        ck_assert_int_eq(parse_pid("4194305", &pid), -ERANGE);
        ck_assert_int_eq(parse_pid("0", &pid), -ERANGE);
        ck_assert_int_eq(parse_pid("-5", &pid), -EINVAL);
        ck_assert_int_eq(parse_pid("99999999999999999999", &pid), -ERANGE);
        ck_assert_int_eq(safe_atoi("-2147483648", &pid), 0);
        ck_assert_int_eq(pid, INT32_MIN);
        ck_assert_int_eq(safe_atoi("2147483648", &pid), -ERANGE);
}
END_TEST

START_TEST(test_scanners) {
        const char buf[] = "  12 -7 0x1f ff x 99999999999999999999";
        const char *p = buf, *end = buf + strlen(buf);
        uint64_t u;
        int64_t i;
        char c;

        ck_assert_int_eq(scan_u64(&p, end, &u), 0);
        ck_assert_uint_eq(u, 12);
        ck_assert_int_eq(scan_i64(&p, end, &i), 0);
        ck_assert_int_eq(i, -7);
        ck_assert_int_eq(scan_hex_u64(&p, end, &u), 0);
        ck_assert_uint_eq(u, 0x1f);
        ck_assert_int_eq(scan_hex_u64(&p, end, &u), 0);
        ck_assert_uint_eq(u, 0xff);
        ck_assert_int_eq(scan_char(&p, end, &c), 0);
        ck_assert_int_eq(c, 'x');
        ck_assert_int_eq(scan_u64(&p, end, &u), -ERANGE);
        /* Never past END, even when the buffer goes on. */
        p = buf;
        ck_assert_int_eq(scan_u64(&p, buf + 3, &u), 0);
        ck_assert_uint_eq(u, 1);
        ck_assert_int_eq(scan_u64(&p, buf + 3, &u), -EINVAL);
        ck_assert_int_eq(scan_skip(&p, buf + 3, 1), -EINVAL);
}
END_TEST

START_TEST(test_scan_digits) {
        static const struct {
                const char *in;
                size_t len;             /* of IN that END allows */
                unsigned base;
                int r;
                uint64_t v;
                size_t used;
        } cases[] = {
                { "0", 1, 10, 0, 0, 1 },
                { "18446744073709551615", 20, 10, 0, UINT64_MAX, 20 },
                { "18446744073709551616", 20, 10, -ERANGE, 0, 0 },      /* 2^64 */
                { "99999999999999999999", 20, 10, -ERANGE, 0, 0 },
                { "ffffffffffffffff", 16, 16, 0, UINT64_MAX, 16 },
                { "10000000000000000", 17, 16, -ERANGE, 0, 0 },         /* 2^64 in hex */
                { "12345", 3, 10, 0, 123, 3 },                          /* stops at END */
                { "12x", 3, 10, 0, 12, 2 },                             /* stops at a non-digit */
                { "7f", 2, 10, 0, 7, 1 },
                { "-1", 2, 10, -EINVAL, 0, 0 },                         /* no sign */
                { " 1", 2, 10, -EINVAL, 0, 0 },                         /* no spaces skipped */
                { "", 0, 10, -EINVAL, 0, 0 },
                { "5", 0, 10, -EINVAL, 0, 0 },                          /* END before the digit */
        };

        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
                const char *p = cases[i].in;
                uint64_t v = 42;
                int r = scan_digits(&p, cases[i].in + cases[i].len, cases[i].base, &v);

                ck_assert_msg(r == cases[i].r, "case %zu (%s): %d", i, cases[i].in, r);
                if (r == 0) {
                        ck_assert_uint_eq(v, cases[i].v);
                        ck_assert_uint_eq((size_t) (p - cases[i].in), cases[i].used);
                } else {
                        /* A failure moves nothing and writes nothing. */
                        ck_assert_ptr_eq(p, cases[i].in);
                        ck_assert_uint_eq(v, 42);
                }
        }
}
END_TEST

UNIT_TEST_MAIN("parse-util", test_safe_atou64, test_base0_and_pid, test_scanners, test_scan_digits)
