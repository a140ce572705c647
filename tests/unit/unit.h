/* unit.h: the one main() every Check suite here shares. */
#pragma once

#include <check.h>

/* Run the tests TESTS (the names START_TEST defined) as suite NAME; exit status 0 when all pass. */
#define UNIT_TEST_MAIN(name, ...)                                                       \
        int main(void) {                                                                \
                const TTest *tests[] = { __VA_ARGS__ };                                 \
                Suite *s = suite_create(name);                                          \
                TCase *tc = tcase_create("core");                                       \
                SRunner *sr;                                                            \
                int failed;                                                             \
                                                                                        \
                for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++)             \
                        _tcase_add_test(tc, tests[i], 0, 0, 0, 1);                      \
                suite_add_tcase(s, tc);                                                 \
                sr = srunner_create(s);                                                 \
                srunner_run_all(sr, CK_NORMAL);                                         \
                failed = srunner_ntests_failed(sr);                                     \
                srunner_free(sr);                                                       \
                return failed ? 1 : 0;                                                  \
        }
