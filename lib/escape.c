/* escape.c: control-character escaping for text output (a process can call itself "\e[2J"). */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "escape.h"

/* Length of the valid UTF-8 sequence at S (at most LEN bytes), or 0 if it is not one. */
static size_t utf8_valid_len(const unsigned char *s, size_t len) {
        size_t n;
        uint32_t cp;

        if (s[0] < 0x80)
                return 1;
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
        /* Reject overlong forms, surrogates, and C1 controls (U+0080…U+009F act as terminal controls). */
        if ((n == 2 && cp < 0xa0) || (n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
            (cp >= 0xd800 && cp <= 0xdfff))
                return 0;
        return n;
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
                n = (c >= 0x20 && c != 0x7f) ? utf8_valid_len(u + i, len - i) : 0;
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
