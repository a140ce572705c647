/* json-util.c: typed members, adders and cleanup over json-c. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "json-util.h"
#include "strv.h"

#define JSON_STR(x) #x
#define JSON_XSTR(x) JSON_STR(x)

json_object *json_member(json_object *o, const char *key, json_type type) {
        json_object *v;

        if (!o || !json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, type))
                return NULL;
        return v;
}

uint64_t json_get_u64(json_object *o, const char *key) {
        json_object *v = json_member(o, key, json_type_int);

        return v ? json_object_get_uint64(v) : 0;
}

double json_get_double(json_object *o, const char *key) {
        json_object *v = json_member(o, key, json_type_double) ?: json_member(o, key, json_type_int);

        return v ? json_object_get_double(v) : 0.0;
}

bool json_get_bool(json_object *o, const char *key) {
        json_object *v = json_member(o, key, json_type_boolean);

        return v && json_object_get_boolean(v);
}

const char *json_get_string(json_object *o, const char *key) {
        json_object *v = json_member(o, key, json_type_string);

        return v ? json_object_get_string(v) : NULL;
}

json_object *json_get_object(json_object *o, const char *key) {
        return json_member(o, key, json_type_object);
}

json_object *json_get_array(json_object *o, const char *key) {
        return json_member(o, key, json_type_array);
}

int json_dup_string(json_object *o, const char *key, char **ret) {
        const char *s = json_get_string(o, key);

        *ret = NULL;
        if (!s)
                return 0;
        *ret = strdup(s);
        return *ret ? 0 : -ENOMEM;
}

int json_require_u64(json_object *o, const char *key, uint64_t *ret) {
        json_object *v = json_member(o, key, json_type_int);

        if (!v || json_object_get_int64(v) < 0)
                return -EBADMSG;
        *ret = json_object_get_uint64(v);
        return 0;
}

int json_require_string(json_object *o, const char *key, char **ret) {
        json_object *v = NULL;
        char *s = NULL;

        if (o && json_object_object_get_ex(o, key, &v) && v) {
                if (!json_object_is_type(v, json_type_string))
                        return -EBADMSG;
                s = strdup(json_object_get_string(v));
                if (!s)
                        return -ENOMEM;
        }
        *ret = s;
        return 0;
}

int json_add(json_object *o, const char *key, json_object *v) {
        if (json_object_object_add(o, key, v) < 0) {
                json_object_put(v);
                return -ENOMEM;
        }
        return 0;
}

int json_add_string(json_object *o, const char *key, const char *s) {
        json_object *v = json_new_string_or_null(s);

        if (s && !v)
                return -ENOMEM;
        return json_add(o, key, v);
}

int json_add_u64(json_object *o, const char *key, uint64_t u) {
        json_object *v = json_object_new_uint64(u);

        return v ? json_add(o, key, v) : -ENOMEM;
}

int json_add_int64(json_object *o, const char *key, int64_t i) {
        json_object *v = json_object_new_int64(i);

        return v ? json_add(o, key, v) : -ENOMEM;
}

json_object *json_new_string_or_null(const char *s) {
        return s ? json_object_new_string(s) : NULL;
}

int json_parse_bounded(const char *text, size_t len, json_object **ret, const char **ret_error) {
        size_t containers = 0, elements = 0, depth = 0;
        bool in_string = false;
        json_tokener *tok;
        json_object *j;

        *ret_error = NULL;
        for (size_t i = 0; i < len; i++) {
                char c = text[i];

                if (in_string) {
                        if (c == '\\')
                                i++;
                        else if (c == '"')
                                in_string = false;
                        continue;
                }
                switch (c) {
                case '"':
                        in_string = true;
                        break;
                case '{':
                case '[':
                        if (++depth > JSON_DEPTH_MAX) {
                                *ret_error = "nested deeper than " JSON_XSTR(JSON_DEPTH_MAX) " levels";
                                return -EINVAL;
                        }
                        containers++;
                        elements++;
                        break;
                case '}':
                case ']':
                        if (depth > 0)
                                depth--;
                        break;
                case ',':
                        elements++;
                        break;
                default:
                        break;
                }
        }
        if (containers > JSON_CONTAINERS_MAX || containers > len / 16 + 1024) {
                *ret_error = "too many objects and arrays for its size (a decompression bomb?)";
                return -EINVAL;
        }
        if (elements > JSON_ELEMENTS_MAX || elements > len / 4 + 4096) {
                *ret_error = "too many elements for its size (a decompression bomb?)";
                return -EINVAL;
        }
        if (len > INT32_MAX) {
                *ret_error = "larger than 2 GiB";
                return -EINVAL;
        }
        tok = json_tokener_new_ex(JSON_DEPTH_MAX + 1);
        if (!tok)
                return -ENOMEM;
        j = json_tokener_parse_ex(tok, text, (int) len);
        if (!j || json_tokener_get_error(tok) != json_tokener_success) {
                enum json_tokener_error e = json_tokener_get_error(tok);

                /* json-c says "success" and returns nothing when an allocation failed. */
                if (e == json_tokener_success) {
                        json_object_put(j);
                        json_tokener_free(tok);
                        return -ENOMEM;
                }
                *ret_error = e == json_tokener_continue ? "truncated" : json_tokener_error_desc(e);
                json_object_put(j);
                json_tokener_free(tok);
                return -EINVAL;
        }
        json_tokener_free(tok);
        *ret = j;
        return 0;
}

json_object *json_new_strv(char *const *v) {
        json_object *a;

        if (!v)
                return NULL;
        a = json_object_new_array();
        for (char *const *s = v; a && *s; s++)
                if (json_object_array_add(a, json_object_new_string(*s)) < 0) {
                        json_object_put(a);
                        return NULL;
                }
        return a;
}

int json_dup_strv(json_object *o, const char *key, char ***ret) {
        json_object *a = json_member(o, key, json_type_array);
        size_t n;
        char **v;

        *ret = NULL;
        if (!a)
                return 0;
        n = json_object_array_length(a);
        v = calloc(n + 1, sizeof *v);
        if (!v)
                return -ENOMEM;
        for (size_t i = 0, k = 0; i < n; i++) {
                json_object *e = json_object_array_get_idx(a, i);
                if (!json_object_is_type(e, json_type_string))
                        continue;
                v[k] = strdup(json_object_get_string(e));
                if (!v[k++]) {
                        strv_free(v);
                        return -ENOMEM;
                }
        }
        *ret = v;
        return 0;
}
