/* intmap.h: an open-addressing hash map from positive ints (pids, tids) to pointers. */
#pragma once

#include <stddef.h>

typedef struct IntMap {
        int *keys;              /* 0 marks an empty slot */
        void **values;
        size_t size;            /* a power of two, or 0 */
        size_t used;
} IntMap;

#define INTMAP_NULL ((IntMap) {})

/* KEY must be > 0. Replaces an existing value. -ENOMEM on OOM. */
int intmap_put(IntMap *m, int key, void *value);
void *intmap_get(const IntMap *m, int key);
/* Remove KEY and return its value (NULL when absent). */
void *intmap_remove(IntMap *m, int key);
void intmap_done(IntMap *m);

/* Iterate: for (size_t i = 0; i < m.size; i++) if (m.keys[i] > 0) … m.values[i] … (no put/remove meanwhile). */
