/* python-scan.h: CPython's _PyRuntime where neither its symbol nor its section tells where it is (an interpreter
 * stripped of both): found in the writable data of its module, by what it points to. */
#pragma once

#include <elfutils/libdwfl.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "model/proc-parse.h"
#include "runtime/python-offsets.h"

/* The bytes of a module's writable data scanned at most. */
#define PY_SCAN_BYTES_MAX (8U * 1024 * 1024)

/* Find _PyRuntime in the writable segments of MOD (its program headers: .data, .bss and any section they hold),
 * read from process PID in chunks, at most PY_SCAN_BYTES_MAX: the start of a _Py_DebugOffsets table (3.13+: the
 * cookie "xdebugpy" and a table that parses); or, with O (the layout of the module's version, NULL when it is not
 * known), the one address R at which interpreters.head points to an interpreter whose threads.head points to a
 * thread state whose interp points back to it, interpreters.main is that interpreter or another such, and
 * interpreters.next_id counts them. MAPS (the process's, sorted) say which pointers can be followed. *RET is R;
 * -ENOENT when there is none, or more than one; -ESRCH, -ENOMEM. */
int py_scan_runtime(pid_t pid, Dwfl_Module *mod, const ProcMap *maps, size_t n_maps, const PyOffsets *o,
                    uint64_t *ret);

/* The bytes of a module's .rodata searched for its version string at most. */
#define PY_VERSION_SCAN_BYTES_MAX (16U * 1024 * 1024)

/* The CPython version that the read-only strings DATA[0..N) name: the NUL-terminated "3.M.P" (with an "aN", "bN"
 * or "rcN" and a "+" after it) that PY_VERSION puts in .rodata for Py_GetVersion(), possibly as the tail of a longer
 * string that ends the same ("/opt/python/3.9.18"). "3.2.0", the Unicode database that unicodedata keeps besides its
 * own, is not a version. *RET is PY_VERSION_HEX's form (3.9.18 final: 0x030912f0); when the strings name one minor
 * version with different micro ones, only major and minor (0x03090000). -ENOENT when none is named, -ENOTUNIQ when
 * two minor versions are: never a guess. */
int py_version_from_strings(const uint8_t *data, size_t n, uint32_t *ret);

/* The same for MOD's .rodata, read from its ELF (the one libdwfl opened through the process's own view), at most
 * PY_VERSION_SCAN_BYTES_MAX: -ENOENT also when MOD has no .rodata. */
int py_scan_version(Dwfl_Module *mod, uint32_t *ret);
