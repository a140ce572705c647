/* test-json-util.c: the bounded parser refuses bombs before json-c builds them, and parses everything else. */
#include <stdlib.h>
#include <string.h>

#include "unit.h"

#include "base/json-util.h"
#include "base/macro.h"

static int parse(const char *text, const char **err) {
        json_object *j = NULL;
        int r = json_parse_bounded(text, strlen(text), &j, err);

        json_object_put(j);
        return r;
}

static char *repeat(const char *head, const char *unit, size_t n, const char *tail) {
        size_t hl = strlen(head), ul = strlen(unit), tl = strlen(tail);
        char *s = malloc(hl + ul * n + tl + 1), *p;

        ck_assert_ptr_nonnull(s);
        p = mempcpy(s, head, hl);
        for (size_t i = 0; i < n; i++)
                p = mempcpy(p, unit, ul);
        memcpy(p, tail, tl + 1);
        return s;
}

START_TEST(test_bounds) {
        _cleanup_free_ char *deep = NULL, *deep_ok = NULL, *objs = NULL, *ints = NULL, *strs = NULL;
        const char *err = NULL;

        ck_assert_int_eq(parse("{\"a\":[1,2,{\"b\":null}],\"c\":\"x\"}", &err), 0);
        ck_assert_ptr_null(err);

        /* 64 levels parse, 65 do not. */
        deep_ok = repeat("", "[", 64, "");
        deep_ok = realloc(deep_ok, 64 * 2 + 1);
        memset(deep_ok + 64, ']', 64);
        deep_ok[128] = 0;
        ck_assert_int_eq(parse(deep_ok, &err), 0);
        deep = repeat("[", "[", 64, "");
        ck_assert_int_eq(parse(deep, &err), -EINVAL);
        ck_assert_str_eq(err, "nested deeper than 64 levels");

        /* 100k empty objects in 300 KB: one container per 3 bytes is a bomb's density. */
        objs = repeat("[", "{},", 100000, "{}]");
        ck_assert_int_eq(parse(objs, &err), -EINVAL);
        ck_assert_ptr_nonnull(strstr(err, "too many objects and arrays"));
        /* 1M tiny integers: one element per 2 bytes. */
        ints = repeat("[", "0,", 1000000, "0]");
        ck_assert_int_eq(parse(ints, &err), -EINVAL);
        ck_assert_ptr_nonnull(strstr(err, "too many elements"));
        /* Braces and commas inside strings are text, not structure. */
        strs = repeat("[\"", "{[,", 100000, "\"]");
        ck_assert_int_eq(parse(strs, &err), 0);
        ck_assert_int_eq(parse("[\"\\\"{{{{\"]", &err), 0);

        ck_assert_int_eq(parse("{\"a\":", &err), -EINVAL);
        ck_assert_str_eq(err, "truncated");
        ck_assert_int_eq(parse("{\"a\" 1}", &err), -EINVAL);
        ck_assert_ptr_nonnull(err);
}
END_TEST

UNIT_TEST_MAIN("json-util", test_bounds)
