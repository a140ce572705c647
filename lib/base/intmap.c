/* intmap.c: linear probing with backward-shift deletion (no tombstones), grown at 50% load. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "base/intmap.h"

static size_t slot_of(int key, size_t size) {
        uint32_t h = (uint32_t) key * 2654435761U;
        return (size_t) h & (size - 1);
}

static int grow(IntMap *m) {
        size_t ns = m->size ? m->size * 2 : 64;
        int *nk = calloc(ns, sizeof *nk);
        void **nv = calloc(ns, sizeof *nv);

        if (!nk || !nv) {
                free(nk);
                free(nv);
                return -ENOMEM;
        }
        for (size_t i = 0; i < m->size; i++)
                if (m->keys[i] > 0) {
                        size_t j = slot_of(m->keys[i], ns);
                        while (nk[j])
                                j = (j + 1) & (ns - 1);
                        nk[j] = m->keys[i];
                        nv[j] = m->values[i];
                }
        free(m->keys);
        free(m->values);
        m->keys = nk;
        m->values = nv;
        m->size = ns;
        return 0;
}

int intmap_put(IntMap *m, int key, void *value) {
        size_t i;

        if (key <= 0)
                return -EINVAL;
        if ((m->used + 1) * 2 > m->size && grow(m) < 0)
                return -ENOMEM;
        for (i = slot_of(key, m->size); m->keys[i]; i = (i + 1) & (m->size - 1))
                if (m->keys[i] == key) {
                        m->values[i] = value;
                        return 0;
                }
        m->keys[i] = key;
        m->values[i] = value;
        m->used++;
        return 0;
}

void *intmap_get(const IntMap *m, int key) {
        if (!m->size || key <= 0)
                return NULL;
        for (size_t i = slot_of(key, m->size); m->keys[i]; i = (i + 1) & (m->size - 1))
                if (m->keys[i] == key)
                        return m->values[i];
        return NULL;
}

void *intmap_remove(IntMap *m, int key) {
        size_t i, j;
        void *v;

        if (!m->size || key <= 0)
                return NULL;
        for (i = slot_of(key, m->size); m->keys[i] != key; i = (i + 1) & (m->size - 1))
                if (!m->keys[i])
                        return NULL;
        v = m->values[i];
        /* Shift later members of the probe run back into the hole so lookups never stop early. */
        for (j = (i + 1) & (m->size - 1); m->keys[j]; j = (j + 1) & (m->size - 1)) {
                size_t home = slot_of(m->keys[j], m->size);
                if ((j > i && (home <= i || home > j)) || (j < i && home <= i && home > j)) {
                        m->keys[i] = m->keys[j];
                        m->values[i] = m->values[j];
                        i = j;
                }
        }
        m->keys[i] = 0;
        m->values[i] = NULL;
        m->used--;
        return v;
}

void intmap_done(IntMap *m) {
        free(m->keys);
        free(m->values);
        *m = INTMAP_NULL;
}
