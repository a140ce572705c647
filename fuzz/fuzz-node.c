/* fuzz-node.c: what the Node.js frame reader decodes of bytes a target process holds: V8's source position tables
 * and baseline offset tables. A process can write anything there; a bad table must give no position, never a wrong
 * read. The first byte picks: 'p' a source position table (then 4 bytes of code offset, little-endian, then the
 * table), 'b' a baseline offset table (then 4 bytes of pc offset, 1 byte the table's length, the table, and the
 * bytecodes, walked with a fixed size table of 200 bytecodes). The seeds are real tables of Node 18 and 20. */
#include "runtime/node-tables.h"
#include "fuzz.h"

#define FUZZ_BYTECODES 200U

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static uint8_t sizes[3 * FUZZ_BYTECODES];
        uint32_t offset;
        int64_t out;

        if (size < 5)
                return 0;
        memcpy(&offset, data + 1, 4);
        if (data[0] == 'p') {
                (void) node_position_for_offset(data + 5, size - 5, (int64_t) offset, &out);
                return 0;
        }
        if (data[0] == 'b' && size >= 6) {
                size_t n = MIN((size_t) data[5], size - 6);

                if (!sizes[0])
                        for (size_t i = 0; i < sizeof sizes; i++)
                                sizes[i] =
                                        (uint8_t) (i % FUZZ_BYTECODES == 199 ? 0
                                                                             : 1 + (i % 7) * (i / FUZZ_BYTECODES + 1));
                (void) node_baseline_offset(data + 6, n, data + 6 + n, size - 6 - n, sizes, FUZZ_BYTECODES, offset,
                                            &out);
        }
        return 0;
}
