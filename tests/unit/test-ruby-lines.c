/* test-ruby-lines.c: Ruby's line table (iseq.c's succinct bit vector) decoded: every position of tables built as
 * succ_index_table_create() builds them, across the immediate part, small blocks and blocks. */
#include "unit.h"
#include <errno.h>
#include <string.h>

#include "runtime/ruby.h"

#define IMM 54U
#define BLOCK_BITS 512U
#define BLOCK_BYTES 80U

/* The table over POSITIONS[0..N) (sorted, the first 0), for positions below MAX, as Ruby lays it out: 9 ranks of 7
 * bits a word below 54; past it, per block of 512 positions, its rank (u32, padded), 7 small-block ranks of 9 bits
 * (from the second), and 8 words of bits. */
static size_t build(const unsigned *positions, size_t n, unsigned max, uint8_t *out, size_t size) {
        size_t blocks = max > IMM ? (max - IMM + BLOCK_BITS - 1) / BLOCK_BITS : 0, bytes = 48 + blocks * BLOCK_BYTES;

        ck_assert_uint_le(bytes, size);
        memset(out, 0, bytes);
        for (unsigned x = 0; x < IMM && x < max; x++) {
                uint64_t rank = 0, w;

                for (size_t j = 0; j < n; j++)
                        rank += positions[j] <= x;
                memcpy(&w, out + (x / 9) * 8, 8);
                w |= rank << ((x % 9) * 7);
                memcpy(out + (x / 9) * 8, &w, 8);
        }
        for (size_t b = 0; b < blocks; b++) {
                uint8_t *blk = out + 48 + b * BLOCK_BYTES;
                uint32_t base = 0;
                uint64_t small = 0, bits[8] = { 0 };

                for (size_t j = 0; j < n; j++) {
                        if (positions[j] < IMM + b * BLOCK_BITS)
                                base++;
                        else if (positions[j] < IMM + (b + 1) * BLOCK_BITS) {
                                unsigned bit = positions[j] - IMM - (unsigned) b * BLOCK_BITS;
                                bits[bit / 64] |= 1ULL << (bit % 64);
                        }
                }
                for (unsigned s = 1, count = 0; s < 8; s++) {
                        count += (unsigned) __builtin_popcountll(bits[s - 1]);
                        small |= (uint64_t) count << ((s - 1) * 9);
                }
                memcpy(blk, &base, 4);
                memcpy(blk + 8, &small, 8);
                memcpy(blk + 16, bits, sizeof bits);
        }
        return bytes;
}

START_TEST(test_every_position_finds_its_entry) {
        static const unsigned positions[] = { 0, 3, 7, 8, 9, 53, 54, 55, 117, 118, 119, 565, 566, 1000, 1077, 1078,
                                              1079, 1590, 1599, 2000 };
        const size_t n = ELEMENTSOF(positions);
        static uint8_t table[48 + 5 * BLOCK_BYTES];
        unsigned max = 2100;
        size_t bytes = build(positions, n, max, table, sizeof table);

        for (unsigned x = 0; x < max; x++) {
                uint64_t offset;
                size_t part = ruby_succ_index_part(x, &offset);
                uint32_t index, want = 0;

                for (size_t j = 0; j < n; j++)
                        want += positions[j] <= x;
                ck_assert_uint_le(offset + part, bytes);
                ck_assert_int_eq(ruby_succ_index_lookup(table + offset, part, x, &index), 0);
                ck_assert_msg(index == want - 1, "position %u: entry %u, want %u", x, index, want - 1);
        }
}
END_TEST

START_TEST(test_short_parts_are_refused) {
        uint8_t part[BLOCK_BYTES] = { 0 };
        uint32_t index;

        /* Rank 0: no entry at or before the position (a table that does not start at 0). */
        ck_assert_int_eq(ruby_succ_index_lookup(part, 48, 5, &index), -EBADMSG);
        ck_assert_int_eq(ruby_succ_index_lookup(part, 47, 5, &index), -EBADMSG);
        ck_assert_int_eq(ruby_succ_index_lookup(part, BLOCK_BYTES - 1, 600, &index), -EBADMSG);
}
END_TEST

UNIT_TEST_MAIN("ruby-lines", test_every_position_finds_its_entry, test_short_parts_are_refused)
