/* unwind-kind.c: the unwinder backends' names, and which ones this build has. */
#include "base/string-table.h"
#include "model/unwind-kind.h"

static const char *const unwinder_kind_table[_UNWINDER_MAX] = {
        [UNWINDER_LIBDW] = "libdw",
        [UNWINDER_LIBUNWIND] = "libunwind",
        [UNWINDER_FP] = "fp",
};
DEFINE_STRING_TABLE_LOOKUP(unwinder_kind, UnwinderKind);

bool unwinder_kind_available(UnwinderKind k) {
#ifdef HAVE_LIBUNWIND
        return k >= 0 && k < _UNWINDER_MAX;
#else
        return k == UNWINDER_LIBDW || k == UNWINDER_FP;
#endif
}
