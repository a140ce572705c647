/* strv.h: NULL-terminated string vectors. */
#pragma once

#include <stdlib.h>

static inline char **strv_free(char **v) {
        if (v) {
                for (char **s = v; *s; s++)
                        free(*s);
                free(v);
        }
        return NULL;
}

static inline size_t strv_length(char *const *v) {
        size_t n = 0;
        while (v && v[n])
                n++;
        return n;
}

static inline void strv_freep(char ***v) {
        strv_free(*v);
}
#define _cleanup_strv_free_ __attribute__((cleanup(strv_freep)))
