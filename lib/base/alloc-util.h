/* alloc-util.h: growable arrays that grow geometrically (systemd's GREEDY_REALLOC shape). */
#pragma once

#include <stddef.h>

/* Make *P hold at least NEED elements of SIZE bytes. *ALLOCATED is the capacity in elements, kept by the caller
 * next to the array (0 with *P == NULL to start). Grows to twice what is needed, so that appending one element at a
 * time costs amortized O(1). Returns *P, or NULL (with *P and *ALLOCATED untouched) when out of memory or when
 * NEED × SIZE does not fit in a size_t. */
void *greedy_realloc(void **p, size_t *allocated, size_t need, size_t size);

/* GREEDY_REALLOC(array, n_allocated, need): the same for a typed array; true on success. */
#define GREEDY_REALLOC(array, allocated, need) \
        (greedy_realloc((void **) &(array), &(allocated), (need), sizeof((array)[0])) != NULL)
