/* unaligned.h: little-endian fields of a block read from another process (or a file), at any alignment. */
#pragma once

#include <stdint.h>
#include <string.h>

static inline uint64_t unaligned_read_u64(const void *p) {
        uint64_t v;

        memcpy(&v, p, sizeof v);
        return v;
}

static inline uint32_t unaligned_read_u32(const void *p) {
        uint32_t v;

        memcpy(&v, p, sizeof v);
        return v;
}

static inline int32_t unaligned_read_i32(const void *p) {
        int32_t v;

        memcpy(&v, p, sizeof v);
        return v;
}
