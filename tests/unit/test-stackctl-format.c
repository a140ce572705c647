/* test-stackctl-format.c: the durations and sizes stackctl's tables show. */
#include "unit.h"
#include <stdint.h>

#include "../../client/stackctl-format.h"
#include "base/macro.h"

START_TEST(test_timespan_table) {
        static const struct {
                uint64_t usec;
                const char *out;
        } cases[] = {
                { 0, "0us" },
                { 999, "999us" },
                { 1000, "1ms" },
                { 1099, "1ms" },
                { 1100, "1.1ms" },
                { 9999, "9.9ms" },
                { 10 * 1000, "10ms" },
                { 850 * 1000, "850ms" },
                { USEC_PER_SEC, "1s" },
                { 3200 * 1000, "3.2s" },
                { 9999 * 1000, "9.9s" },                /* truncated: never "10.0s" */
                { 10 * USEC_PER_SEC, "10s" },
                { 59 * USEC_PER_SEC + 999999, "59s" },
                { 60 * USEC_PER_SEC, "1m" },
                { 310 * USEC_PER_SEC, "5m10s" },
                { 3600 * USEC_PER_SEC, "1h" },
                { 7200 * USEC_PER_SEC + 59 * USEC_PER_SEC, "2h" },
                { 7500 * USEC_PER_SEC, "2h5m" },
                { 86400 * USEC_PER_SEC, "1d" },
                { (3 * 86400 + 4 * 3600 + 59) * USEC_PER_SEC, "3d4h" },
                { UINT64_MAX, "213503982d8h" },
        };
        char buf[FORMAT_TIMESPAN_MAX];

        for (size_t i = 0; i < ELEMENTSOF(cases); i++)
                ck_assert_str_eq(format_timespan(buf, sizeof buf, cases[i].usec), cases[i].out);
}
END_TEST

START_TEST(test_bytes_table) {
        static const struct {
                uint64_t bytes;
                const char *out;
        } cases[] = {
                { 0, "0 B" },
                { 1023, "1023 B" },
                { 1024, "1.0 KiB" },
                { 1536, "1.5 KiB" },
                { 12ULL * 1024 * 1024, "12.0 MiB" },
                { 5ULL << 40, "5.0 TiB" },
                { UINT64_MAX, "16.0 EiB" },
        };
        char buf[FORMAT_BYTES_MAX];

        for (size_t i = 0; i < ELEMENTSOF(cases); i++)
                ck_assert_str_eq(format_bytes(buf, sizeof buf, cases[i].bytes), cases[i].out);
}
END_TEST

START_TEST(test_timestamp_utc) {
        char buf[FORMAT_TIMESTAMP_MAX];

        setenv("TZ", "UTC", 1);
        ck_assert_str_eq(format_timestamp(buf, sizeof buf, 1700000000ULL * USEC_PER_SEC + 999999),
                         "2023-11-14 22:13:20");
}
END_TEST

UNIT_TEST_MAIN("stackctl-format", test_timespan_table, test_bytes_table, test_timestamp_utc)
