/* demangle.h: C++ (Itanium), Rust legacy and Rust v0 symbol names as people read them, by libiberty's demangler
 * (binutils'), not one of our own. */
#pragma once

/* The readable form of the linkage name NAME ("_ZN3eco6detail6ServerclEi" → "eco::detail::Server::operator()(int)",
 * "_RNvCs1234_7mycrate3foo" → "mycrate::foo"; a Rust legacy name loses its hash), newly allocated; NULL when NAME
 * is not a mangled name (a C function), on a name too deep or too long to demangle, or on OOM. */
char *demangle_name(const char *name);
