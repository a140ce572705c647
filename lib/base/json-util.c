/* json-util.c: typed members, adders and cleanup over json-c. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/escape.h"
#include "base/json-util.h"
#include "base/strv.h"

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

int json_fputs(json_object *o, int flags, FILE *f) {
        static const char hex[] = "0123456789abcdef";
        size_t len, start = 0;
        const char *text = json_object_to_json_string_length(o, flags, &len);

        if (!text)
                return -ENOMEM;
        for (size_t i = 0; i < len;) {
                uint32_t cp;
                size_t n = utf8_sequence_len(text + i, len - i, &cp);
                unsigned char c = (unsigned char) text[i];
                /* A byte that is not UTF-8 as \udcNN; a control json-c leaves raw (DEL, C1, bidi) as \uXXXX. */
                char esc[] = { '\\', 'u', 'd', 'c', hex[c >> 4], hex[c & 15] };

                if (n > 0 && !(cp >= 0x7f && unicode_is_control(cp))) {
                        i += n;
                        continue;
                }
                if (n > 0) {
                        esc[2] = hex[cp >> 12];
                        esc[3] = hex[(cp >> 8) & 15];
                        esc[4] = hex[(cp >> 4) & 15];
                        esc[5] = hex[cp & 15];
                }
                if (fwrite(text + start, 1, i - start, f) != i - start || fwrite(esc, 1, sizeof esc, f) != sizeof esc)
                        return -EIO;
                i += n ?: 1;
                start = i;
        }
        return fwrite(text + start, 1, len - start, f) == len - start ? 0 : -EIO;
}

int json_to_text(json_object *o, int flags, char **ret, size_t *ret_len) {
        _cleanup_free_ char *buf = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&buf, &size);
        int r;

        if (!f)
                return -ENOMEM;
        r = json_fputs(o, flags, f);
        if (fclose(f) != 0 || r < 0)
                return -ENOMEM; /* a memory stream fails only for memory */
        *ret = TAKE_PTR(buf);
        if (ret_len)
                *ret_len = size;
        return 0;
}

static int hex_digit(char c) {
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        if (c >= 'A' && c <= 'F')
                return c - 'A' + 10;
        return -1;
}

/* The code unit of the \uXXXX escape at P (LEN bytes from P), or -1 when there is none. */
static int32_t unicode_escape_at(const char *p, size_t len) {
        int32_t v = 0;

        if (len < 6 || p[0] != '\\' || p[1] != 'u')
                return -1;
        for (size_t i = 2; i < 6; i++) {
                int d = hex_digit(p[i]);
                if (d < 0)
                        return -1;
                v = v << 4 | d;
        }
        return v;
}

int json_text_restore_bytes(const char *text, size_t len, char **ret, size_t *ret_len) {
        _cleanup_free_ char *out = NULL;
        size_t o = 0, copied = 0;
        bool in_string = false, after_high = false;

        for (size_t i = 0; i < len; i++) {
                int32_t u;

                if (!in_string) {
                        in_string = text[i] == '"';
                        continue;
                }
                if (text[i] == '"') {
                        in_string = after_high = false;
                        continue;
                }
                if (text[i] != '\\') {
                        after_high = false;
                        continue;
                }
                u = unicode_escape_at(text + i, len - i);
                if (u < 0xdc80 || u > 0xdcff || after_high) {
                        /* Another escape; a high surrogate makes the \udcNN after it the second half of a pair. */
                        after_high = u >= 0xd800 && u <= 0xdbff;
                        i += u >= 0 ? 5 : 1;
                        continue;
                }
                if (!out) {
                        out = malloc(len + 1);
                        if (!out)
                                return -ENOMEM;
                }
                memcpy(out + o, text + copied, i - copied);
                o += i - copied;
                out[o++] = (char) (u & 0xff);
                i += 5;
                copied = i + 1;
        }
        if (out) {
                memcpy(out + o, text + copied, len - copied);
                o += len - copied;
                out[o] = '\0';
        }
        if (ret_len)
                *ret_len = out ? o : len;
        *ret = TAKE_PTR(out);
        return 0;
}

int json_parse_bounded(const char *text, size_t len, json_object **ret, const char **ret_error) {
        _cleanup_free_ char *restored = NULL;
        size_t containers = 0, elements = 0, depth = 0;
        bool in_string = false;
        json_tokener *tok;
        json_object *j;
        int r;

        *ret_error = NULL;
        r = json_text_restore_bytes(text, len, &restored, &len);
        if (r < 0)
                return r;
        if (restored)
                text = restored;
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
