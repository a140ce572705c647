/* fuzz-python.c: what the Python frame reader parses of bytes a target process holds: a code object's line table
 * (every form: lnotab, the 3.10 linetable, the 3.11+ location table) and 3.13's _Py_DebugOffsets. A process can
 * write anything there; a bad table must give no line, never a wrong read. The first byte picks: 'n' lnotab, 't'
 * 3.10 linetable, 'l' location table (then 4 bytes of first line and 4 of byte offset, little-endian, then the
 * table), 'd' a _PyRuntime head. The seeds are real tables and a real 3.13.0 head. */
#include "runtime/python-lines.h"
#include "runtime/python-offsets.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        PyLineTable kind;
        int32_t first;
        uint32_t offset;

        if (size < 1)
                return 0;
        if (data[0] == 'd') {
                PyOffsets o;
                uint8_t head[PY_DEBUG_OFFSETS_BYTES] = {};

                memcpy(head, data + 1, MIN(size - 1, sizeof head));
                (void) py_offsets_from_debug(head, MIN(size - 1, sizeof head), &o);
                return 0;
        }
        switch (data[0]) {
        case 'n':
                kind = PY_LINES_LNOTAB;
                break;
        case 't':
                kind = PY_LINES_LINETABLE;
                break;
        case 'l':
                kind = PY_LINES_LOCATIONS;
                break;
        default:
                return 0;
        }
        if (size < 9)
                return 0;
        memcpy(&first, data + 1, 4);
        memcpy(&offset, data + 5, 4);
        /* The table is copied to a buffer of its own size, so that a read past it is ASan's to see. */
        {
                size_t n = size - 9;
                uint8_t *t = malloc(n ?: 1);

                if (!t)
                        return 0;
                memcpy(t, data + 9, n);
                (void) py_line_for_offset(kind, t, n, first, offset);
                free(t);
        }
        return 0;
}
