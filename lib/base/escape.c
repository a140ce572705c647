/* escape.c: control-character escaping for text output (a process can call itself "\e[2J"). */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/escape.h"
#include "base/macro.h"

size_t utf8_sequence_len(const char *str, size_t len, uint32_t *ret_cp) {
        const unsigned char *s = (const unsigned char *) str;
        size_t n;
        uint32_t cp;

        if (len == 0)
                return 0;
        if (s[0] < 0x80) {
                if (ret_cp)
                        *ret_cp = s[0];
                return 1;
        }
        if ((s[0] & 0xe0) == 0xc0) {
                n = 2;
                cp = s[0] & 0x1f;
        } else if ((s[0] & 0xf0) == 0xe0) {
                n = 3;
                cp = s[0] & 0x0f;
        } else if ((s[0] & 0xf8) == 0xf0) {
                n = 4;
                cp = s[0] & 0x07;
        } else
                return 0;
        if (n > len)
                return 0;
        for (size_t i = 1; i < n; i++) {
                if ((s[i] & 0xc0) != 0x80)
                        return 0;
                cp = (cp << 6) | (s[i] & 0x3f);
        }
        /* Reject overlong forms, surrogates and what lies beyond U+10FFFF. */
        if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
            (cp >= 0xd800 && cp <= 0xdfff))
                return 0;
        if (ret_cp)
                *ret_cp = cp;
        return n;
}

bool unicode_is_control(uint32_t cp) {
        return cp < 0x20 || (cp >= 0x7f && cp < 0xa0) || cp == 0x061c || cp == 0x200e || cp == 0x200f ||
               (cp >= 0x2028 && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
}

/* Length of the printable UTF-8 sequence at S: as utf8_sequence_len(), but not the controls. */
static size_t utf8_printable_len(const unsigned char *s, size_t len) {
        uint32_t cp;
        size_t n = utf8_sequence_len((const char *) s, len, &cp);

        return n > 0 && unicode_is_control(cp) ? 0 : n;
}

char *escape_cstring(const char *s, size_t len) {
        static const char hex[] = "0123456789abcdef";
        const unsigned char *u = (const unsigned char *) s;
        char *out, *o;

        /* Worst case every byte becomes \xNN. */
        out = malloc(len * 4 + 1);
        if (!out)
                return NULL;
        o = out;
        for (size_t i = 0; i < len;) {
                unsigned char c = u[i];
                size_t n;

                switch (c) {
                case '\n': *o++ = '\\'; *o++ = 'n'; i++; continue;
                case '\t': *o++ = '\\'; *o++ = 't'; i++; continue;
                case '\r': *o++ = '\\'; *o++ = 'r'; i++; continue;
                case '\033': *o++ = '\\'; *o++ = 'e'; i++; continue;
                case '\\': *o++ = '\\'; *o++ = '\\'; i++; continue;
                default: break;
                }
                n = (c >= 0x20 && c != 0x7f) ? utf8_printable_len(u + i, len - i) : 0;
                if (n == 0) {
                        *o++ = '\\';
                        *o++ = 'x';
                        *o++ = hex[c >> 4];
                        *o++ = hex[c & 15];
                        i++;
                        continue;
                }
                memcpy(o, u + i, n);
                o += n;
                i += n;
        }
        *o = '\0';
        return out;
}

char *escape_string(const char *s) {
        if (!s)
                return strdup("(null)");
        return escape_cstring(s, strlen(s));
}

/* The length of S's leading run of bytes that escape_cstring() keeps as they are and that need no look at the UTF-8
 * after them: printable ASCII but the backslash. Names, paths and Python's identifiers mostly are all of it. */
static size_t plain_prefix(const char *s) {
        const unsigned char *u = (const unsigned char *) s;
        size_t n = 0;

        while (u[n] >= 0x20 && u[n] < 0x7f && u[n] != '\\')
                n++;
        return n;
}

void fputs_escaped(const char *s, FILE *f) {
        _cleanup_free_ char *e = NULL;
        size_t n;

        if (!s) {
                fputs("(null)", f);
                return;
        }
        /* A dump prints thousands of names: those with nothing to escape are written without a copy. */
        n = plain_prefix(s);
        fwrite(s, 1, n, f);
        if (s[n] == '\0')
                return;
        e = escape_string(s + n);
        fputs(e ?: "?", f);
}

void fputs_folded(const char *s, FILE *f) {
        _cleanup_free_ char *e = NULL;
        const char *p = s;

        if (!s || s[plain_prefix(s)] != '\0') {
                e = escape_string(s);
                p = e ?: "?";
        }
        for (; *p; p++)
                fputc(*p == ';' ? ':' : *p == ' ' ? '_' : *p, f);
}

void fputs_xml_n(const char *s, size_t len, FILE *f) {
        _cleanup_free_ char *e = s ? escape_cstring(s, len) : strdup("(null)");

        for (const char *p = e ?: "?"; *p; p++)
                switch (*p) {
                case '<': fputs("&lt;", f); break;
                case '>': fputs("&gt;", f); break;
                case '&': fputs("&amp;", f); break;
                case '"': fputs("&quot;", f); break;
                case '\'': fputs("&#39;", f); break;
                default: fputc(*p, f);
                }
}

void fputs_xml(const char *s, FILE *f) {
        fputs_xml_n(s, s ? strlen(s) : 0, f);
}
