/* test-token-file.c: the bearer token file as stackwatchd and stackctl read it, hostile contents included. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "unit.h"

#include "base/macro.h"
#include "serve/api.h"
#include "serve/token-file.h"

static char *write_tmp(const char *data, size_t len) {
        char *path = strdup("/tmp/test-token-XXXXXX");
        int fd;

        ck_assert_ptr_nonnull(path);
        fd = mkstemp(path);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(write(fd, data, len), (ssize_t) len);
        close(fd);
        return path;
}

START_TEST(test_token_file) {
        char longest[API_TOKEN_MAX + 2], too_long[API_TOKEN_MAX + 3];
        static const struct {
                const char *data;
                int ret;
                const char *token;
        } cases[] = {
                { "s3cret\n", 0, "s3cret" }, { "s3cret", 0, "s3cret" }, { "s3cret \r\n\n", 0, "s3cret" },
                { "", -ENODATA, NULL }, { "\n\n", -ENODATA, NULL }, { "two words\n", -EINVAL, NULL },
                { "tab\there", -EINVAL, NULL }, { "esc\x1b[2J", -EINVAL, NULL }, { "a\nb\n", -EINVAL, NULL },
                { "del\x7f", -EINVAL, NULL },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_free_ char *path = write_tmp(cases[i].data, strlen(cases[i].data)), *tok = NULL;
                int r = token_file_read(path, &tok);

                ck_assert_msg(r == cases[i].ret, "case %zu: %d", i, r);
                if (r == 0)
                        ck_assert_str_eq(tok, cases[i].token);
                else
                        ck_assert_ptr_nonnull(token_file_strerror(r));
                unlink(path);
        }

        memset(longest, 'x', API_TOKEN_MAX);
        longest[API_TOKEN_MAX] = '\n';
        memset(too_long, 'x', API_TOKEN_MAX + 1);
        too_long[API_TOKEN_MAX + 1] = '\n';
        {
                _cleanup_free_ char *p1 = write_tmp(longest, API_TOKEN_MAX + 1), *p2 = write_tmp(too_long, API_TOKEN_MAX + 2),
                                    *tok = NULL, *tok2 = NULL;
                ck_assert_int_eq(token_file_read(p1, &tok), 0);
                ck_assert_uint_eq(strlen(tok), API_TOKEN_MAX);
                ck_assert_int_eq(token_file_read(p2, &tok2), -E2BIG);
                unlink(p1);
                unlink(p2);
        }
        {
                char *tok = NULL;
                ck_assert_int_eq(token_file_read("/nonexistent/token", &tok), -ENOENT);
                ck_assert_ptr_null(token_file_strerror(-ENOENT));
        }
}
END_TEST

/* The daemon's side: one token, or two during a rotation; never a third, and each line as strict as the one. */
START_TEST(test_token_file_read_all) {
        static const struct {
                const char *data;
                int ret;
                const char *tokens[TOKEN_FILE_TOKENS_MAX];
        } cases[] = {
                { "s3cret\n", 0, { "s3cret" } },
                { "old-one\nnew-one\n", 0, { "old-one", "new-one" } },
                { "old-one \r\n\nnew-one\r\n\n", 0, { "old-one", "new-one" } },
                { "\n\n", -ENODATA, {} },
                { "a\nb\nc\n", -ETOOMANYREFS, {} },
                { "good\ntwo words\n", -EINVAL, {} },
                { "good\nesc\x1b[2J\n", -EINVAL, {} },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_free_ char *path = write_tmp(cases[i].data, strlen(cases[i].data));
                char *tok[TOKEN_FILE_TOKENS_MAX];
                size_t n = 99;
                int r = token_file_read_all(path, tok, &n);

                ck_assert_msg(r == cases[i].ret, "case %zu: %d", i, r);
                for (size_t k = 0; k < TOKEN_FILE_TOKENS_MAX; k++) {
                        if (r == 0 && cases[i].tokens[k])
                                ck_assert_str_eq(tok[k], cases[i].tokens[k]);
                        else
                                ck_assert_ptr_null(tok[k]);
                        free(tok[k]);
                }
                if (r == 0)
                        ck_assert_uint_eq(n, cases[i].tokens[1] ? 2 : 1);
                else
                        ck_assert_ptr_nonnull(token_file_strerror(r));
                unlink(path);
        }
}
END_TEST

UNIT_TEST_MAIN("token-file", test_token_file, test_token_file_read_all)
