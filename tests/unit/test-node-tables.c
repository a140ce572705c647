/* test-node-tables.c: V8's source position tables as Node 18 (V8 10.2) and Node 20 (V8 11.3) hold them, with the
 * position of each bytecode as V8 itself prints it, and baseline offset tables: what the JavaScript frame reader
 * decodes out of a target's memory. Tables that do not decode give no position, never a guess. */
#include "unit.h"
#include <errno.h>
#include <inttypes.h>

#include "base/macro.h"
#include "runtime/node-tables.h"

typedef struct PositionCase {
        int64_t offset;         /* a bytecode's offset */
        int64_t position;       /* its script offset, as --print-bytecode shows it (the last "S>" or "E>" so far) */
} PositionCase;

/* The function below, as each Node compiled it; its source position table read from the running process (the
 * BytecodeArray's), the positions from `node --print-bytecode --print-bytecode-filter=sample`:
 *
 *     const fs = require('fs');
 *     function sample(items, limit) {
 *       let total = 0;
 *       for (const x of items) {
 *         if (x > limit) total += x;
 *         else total -= x;
 *       }
 *       const squares = items.map((y) => y * y);
 *       return fs.readFileSync(process.argv[2], 'utf8') +
 *              total + squares.length;
 *     }
 */
static const uint8_t table_node18[] = {
        0x01, 0xa8, 0x01, 0x02, 0x7c, 0x04, 0x54, 0x30, 0x13, 0x38, 0x00, 0x06,
        0x48, 0x05, 0x18, 0x0a, 0x24, 0x05, 0x24, 0x12, 0x30, 0x05, 0x24, 0x0f,
        0xa7, 0x02, 0x7e, 0xa4, 0x03, 0x15, 0x00, 0x0c, 0x54, 0x0b, 0x28, 0x0b,
        0x34, 0x09, 0x20, 0x0f, 0x10, 0x0f, 0x63, 0x13, 0x98, 0x01, 0x09, 0x6c,
        0x09, 0x27, 0x06, 0x44,
};

static const PositionCase cases_node18[] = {
        { 0, 72 }, { 1, 72 }, { 2, 93 }, { 6, 93 }, { 8, 93 }, { 13, 93 },
        { 14, 93 }, { 18, 93 }, { 19, 93 }, { 20, 93 }, { 21, 93 }, { 24, 93 },
        { 25, 93 }, { 26, 88 }, { 30, 88 }, { 31, 88 }, { 33, 88 }, { 38, 88 },
        { 42, 88 }, { 44, 88 }, { 48, 88 }, { 49, 88 }, { 50, 88 }, { 51, 88 },
        { 54, 88 }, { 57, 106 }, { 59, 112 }, { 62, 112 }, { 64, 121 }, { 66, 130 },
        { 69, 130 }, { 72, 130 }, { 73, 130 }, { 75, 142 }, { 77, 151 }, { 80, 151 },
        { 83, 151 }, { 84, 77 }, { 87, 77 }, { 89, 77 }, { 90, 77 }, { 91, 77 },
        { 93, 77 }, { 94, 77 }, { 95, 77 }, { 96, 77 }, { 97, 77 }, { 98, 77 },
        { 99, 77 }, { 101, 77 }, { 103, 77 }, { 106, 77 }, { 110, 77 }, { 112, 77 },
        { 113, 77 }, { 117, 77 }, { 119, 77 }, { 120, 77 }, { 125, 77 }, { 127, 77 },
        { 128, 77 }, { 129, 77 }, { 131, 77 }, { 133, 77 }, { 135, 77 }, { 136, 77 },
        { 138, 77 }, { 139, 77 }, { 140, 77 }, { 142, 77 }, { 144, 77 }, { 146, 77 },
        { 147, 182 }, { 151, 182 }, { 152, 182 }, { 156, 182 }, { 157, 182 }, { 162, 182 },
        { 163, 203 }, { 165, 203 }, { 167, 203 }, { 168, 213 }, { 172, 213 }, { 173, 226 },
        { 176, 226 }, { 177, 234 }, { 181, 234 }, { 182, 234 }, { 184, 238 }, { 187, 238 },
        { 188, 238 }, { 190, 238 }, { 191, 213 }, { 197, 213 }, { 198, 213 }, { 200, 251 },
        { 203, 251 }, { 204, 278 }, { 208, 268 }, { 211, 285 },
};

static const uint8_t table_node20[] = {
        0x01, 0xa8, 0x01, 0x02, 0x7c, 0x04, 0x54, 0x22, 0x13, 0x38, 0x00, 0x06,
        0x48, 0x05, 0x18, 0x0a, 0x24, 0x05, 0x24, 0x12, 0x30, 0x05, 0x24, 0x0f,
        0xa7, 0x02, 0x80, 0x01, 0xa4, 0x03, 0x15, 0x00, 0x0c, 0x54, 0x0b, 0x28,
        0x0b, 0x34, 0x09, 0x20, 0x0f, 0x10, 0x0f, 0x63, 0x13, 0x98, 0x01, 0x09,
        0x6c, 0x09, 0x27, 0x06, 0x44,
};

static const PositionCase cases_node20[] = {
        { 0, 72 }, { 1, 72 }, { 2, 93 }, { 6, 93 }, { 7, 93 }, { 11, 93 },
        { 12, 93 }, { 13, 93 }, { 14, 93 }, { 17, 93 }, { 18, 93 }, { 19, 88 },
        { 23, 88 }, { 24, 88 }, { 26, 88 }, { 31, 88 }, { 35, 88 }, { 37, 88 },
        { 41, 88 }, { 42, 88 }, { 43, 88 }, { 44, 88 }, { 47, 88 }, { 50, 106 },
        { 52, 112 }, { 55, 112 }, { 57, 121 }, { 59, 130 }, { 62, 130 }, { 65, 130 },
        { 66, 130 }, { 68, 142 }, { 70, 151 }, { 73, 151 }, { 76, 151 }, { 77, 77 },
        { 81, 77 }, { 83, 77 }, { 84, 77 }, { 85, 77 }, { 87, 77 }, { 88, 77 },
        { 89, 77 }, { 90, 77 }, { 91, 77 }, { 92, 77 }, { 93, 77 }, { 95, 77 },
        { 97, 77 }, { 100, 77 }, { 104, 77 }, { 106, 77 }, { 107, 77 }, { 111, 77 },
        { 113, 77 }, { 114, 77 }, { 119, 77 }, { 121, 77 }, { 122, 77 }, { 123, 77 },
        { 125, 77 }, { 127, 77 }, { 129, 77 }, { 130, 77 }, { 132, 77 }, { 133, 77 },
        { 134, 77 }, { 136, 77 }, { 138, 77 }, { 140, 77 }, { 141, 182 }, { 145, 182 },
        { 146, 182 }, { 150, 182 }, { 151, 182 }, { 156, 182 }, { 157, 203 }, { 159, 203 },
        { 161, 203 }, { 162, 213 }, { 166, 213 }, { 167, 226 }, { 170, 226 }, { 171, 234 },
        { 175, 234 }, { 176, 234 }, { 178, 238 }, { 181, 238 }, { 182, 238 }, { 184, 238 },
        { 185, 213 }, { 191, 213 }, { 192, 213 }, { 194, 251 }, { 197, 251 }, { 198, 278 },
        { 202, 268 }, { 205, 285 },
};

static void check_positions(const uint8_t *table, size_t n, const PositionCase *cases, size_t n_cases) {
        for (size_t i = 0; i < n_cases; i++) {
                int64_t position = -42;
                int r = node_position_for_offset(table, n, cases[i].offset, &position);

                ck_assert_msg(r == 0 && position == cases[i].position,
                              "offset %" PRId64 ": %d, position %" PRId64 ", V8 says %" PRId64, cases[i].offset, r,
                              position, cases[i].position);
        }
}

START_TEST(test_positions_node18) {
        check_positions(table_node18, sizeof table_node18, cases_node18, ELEMENTSOF(cases_node18));
}
END_TEST

START_TEST(test_positions_node20) {
        int64_t position;

        check_positions(table_node20, sizeof table_node20, cases_node20, ELEMENTSOF(cases_node20));
        /* The frame of sample() blocked in readFileSync(): its bytecode offset 185, the call's position. */
        ck_assert_int_eq(node_position_for_offset(table_node20, sizeof table_node20, 185, &position), 0);
        ck_assert_int_eq(position, 213);
}
END_TEST

START_TEST(test_positions_malformed) {
        int64_t position = -42;

        /* Cut inside an entry (the function entry's is whole in 3 bytes), empty, a continuation byte at the end: no
         * position. */
        ck_assert_int_eq(node_position_for_offset(table_node20, 3, 100, &position), 0);
        ck_assert_int_eq(position, 41);
        ck_assert_int_eq(node_position_for_offset(table_node20, 4, 100, &position), -EBADMSG);
        ck_assert_int_eq(node_position_for_offset(table_node20, 0, 0, &position), -ENOENT);
        static const uint8_t stray[] = { 0x02, 0x80 };
        ck_assert_int_eq(node_position_for_offset(stray, sizeof stray, 4, &position), -EBADMSG);
        /* An offset before the first entry. */
        static const uint8_t late[] = { 0x14, 0x08 }; /* code offset 9, script offset 1 */
        ck_assert_int_eq(node_position_for_offset(late, sizeof late, 3, &position), -ENOENT);
        ck_assert_int_eq(node_position_for_offset(late, sizeof late, 9, &position), 0);
        ck_assert_int_eq(position, 1);
        /* An external position (bit 0), and one inside an inlined function (its id + 1 at bit 31). */
        static const uint8_t external[] = { 0x02, 0x0a };
        ck_assert_int_eq(node_position_for_offset(external, sizeof external, 4, &position), -EBADMSG);
        static const uint8_t inlined[] = { 0x02, 0x88, 0x80, 0x80, 0x80, 0x10 };
        ck_assert_int_eq(node_position_for_offset(inlined, sizeof inlined, 4, &position), -EXDEV);
}
END_TEST

/* Sizes for a made-up V8 of 8 bytecodes: [0, 4) the prefixes, 4 one byte, 5 two, 6 three (five with a Wide prefix's
 * doubled operands, nine with ExtraWide's), 7 unknown (size 0). */
static const uint8_t sizes8[3][8] = {
        { 1, 1, 1, 1, 1, 2, 3, 0 },
        { 1, 1, 1, 1, 1, 3, 5, 0 },
        { 1, 1, 1, 1, 1, 5, 9, 0 },
};

START_TEST(test_baseline_offsets) {
        /* Bytecodes: @0 op4, @1 op5 x, @3 Wide op6 x x x x, @9 op6 x x; a 16-byte prologue, then machine code of
         * 8, 12, 20 and 4 bytes. */
        static const uint8_t codes[] = { 4, 5, 0, 0, 6, 0, 0, 0, 0, 6, 0, 0 };
        static const uint8_t table[] = { 16, 8, 12, 20, 4 };
        static const struct {
                uint64_t pc;
                int64_t offset;
        } cases[] = {
                { 0, -1 }, { 1, -1 }, { 16, -1 }, { 17, 0 }, { 24, 0 }, { 25, 1 }, { 36, 1 }, { 37, 3 },
                { 56, 3 }, { 57, 9 }, { 60, 9 },
        };
        int64_t offset;

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                offset = -42;
                ck_assert_msg(node_baseline_offset(table, sizeof table, codes, sizeof codes, &sizes8[0][0], 8,
                                                   cases[i].pc, &offset) == 0 &&
                                      offset == cases[i].offset,
                              "pc +%" PRIu64 ": bytecode %" PRId64 ", expected %" PRId64, cases[i].pc, offset,
                              cases[i].offset);
        }
        /* Past the code the table covers; bytecodes that end first; an unknown bytecode; a cut table. */
        ck_assert_int_eq(node_baseline_offset(table, sizeof table, codes, sizeof codes, &sizes8[0][0], 8, 61, &offset),
                         -ERANGE);
        ck_assert_int_eq(node_baseline_offset(table, sizeof table, codes, 3, &sizes8[0][0], 8, 57, &offset), -ERANGE);
        static const uint8_t unknown[] = { 4, 7 };
        ck_assert_int_eq(node_baseline_offset(table, sizeof table, unknown, sizeof unknown, &sizes8[0][0], 8, 30,
                                              &offset),
                         -EBADMSG);
        static const uint8_t cut[] = { 16, 0x88 };
        ck_assert_int_eq(node_baseline_offset(cut, sizeof cut, codes, sizeof codes, &sizes8[0][0], 8, 30, &offset),
                         -EBADMSG);
        static const uint8_t opcode_past[] = { 4, 200 };
        ck_assert_int_eq(node_baseline_offset(table, sizeof table, opcode_past, sizeof opcode_past, &sizes8[0][0], 8,
                                              30, &offset),
                         -EBADMSG);
}
END_TEST

UNIT_TEST_MAIN("node-tables", test_positions_node18, test_positions_node20, test_positions_malformed,
               test_baseline_offsets)
