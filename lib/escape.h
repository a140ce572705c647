/* escape.h: make process-supplied strings safe to print on a terminal. */
#pragma once

#include <stddef.h>

/* Return a malloc'd copy of the first LEN bytes of S with control characters, DEL, backslash and bytes that
 * are not valid UTF-8 written as C escapes (\n, \t, \e, \\, \xNN); printable UTF-8 is kept. NULL on OOM. */
char *escape_cstring(const char *s, size_t len);
/* Same for a NUL-terminated string; NULL in gives "(null)" out. */
char *escape_string(const char *s);
