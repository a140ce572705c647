/* json-util.h: the small json-c helpers every module used to write again: typed members, adders, cleanup. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <json-c/json.h>

#include "base/macro.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(json_object *, json_object_put);

/* Member KEY of O when it has TYPE; NULL when O is NULL, KEY is missing, or of another type. */
json_object *json_member(json_object *o, const char *key, json_type type);

/* Lenient readers, for documents that may come from another version: a default when missing or of another
 * type (0, 0.0, false, NULL). */
uint64_t json_get_u64(json_object *o, const char *key);
double json_get_double(json_object *o, const char *key);   /* a double or an integer */
bool json_get_bool(json_object *o, const char *key);
const char *json_get_string(json_object *o, const char *key);
json_object *json_get_object(json_object *o, const char *key);
json_object *json_get_array(json_object *o, const char *key);
/* A copy of string member KEY into *RET (NULL when missing or of another type); -ENOMEM. */
int json_dup_string(json_object *o, const char *key, char **ret);
/* A copy of the strings of array member KEY into a NULL-terminated *RET (NULL when KEY is missing or not an array;
 * elements that are not strings are skipped); -ENOMEM. */
int json_dup_strv(json_object *o, const char *key, char ***ret);

/* Strict readers, for headers we wrote ourselves: -EBADMSG when missing or of another type. */
int json_require_u64(json_object *o, const char *key, uint64_t *ret);          /* a non-negative integer */
int json_require_string(json_object *o, const char *key, char **ret);          /* missing or null: NULL */

/* Add V under KEY, taking V over (freed on failure); a NULL V is JSON null. -ENOMEM. */
int json_add(json_object *o, const char *key, json_object *v);
/* Add S as a string, or null when S is NULL; -ENOMEM. */
int json_add_string(json_object *o, const char *key, const char *s);
int json_add_u64(json_object *o, const char *key, uint64_t v);
int json_add_int64(json_object *o, const char *key, int64_t v);
/* Bounds on a document from outside (a stored snapshot, a reply): json-c builds an object of a few hundred bytes
 * per "{}" and tens per "0", so a few kilobytes of zstd can become gigabytes of tree. Real snapshots hold one
 * container per ~170 bytes and one element per ~18 (2,000 threads × 64 frames: 154k and 1.5M in 25.7 MB). */
#define JSON_DEPTH_MAX 64
#define JSON_CONTAINERS_MAX (1024U * 1024U)
#define JSON_ELEMENTS_MAX (8U * 1024U * 1024U)

/* Parse LEN bytes of TEXT (its \udcNN escapes read as the bytes, see json_to_text()) into *RET after a linear
 * pre-scan that refuses, before json-c allocates anything, more nesting than JSON_DEPTH_MAX, more containers than
 * JSON_CONTAINERS_MAX or one per 16 bytes (plus 1024), and more elements than JSON_ELEMENTS_MAX or one per 4 bytes
 * (plus 4096). -EINVAL with *RET_ERROR saying why (a static string), -ENOMEM. */
int json_parse_bounded(const char *text, size_t len, json_object **ret, const char **ret_error);

/* JSON text of O (json-c's FLAGS) that is UTF-8 whatever its strings hold, and inert on a terminal. json-c copies
 * a string's bytes as they are, and a process names itself with any bytes: each byte that is not part of
 * well-formed UTF-8, 0xNN, is written as the escape \udcNN instead, a lone low surrogate as Python's
 * "surrogateescape" writes it (in Python, s.encode("utf-8", "surrogateescape") gives the bytes back), and the
 * controls json-c leaves raw (DEL, C1, bidi, see unicode_is_control()) as their \uXXXX. json_parse_bounded()
 * turns the \udcNN escapes back into the bytes. json_to_text() returns a malloc'd string (-ENOMEM); json_fputs()
 * writes to F (-EIO, -ENOMEM). */
int json_to_text(json_object *o, int flags, char **ret, size_t *ret_len);
int json_fputs(json_object *o, int flags, FILE *f);
/* The bytes escaped by json_to_text() restored in a copy of TEXT (LEN bytes): *RET is NULL when there were none
 * (use TEXT as it is, *RET_LEN is LEN), else a malloc'd NUL-terminated copy of *RET_LEN bytes. -ENOMEM. */
int json_text_restore_bytes(const char *text, size_t len, char **ret, size_t *ret_len);

/* An array of the strings of V, or NULL (JSON null when added) for a NULL V or on OOM. */
json_object *json_new_strv(char *const *v);
/* A new string, or NULL (JSON null when added) for a NULL S. */
json_object *json_new_string_or_null(const char *s);
