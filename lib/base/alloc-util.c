/* alloc-util.c: growable arrays that grow geometrically. */
#include <stdint.h>
#include <stdlib.h>

#include "base/alloc-util.h"

void *greedy_realloc(void **p, size_t *allocated, size_t need, size_t size) {
        size_t n;
        void *q;

        if (*p && need <= *allocated)
                return *p;
        if (size == 0 || need > SIZE_MAX / size)
                return NULL;
        /* Twice what is needed, at least 4, unless that would overflow: then just what is needed. */
        n = need < 4 ? 4 : need;
        if (n <= SIZE_MAX / 2 / size)
                n *= 2;
        q = realloc(*p, n * size);
        if (!q)
                return NULL;
        *p = q;
        *allocated = n;
        return q;
}
