/* symbolize.c: symbols, source lines and inline chains through libdw. Each binary is opened once, offline, keyed
 * by build-id, and every address resolved in it is memoized: threads and processes share most of their PCs. */
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <dwarf.h>
#include <elfutils/debuginfod.h>
#include <elfutils/libdw.h>

#include "base/alloc-util.h"
#include "base/demangle.h"
#include "base/escape.h"
#include "base/json-util.h"
#include "base/log.h"
#include "base/time-util.h"
#include "proc/fuse-conn.h"
#include "render/render.h"
#include "unwind/symbolize.h"
#include "unwind/symcache.h"

#define SYMBOLIZER_MODULES_MAX 4096
#define INLINE_DEPTH_MAX 32

/* One resolved frame of an address (an address with inlines resolves to several). */
typedef struct SymFrame {
        char *function;         /* demangled when the symbolizer demangles and it is a mangled name */
        char *linkage_name;     /* then the name as the binary has it; else NULL */
        uint64_t offset;        /* from the symbol to the looked-up address */
        char *file;
        unsigned line, column;
        bool inlined;
} SymFrame;

typedef struct SymEntry {
        uint64_t addr;          /* ELF address looked up; 0 marks an empty slot (no code lives at 0) */
        uint32_t first, count;  /* into SymModule.pool */
        bool source;            /* resolved with file:line and inlines (not past the source deadline) */
} SymEntry;

struct SymModule {
        Symbolizer *symbolizer; /* for the find_debuginfo callback, which gets the module's userdata */
        char *root;             /* the target's /proc/PID/root, where its separate debuginfo is looked up first */
        char *name;             /* the module's path, for opening it on the first address the memo lacks */
        char *build_id;
        bool opened;            /* sym_module_open() was tried */
        Dwfl *dwfl;             /* NULL: could not be opened (or is not the binary loaded); not retried */
        Dwfl_Module *mod;
        GElf_Addr bias;
        int debuginfo;          /* -1 not yet known */
        bool dirty;             /* resolved with DWARF since the memo was read from the cache: write it back */

        /* The memo, keyed by ELF address (the module's own, whatever its load or report bias). */
        SymEntry *table;        /* open addressing, size a power of two */
        size_t table_size, table_used;
        SymFrame *pool;
        size_t n_pool, pool_alloc;
};

/* A module's separate debuginfo, found outside the cache. */
typedef struct SymDebuginfo {
        char *build_id;
        char *path;
} SymDebuginfo;

struct Symbolizer {
        char *debuginfo_path;
        bool source;
        bool demangle;                  /* C++ and Rust names readable, the raw ones kept as linkage_name */
        uint64_t source_deadline_usec;  /* CLOCK_MONOTONIC; 0: none */
        bool source_deferred;           /* symbolizer_defer_source() */
        Dwfl_Callbacks callbacks;
        SymModule **modules;
        size_t n_modules, n_modules_allocated;
        SymbolizerStats stats;

        /* debuginfod, on our terms: libdw's own client (DEBUGINFOD_URLS at its first query) would wait up to
         * DEBUGINFOD_TIMEOUT (90 s) per module on a slow server; ours asks only within the source deadline, and
         * gives up on a server for the rest of the run once it did not answer. */
        char *dbgd_urls;                /* NULL: not used */
        void *dbgd_dl;                  /* libdebuginfod.so.1, dlopen()ed on first use: linked, it would load
                                         * libcurl into every stackctl at start */
        debuginfod_client *dbgd;
        typeof(debuginfod_begin) *dbgd_begin;
        typeof(debuginfod_find_debuginfo) *dbgd_find_debuginfo;
        typeof(debuginfod_set_progressfn) *dbgd_set_progressfn;
        typeof(debuginfod_end) *dbgd_end;
        bool dbgd_dead;                 /* a query got no answer in time, or the library is missing: no more */

        /* The FUSE mounts of the process whose root modules are opened under (fuse_pid; ours for none), read at
         * the first module opened: a file on one whose daemon does not answer is not opened. Whether a connection's
         * daemon answers is asked once per symbolizer (a pass over every process's fds): FuseVerdict. */
        FuseMount *fuse_mounts;
        size_t n_fuse_mounts;
        pid_t fuse_pid;
        struct FuseVerdict {
                unsigned connection;
                bool answering;
        } *fuse_verdicts;
        size_t n_fuse_verdicts, n_fuse_verdicts_allocated;

        SymCache *cache;                /* NULL: no on-disk cache */
        /* Named symbols looked up by symbolizer_find_symbol(): a runtime's roots (CPython's _PyRuntime), found
         * or not, by build-id. */
        struct SymNamed {
                char *build_id;
                char *name;
                bool found;
                uint64_t elf_addr, size;
        } *named;
        size_t n_named, n_named_allocated;
        SymDebuginfo *found;            /* debuginfo found elsewhere this run, for symbolizer_flush_cache() */
        size_t n_found, n_found_allocated;
};

/* Whether memos are read from the on-disk cache: they hold what a default lookup gives (source lines, demangled
 * names), which a symbolizer without source cuts to the containing function (see append_frames()); and whether
 * they are written to it: only by a symbolizer that gives what they hold. */
static bool memo_readable(const Symbolizer *s) {
        return s->cache && s->demangle;
}

static bool memo_writable(const Symbolizer *s) {
        return memo_readable(s) && s->source;
}

static int memo_load(Symbolizer *s, SymModule *m);
static int memo_store(Symbolizer *s, SymModule *m);

/* The deadline of the query in progress, for its progress callback: set only around debuginfod_find_debuginfo(),
 * on this thread (the one exception to lib/'s no-mutable-globals rule: the callback has no other context without
 * one more symbol of the library). 0: none. */
static _Thread_local uint64_t dbgd_deadline_usec;

/* Abort a debuginfod transfer past the source deadline (debuginfod calls this while it waits and as data comes). */
static int dbgd_progress(debuginfod_client *c, long a, long b) {
        (void) c;
        (void) a;
        (void) b;
        return dbgd_deadline_usec && now_usec(CLOCK_MONOTONIC) >= dbgd_deadline_usec;
}

static bool dbgd_open(Symbolizer *s) {
        if (s->dbgd)
                return true;
        s->dbgd_dl = dlopen("libdebuginfod.so.1", RTLD_NOW | RTLD_LOCAL);
        if (!s->dbgd_dl || !(s->dbgd_begin = (typeof(s->dbgd_begin)) dlsym(s->dbgd_dl, "debuginfod_begin")) ||
            !(s->dbgd_find_debuginfo = (typeof(s->dbgd_find_debuginfo)) dlsym(s->dbgd_dl,
                                                                                "debuginfod_find_debuginfo")) ||
            !(s->dbgd_set_progressfn = (typeof(s->dbgd_set_progressfn)) dlsym(s->dbgd_dl,
                                                                                "debuginfod_set_progressfn")) ||
            !(s->dbgd_end = (typeof(s->dbgd_end)) dlsym(s->dbgd_dl, "debuginfod_end")) ||
            !(s->dbgd = s->dbgd_begin())) {
                log_debug("debuginfod's client is not usable (apt-get install libdebuginfod1): %s",
                          s->dbgd_dl ? "no client" : dlerror());
                return false;
        }
        s->dbgd_set_progressfn(s->dbgd, dbgd_progress);
        return true;
}

/* Remember separate debuginfo found at PATH for build-id BID, for the cache. */
static void found_debuginfo(Symbolizer *s, const char *bid, const char *path) {
        if (!s->cache || !path)
                return;
        for (size_t i = 0; i < s->n_found; i++)
                if (streq(s->found[i].build_id, bid))
                        return;
        if (!GREEDY_REALLOC(s->found, s->n_found_allocated, s->n_found + 1))
                return;
        s->found[s->n_found] = (SymDebuginfo) { .build_id = strdup(bid), .path = strdup(path) };
        if (!s->found[s->n_found].build_id || !s->found[s->n_found].path) {
                free(s->found[s->n_found].build_id);
                free(s->found[s->n_found].path);
                return;
        }
        s->n_found++;
}

/* The debuginfo of build-id BID in the target's own file system (ROOT, its /proc/PID/root), as distributions install
 * it (/usr/lib/debug/.build-id/xx/rest.debug). Looked up even when that root looks like ours: a container started
 * with unshare -m has the host's root inode, and mounts of its own over /usr/lib/debug. */
static int root_find_debuginfo(const char *root, const char *bid, char **ret_path) {
        char *path;
        int fd;

        if (!root || strlen(bid) < 4)
                return -ENOENT;
        if (asprintf(&path, "%s/usr/lib/debug/.build-id/%.2s/%s.debug", root, bid, bid + 2) < 0)
                return -ENOMEM;
        fd = open(path, O_RDONLY | O_CLOEXEC);
        /* Used only when it is the debuginfo of this very build. */
        if (fd >= 0 && !symcache_elf_valid(fd, bid)) {
                log_debug("Ignoring '%s': not the debuginfo of build-id %s", path, bid);
                fd = safe_close(fd);
        }
        if (fd < 0) {
                free(path);
                return -ENOENT;
        }
        *ret_path = path;
        return fd;
}

/* The cache, the target's root, libdw's standard search (the module's directory, .debug, the debuginfo path,
 * build-id links on this host), then debuginfod by build-id within the deadline. */
static int sym_find_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
                              const char *file_name, const char *debuglink_file, GElf_Word debuglink_crc,
                              char **debuginfo_file_name) {
        SymModule *m = userdata ? *userdata : NULL;
        Symbolizer *s = m ? m->symbolizer : NULL;
        const unsigned char *bits;
        GElf_Addr vaddr;
        char timeout[32];
        int fd, len;

        if (s && m->build_id) {
                if (s->cache) {
                        fd = symcache_open(s->cache, m->build_id, debuginfo_file_name);
                        if (fd >= 0) {
                                s->stats.cache_hits++;
                                return fd;
                        }
                }
                fd = root_find_debuginfo(m->root, m->build_id, debuginfo_file_name);
                if (fd >= 0) {
                        found_debuginfo(s, m->build_id, *debuginfo_file_name);
                        return fd;
                }
        }
        fd = dwfl_standard_find_debuginfo(mod, userdata, modname, base, file_name, debuglink_file, debuglink_crc,
                                          debuginfo_file_name);
        if (fd >= 0 && s && m->build_id)
                found_debuginfo(s, m->build_id, *debuginfo_file_name);
        if (fd >= 0 || !s || !s->dbgd_urls || s->dbgd_dead)
                return fd;
        len = dwfl_module_build_id(mod, &bits, &vaddr);
        if (len <= 0)
                return fd;
        if (s->source_deadline_usec && now_usec(CLOCK_MONOTONIC) >= s->source_deadline_usec) {
                s->stats.debuginfod_skipped++;
                return fd;
        }
        if (!dbgd_open(s)) {
                s->dbgd_dead = true;
                return fd;
        }
        /* The client reads these at each query: the URLs only for ours, a timeout no longer than what is left. */
        snprintf(timeout, sizeof timeout, "%llu",
                 s->source_deadline_usec ? (unsigned long long) MAX(1U, (s->source_deadline_usec -
                                                                        now_usec(CLOCK_MONOTONIC)) / USEC_PER_SEC)
                                         : 30ULL);
        (void) setenv("DEBUGINFOD_TIMEOUT", timeout, 1);
        (void) setenv("DEBUGINFOD_URLS", s->dbgd_urls, 1);
        s->stats.debuginfod_queries++;
        dbgd_deadline_usec = s->source_deadline_usec;
        fd = s->dbgd_find_debuginfo(s->dbgd, bits, len, debuginfo_file_name);
        dbgd_deadline_usec = 0;
        (void) setenv("DEBUGINFOD_URLS", "", 1);
        if (fd >= 0) {
                s->stats.debuginfod_found++;
                if (m->build_id)
                        found_debuginfo(s, m->build_id, *debuginfo_file_name);
                return fd;
        }
        /* Not there (404) is an answer; anything else (refused, timed out, cut at the deadline) ends its use. So
         * does a "not there" that comes only past the deadline: the client (0.188) returns -ENOENT, and caches the
         * miss, for a server that took the connection and never answered (its tries timed out). */
        if (fd != -ENOENT || (s->source_deadline_usec && now_usec(CLOCK_MONOTONIC) >= s->source_deadline_usec)) {
                s->dbgd_dead = true;
                s->stats.debuginfod_failed++;
                log_debug_errno(fd, "debuginfod gave no answer; not asked again in this run: %m");
        }
        return -1;
}

int symbolizer_new(const char *debuginfo_path, bool source, Symbolizer **ret) {
        Symbolizer *s = calloc(1, sizeof *s);

        if (!s)
                return -ENOMEM;
        s->source = source;
        s->demangle = true;
        /* The URLs are ours to use from here on: libdw's client is left with none (see dbgd_urls). */
        const char *urls = getenv("DEBUGINFOD_URLS");
        if (urls && urls[0] && !(s->dbgd_urls = strdup(urls))) {
                free(s);
                return -ENOMEM;
        }
        (void) setenv("DEBUGINFOD_URLS", "", 1);
        if (debuginfo_path) {
                s->debuginfo_path = strdup(debuginfo_path);
                if (!s->debuginfo_path) {
                        free(s);
                        return -ENOMEM;
                }
        }
        s->callbacks = (Dwfl_Callbacks) {
                .find_debuginfo = sym_find_debuginfo,
                .section_address = dwfl_offline_section_address,
                .debuginfo_path = s->debuginfo_path ? &s->debuginfo_path : NULL,
        };
        *ret = s;
        return 0;
}

static void sym_frame_done(SymFrame *f) {
        free(f->function);
        free(f->linkage_name);
        free(f->file);
}

static void sym_module_free(SymModule *m) {
        if (!m)
                return;
        for (size_t i = 0; i < m->n_pool; i++)
                sym_frame_done(&m->pool[i]);
        free(m->pool);
        free(m->table);
        free(m->build_id);
        free(m->name);
        free(m->root);
        if (m->dwfl)
                dwfl_end(m->dwfl);
        free(m);
}

Symbolizer *symbolizer_free(Symbolizer *s) {
        if (!s)
                return NULL;
        for (size_t i = 0; i < s->n_named; i++) {
                free(s->named[i].build_id);
                free(s->named[i].name);
        }
        free(s->named);
        for (size_t i = 0; i < s->n_modules; i++)
                sym_module_free(s->modules[i]);
        free(s->modules);
        free(s->debuginfo_path);
        if (s->dbgd)
                s->dbgd_end(s->dbgd);
        if (s->dbgd_dl)
                dlclose(s->dbgd_dl);
        free(s->dbgd_urls);
        for (size_t i = 0; i < s->n_found; i++) {
                free(s->found[i].build_id);
                free(s->found[i].path);
        }
        free(s->found);
        free(s->fuse_mounts);
        free(s->fuse_verdicts);
        symcache_free(s->cache);
        free(s);
        return NULL;
}

int symbolizer_set_cache(Symbolizer *s, const char *dir, uint64_t max_size) {
        SymCache *c = NULL;
        int r;

        if (dir) {
                r = symcache_new(dir, max_size, &c);
                if (r < 0)
                        return r;
        }
        symcache_free(s->cache);
        s->cache = c;
        return 0;
}

int symbolizer_apply(Symbolizer *s, const SymbolizerSettings *st) {
        if (st->debuginfod_set && symbolizer_set_debuginfod(s, st->debuginfod) < 0)
                return -ENOMEM;
        return st->cache_dir ? symbolizer_set_cache(s, st->cache_dir, st->cache_max_size) : 0;
}

int symbolizer_flush_cache(Symbolizer *s) {
        int stored = 0, err = 0;
        unsigned memos = 0;

        for (size_t i = 0; s->cache && i < s->n_found; i++) {
                int r = symcache_store(s->cache, s->found[i].build_id, s->found[i].path);
                if (r < 0) {
                        log_debug_errno(r, "Failed to cache the debuginfo of %s: %m", s->found[i].build_id);
                        err = err ?: r;
                } else
                        stored += r;
                free(s->found[i].build_id);
                free(s->found[i].path);
        }
        s->n_found = 0;
        s->stats.cache_stored += (unsigned) stored;
        for (size_t i = 0; memo_writable(s) && i < s->n_modules; i++) {
                SymModule *m = s->modules[i];
                int r;

                if (!m->dirty || m->debuginfo <= 0)
                        continue;
                r = memo_store(s, m);
                if (r < 0) {
                        log_debug_errno(r, "Failed to cache the resolved addresses of %s: %m", m->build_id);
                        err = err ?: r;
                        continue;
                }
                m->dirty = false;
                memos++;
        }
        s->stats.pcs_stored += memos;
        /* symcache_store() trims after a store; memos alone are trimmed here. */
        if (memos > 0 && stored == 0)
                (void) symcache_trim(s->cache);
        return err < 0 ? err : stored;
}

void symbolizer_get_stats(const Symbolizer *s, SymbolizerStats *ret) {
        *ret = s->stats;
        ret->modules_cached = (unsigned) s->n_modules;
}

char *dwfl_module_build_id_hex(Dwfl_Module *mod) {
        const unsigned char *bits;
        GElf_Addr vaddr, bias;
        char *hex;
        int len;

        if (!dwfl_module_getelf(mod, &bias))
                return NULL;
        len = dwfl_module_build_id(mod, &bits, &vaddr);
        if (len <= 0)
                return NULL;
        hex = malloc((size_t) len * 2 + 1);
        if (!hex)
                return NULL;
        for (int i = 0; i < len; i++)
                sprintf(hex + 2 * i, "%02x", bits[i]);
        return hex;
}

/* The Go toolchain's build ID (the ".note.go.buildid" note, type 4, name "Go\0\0"), hex-encoded; NULL when ELF has
 * none. Go's linker writes no GNU build-id unless it links externally. */
static char *go_build_id_hex(Elf *elf) {
        size_t shstrndx;

        if (elf_getshdrstrndx(elf, &shstrndx) < 0)
                return NULL;
        for (Elf_Scn *scn = elf_nextscn(elf, NULL); scn; scn = elf_nextscn(elf, scn)) {
                size_t off = 0, name_off, desc_off;
                const char *sn;
                GElf_Shdr shdr;
                GElf_Nhdr nh;
                Elf_Data *d;

                if (!gelf_getshdr(scn, &shdr) || shdr.sh_type != SHT_NOTE)
                        continue;
                sn = elf_strptr(elf, shstrndx, shdr.sh_name);
                if (!sn || !streq(sn, ".note.go.buildid") || !(d = elf_getdata(scn, NULL)))
                        continue;
                while ((off = gelf_getnote(d, off, &nh, &name_off, &desc_off)) > 0) {
                        const char *id = (const char *) d->d_buf + desc_off, *last;
                        size_t n;
                        char *hex;

                        if (nh.n_type != 4 || (nh.n_namesz != 3 && nh.n_namesz != 4) ||
                            memcmp((char *) d->d_buf + name_off, "Go", 3) != 0 ||
                            nh.n_descsz == 0 || nh.n_descsz > 1024)
                                continue;
                        /* "action/content/…/content": the last part is the hash of the linked file's content, which
                         * names it as a build-id does (cmd/go/internal/work/buildid.go). */
                        n = strnlen(id, nh.n_descsz);
                        last = memrchr(id, '/', n);
                        last = last ? last + 1 : id;
                        n -= (size_t) (last - id);
                        if (n == 0 || n > 48)
                                return NULL;
                        hex = malloc(n * 2 + 1);
                        if (!hex)
                                return NULL;
                        for (size_t i = 0; i < n; i++)
                                sprintf(hex + 2 * i, "%02x", (unsigned char) last[i]);
                        return hex;
                }
        }
        return NULL;
}

/* What the caches know a module's build by: its build-id, else a Go binary's own build ID. */
static char *module_cache_key(Dwfl_Module *mod) {
        GElf_Addr bias;
        char *bid = dwfl_module_build_id_hex(mod);
        Elf *elf;

        if (bid || !(elf = dwfl_module_getelf(mod, &bias)))
                return bid;
        return go_build_id_hex(elf);
}

int symbolizer_set_debuginfod(Symbolizer *s, const char *urls) {
        char *u = urls && urls[0] ? strdup(urls) : NULL;

        if (urls && urls[0] && !u)
                return -ENOMEM;
        free(s->dbgd_urls);
        s->dbgd_urls = u;
        return 0;
}

void symbolizer_set_demangle(Symbolizer *s, bool demangle) {
        s->demangle = demangle;
}

void symbolizer_set_source_deadline(Symbolizer *s, uint64_t usec) {
        s->source_deadline_usec = usec;
}

void symbolizer_defer_source(Symbolizer *s, bool deferred) {
        s->source_deferred = deferred;
}

/* Whether to resolve file:line and inlines now: asked for, and before the source deadline. */
static bool want_source(Symbolizer *s) {
        if (!s->source)
                return false;
        if (s->source_deadline_usec == 0 || now_usec(CLOCK_MONOTONIC) < s->source_deadline_usec)
                return true;
        s->stats.source_skipped++;
        return false;
}

/* After a lookup with source: whether the module has DWARF is known now (libdw loaded it, or found none). */
static void note_debuginfo(SymModule *m) {
        Dwarf_Addr dwbias;

        if (m->debuginfo < 0)
                m->debuginfo = dwfl_module_getdwarf(m->mod, &dwbias) != NULL;
}

bool sym_module_has_debuginfo(const SymModule *sm) {
        return sm && sm->debuginfo > 0;
}

/* Whether NAME, under ROOT (a /proc/PID/root; NULL: ours), may be opened: not a file on a FUSE mount whose daemon
 * does not answer, which an open() would wait for, in D state once the daemon has the request (fuse-conn.h). The
 * capture checks the modules it reports; this is for the rest: a stored snapshot symbolized again, a lock named. */
static bool module_path_openable(Symbolizer *s, const char *root, const char *name) {
        _cleanup_(peer_resolver_freep) PeerResolver *r = NULL;
        const FuseMount *m;
        unsigned conn;
        bool answering;
        pid_t pid = 0;
        char why[256];

        if (!root || sscanf(root, "/proc/%d/root", &pid) != 1 || pid <= 0)
                pid = getpid();
        if (!s->fuse_pid || s->fuse_pid != pid) {
                s->fuse_mounts = mfree(s->fuse_mounts);
                s->n_fuse_mounts = 0;
                if (fuse_mounts_load(pid, &s->fuse_mounts, &s->n_fuse_mounts) < 0)
                        s->n_fuse_mounts = 0;
                s->fuse_pid = pid;
        }
        m = fuse_mounts_by_path(s->fuse_mounts, s->n_fuse_mounts, name);
        if (!m)
                return true;
        conn = fuse_mount_connection(m);
        for (size_t i = 0; i < s->n_fuse_verdicts; i++)
                if (s->fuse_verdicts[i].connection == conn)
                        return s->fuse_verdicts[i].answering;
        answering = peer_resolver_new(&r) < 0 || fuse_connection_answering(r, conn, why, sizeof why) != 0;
        if (GREEDY_REALLOC(s->fuse_verdicts, s->n_fuse_verdicts_allocated, s->n_fuse_verdicts + 1))
                s->fuse_verdicts[s->n_fuse_verdicts++] = (struct FuseVerdict) { conn, answering };
        if (!answering)
                log_debug("Not opening the files on %s mount %s: %s", m->fstype, m->mountpoint, why);
        return answering;
}

/* After a file of NAME's FUSE mount could not be read in time: the other files of that mount are not tried. */
static void forget_fuse_connection(Symbolizer *s, const char *name) {
        const FuseMount *m = fuse_mounts_by_path(s->fuse_mounts, s->n_fuse_mounts, name);
        unsigned conn = m ? fuse_mount_connection(m) : 0;

        for (size_t i = 0; m && i < s->n_fuse_verdicts; i++)
                if (s->fuse_verdicts[i].connection == conn)
                        s->fuse_verdicts[i].answering = false;
}

/* Open the module's file (M's name under its root: as the target sees it, in its mount namespace) and report it
 * offline. */
static void sym_module_open(Symbolizer *s, SymModule *m) {
        const char *name = m->name, *root = m->root;
        _cleanup_free_ char *path = NULL, *bid = NULL;
        Dwarf_Addr dwbias;
        Dwfl_Module *om;
        int fd;

        m->opened = true;
        if (!name || name[0] != '/')
                return;
        if (!startswith(name, "/proc/") && !module_path_openable(s, root, name))
                return;
        /* map_files aliases of deleted binaries are already absolute /proc paths. */
        if (asprintf(&path, "%s%s", startswith(name, "/proc/") ? "" : root ?: "", name) < 0)
                return;
        /* On a FUSE mount whose daemon takes requests it may still answer none: read by a child, with a deadline. */
        if (!startswith(name, "/proc/") && fuse_mounts_by_path(s->fuse_mounts, s->n_fuse_mounts, name)) {
                int k = fuse_copy_file(path, NULL, FUSE_COPY_TIMEOUT_USEC, &fd);

                if (k < 0) {
                        log_debug("Not opening %s, on a FUSE mount: %s", name, strerror(-k));
                        forget_fuse_connection(s, name);
                        return;
                }
        } else
                fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return;
        m->dwfl = dwfl_begin(&s->callbacks);
        if (!m->dwfl) {
                close(fd);
                return;
        }
        /* libdwfl owns FD from here on. */
        om = dwfl_report_offline(m->dwfl, name, name, fd);
        if (om) {
                void **ud;
                dwfl_module_info(om, &ud, NULL, NULL, NULL, NULL, NULL, NULL);
                *ud = m; /* for sym_find_debuginfo() */
        }
        if (!om || dwfl_report_end(m->dwfl, NULL, NULL) != 0 || !dwfl_module_getelf(om, &m->bias))
                goto fail;
        /* The file on disk may have been replaced since the process loaded it: only a matching build-id counts. */
        bid = module_cache_key(om);
        if (!bid || !streq(bid, m->build_id))
                goto fail;
        m->mod = om;
        /* Deferred: the DWARF is loaded by the first lookup with source. */
        if (!s->source_deferred && want_source(s))
                m->debuginfo = dwfl_module_getdwarf(om, &dwbias) != NULL;
        return;
fail:
        log_debug("Not caching module %s: cannot open it, or its build-id differs from the loaded one", name);
        dwfl_end(m->dwfl);
        m->dwfl = NULL;
}

/* Whether M can answer: opened, or with a memo from the cache (opened when an address is not in it). */
static bool module_usable(const SymModule *m) {
        return m->mod || (!m->opened && m->table_used > 0);
}

/* Open M now if it was left for later, as its memo answered so far. Whether it is open. */
static bool module_ensure_open(Symbolizer *s, SymModule *m) {
        if (!m->opened)
                sym_module_open(s, m);
        return m->mod;
}

/* The cache entry for the module with build-id BID, from NAME under ROOT: opened on first use, or only when an
 * address is not in the memo the on-disk cache has for BID. */
static SymModule *get_module(Symbolizer *s, const char *bid, const char *name, const char *root) {
        SymModule *m;

        if (!bid)
                return NULL;
        for (size_t i = 0; i < s->n_modules; i++)
                if (streq(s->modules[i]->build_id, bid)) {
                        s->stats.module_hits++;
                        return module_usable(s->modules[i]) ? s->modules[i] : NULL;
                }
        s->stats.module_misses++;
        if (s->n_modules >= SYMBOLIZER_MODULES_MAX)
                return NULL;
        if (!GREEDY_REALLOC(s->modules, s->n_modules_allocated, s->n_modules + 1))
                return NULL;
        m = calloc(1, sizeof *m);
        if (!m)
                return NULL;
        m->build_id = strdup(bid);
        if (!m->build_id) {
                free(m);
                return NULL;
        }
        m->debuginfo = -1;
        m->symbolizer = s;
        if ((root && !(m->root = strdup(root))) || (name && !(m->name = strdup(name)))) {
                free(m->root);
                free(m->build_id);
                free(m);
                return NULL;
        }
        s->modules[s->n_modules++] = m;
        /* Only a memo with DWARF's answers is stored: the module has debuginfo (a symbolizer without source does
         * not say, as it does not look). */
        if (memo_readable(s) && memo_load(s, m) > 0)
                m->debuginfo = s->source ? 1 : -1;
        else
                (void) module_ensure_open(s, m);
        return module_usable(m) ? m : NULL;
}

SymModule *symbolizer_get_module(Symbolizer *s, Dwfl_Module *mod, const char *root) {
        _cleanup_free_ char *bid = module_cache_key(mod);

        return get_module(s, bid, dwfl_module_info(mod, NULL, NULL, NULL, NULL, NULL, NULL, NULL), root);
}

/* NAME in MOD's symbol table (libdwfl's: .symtab, else .dynsym), or the section NAME when it starts with a dot:
 * its address (with MOD's bias) and size. */
static int module_find_named(Dwfl_Module *mod, const char *name, uint64_t *ret_addr, uint64_t *ret_size) {
        GElf_Addr bias = 0;
        Elf *elf;
        int n;

        if (name[0] == '.') {
                size_t shstrndx;

                elf = dwfl_module_getelf(mod, &bias);
                if (!elf || elf_getshdrstrndx(elf, &shstrndx) < 0)
                        return -ENOENT;
                for (Elf_Scn *scn = elf_nextscn(elf, NULL); scn; scn = elf_nextscn(elf, scn)) {
                        GElf_Shdr shdr;
                        const char *sn;

                        if (!gelf_getshdr(scn, &shdr) || !(shdr.sh_flags & SHF_ALLOC))
                                continue;
                        sn = elf_strptr(elf, shstrndx, shdr.sh_name);
                        if (sn && streq(sn, name)) {
                                *ret_addr = shdr.sh_addr + bias;
                                *ret_size = shdr.sh_size;
                                return 0;
                        }
                }
                return -ENOENT;
        }
        n = dwfl_module_getsymtab(mod);
        for (int i = 1; i < n; i++) {
                GElf_Addr addr;
                GElf_Sym sym;
                const char *sn = dwfl_module_getsym_info(mod, i, &sym, &addr, NULL, NULL, NULL);

                if (sn && sym.st_shndx != SHN_UNDEF && streq(sn, name)) {
                        *ret_addr = addr;
                        *ret_size = sym.st_size;
                        return 0;
                }
        }
        return -ENOENT;
}

/* A module's exported symbols, through its .gnu.hash (the dynamic linker's own table): the answer a pass over the
 * symbol table gives for a defined dynamic symbol, without the pass (thousands of symbols, and a dump asks once per
 * runtime reader). */
typedef struct DynTable {
        Elf *elf;
        GElf_Addr bias;
        GElf_Shdr symsh;
        Elf_Data *symd;
        const uint32_t *w;
        size_t words, nsyms;
        uint32_t nbuckets, symoffset, bloom_words;
} DynTable;

/* MOD's table; -ENOENT when it has none. */
static int dyn_table_open(Dwfl_Module *mod, DynTable *t) {
        Elf_Scn *hscn = NULL, *symscn;
        GElf_Shdr hsh;
        Elf_Data *hd;

        *t = (DynTable) {};
        t->elf = dwfl_module_getelf(mod, &t->bias);
        if (!t->elf || gelf_getclass(t->elf) != ELFCLASS64)
                return -ENOENT;
        for (Elf_Scn *scn = elf_nextscn(t->elf, NULL); scn; scn = elf_nextscn(t->elf, scn))
                if (gelf_getshdr(scn, &hsh) && hsh.sh_type == SHT_GNU_HASH) {
                        hscn = scn;
                        break;
                }
        if (!hscn || !(symscn = elf_getscn(t->elf, hsh.sh_link)) || !gelf_getshdr(symscn, &t->symsh) ||
            t->symsh.sh_type != SHT_DYNSYM || !(hd = elf_getdata(hscn, NULL)) ||
            !(t->symd = elf_getdata(symscn, NULL)) || hd->d_size < 16 || t->symsh.sh_entsize == 0)
                return -ENOENT;
        /* nbuckets, symoffset, bloom words (64-bit here), bloom shift; the bloom filter; the buckets; the chains. */
        t->w = hd->d_buf;
        t->words = hd->d_size / 4;
        t->nbuckets = t->w[0];
        t->symoffset = t->w[1];
        t->bloom_words = t->w[2];
        t->nsyms = t->symd->d_size / t->symsh.sh_entsize;
        if (t->nbuckets == 0 || (size_t) t->bloom_words * 2 + t->nbuckets + 4 > t->words)
                return -ENOENT;
        return 0;
}

/* NAME in table T: its address (with the module's bias) and size. -ENOENT when NAME is not in it (a symbol of
 * .symtab only, a local one: the caller passes over the table). */
static int dyn_table_find(const DynTable *t, const char *name, uint64_t *ret_addr, uint64_t *ret_size) {
        const uint32_t *w = t->w;
        uint32_t h = 5381, idx;

        for (const unsigned char *c = (const unsigned char *) name; *c; c++)
                h = h * 33 + *c;
        idx = w[4 + t->bloom_words * 2 + h % t->nbuckets];
        if (idx < t->symoffset)
                return -ENOENT;
        for (; idx < t->nsyms; idx++) {
                size_t ci = 4 + (size_t) t->bloom_words * 2 + t->nbuckets + (idx - t->symoffset);
                GElf_Sym sym;
                const char *sn;

                if (ci >= t->words)
                        break;
                if ((w[ci] | 1) == (h | 1) && gelf_getsym(t->symd, (int) idx, &sym) &&
                    (sn = elf_strptr(t->elf, t->symsh.sh_link, sym.st_name)) && streq(sn, name) &&
                    sym.st_shndx != SHN_UNDEF) {
                        *ret_addr = sym.st_value + t->bias;
                        *ret_size = sym.st_size;
                        return 0;
                }
                if (w[ci] & 1)
                        break;
        }
        return -ENOENT;
}

/* The cached answer for NAME of build BID, or NULL. */
static const struct SymNamed *named_find(const Symbolizer *s, const char *bid, const char *name) {
        for (size_t i = 0; bid && i < s->n_named; i++)
                if (streq(s->named[i].build_id, bid) && streq(s->named[i].name, name))
                        return &s->named[i];
        return NULL;
}

static int named_add(Symbolizer *s, const char *bid, const char *name, bool found, uint64_t elf_addr,
                     uint64_t size) {
        struct SymNamed *e;

        if (s->n_named >= SYMBOLIZER_MODULES_MAX || !GREEDY_REALLOC(s->named, s->n_named_allocated, s->n_named + 1))
                return 0;
        e = &s->named[s->n_named];
        *e = (struct SymNamed) { .found = found, .elf_addr = elf_addr, .size = size };
        e->build_id = strdup(bid);
        e->name = strdup(name);
        if (!e->build_id || !e->name) {
                free(e->build_id);
                free(e->name);
                return -ENOMEM;
        }
        s->n_named++;
        return 0;
}

/* SCAN: pass over the symbol table for the names the dynamic linker's table lacks; else they are not there (and that
 * is not remembered: a later caller may scan). */
static int find_symbols(Symbolizer *s, Dwfl_Module *mod, const char *const *names, size_t n, uint64_t *ret_addrs,
                        uint64_t *ret_sizes, bool scan) {
        _cleanup_free_ char *bid = module_cache_key(mod);
        GElf_Addr bias = 0;
        bool missing = false, have_dyn;
        DynTable dyn;
        int nsyms, r;

        /* The answers by ELF address, the same for every process that loads this build. */
        if (!dwfl_module_getelf(mod, &bias))
                return -ENOENT;
        for (size_t k = 0; k < n; k++) {
                const struct SymNamed *e = named_find(s, bid, names[k]);

                ret_addrs[k] = ret_sizes[k] = 0;
                if (e && e->found) {
                        ret_addrs[k] = e->elf_addr + bias;
                        ret_sizes[k] = e->size;
                }
                missing = missing || !e;
        }
        if (!missing)
                goto done;
        /* Exported symbols by the dynamic linker's hash table: when it has every name, no pass is needed. */
        missing = false;
        have_dyn = dyn_table_open(mod, &dyn) >= 0;
        for (size_t k = 0; k < n; k++)
                if (!named_find(s, bid, names[k]) &&
                    (names[k][0] == '.' || !have_dyn ||
                     dyn_table_find(&dyn, names[k], &ret_addrs[k], &ret_sizes[k]) < 0))
                        missing = true;
        if (!missing)
                goto remember;
        if (!scan) {
                for (size_t k = 0; bid && k < n; k++)
                        if (ret_addrs[k] && !named_find(s, bid, names[k])) {
                                r = named_add(s, bid, names[k], true, ret_addrs[k] - bias, ret_sizes[k]);
                                if (r < 0)
                                        return r;
                        }
                goto done;
        }
        /* One pass over the symbol table for every name not asked before (sections are looked up by name). */
        for (size_t k = 0; k < n; k++)
                if (names[k][0] == '.' && !named_find(s, bid, names[k]) &&
                    module_find_named(mod, names[k], &ret_addrs[k], &ret_sizes[k]) < 0)
                        ret_addrs[k] = ret_sizes[k] = 0;
        nsyms = dwfl_module_getsymtab(mod);
        for (int i = 1; i < nsyms; i++) {
                GElf_Addr addr;
                GElf_Sym sym;
                const char *sn = dwfl_module_getsym_info(mod, i, &sym, &addr, NULL, NULL, NULL);

                if (!sn || sym.st_shndx == SHN_UNDEF)
                        continue;
                for (size_t k = 0; k < n; k++)
                        if (names[k][0] != '.' && ret_addrs[k] == 0 && streq(sn, names[k])) {
                                ret_addrs[k] = addr;
                                ret_sizes[k] = sym.st_size;
                        }
        }
remember:
        for (size_t k = 0; bid && k < n; k++)
                if (!named_find(s, bid, names[k])) {
                        r = named_add(s, bid, names[k], ret_addrs[k] != 0, ret_addrs[k] ? ret_addrs[k] - bias : 0,
                                      ret_sizes[k]);
                        if (r < 0)
                                return r;
                }
done:
        r = 0;
        for (size_t k = 0; k < n; k++)
                r += ret_addrs[k] != 0;
        return r;
}

int symbolizer_find_symbols(Symbolizer *s, Dwfl_Module *mod, const char *const *names, size_t n, uint64_t *ret_addrs,
                            uint64_t *ret_sizes) {
        return find_symbols(s, mod, names, n, ret_addrs, ret_sizes, true);
}

int symbolizer_find_exported(Symbolizer *s, Dwfl_Module *mod, const char *const *names, size_t n, uint64_t *ret_addrs,
                             uint64_t *ret_sizes) {
        return find_symbols(s, mod, names, n, ret_addrs, ret_sizes, false);
}

int symbolizer_find_symbol(Symbolizer *s, Dwfl_Module *mod, const char *name, uint64_t *ret_addr,
                           uint64_t *ret_size) {
        int r = symbolizer_find_symbols(s, mod, &name, 1, ret_addr, ret_size);

        return r < 0 ? r : r == 0 ? -ENOENT : 0;
}

char *symbolizer_data_symbol(Symbolizer *s, const ModuleInfo *mi, const char *root, uint64_t addr) {
        const char *name;
        char *ret = NULL;
        GElf_Off offset = 0;
        GElf_Sym sym;
        SymModule *m;

        /* A module the capture could not read, or did not dare to (a FUSE daemon that does not answer), is not
         * opened again to name a lock. */
        if (!mi->build_id || !mi->path || mi->missing || addr < mi->start || addr >= mi->end)
                return NULL;
        m = get_module(s, mi->build_id, mi->path, root);
        if (!m || !module_ensure_open(s, m))
                return NULL;
        name = dwfl_module_addrinfo(m->mod, addr - mi->bias + m->bias, &offset, &sym, NULL, NULL, NULL);
        if (!name || GELF_ST_TYPE(sym.st_info) != STT_OBJECT || offset >= MAX(sym.st_size, 1U))
                return NULL;
        if (offset == 0)
                return strdup(name);
        return asprintf(&ret, "%s+0x%" PRIx64, name, (uint64_t) offset) < 0 ? NULL : ret;
}

static SymEntry *memo_find(SymModule *m, uint64_t addr) {
        if (!m->table)
                return NULL;
        for (size_t i = hash_u64(addr) & (m->table_size - 1);; i = (i + 1) & (m->table_size - 1)) {
                if (m->table[i].addr == addr)
                        return &m->table[i];
                if (m->table[i].addr == 0)
                        return NULL;
        }
}

static int memo_insert(SymModule *m, SymEntry e) {
        if ((m->table_used + 1) * 2 > m->table_size) {
                size_t ns = m->table_size ? m->table_size * 2 : 256;
                SymEntry *nt = calloc(ns, sizeof *nt);
                if (!nt)
                        return -ENOMEM;
                for (size_t k = 0; k < m->table_size; k++)
                        if (m->table[k].addr) {
                                size_t i = hash_u64(m->table[k].addr) & (ns - 1);
                                while (nt[i].addr)
                                        i = (i + 1) & (ns - 1);
                                nt[i] = m->table[k];
                        }
                free(m->table);
                m->table = nt;
                m->table_size = ns;
        }
        size_t i = hash_u64(e.addr) & (m->table_size - 1);
        while (m->table[i].addr)
                i = (i + 1) & (m->table_size - 1);
        m->table[i] = e;
        m->table_used++;
        return 0;
}

/* A memo on disk (symcache_read_pcs()): MEMO_MAGIC, then a 64-bit FNV-1a hash of the rest, then entries: the ELF
 * address (u64), the frame count (u8, 1..INLINE_DEPTH_MAX + 1), and per frame inlined (u8), offset (u64), line and
 * column (u32), then function, linkage name and file, each a u32 length (MEMO_NULL: none) and its bytes. Native byte
 * order: the file never leaves the machine, and the magic is read as bytes. Entries are those resolved with DWARF. */
#define MEMO_MAGIC "SWPCS1\n"
#define MEMO_NULL UINT32_MAX
#define MEMO_HEADER_SIZE (sizeof MEMO_MAGIC + sizeof(uint64_t))
/* Strings longer than this are not stored (heavy C++ templates demangle to kilobytes; more is not a name anyone
 * reads), and the entries that do not fit in SYMCACHE_PCS_MAX_SIZE are left out. */
#define MEMO_STRING_MAX 65536U

static uint64_t fnv1a(const void *p, size_t n) {
        uint64_t h = 0xcbf29ce484222325ULL;

        for (const unsigned char *c = p; n > 0; n--, c++)
                h = (h ^ *c) * 0x100000001b3ULL;
        return h;
}

typedef struct MemoReader {
        const char *p, *end;
} MemoReader;

static bool memo_get(MemoReader *rd, void *v, size_t n) {
        if ((size_t) (rd->end - rd->p) < n)
                return false;
        memcpy(v, rd->p, n);
        rd->p += n;
        return true;
}

static bool memo_get_str(MemoReader *rd, char **ret) {
        uint32_t len;

        *ret = NULL;
        if (!memo_get(rd, &len, sizeof len))
                return false;
        if (len == MEMO_NULL)
                return true;
        if (len > MEMO_STRING_MAX || (size_t) (rd->end - rd->p) < len || memchr(rd->p, 0, len))
                return false;
        *ret = strndup(rd->p, len);
        rd->p += len;
        return *ret;
}

/* Drop every entry of M's memo. */
static void memo_clear(SymModule *m) {
        for (size_t i = 0; i < m->n_pool; i++)
                sym_frame_done(&m->pool[i]);
        m->n_pool = 0;
        m->pool = mfree(m->pool);
        m->pool_alloc = 0;
        m->table = mfree(m->table);
        m->table_size = m->table_used = 0;
}

/* Read M's memo from the cache: the number of entries, 0 when there is none. A file that is not one (damaged,
 * truncated, another format) is removed, and M starts empty. */
static int memo_load(Symbolizer *s, SymModule *m) {
        _cleanup_free_ char *buf = NULL;
        uint64_t sum;
        size_t size;
        MemoReader rd;

        if (symcache_read_pcs(s->cache, m->build_id, &buf, &size) < 0)
                return 0;
        if (size < MEMO_HEADER_SIZE || memcmp(buf, MEMO_MAGIC, sizeof MEMO_MAGIC) != 0)
                goto bad;
        memcpy(&sum, buf + sizeof MEMO_MAGIC, sizeof sum);
        if (sum != fnv1a(buf + MEMO_HEADER_SIZE, size - MEMO_HEADER_SIZE))
                goto bad;
        rd = (MemoReader) { buf + MEMO_HEADER_SIZE, buf + size };
        while (rd.p < rd.end) {
                SymEntry e = { .source = true };
                uint8_t count, inlined;

                if (!memo_get(&rd, &e.addr, sizeof e.addr) || e.addr == 0 || memo_find(m, e.addr) ||
                    !memo_get(&rd, &count, 1) || count == 0 || count > INLINE_DEPTH_MAX + 1 ||
                    !GREEDY_REALLOC(m->pool, m->pool_alloc, m->n_pool + count))
                        goto bad;
                e.first = (uint32_t) m->n_pool;
                for (; e.count < count; e.count++) {
                        SymFrame *f = &m->pool[m->n_pool];

                        *f = (SymFrame) {};
                        /* Counted in the pool before its strings, so that memo_clear() frees what was read. */
                        m->n_pool++;
                        if (!memo_get(&rd, &inlined, 1) || inlined > 1 ||
                            !memo_get(&rd, &f->offset, sizeof f->offset) || !memo_get(&rd, &f->line, sizeof f->line) ||
                            !memo_get(&rd, &f->column, sizeof f->column) ||
                            !memo_get_str(&rd, &f->function) || !memo_get_str(&rd, &f->linkage_name) ||
                            !memo_get_str(&rd, &f->file))
                                goto bad;
                        f->inlined = inlined;
                }
                if (memo_insert(m, e) < 0)
                        goto bad;
        }
        s->stats.pcs_loaded += (unsigned) m->table_used;
        return (int) m->table_used;
bad:
        log_debug("Resolved-address memo of %s in the symbol cache is damaged; removing it.", m->build_id);
        memo_clear(m);
        symcache_remove_pcs(s->cache, m->build_id);
        return 0;
}

static void memo_put_str(FILE *f, const char *str) {
        uint32_t len = str ? (uint32_t) strlen(str) : MEMO_NULL;

        fwrite(&len, sizeof len, 1, f);
        if (str)
                fwrite(str, 1, len, f);
}

/* Write M's memo (its entries resolved with DWARF, as many as fit) to the cache, whole. */
static int memo_store(Symbolizer *s, SymModule *m) {
        _cleanup_free_ char *buf = NULL;
        size_t size = 0;
        long whole = MEMO_HEADER_SIZE;  /* where the last entry that fits ends */
        uint64_t sum;
        FILE *f;

        f = open_memstream(&buf, &size);
        if (!f)
                return -ENOMEM;
        fwrite(MEMO_MAGIC, 1, sizeof MEMO_MAGIC, f);
        fwrite(&(uint64_t) { 0 }, sizeof(uint64_t), 1, f);
        for (size_t i = 0; i < m->table_size; i++) {
                const SymEntry *e = &m->table[i];
                bool fits = e->addr && e->source;

                for (uint32_t k = 0; fits && k < e->count; k++) {
                        const SymFrame *fr = &m->pool[e->first + k];
                        fits = strlen(fr->function ?: "") <= MEMO_STRING_MAX &&
                               strlen(fr->linkage_name ?: "") <= MEMO_STRING_MAX &&
                               strlen(fr->file ?: "") <= MEMO_STRING_MAX;
                }
                if (!fits)
                        continue;
                fwrite(&e->addr, sizeof e->addr, 1, f);
                fputc((int) e->count, f);
                for (uint32_t k = 0; k < e->count; k++) {
                        const SymFrame *fr = &m->pool[e->first + k];

                        fputc(fr->inlined, f);
                        fwrite(&fr->offset, sizeof fr->offset, 1, f);
                        fwrite(&fr->line, sizeof fr->line, 1, f);
                        fwrite(&fr->column, sizeof fr->column, 1, f);
                        memo_put_str(f, fr->function);
                        memo_put_str(f, fr->linkage_name);
                        memo_put_str(f, fr->file);
                }
                if (ftell(f) > (long) SYMCACHE_PCS_MAX_SIZE)
                        break;
                whole = ftell(f);
        }
        if (fclose(f) != 0 || !buf)
                return -ENOMEM;
        /* Past the bound: the entries before the one that crossed it. */
        size = MIN(size, (size_t) whole);
        sum = fnv1a(buf + MEMO_HEADER_SIZE, size - MEMO_HEADER_SIZE);
        memcpy(buf + sizeof MEMO_MAGIC, &sum, sizeof sum);
        return symcache_write_pcs(s->cache, m->build_id, buf, size);
}

static int set_str(char **dst, const char *src) {
        *dst = NULL;
        if (!src)
                return 0;
        *dst = strdup(src);
        return *dst ? 0 : -ENOMEM;
}

/* F's name: the demangled form of LINKAGE when DEMANGLE and it is a mangled name (LINKAGE kept as the linkage name);
 * raw (not DEMANGLE), LINKAGE as it is; else PLAIN (an inlined function's DW_AT_name), else LINKAGE. */
static int set_name(SymFrame *f, const char *linkage, const char *plain, bool demangle) {
        char *d = demangle && linkage ? demangle_name(linkage) : NULL;

        if (d) {
                f->function = d;
                return set_str(&f->linkage_name, linkage);
        }
        return set_str(&f->function, demangle ? plain ?: linkage : linkage ?: plain);
}

/* The linkage name of an inlined subroutine's function, from its abstract origin; NULL when DWARF has none. */
static const char *linkage_name(Dwarf_Die *die) {
        Dwarf_Attribute attr;

        if (dwarf_attr_integrate(die, DW_AT_linkage_name, &attr) || dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name,
                                                                                         &attr))
                return dwarf_formstring(&attr);
        return NULL;
}

/* Source file of a DW_AT_call_file index in the CU. */
static const char *call_file(Dwarf_Die *cudie, Dwarf_Word idx) {
        Dwarf_Files *files;
        size_t nfiles;

        if (dwarf_getsrcfiles(cudie, &files, &nfiles) != 0 || idx >= nfiles)
                return NULL;
        return dwarf_filesrc(files, idx, NULL, NULL);
}

/* How deep nested_scopes() looks: namespaces and types around a function, and blocks and inlines within it. */
#define NESTED_SCOPES_MAX 64

/* Append to PATH (N so far) the scopes at ADDR under PARENT, outermost first: a function (and the blocks and inlined
 * calls in it) found inside namespaces, types and modules too. Returns the new N. */
static int nested_walk(Dwarf_Die *parent, Dwarf_Addr addr, Dwarf_Die *path, int n, int level) {
        Dwarf_Die child;

        if (level >= NESTED_SCOPES_MAX || n >= NESTED_SCOPES_MAX || dwarf_child(parent, &child) != 0)
                return n;
        do {
                int tag = dwarf_tag(&child);

                if (tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine || tag == DW_TAG_lexical_block) {
                        if (dwarf_haspc(&child, addr) == 1) {
                                path[n] = child;
                                return nested_walk(&child, addr, path, n + 1, level + 1);
                        }
                } else if (n == 0 && (tag == DW_TAG_namespace || tag == DW_TAG_structure_type ||
                                      tag == DW_TAG_class_type || tag == DW_TAG_union_type || tag == DW_TAG_module ||
                                      tag == DW_TAG_enumeration_type || tag == DW_TAG_variant_part ||
                                      tag == DW_TAG_variant)) {
                        int m = nested_walk(&child, addr, path, n, level + 1);
                        if (m > n)
                                return m;
                }
                /* A hostile DW_AT_sibling could point back: only forward, so that the walk ends. */
                Dwarf_Off here = dwarf_dieoffset(&child);
                if (dwarf_siblingof(&child, &child) != 0 || dwarf_dieoffset(&child) <= here)
                        break;
        } while (true);
        return n;
}

/* The scopes at ADDR in CUDIE, innermost first as dwarf_getscopes() gives them, for the functions it does not find:
 * libdw looks for them at the top of the CU only, and rustc puts every function in the namespaces of its path
 * (a trait impl's method inside the impl's namespace), so a Rust frame had no inlined frames. */
static int nested_scopes(Dwarf_Die *cudie, Dwarf_Addr addr, Dwarf_Die **ret) {
        Dwarf_Die path[NESTED_SCOPES_MAX];
        int n = nested_walk(cudie, addr, path, 0, 0);
        Dwarf_Die *scopes;

        if (n <= 0)
                return 0;
        scopes = calloc((size_t) n, sizeof *scopes);
        if (!scopes)
                return 0;
        for (int i = 0; i < n; i++)
                scopes[i] = path[n - 1 - i];
        *ret = scopes;
        return n;
}

/* The unit of ADDR (a module address) found by the units' own ranges, for a module whose DWARF has no .debug_aranges,
 * which libdw's lookups need: Go's linker writes none. NULL when it has aranges (they answered already), or no unit
 * covers ADDR. */
static Dwarf_Die *cu_by_ranges(Dwfl_Module *m, Dwarf_Addr addr, Dwarf_Die *buf, Dwarf_Addr *ret_bias) {
        Dwarf_Aranges *aranges;
        Dwarf_Off off = 0, next;
        size_t hsize, n_aranges = 0;
        Dwarf *dw = dwfl_module_getdwarf(m, ret_bias);

        if (!dw || (dwarf_getaranges(dw, &aranges, &n_aranges) == 0 && n_aranges > 0))
                return NULL;
        while (dwarf_nextcu(dw, off, &next, &hsize, NULL, NULL, NULL) == 0) {
                if (dwarf_offdie(dw, off + hsize, buf) && dwarf_haspc(buf, addr - *ret_bias) > 0)
                        return buf;
                off = next;
        }
        return NULL;
}

/* Resolve ADDR (a module address, already adjusted to point into the call) into OUT[0..*n): inlined call sites
 * innermost first, the containing function last. */
static int resolve(Dwfl_Module *m, GElf_Addr addr, bool source, bool demangle, SymFrame *out, size_t max, size_t *n) {
        const char *name, *file = NULL;
        int line = 0, column = 0, nscopes = 0;
        GElf_Off offset = 0;
        GElf_Sym sym;
        Dwarf_Die *scopes = NULL, *cudie, cu_buf;
        bool by_ranges = false;
        Dwarf_Addr dwbias;
        Dwfl_Line *l;
        size_t k = 0;

        name = dwfl_module_addrinfo(m, addr, &offset, &sym, NULL, NULL, NULL);
        if (source) {
                l = dwfl_module_getsrc(m, addr);
                if (l)
                        file = dwfl_lineinfo(l, NULL, &line, &column, NULL, NULL);
                cudie = dwfl_module_addrdie(m, addr, &dwbias);
                if (!cudie && (cudie = cu_by_ranges(m, addr, &cu_buf, &dwbias)))
                        by_ranges = true;
                if (by_ranges && !file) {
                        Dwarf_Line *dl = dwarf_getsrc_die(cudie, addr - dwbias);

                        file = dl ? dwarf_linesrc(dl, NULL, NULL) : NULL;
                        if (file) {
                                (void) dwarf_lineno(dl, &line);
                                (void) dwarf_linecol(dl, &column);
                        }
                }
                /* dwarf_getscopes() continues with an inline's abstract origin after the first inlined instance;
                 * the concrete nesting (b inlined in a inlined in f) is the DIE path to the innermost scope. */
                if (by_ranges)
                        /* Go's: an inline's abstract origin is often in another unit, where dwarf_getscopes() (0.188)
                         * does not find it, and leaks its answer. */
                        nscopes = nested_scopes(cudie, addr - dwbias, &scopes);
                else if (cudie && (nscopes = dwarf_getscopes(cudie, addr - dwbias, &scopes)) > 0) {
                        Dwarf_Die innermost = scopes[0];

                        /* Without inlines, or one level of them, its answer is the nesting already; the walk from the
                         * unit's start that dwarf_getscopes_die() does costs the unit's size (Go's runtime is one
                         * unit of a hundred thousand entries). */
                        if (dwarf_tag(&scopes[0]) == DW_TAG_inlined_subroutine &&
                            (nscopes < 2 || dwarf_tag(&scopes[1]) != DW_TAG_subprogram)) {
                                free(scopes);
                                scopes = NULL;
                                nscopes = dwarf_getscopes_die(&innermost, &scopes);
                        }
                } else if (cudie)
                        nscopes = nested_scopes(cudie, addr - dwbias, &scopes);
        }

        /* Each inlined frame's position is where it is; its caller's is its call site. */
        for (int i = 0; i < nscopes && k + 1 < max; i++) {
                Dwarf_Die *die = &scopes[i];
                Dwarf_Attribute attr;
                Dwarf_Word val;

                if (dwarf_tag(die) != DW_TAG_inlined_subroutine)
                        continue;
                out[k] = (SymFrame) { .inlined = true, .line = line > 0 ? (unsigned) line : 0,
                                      .column = column > 0 ? (unsigned) column : 0 };
                /* DW_AT_name is "operator()" or "lambda": the linkage name (through the abstract origin) says whose. */
                if (set_name(&out[k], linkage_name(die), dwarf_diename(die), demangle) < 0 ||
                    set_str(&out[k].file, file) < 0)
                        goto oom;
                k++;
                file = NULL;
                line = column = 0;
                if (dwarf_formudata(dwarf_attr(die, DW_AT_call_file, &attr), &val) == 0)
                        file = call_file(cudie, val);
                if (dwarf_formudata(dwarf_attr(die, DW_AT_call_line, &attr), &val) == 0)
                        line = (int) val;
                if (dwarf_formudata(dwarf_attr(die, DW_AT_call_column, &attr), &val) == 0)
                        column = (int) val;
        }
        out[k] = (SymFrame) { .offset = name ? offset : 0, .line = line > 0 ? (unsigned) line : 0,
                              .column = column > 0 ? (unsigned) column : 0 };
        if (set_name(&out[k], name, NULL, demangle) < 0 || set_str(&out[k].file, file) < 0)
                goto oom;
        k++;
        free(scopes);
        *n = k;
        return 0;
oom:
        for (size_t i = 0; i <= k && i < max; i++)
                sym_frame_done(&out[i]);
        free(scopes);
        return -ENOMEM;
}

/* The frames of ELF address ADDR in M, from its memo or resolved now. -ENXIO: M cannot be opened (its memo from the
 * cache answered until now); -ENOMEM. */
static int memo_resolve(Symbolizer *s, SymModule *m, GElf_Addr addr, const SymFrame **ret, size_t *ret_n) {
        SymFrame tmp[INLINE_DEPTH_MAX + 1];
        SymEntry *e = memo_find(m, addr), entry;
        bool source, deferred;
        size_t n;
        int r;

        /* A hit resolved without source (past an earlier capture's deadline, or deferred) is resolved again when
         * source is possible now, unless the module is known to have no DWARF (a JVM's libjvm.so: resolving its
         * pcs again doubled the symbols' cost for nothing). Deferred while the module's DWARF is not loaded (nor
         * known to be missing): the symbols alone, as a provisional answer, which the lookup with source resolves
         * again (then the miss). */
        deferred = (!e || !e->source) && s->source && s->source_deferred && m->debuginfo < 0;
        if (deferred)
                s->stats.source_deferred++;
        source = (!e || !e->source) && !deferred && m->debuginfo != 0 && want_source(s);
        if (e && !source) {
                s->stats.addr_hits++;
                *ret = &m->pool[e->first];
                *ret_n = e->count;
                return 0;
        }
        if (!module_ensure_open(s, m))
                return -ENXIO;
        if (!deferred)
                s->stats.addr_misses++;
        r = resolve(m->mod, addr + m->bias, source, s->demangle, tmp, ELEMENTSOF(tmp), &n);
        if (r < 0)
                return r;
        if (source) {
                note_debuginfo(m);
                m->dirty = m->dirty || m->debuginfo > 0;
        }
        if (!GREEDY_REALLOC(m->pool, m->pool_alloc, m->n_pool + n)) {
                for (size_t i = 0; i < n; i++)
                        sym_frame_done(&tmp[i]);
                return -ENOMEM;
        }
        memcpy(&m->pool[m->n_pool], tmp, n * sizeof *tmp);
        entry = (SymEntry) { .addr = addr, .first = (uint32_t) m->n_pool, .count = (uint32_t) n, .source = source };
        if (e)
                *e = entry;
        else
                r = memo_insert(m, entry);
        m->n_pool += n;
        if (r < 0)
                return r;
        *ret = &m->pool[m->n_pool - n];
        *ret_n = n;
        return 0;
}

/* Append the frames SF[0..N) of the pc in TMPL to T. A symbolizer without source gives the containing function only
 * (the last frame), without file:line, as a lookup of its own would: a memo from the cache holds more. */
static int append_frames(Symbolizer *s, ThreadSnapshot *t, const UserFrame *tmpl, const SymFrame *sf, size_t n) {
        if (!s->source && n > 1) {
                sf += n - 1;
                n = 1;
        }
        for (size_t i = 0; i < n; i++) {
                UserFrame *f = thread_add_frame(t);

                if (!f)
                        return -ENOMEM;
                f->pc = tmpl->pc;
                f->activation = tmpl->activation;
                f->method = tmpl->method;
                f->module = tmpl->module;
                f->inlined = sf[i].inlined;
                /* The lookup used pc-1 for a return address; the offset shown is that of pc itself. */
                f->function_offset = sf[i].function && !sf[i].inlined ? sf[i].offset + (tmpl->activation ? 0 : 1) : 0;
                f->line = s->source ? sf[i].line : 0;
                f->column = s->source ? sf[i].column : 0;
                if (set_str(&f->function, sf[i].function) < 0 || set_str(&f->linkage_name, sf[i].linkage_name) < 0 ||
                    set_str(&f->file, s->source ? sf[i].file : NULL) < 0)
                        return -ENOMEM;
        }
        return (int) n;
}

int symbolizer_add_frames(Symbolizer *s, SymModule *sm, Dwfl_Module *mod, const UserFrame *tmpl,
                          ThreadSnapshot *t) {
        SymFrame tmp[INLINE_DEPTH_MAX + 1];
        const SymFrame *sf;
        GElf_Addr pbias, addr;
        size_t n;
        int r;

        if (!mod || !dwfl_module_getelf(mod, &pbias))
                return append_frames(s, t, tmpl, &(SymFrame) {}, 1);
        /* Return addresses point after the call: look up the call itself. */
        addr = tmpl->pc - (tmpl->activation ? 0 : 1);
        if (sm) {
                r = memo_resolve(s, sm, addr - pbias, &sf, &n);
                if (r >= 0)
                        return append_frames(s, t, tmpl, sf, n);
                if (r != -ENXIO)
                        return r;
        }
        /* Not cacheable (the vdso, a binary without build-id, one that cannot be opened offline): resolve in the
         * process's own module. */
        r = resolve(mod, addr, want_source(s), s->demangle, tmp, ELEMENTSOF(tmp), &n);
        if (r < 0)
                return r;
        r = append_frames(s, t, tmpl, tmp, n);
        for (size_t i = 0; i < n; i++)
                sym_frame_done(&tmp[i]);
        return r;
}

/* Whether the frames of one pc, old (N_OLD) and new (N_NEW), say the same: names, files and lines. */
static bool same_frames(const UserFrame *a, size_t n_a, const UserFrame *b, size_t n_b) {
        if (n_a != n_b)
                return false;
        for (size_t i = 0; i < n_a; i++)
                if (!streq_ptr(a[i].function, b[i].function) || !streq_ptr(a[i].file, b[i].file) ||
                    a[i].line != b[i].line)
                        return false;
        return true;
}

/* One thread's frames again: each pc (an inline chain shares it: the inlined frames first, the function last) from
 * its module's build-id, when a file with that build-id is found today; otherwise as they were. */
static int resymbolize_thread(Symbolizer *s, const Snapshot *snap, ThreadSnapshot *t, const char *root,
                              FILE *report, unsigned *changed) {
        ThreadSnapshot fresh = {};
        size_t i = 0;
        int r = 0;

        while (i < t->n_frames && r >= 0) {
                size_t j = i;
                const UserFrame *last;
                const ModuleInfo *mi;
                SymModule *m = NULL;
                const SymFrame *sf;
                size_t n, before = fresh.n_frames;

                while (j + 1 < t->n_frames && t->frames[j].inlined && t->frames[j + 1].pc == t->frames[i].pc)
                        j++;
                last = &t->frames[j];
                mi = snapshot_frame_module(snap, last);
                if (mi && mi->build_id && mi->path && last->pc >= mi->start && last->pc < mi->end)
                        m = get_module(s, mi->build_id, mi->path, root);
                if (m && memo_resolve(s, m, last->pc - (last->activation ? 0 : 1) - mi->bias, &sf, &n) >= 0)
                        r = append_frames(s, &fresh, last, sf, n);
                else
                        for (size_t k = i; k <= j && r >= 0; k++) {
                                UserFrame *f = thread_add_frame(&fresh);
                                if (!f) {
                                        r = -ENOMEM;
                                        break;
                                }
                                *f = t->frames[k];
                                f->function = f->linkage_name = f->file = NULL;
                                if (set_str(&f->function, t->frames[k].function) < 0 ||
                                    set_str(&f->linkage_name, t->frames[k].linkage_name) < 0 ||
                                    set_str(&f->file, t->frames[k].file) < 0)
                                        r = -ENOMEM;
                        }
                if (r >= 0 && !same_frames(&t->frames[i], j - i + 1, &fresh.frames[before], fresh.n_frames - before)) {
                        (*changed)++;
                        if (report) {
                                _cleanup_free_ char *was = escape_string(last->function ?: "??"),
                                                    *now = escape_string(fresh.frames[fresh.n_frames - 1].function ?: "??");
                                fprintf(report, "  pid %d TID %d 0x%016" PRIx64 ": %s -> %s\n", (int) snap->pid,
                                        (int) t->tid, last->pc, was ?: "?", now ?: "?");
                        }
                }
                i = j + 1;
        }
        if (r < 0) {
                for (size_t k = 0; k < fresh.n_frames; k++)
                        user_frame_done(&fresh.frames[k]);
                free(fresh.frames);
                return r;
        }
        for (size_t k = 0; k < t->n_frames; k++)
                user_frame_done(&t->frames[k]);
        free(t->frames);
        t->frames = fresh.frames;
        t->n_frames = fresh.n_frames;
        return 0;
}

int symbolizer_resymbolize(Symbolizer *s, Snapshot *snap, const char *root, FILE *report, unsigned *ret_changed) {
        unsigned changed = 0;
        int r;

        for (size_t i = 0; i < snap->n_threads; i++) {
                r = resymbolize_thread(s, snap, &snap->threads[i], root, report, &changed);
                if (r < 0)
                        return r;
        }
        for (size_t p = 0; p < snap->n_peers; p++) {
                unsigned c = 0;
                r = symbolizer_resymbolize(s, snap->peers[p], root, report, &c);
                if (r < 0)
                        return r;
                changed += c;
        }
        for (size_t i = 0; i < snap->n_modules; i++) {
                SymModule *m = snap->modules[i].build_id && snap->modules[i].path
                                       ? get_module(s, snap->modules[i].build_id, snap->modules[i].path, root)
                                       : NULL;
                if (m)
                        snap->modules[i].debuginfo = sym_module_has_debuginfo(m);
        }
        *ret_changed = changed;
        return 0;
}

int symbolizer_render_resymbolized(Symbolizer *s, const char *json, size_t len, RenderFormat format,
                                   const RenderOptions *o, FILE *f, FILE *report, const char **ret_why) {
        _cleanup_snapshot_free_ Snapshot *snap = NULL;
        unsigned changed = 0;
        int r;

        r = snapshot_parse_stored(json, len, &snap, ret_why);
        if (r < 0)
                return r;
        r = symbolizer_resymbolize(s, snap, NULL, report, &changed);
        if (r < 0)
                return r;
        if (report)
                fprintf(report, "%u frame(s) resolve differently now.\n", changed);
        return snapshot_render(snap, format, o, f);
}
