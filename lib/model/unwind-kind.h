/* unwind-kind.h: the unwinder backends by name, for options and the config (no unwinding library needed). */
#pragma once

#include <errno.h>
#include <stdbool.h>

typedef enum UnwinderKind {
        UNWINDER_LIBDW,
        UNWINDER_LIBUNWIND,
        UNWINDER_FP,
        _UNWINDER_MAX,
        _UNWINDER_INVALID = -EINVAL,
} UnwinderKind;

const char *unwinder_kind_to_string(UnwinderKind k);
UnwinderKind unwinder_kind_from_string(const char *s);
/* Whether this build has the backend (libunwind is optional). */
bool unwinder_kind_available(UnwinderKind k);
