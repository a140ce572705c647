/* escape.h: make process-supplied strings safe to print on a terminal. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Return a malloc'd copy of the first LEN bytes of S with control characters, DEL, backslash and bytes that
 * are not valid UTF-8 written as C escapes (\n, \t, \e, \\, \xNN); printable UTF-8 is kept. C1 controls
 * (U+0080…U+009F), the bidirectional controls and U+2028/U+2029 are written as the \xNN of their bytes. Every
 * escape is reversible: unescaping gives S's bytes back. NULL on OOM. */
char *escape_cstring(const char *s, size_t len);
/* Same for a NUL-terminated string; NULL in gives "(null)" out. */
char *escape_string(const char *s);

/* escape_string(S) written to F ("?" on OOM). */
void fputs_escaped(const char *s, FILE *f);
/* The same as a name in a folded stack, whose frames are separated by ';' and which ends with " count": those bytes
 * become ':' and '_'. */
void fputs_folded(const char *s, FILE *f);

/* Whether code point CP acts rather than shows: C0 and C1 controls and DEL (U+0080…U+009F hold CSI and OSC for a
 * terminal), the bidirectional controls (U+202E turns "exe.txt" around), and the line and paragraph separators
 * U+2028/U+2029 that some viewers break lines at. */
bool unicode_is_control(uint32_t cp);
/* Length of the well-formed UTF-8 sequence at S (at most LEN bytes), its code point in *RET_CP (may be NULL); 0
 * when the bytes there are not one (a stray byte, an overlong form, a surrogate, beyond U+10FFFF, cut short). */
size_t utf8_sequence_len(const char *s, size_t len, uint32_t *ret_cp);

/* The first LEN bytes of S written to F as XML text or an attribute value: escape_cstring()'s escapes first (control
 * characters, which XML 1.0 cannot hold, and bytes that are not UTF-8 become visible \xNN), then <, >, &, " and '
 * as character references. No name a process gives itself can open an element or close an attribute. */
void fputs_xml_n(const char *s, size_t len, FILE *f);
/* The same for a NUL-terminated string; NULL writes "(null)". */
void fputs_xml(const char *s, FILE *f);
