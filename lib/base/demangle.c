/* demangle.c: libiberty's cplus_demangle() with the style guessed from the name (C++ or Rust). */
#include <stdlib.h>
#include <string.h>

#include <libiberty/demangle.h>

#include "base/demangle.h"

/* Names longer than this are left as they are: a hostile binary's symbol table can hold anything. */
#define DEMANGLE_NAME_MAX 4096

char *demangle_name(const char *name) {
        if (!name || (strncmp(name, "_Z", 2) != 0 && strncmp(name, "_R", 2) != 0) ||
            strnlen(name, DEMANGLE_NAME_MAX + 1) > DEMANGLE_NAME_MAX)
                return NULL;
        /* DMGL_AUTO: Itanium C++, and Rust (legacy names are Itanium-shaped, v0 names start with _R). The
         * recursion limit stays on (no DMGL_NO_RECURSE_LIMIT). */
        return cplus_demangle(name, DMGL_PARAMS | DMGL_ANSI | DMGL_AUTO);
}
