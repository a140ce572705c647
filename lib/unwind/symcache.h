/* symcache.h: an on-disk cache of debuginfo by build-id, for the step that costs most in a dump: libdw inflating a
 * distribution's compressed .debug_* sections (libc6-dbg's take ~35 ms here), paid again by every stackctl run and
 * every daemon capture. An entry is a module's separate debuginfo with its sections stored uncompressed, as
 * DIR/<build-id>.debug, which libdw then maps as it is.
 *
 * Safe to share: an entry is written under a temporary name and renamed into place, so concurrent writers race
 * harmlessly (both write the same bytes) and a reader never sees half a file; each entry is checked before use (its
 * ELF structure lies within the file, its build-id is its name) and removed when it fails; the directory is bounded
 * in size, the least recently used entries going first. A cache that cannot be written (read-only, full) only
 * costs the time it would have saved. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "base/macro.h"

typedef struct SymCache SymCache;

/* The default bound on the cache's size, and the smallest one accepted. */
#define SYMCACHE_MAX_SIZE_DEFAULT (1024ULL * 1024 * 1024)
#define SYMCACHE_MAX_SIZE_MIN (16ULL * 1024 * 1024)

/* The cache's directory unless told otherwise: $STACKWATCH_CACHE_DIR ("off" or empty: none); else, for root,
 * SYMCACHE_DIR_DEFAULT (the unit's CacheDirectory=); else $XDG_CACHE_HOME/stackwatch/symbols, or ~/.cache/….
 * *RET NULL: no cache. -ENOMEM. */
#define SYMCACHE_DIR_DEFAULT "/var/cache/stackwatch/symbols"
int symcache_default_dir(char **ret);

/* The cache in DIR, created (with its parents) if missing. -errno when it cannot be created or is not a directory. */
int symcache_new(const char *dir, uint64_t max_size, SymCache **ret);
SymCache *symcache_free(SymCache *c);
DEFINE_TRIVIAL_CLEANUP_FUNC(SymCache *, symcache_free);

/* A read-only fd on the entry for build-id BID (lowercase hex), its path in *RET_PATH (NULL: not wanted). -ENOENT
 * when there is none, or there was one that failed its check (it is removed); -ENOMEM. */
int symcache_open(SymCache *c, const char *bid, char **ret_path);

/* Store the separate debuginfo file SRC of build-id BID, its compressed sections inflated. 1: stored; 0: nothing to
 * gain (no compressed section, another file's build-id, larger than the whole cache); -errno (-ENOSPC: the file
 * system is full) with nothing left behind. Then trims the cache to its bound. */
int symcache_store(SymCache *c, const char *bid, const char *src);

/* Beside a build-id's debuginfo, what was resolved from it: DIR/<build-id>.pcs, written whole by one writer at a time
 * (temporary name, rename), read whole, within the same size bound and LRU order as the debuginfo. The format is the
 * caller's (symbolize.c); a file the caller finds wrong is removed with symcache_remove_pcs(). */
#define SYMCACHE_PCS_MAX_SIZE (4U * 1024 * 1024)
/* The file for BID into *RET (NUL-terminated; *RET_SIZE bytes). -ENOENT: none; -EFBIG: over SYMCACHE_PCS_MAX_SIZE
 * (removed); -ENOMEM, -errno. */
int symcache_read_pcs(SymCache *c, const char *bid, char **ret, size_t *ret_size);
/* Replace the file for BID by DATA; -errno (-ENOSPC…) with nothing left behind. Does not trim. */
int symcache_write_pcs(SymCache *c, const char *bid, const void *data, size_t size);
void symcache_remove_pcs(SymCache *c, const char *bid);

/* Entries removed until the cache is within its bound (least recently used first), and temporary files of writers
 * that died. Returns the number of entries removed. */
int symcache_trim(SymCache *c);

/* Whether the ELF file FD is whole, as far as its headers say (every section it stores lies within the file), and
 * has build-id BID (NULL: any). */
bool symcache_elf_valid(int fd, const char *bid);
