/* symbolize.h: PC → function+offset, file:line and inlined frames; modules cached by build-id across captures,
 * and each module's resolved addresses memoized, so a second dump of the same binaries is cheaper. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <elfutils/libdwfl.h>

#include "base/macro.h"
#include "model/snapshot.h"
#include "render/render.h"

typedef struct Symbolizer Symbolizer;
typedef struct SymModule SymModule;

/* DEBUGINFO_PATH uses libdwfl's syntax; NULL means ":.debug:/usr/lib/debug". SOURCE: resolve file:line and inlined
 * frames from DWARF (loading a binary's debuginfo, e.g. inflating libc's compressed sections, costs tens of ms the
 * first time); without it only symbols are resolved, as eu-stack does by default. */
int symbolizer_new(const char *debuginfo_path, bool source, Symbolizer **ret);
Symbolizer *symbolizer_free(Symbolizer *s);
/* From USEC (CLOCK_MONOTONIC) on, resolve symbols only, as without SOURCE: loading a module's DWARF is the one step
 * of a capture that cannot be cut short, and it costs seconds on a starved CPU. 0: no deadline. Frames resolved
 * past it are counted in SymbolizerStats.source_skipped, and resolved again, with source, by a later capture. */
/* Whether names are demangled (the default: C++ and Rust names readable, the raw one kept as the frame's
 * linkage_name); eu-stack -r and stackctl --no-demangle turn it off. Set before the first lookup. */
void symbolizer_set_demangle(Symbolizer *s, bool demangle);
/* debuginfod: by default the servers in DEBUGINFOD_URLS as it was at symbolizer_new() (which empties it, so that
 * libdw does not ask them itself without a deadline); URLS NULL: none. Asked by build-id for a module without local
 * debuginfo, only before the source deadline; a server that does not answer is not asked again by this symbolizer.
 * -ENOMEM. */
int symbolizer_set_debuginfod(Symbolizer *s, const char *urls);
void symbolizer_set_source_deadline(Symbolizer *s, uint64_t usec);
/* While DEFERRED, a lookup in a module whose DWARF is not loaded yet resolves symbols only, without loading it (the
 * step that costs tens of ms of CPU, more on a starved one, and cannot be cut short): a provisional answer, counted
 * in SymbolizerStats.source_deferred (not as skipped), which a later lookup of the same pc without deferral resolves
 * again with file:line. A module whose DWARF is loaded (or known to be missing) answers with source as always. The
 * capture defers while it gives every copied thread its frames, then loads the DWARF (capture.c). */
void symbolizer_defer_source(Symbolizer *s, bool deferred);
/* The on-disk cache of debuginfo by build-id (symcache.h) in DIR, bounded by MAX_SIZE bytes; DIR NULL: none (the
 * default). Looked up first; what was found elsewhere is added by symbolizer_flush_cache(), after the output, so
 * that the dump or capture never waits for the copy. -errno when DIR cannot be created. */
int symbolizer_set_cache(Symbolizer *s, const char *dir, uint64_t max_size);
/* What a capture's symbolizer is set up with, from the daemon's configuration or stackctl's options. */
typedef struct SymbolizerSettings {
        const char *cache_dir;          /* the debuginfo cache; NULL: none */
        uint64_t cache_max_size;
        bool debuginfod_set;            /* set: DEBUGINFOD below; else the environment's DEBUGINFOD_URLS */
        const char *debuginfod;         /* servers (DEBUGINFOD_URLS' syntax); NULL: none */
} SymbolizerSettings;
/* Apply ST: -ENOMEM; a cache directory that cannot be used leaves the symbolizer without a cache (-errno). */
int symbolizer_apply(Symbolizer *s, const SymbolizerSettings *st);

/* Store in the cache the debuginfo this symbolizer found elsewhere, inflated, and each module's resolved addresses
 * (function, file:line and inline chain by ELF address) when it has DWARF and names are demangled: a later dump of
 * the same build-ids reads those instead of opening the debuginfo at all. The number of debuginfo entries stored,
 * or the first error (-ENOSPC…): nothing else depends on it. */
int symbolizer_flush_cache(Symbolizer *s);
DEFINE_TRIVIAL_CLEANUP_FUNC(Symbolizer *, symbolizer_free);

/* The cache entry for process module MOD, opened on first use from the file as the target sees it (ROOT is its
 * /proc/PID/root). NULL when the module cannot be cached (no build-id, unreadable, replaced on disk): then
 * symbolize with MOD directly. */
SymModule *symbolizer_get_module(Symbolizer *s, Dwfl_Module *mod, const char *root);
bool sym_module_has_debuginfo(const SymModule *sm);

/* The data object (a global or static variable) at ADDR in the process module MI, as "name" or "name+0xOFF"; NULL
 * when no object symbol covers it (the heap, the stack, a stripped binary) or the module cannot be opened. */
char *symbolizer_data_symbol(Symbolizer *s, const ModuleInfo *mi, const char *root, uint64_t addr);

/* The address in the process of the symbol NAME of process module MOD (.symtab, else .dynsym), or of the section
 * NAME when it starts with a dot, and its size: looked up once per build-id and name, the answer (found or not)
 * kept for every later process with the same build. -ENOENT when MOD has none, -ENOMEM. */
int symbolizer_find_symbol(Symbolizer *s, Dwfl_Module *mod, const char *name, uint64_t *ret_addr, uint64_t *ret_size);
/* The same for NAMES[0..N) at once (one pass over the symbol table for those not asked before): RET_ADDRS[k] 0
 * when NAMES[k] is not there. Returns how many were found, or -ENOENT when MOD has no ELF, -ENOMEM. */
int symbolizer_find_symbols(Symbolizer *s, Dwfl_Module *mod, const char *const *names, size_t n, uint64_t *ret_addrs,
                            uint64_t *ret_sizes);
/* The same for names the module exports (its dynamic symbol table, through the dynamic linker's hash table): no pass
 * over a symbol table of hundreds of thousands for a name a version does not have. */
int symbolizer_find_exported(Symbolizer *s, Dwfl_Module *mod, const char *const *names, size_t n, uint64_t *ret_addrs,
                             uint64_t *ret_sizes);

/* Append to T the frames for the pc in FRAME_TEMPLATE (which carries pc/activation/method/module index): inlined
 * call sites first (each marked inlined), then the containing function. SM may be NULL (see above); MOD may be
 * NULL when no module covers the pc. Returns the number of frames appended. */
int symbolizer_add_frames(Symbolizer *s, SymModule *sm, Dwfl_Module *mod, const UserFrame *frame_template,
                          ThreadSnapshot *t);

/* Lowercase hex build-id of a process module, NULL if it has none (or on OOM). */
char *dwfl_module_build_id_hex(Dwfl_Module *mod);

/* A stored snapshot's frames resolved again from their pcs and modules' build-ids with the debuginfo there is today
 * (debuginfo installed after the hang): a module is used only when a file with its build-id is found, at its path
 * under ROOT (NULL: this host's view) or as separate debuginfo; frames of other modules stay as they were.
 * *RET_CHANGED: how many pcs now resolve differently; each one is a line on REPORT (NULL: none). -ENOMEM. */
int symbolizer_resymbolize(Symbolizer *s, Snapshot *snap, const char *root, FILE *report, unsigned *ret_changed);
/* A stored document (untrusted: parsed within json_parse_bounded()'s bounds) re-symbolized and rendered to F
 * (snapshot_render()), the changes and their count on REPORT (NULL: none). -EBADMSG with *RET_WHY on a document
 * that is not a snapshot, -ENOMEM, -EIO. */
int symbolizer_render_resymbolized(Symbolizer *s, const char *json, size_t len, RenderFormat format,
                                   const RenderOptions *o, FILE *f, FILE *report, const char **ret_why);

/* Cache statistics, for tests and benchmarks. */
typedef struct SymbolizerStats {
        unsigned modules_cached;
        unsigned module_hits;
        unsigned module_misses;
        unsigned addr_hits;
        unsigned addr_misses;
        unsigned source_skipped;        /* frame lookups without file:line for the source deadline */
        unsigned source_deferred;       /* frame lookups without file:line for now (symbolizer_defer_source()) */
        unsigned debuginfod_queries;    /* debuginfod asked for a module's debuginfo (DEBUGINFOD_URLS) */
        unsigned debuginfod_found;
        unsigned debuginfod_failed;     /* no answer (refused, timed out, cut at the deadline): not asked again */
        unsigned debuginfod_skipped;    /* not asked: past the deadline */
        unsigned cache_hits;            /* debuginfo read from the on-disk cache */
        unsigned cache_stored;          /* and added to it by symbolizer_flush_cache() */
        unsigned pcs_loaded;            /* resolved addresses read from the cache's memos (no DWARF opened for them) */
        unsigned pcs_stored;            /* memos written back to it by symbolizer_flush_cache() */
} SymbolizerStats;
void symbolizer_get_stats(const Symbolizer *s, SymbolizerStats *ret);
