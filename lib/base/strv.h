/* strv.h: NULL-terminated string vectors. */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

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

/* A deep copy of V (NULL for NULL); NULL on OOM too, so check V first. */
/* Whether S (NULL: never) is one of the strings of V (NULL: none). */
static inline bool strv_contains(char *const *v, const char *s) {
        for (size_t i = 0; s && v && v[i]; i++)
                if (strcmp(v[i], s) == 0)
                        return true;
        return false;
}

static inline char **strv_copy(char *const *v) {
        size_t n = strv_length(v);
        char **c;

        if (!v)
                return NULL;
        c = calloc(n + 1, sizeof *c);
        if (!c)
                return NULL;
        for (size_t i = 0; i < n; i++)
                if (!(c[i] = strdup(v[i])))
                        return strv_free(c);
        return c;
}

/* Append S to the NULL-terminated vector *V, taking it over (freed on failure). Vectors here are short (globs,
 * argv, error lists), so they grow by one; use GREEDY_REALLOC for long arrays. 0 or -ENOMEM. */
static inline int strv_consume(char ***v, char *s) {
        size_t n = strv_length(*v);
        char **nv;

        if (!s)
                return -ENOMEM;
        nv = realloc(*v, (n + 2) * sizeof *nv);
        if (!nv) {
                free(s);
                return -ENOMEM;
        }
        nv[n] = s;
        nv[n + 1] = NULL;
        *v = nv;
        return 0;
}

/* Append a copy of S to *V; 0 or -ENOMEM. */
static inline int strv_extend(char ***v, const char *s) {
        return strv_consume(v, strdup(s));
}

static inline void strv_freep(char ***v) {
        strv_free(*v);
}
#define _cleanup_strv_free_ __attribute__((cleanup(strv_freep)))
