/* python.c: CPython's own frames, read from outside with process_vm_readv, never stopping the process. Every read
 * is bounded and every pointer checked by reading through it: a chain that does not hold ends with its reason. */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc-util.h"
#include "base/log.h"
#include "base/macro.h"
#include "base/unaligned.h"
#include "model/proc-parse.h"
#include "proc/proc-read.h"
#include "runtime/python-lines.h"
#include "runtime/python-offsets.h"
#include "runtime/python-scan.h"
#include "runtime/python.h"

#define PY_INTERPRETERS_MAX 64U
#define PY_THREADS_MAX 65536U
#define PY_STRING_CHARS_MAX 1024U
#define PY_LINETABLE_BYTES_MAX (256U * 1024)
#define PY_CODES_MAX 65536U
/* The bytes of struct _gil_runtime_state a wait inside it may be on (its mutex and condition variables): 3.8-3.13
 * all fit, with room. */
#define PY_GIL_STATE_BYTES 320U
/* glibc's struct pthread holds the thread's TID at this offset (glibc 2.28-2.40): tried first. x86-64's opens
 * with its TCB; aarch64's has the TCB after it, and the TID follows the list links. */
#if defined(__aarch64__)
#define PTHREAD_TID_OFFSET_GLIBC 16U
#else
#define PTHREAD_TID_OFFSET_GLIBC 720U
#endif
#define PTHREAD_SCAN_BYTES 2048U
/* _PyInterpreterFrame.owner: FRAME_OWNED_BY_CSTACK (Include/internal/pycore_frame.h, 3.12+): a shim frame that
 * _PyEval_EvalFrameDefault pushes below the frames of its call. */
#define PY_FRAME_OWNED_BY_CSTACK 3

typedef struct PyThreadRef {
        pid_t tid;
        uint64_t tstate;
        uint64_t ident;         /* threading.get_ident(): what an RLock records as its owner */
} PyThreadRef;

/* A code object as decoded, cached per capture by address. */
typedef struct PyCode {
        uint64_t addr;
        bool valid;             /* it is a code object, and its names could be read */
        char *qualname;
        char *filename;
        int firstlineno;
        uint8_t *linetable;
        size_t linetable_len;
        bool memo;              /* MEMO_LINE is the line of MEMO_INSTR: a recursion repeats its frames' places */
        uint64_t memo_instr;
        int memo_line;
} PyCode;

struct PyProcess {
        pid_t pid;
        PyOffsets off;
        char version[32];
        uint64_t runtime;
        uint64_t code_type;     /* PyCode_Type, once a code object's type was seen to be named "code" */
        pid_t gil_holder;
        uint64_t gil;           /* the _gil_runtime_state (the main interpreter's from 3.12), 0 when unknown */
        PyThreadRef *threads;
        size_t n_threads, n_threads_allocated;
        PyCode *codes;          /* open addressing by address, size a power of two */
        size_t codes_size, codes_used;
        PyCode overflow;        /* what a code object is when the cache is full: not read */
};

/* ---- memory ---- */

static int py_read(const PyProcess *p, uint64_t addr, void *buf, size_t n) {
        return proc_mem_read(p->pid, addr, buf, n);
}

static int py_read_ptr(const PyProcess *p, uint64_t addr, uint64_t *ret) {
        return py_read(p, addr, ret, sizeof *ret);
}

/* Up to N bytes at ADDR, as many as lie before the end of their mapping, and at least MIN_N: the bytes read, or
 * -EFAULT. An object and the data that follows it in one read, where a read of the head would need a second. */
static ssize_t py_read_upto(const PyProcess *p, uint64_t addr, void *buf, size_t min_n, size_t n) {
        ssize_t k = proc_mem_read_upto(p->pid, addr, buf, n);

        if (k == -EFAULT && min_n < n && addr != 0)
                /* The first page itself ends the mapping: the head alone. */
                return py_read(p, addr, buf, min_n) < 0 ? -EFAULT : (ssize_t) min_n;
        if (k < 0)
                return k;
        return (size_t) k >= min_n ? k : -EFAULT;
}

/* The bytes to read of a structure so that every field at OFFS[0..N) (each SIZE bytes at most) is covered. */
static size_t span_of(const uint32_t *offs, size_t n) {
        size_t end = 0;

        for (size_t i = 0; i < n; i++)
                if (offs[i] != PY_OFF_NONE)
                        end = MAX(end, (size_t) offs[i] + 8);
        return end;
}

/* ---- finding the runtime ---- */

typedef struct PyFind {
        PyProcess *p;
        Symbolizer *sym;
        UnwindProcess *up;
        const char *exe;        /* /proc/PID/exe as maps names it: " (deleted)" for a file replaced since */
        uint64_t runtime;
        Dwfl_Module *mod;       /* the module that holds it */
        uint64_t version_addr;  /* Py_Version, 0 when the build has none (before 3.11) */
        unsigned name_minor;    /* from the module's name: libpython3.9.so → 9; 0 when none */
        const char *old;        /* why a module named as an older Python, without a runtime we know, is not read */
        /* The modules named as a CPython 3.8+ with neither symbol nor section, to scan (python-scan.c): a shared
         * build's python3.X comes before its libpython. */
        struct {
                Dwfl_Module *mod;
                uint64_t version_addr;
                unsigned minor;
        } scan[4];
        size_t n_scan;
        int error;
} PyFind;

/* The version in a module's file name, python3.11 or libpython3.9.so.1.0 (also "python3.11 (deleted)"), as
 * major * 100 + minor; 0 when it names none. */
static unsigned version_from_name(const char *path) {
        const char *b = path ? strrchr(path, '/') : NULL, *v;
        unsigned major, minor = 0;

        b = b ? b + 1 : path;
        if (!b)
                return 0;
        if (startswith(b, "lib"))
                b += strlen("lib");
        if (!startswith(b, "python") || (b[6] != '2' && b[6] != '3') || b[7] != '.')
                return 0;
        major = (unsigned) (b[6] - '0');
        for (v = b + 8; *v >= '0' && *v <= '9' && minor < 100; v++)
                minor = minor * 10 + (unsigned) (*v - '0');
        return v == b + 8 ? 0 : major * 100 + minor;
}

static unsigned minor_from_name(const char *path) {
        unsigned v = version_from_name(path);

        return v / 100 == 3 ? v % 100 : 0;
}

static bool candidate_module(const char *name, const char *exe) {
        const char *b = name ? strrchr(name, '/') : NULL;

        if (!name || name[0] != '/')
                return false;
        b = b ? b + 1 : name;
        /* The executable (python3.11, an embedding program linked statically), or a libpython3.X.so. */
        return (exe && streq(name, exe)) || startswith(b, "libpython3") || startswith(b, "python3");
}

static int find_runtime_cb(Dwfl_Module *mod, void **userdata, const char *name, Dwarf_Addr start, void *arg) {
        static const char *const roots[] = { "_PyRuntime", "Py_Version" };
        uint64_t addr = 0, size = 0, addrs[ELEMENTSOF(roots)] = {}, sizes[ELEMENTSOF(roots)];
        PyFind *f = arg;
        unsigned v;
        int r;

        (void) userdata;
        (void) start;
        /* A file on a FUSE mount whose daemon does not answer is not opened (unwind.h): its symbols neither. */
        if (unwind_process_module_not_read(f->up, name))
                return DWARF_CB_OK;
        /* libdwfl knows the files by the names it opens them by (/proc/PID/root/…, or …/map_files/… for a
         * deleted one): the name that says what the module is is the one maps shows. */
        name = unwind_process_module_name(f->up, name);
        v = version_from_name(name);
        if (v > 0 && v < 308 && !f->old)
                /* 3.7 has a _PyRuntime (and its own answer below), 3.6 and 2.7 none: all are named. */
                f->old = v < 300 ? "CPython 2, which stackwatch does not read (3.8 and later are read)"
                                 : "CPython 3.7 or older, which stackwatch does not read (3.8 and later are read)";
        if (!candidate_module(name, f->exe))
                return DWARF_CB_OK;
        /* Both names in one pass over the symbol table (a program's executable is asked too, every dump). */
        r = symbolizer_find_symbols(f->sym, mod, roots, ELEMENTSOF(roots), addrs, sizes);
        if (r >= 0) {
                addr = addrs[0];
                size = sizes[0];
                r = addr ? 0 : -ENOENT;
        }
        if (r == -ENOENT)
                /* A build without the symbol (stripped of .symtab and .dynsym): 3.10+ put it in its own section. */
                r = symbolizer_find_symbol(f->sym, mod, ".PyRuntime", &addr, &size);
        if (r == -ENOMEM) {
                f->error = r;
                return DWARF_CB_ABORT;
        }
        if (r < 0) {
                /* Scanned if no module has either (runtime_by_scan()): only one named as a CPython we read, never
                 * any program's executable. */
                if (f->n_scan < ELEMENTSOF(f->scan) && v >= 308 && v < 400) {
                        f->scan[f->n_scan].mod = mod;
                        f->scan[f->n_scan].minor = v % 100;
                        f->scan[f->n_scan].version_addr = addrs[1];
                        f->n_scan++;
                }
                return DWARF_CB_OK;
        }
        f->runtime = addr;
        f->mod = mod;
        f->version_addr = addrs[1];
        f->name_minor = minor_from_name(name);
        return DWARF_CB_ABORT;
}

/* Neither the symbol nor the section: each module named as a CPython scanned, with the layout of the version its
 * Py_Version or its name says (3.13+ find their own table). */
static int runtime_by_scan(PyProcess *p, UnwindProcess *up, PyFind *f, const char **ret_why) {
        const ProcMap *maps;
        size_t n_maps;

        maps = unwind_process_maps(up, &n_maps);
        for (size_t i = 0; i < f->n_scan; i++) {
                uint32_t version = 0;
                PyOffsets o;
                bool known;
                int r;

                if (f->scan[i].version_addr == 0 ||
                    py_read(p, f->scan[i].version_addr, &version, sizeof version) < 0)
                        version = (3U << 24) | (f->scan[i].minor << 16);
                known = py_offsets_for_version(version, &o) == 0;
                r = py_scan_runtime(p->pid, f->scan[i].mod, maps, n_maps, known ? &o : NULL, &f->runtime);
                if (r == -ENOENT)
                        continue;
                if (r < 0)
                        return r;
                log_debug("_PyRuntime of %d found by scan at 0x%" PRIx64, (int) p->pid, f->runtime);
                f->mod = f->scan[i].mod;
                f->version_addr = f->scan[i].version_addr;
                f->name_minor = f->scan[i].minor;
                return 0;
        }
        *ret_why = "no _PyRuntime: no symbol or section names it, and the data of the modules named as a CPython "
                   "hold no running interpreter";
        return -EPROTONOSUPPORT;
}

static void version_string(uint32_t v, char *buf, size_t n) {
        unsigned level = (v >> 4) & 15, serial = v & 15;

        if (level == 0xf || level == 0)
                snprintf(buf, n, "%u.%u.%u", v >> 24, (v >> 16) & 255, (v >> 8) & 255);
        else
                snprintf(buf, n, "%u.%u.%u%s%u", v >> 24, (v >> 16) & 255, (v >> 8) & 255,
                         level == 0xa ? "a" : level == 0xb ? "b" : "rc", serial);
}

/* The buffers the reader copies structures into (a thread state, a code object, a str's head, a frame): every
 * offset it reads there must fit, whatever a layout (3.13's comes from the target's own memory) says. */
#define PY_TSTATE_BYTES 512U
#define PY_CODE_BYTES 512U
#define PY_STR_HEAD_BYTES 96U
/* Bytes read after a str's head, for its characters, and of a bytes object with its head: one read each for the
 * names, paths and line tables of most code objects. */
#define PY_STR_INLINE_BYTES 160U
#define PY_BYTES_INLINE_BYTES 512U
#define PY_FRAME_BYTES_MAX 256U

static bool fits(uint32_t off, size_t width, size_t size) {
        return off == PY_OFF_NONE || (size_t) off + width <= size;
}

static bool layout_fits(const PyOffsets *o) {
        if (!fits(o->tstate_next, 8, PY_TSTATE_BYTES) || !fits(o->tstate_interp, 8, PY_TSTATE_BYTES) ||
            !fits(o->tstate_thread_id, 8, PY_TSTATE_BYTES) || !fits(o->tstate_native_thread_id, 8, PY_TSTATE_BYTES))
                return false;
        if (!fits(o->code_filename, 8, PY_CODE_BYTES) || !fits(o->code_name, 8, PY_CODE_BYTES) ||
            !fits(o->code_qualname, 8, PY_CODE_BYTES) || !fits(o->code_firstlineno, 4, PY_CODE_BYTES) ||
            !fits(o->code_linetable, 8, PY_CODE_BYTES))
                return false;
        if (!fits(o->unicode_length, 8, PY_STR_HEAD_BYTES) || !fits(o->unicode_state, 4, PY_STR_HEAD_BYTES) ||
            !fits(o->unicode_compact_data, 8, PY_STR_HEAD_BYTES) || o->unicode_state_kind_shift > 24)
                return false;
        if (o->frames == PY_FRAMES_OBJECT)
                return fits(o->frame_back, 8, PY_FRAME_BYTES_MAX) && fits(o->frame_code, 8, PY_FRAME_BYTES_MAX) &&
                       fits(o->frame_lasti, 4, PY_FRAME_BYTES_MAX);
        return o->iframe_size <= PY_FRAME_BYTES_MAX && fits(o->iframe_code, 8, o->iframe_size) &&
               fits(o->iframe_previous, 8, o->iframe_size) && fits(o->iframe_instr, 8, o->iframe_size) &&
               fits(o->iframe_owner, 1, o->iframe_size) && fits(o->iframe_is_entry, 1, o->iframe_size);
}

/* The version of a runtime without Py_Version (before 3.11) whose module's name says none (a renamed interpreter, a
 * program that links libpython statically): the PY_VERSION string in the module's .rodata, which Py_GetVersion()
 * prints. Only a version the strings name alone counts; two minor versions named say nothing. 0 when unknown. */
static uint32_t version_from_rodata(const PyFind *f) {
        uint32_t version = 0;
        int r;

        if (!f->mod)
                return 0;
        r = py_scan_version(f->mod, &version);
        if (r < 0) {
                log_debug("No CPython version in the .rodata of %d's runtime module: %s", (int) f->p->pid,
                          r == -ENOTUNIQ ? "more than one named" : "none named");
                return 0;
        }
        return version;
}

/* The layout: 3.13+ describe themselves at the start of _PyRuntime; older ones by Py_Version (3.11, 3.12), the
 * module's name, or the version string in its .rodata (3.8-3.10). */
static int py_layout(PyProcess *p, const PyFind *f, const char **ret_why) {
        uint8_t head[PY_DEBUG_OFFSETS_BYTES];
        uint32_t version = 0;
        int r;

        if (py_read(p, f->runtime, head, sizeof head) < 0) {
                *ret_why = "the interpreter's _PyRuntime cannot be read";
                return -EPROTONOSUPPORT;
        }
        r = py_offsets_from_debug(head, sizeof head, &p->off);
        if (r == 0) {
                if (!layout_fits(&p->off)) {
                        *ret_why = "a CPython whose _Py_DebugOffsets give offsets past the structures they describe";
                        return -EPROTONOSUPPORT;
                }
                version_string(p->off.version, p->version, sizeof p->version);
                return 0;
        }
        if (r != -EBADMSG) {
                *ret_why = "a CPython whose _Py_DebugOffsets we cannot read (a free-threaded build, or a later layout)";
                return -EPROTONOSUPPORT;
        }
        if (f->version_addr == 0 || py_read(p, f->version_addr, &version, sizeof version) < 0)
                version = f->name_minor > 0 ? (3U << 24) | (f->name_minor << 16) : version_from_rodata(f);
        if (version == 0) {
                *ret_why = "a CPython runtime of unknown version (no Py_Version, no version in its file name or in "
                           "its version string)";
                return -EPROTONOSUPPORT;
        }
        r = py_offsets_for_version(version, &p->off);
        if (r < 0) {
                *ret_why = "a CPython version stackwatch has no layout for (3.8 and later are read)";
                return -EPROTONOSUPPORT;
        }
        if ((version & 0xffff) == 0)
                snprintf(p->version, sizeof p->version, "3.%u", (version >> 16) & 255);
        else
                version_string(version, p->version, sizeof p->version);
        return 0;
}

/* ---- threads ---- */

static bool tid_in(const int *tids, size_t n, int32_t v) {
        for (size_t i = 0; i < n; i++)
                if (tids[i] == v)
                        return true;
        return false;
}

/* Before 3.11 a thread state knows its pthread_t (threading.get_ident()), not its TID: glibc's struct pthread
 * holds the TID. Its offset is glibc's business, so it is found: the one offset at which every thread state's
 * pthread holds a TID of the process (glibc's own tried first). */
static int pthread_tids(PyProcess *p, const uint64_t *idents, const int *given, size_t n_given) {
        _cleanup_free_ uint8_t *buf = NULL;
        _cleanup_free_ int *all = NULL;
        _cleanup_close_ int dirfd = -EBADF;
        const int *tids = given;
        size_t n_tids = n_given, best_n = 0;
        uint32_t best = PY_OFF_NONE;

        if (p->n_threads == 0)
                return 0;
        /* Every thread of the process, not only those a capture picked (--tid, a thread budget): any thread
         * state's pthread may be the one that tells the offset. */
        if (proc_open_dir(p->pid, 0, &dirfd) >= 0 && proc_list_numeric(dirfd, "task", &all, &n_tids) >= 0)
                tids = all;
        else
                n_tids = n_given;
        buf = malloc((size_t) p->n_threads * PTHREAD_SCAN_BYTES);
        if (!buf)
                return -ENOMEM;
        for (size_t i = 0; i < p->n_threads; i++)
                if (py_read(p, idents[i], buf + i * PTHREAD_SCAN_BYTES, PTHREAD_SCAN_BYTES) < 0)
                        memset(buf + i * PTHREAD_SCAN_BYTES, 0, PTHREAD_SCAN_BYTES);
        /* The offset at which the most thread states' pthreads hold a TID of the process (a thread that exited
         * meanwhile, or a pthread that cannot be read, holds none); glibc's own wins a tie. */
        for (uint32_t off = 0; off < PTHREAD_SCAN_BYTES; off += 4) {
                uint32_t o = off == 0 ? PTHREAD_TID_OFFSET_GLIBC : off == PTHREAD_TID_OFFSET_GLIBC ? 0 : off;
                size_t n = 0;

                for (size_t i = 0; i < p->n_threads; i++)
                        n += tid_in(tids, n_tids, unaligned_read_i32(buf + i * PTHREAD_SCAN_BYTES + o));
                if (n > best_n) {
                        best = o;
                        best_n = n;
                }
        }
        for (size_t i = 0; i < p->n_threads; i++) {
                int32_t tid = best == PY_OFF_NONE ? 0 : unaligned_read_i32(buf + i * PTHREAD_SCAN_BYTES + best);

                p->threads[i].tid = tid_in(tids, n_tids, tid) ? tid : 0;
        }
        return 0;
}

static int py_walk_threads(PyProcess *p, const int *tids, size_t n_tids) {
        const PyOffsets *o = &p->off;
        const uint32_t toffs[] = { o->tstate_next, o->tstate_interp, o->tstate_thread_id, o->tstate_native_thread_id };
        size_t tspan = span_of(toffs, ELEMENTSOF(toffs));
        _cleanup_free_ uint64_t *idents = NULL;
        size_t n_idents_allocated = 0;
        uint64_t interp, holder = 0;
        uint8_t tbuf[PY_TSTATE_BYTES];
        int r;

        assert(tspan <= sizeof tbuf);
        if (py_read_ptr(p, p->runtime + o->runtime_interpreters_head, &interp) < 0)
                return -EFAULT;
        if (o->runtime_gil != PY_OFF_NONE) {
                int32_t locked = 0;

                p->gil = p->runtime + o->runtime_gil;
                if (py_read(p, p->runtime + o->runtime_gil + o->gil_locked, &locked, sizeof locked) == 0 && locked)
                        (void) py_read_ptr(p, p->runtime + o->runtime_gil + o->gil_last_holder, &holder);
        }
        for (unsigned ni = 0; interp && ni < PY_INTERPRETERS_MAX; ni++) {
                uint64_t tstate, next_interp = 0, gil;

                if (py_read_ptr(p, interp + o->interp_threads_head, &tstate) < 0)
                        break;
                (void) py_read_ptr(p, interp + o->interp_next, &next_interp);
                if (o->interp_gil != PY_OFF_NONE && holder == 0 && py_read_ptr(p, interp + o->interp_gil, &gil) == 0) {
                        int32_t locked = 0;

                        /* The main interpreter is the last of the list: its GIL is the one that counts. */
                        p->gil = gil;

                        if (py_read(p, gil + o->gil_locked, &locked, sizeof locked) == 0 && locked)
                                (void) py_read_ptr(p, gil + o->gil_last_holder, &holder);
                }
                while (tstate && p->n_threads < PY_THREADS_MAX) {
                        PyThreadRef *t;

                        if (py_read(p, tstate, tbuf, tspan) < 0 || unaligned_read_u64(tbuf + o->tstate_interp) != interp)
                                break;  /* not a thread state of this interpreter: the list changed under us */
                        if (!GREEDY_REALLOC(p->threads, p->n_threads_allocated, p->n_threads + 1) ||
                            !GREEDY_REALLOC(idents, n_idents_allocated, p->n_threads + 1))
                                return -ENOMEM;
                        t = &p->threads[p->n_threads];
                        *t = (PyThreadRef) { .tstate = tstate };
                        if (o->tstate_native_thread_id != PY_OFF_NONE)
                                t->tid = (pid_t) unaligned_read_u64(tbuf + o->tstate_native_thread_id);
                        t->ident = idents[p->n_threads++] = unaligned_read_u64(tbuf + o->tstate_thread_id);
                        tstate = unaligned_read_u64(tbuf + o->tstate_next);
                }
                interp = next_interp;
        }
        if (o->tstate_native_thread_id == PY_OFF_NONE) {
                r = pthread_tids(p, idents, tids, n_tids);
                if (r < 0)
                        return r;
        }
        for (size_t i = 0; holder && i < p->n_threads; i++)
                if (p->threads[i].tstate == holder)
                        p->gil_holder = p->threads[i].tid;
        return 0;
}

int py_process_open(pid_t pid, UnwindProcess *up, Symbolizer *sym, const int *tids, size_t n_tids, PyProcess **ret,
                    const char **ret_why) {
        _cleanup_(py_process_freep) PyProcess *p = NULL;
        _cleanup_close_ int dirfd = -EBADF;
        _cleanup_free_ char *exe = NULL;
        PyFind f;
        int r;

        *ret = NULL;
        *ret_why = NULL;
        p = calloc(1, sizeof *p);
        if (!p)
                return -ENOMEM;
        p->pid = pid;
        /* The link as maps names the file (not realpath(), which would look it up in our own mount namespace). */
        r = proc_open_dir(pid, 0, &dirfd);
        if (r == 0)
                r = proc_readlink(dirfd, "exe", &exe);
        if (r == -ENOMEM)
                return r;
        f = (PyFind) { .p = p, .sym = sym, .up = up, .exe = exe };
        dwfl_getmodules(unwind_process_dwfl(up), find_runtime_cb, &f, 0);
        if (f.error < 0)
                return f.error;
        if (f.runtime == 0 && f.n_scan > 0) {
                r = runtime_by_scan(p, up, &f, ret_why);
                if (r == -ESRCH)
                        return 0;
                if (r < 0)
                        return r;
        }
        if (f.runtime == 0 && f.old) {
                *ret_why = f.old;
                return -EPROTONOSUPPORT;
        }
        if (f.runtime == 0)
                return 0;
        p->runtime = f.runtime;
        r = py_layout(p, &f, ret_why);
        if (r < 0)
                return r;
        r = py_walk_threads(p, tids, n_tids);
        if (r == -ENOMEM)
                return r;
        if (r < 0) {
                *ret_why = "the interpreter's list of interpreters cannot be read";
                return -EPROTONOSUPPORT;
        }
        *ret = TAKE_PTR(p);
        return 0;
}

PyProcess *py_process_free(PyProcess *p) {
        if (!p)
                return NULL;
        for (size_t i = 0; i < p->codes_size; i++) {
                free(p->codes[i].qualname);
                free(p->codes[i].filename);
                free(p->codes[i].linetable);
        }
        free(p->codes);
        free(p->threads);
        free(p);
        return NULL;
}

const char *py_process_version(const PyProcess *p) {
        return p->version;
}

int py_process_gil_range(const PyProcess *p, uint64_t *ret_start, uint64_t *ret_size) {
        if (!p->gil)
                return -ENOENT;
        *ret_start = p->gil;
        *ret_size = PY_GIL_STATE_BYTES;
        return 0;
}

pid_t py_process_gil_holder(const PyProcess *p) {
        return p->gil_holder;
}

/* ---- a thread's frames ---- */

void py_raw_stack_done(PyRawStack *st) {
        st->frames = mfree(st->frames);
        st->n = st->n_allocated = 0;
        st->have_tstate = false;
        st->end[0] = '\0';
        st->truncated = false;
}

static const PyThreadRef *find_thread(const PyProcess *p, pid_t tid) {
        for (size_t i = 0; i < p->n_threads; i++)
                if (p->threads[i].tid == tid)
                        return &p->threads[i];
        return NULL;
}

static int current_frame(const PyProcess *p, uint64_t tstate, uint64_t *ret) {
        const PyOffsets *o = &p->off;
        uint64_t cframe;

        if (o->tstate_cframe == PY_OFF_NONE)
                return py_read_ptr(p, tstate + o->tstate_frame, ret);
        if (py_read_ptr(p, tstate + o->tstate_cframe, &cframe) < 0)
                return -EFAULT;
        if (cframe == 0) {
                *ret = 0;
                return 0;
        }
        return py_read_ptr(p, cframe + o->cframe_current_frame, ret);
}

/* Frames are copied through a window: the bytes below a frame's end, as far down as they can be read, in one
 * process_vm_readv. 3.11+ keep a thread's frames on its own data stack, each one below the frame it called: one
 * window then holds tens of them, where a read per frame would hold the stopped thread ~1.5 µs a frame. */
#define PY_WINDOW_BYTES (16U * 1024)
/* The granule of the window's reads: a page or less, so that a page that cannot be read ends the window there. */
#define PY_WINDOW_GRANULE 4096U
/* The bytes of one frame we read at most (all the fields we use lie within). */

typedef struct PyWindow {
        uint64_t start, end;    /* the remote bytes held: [start, end); start == end when none */
        uint8_t *base;          /* where BUF holds remote address START */
        uint8_t buf[PY_WINDOW_BYTES];
} PyWindow;

/* Fill W with [ADDR, ADDR + N) and, WIDE, with what lies below it, down to PY_WINDOW_BYTES in all: the granules
 * from the top down, so that a read stops at the first one that cannot be read and keeps what came above. */
static int window_fill(const PyProcess *p, PyWindow *w, uint64_t addr, size_t n, bool wide) {
        ProcMemBlock b[PY_WINDOW_BYTES / PY_WINDOW_GRANULE + 1];
        uint64_t end = addr + n, lo = wide && end > PY_WINDOW_BYTES ? end - PY_WINDOW_BYTES : addr;
        size_t k = 0;
        ssize_t got;

        if (addr == 0 || end < addr || n > PY_WINDOW_BYTES)
                return -EFAULT;
        lo = MIN(lo, addr);
        for (uint64_t hi = end; hi > lo && k < ELEMENTSOF(b);) {
                uint64_t g = MAX((hi - 1) / PY_WINDOW_GRANULE * PY_WINDOW_GRANULE, lo);

                b[k++] = (ProcMemBlock) { .addr = g, .buf = w->buf + (g - lo), .size = hi - g };
                hi = g;
        }
        w->start = w->end = 0;
        got = proc_mem_readv(p->pid, b, k, NULL);
        if (got < 0)
                return (int) got;
        if ((size_t) got < n)
                return -EFAULT;
        w->start = end - (uint64_t) got;
        w->end = end;
        w->base = w->buf + (w->start - lo);
        return 0;
}

/* The N bytes at ADDR, from the window or read into it. */
static const uint8_t *window_get(const PyProcess *p, PyWindow *w, uint64_t addr, size_t n, bool wide) {
        if (addr < w->start || addr + n > w->end || addr + n < addr) {
                if (window_fill(p, w, addr, n, wide) < 0)
                        return NULL;
        }
        return w->base + (addr - w->start);
}

int py_read_stack(PyProcess *p, pid_t tid, unsigned max_frames, PyRawStack *ret) {
        const PyOffsets *o = &p->off;
        const PyThreadRef *t = find_thread(p, tid);
        const uint32_t objoffs[] = { o->frame_back, o->frame_code, o->frame_lasti };
        size_t span = o->frames == PY_FRAMES_OBJECT ? span_of(objoffs, ELEMENTSOF(objoffs)) : o->iframe_size;
        PyWindow w;
        uint64_t frame, prev = 0;

        py_raw_stack_done(ret);
        if (!t)
                return 0;
        ret->have_tstate = true;
        max_frames = MIN(max_frames ?: PY_FRAMES_MAX, PY_FRAMES_MAX);
        if (span == 0 || span > PY_FRAME_BYTES_MAX) {
                snprintf(ret->end, sizeof ret->end, "frame layout not known");
                return 0;
        }
        if (current_frame(p, t->tstate, &frame) < 0) {
                snprintf(ret->end, sizeof ret->end, "thread state unreadable");
                return 0;
        }
        w.start = w.end = 0;
        for (unsigned steps = 0; frame; steps++) {
                const uint8_t *buf;
                PyRawFrame *rf;

                /* Shim frames are not counted, but bound the walk too: a cycle of them ends here. */
                if (ret->n >= max_frames || steps >= 2 * max_frames) {
                        snprintf(ret->end, sizeof ret->end, "more than %u Python frames", max_frames);
                        ret->truncated = true;
                        break;
                }
                /* Frame objects (before 3.11) are the heap's: a window only where the chain runs down the heap,
                 * as a recursion's do, else one read each as before. */
                buf = window_get(p, &w, frame, span,
                                 o->frames == PY_FRAMES_INTERP || (prev > frame && prev - frame < PY_WINDOW_BYTES));
                if (!buf) {
                        snprintf(ret->end, sizeof ret->end, "frame at 0x%" PRIx64 " unreadable", frame);
                        break;
                }
                /* Grown as the walk goes: most threads are shallow, and a thousand of them should not cost a
                 * thousand times the deepest. */
                if (!GREEDY_REALLOC(ret->frames, ret->n_allocated, ret->n + 1))
                        return -ENOMEM;
                if (o->frames == PY_FRAMES_OBJECT) {
                        rf = &ret->frames[ret->n++];
                        *rf = (PyRawFrame) { .code = unaligned_read_u64(buf + o->frame_code),
                                             .instr = (uint64_t) (int64_t) unaligned_read_i32(buf + o->frame_lasti),
                                             .entry = true };
                        prev = frame;
                        frame = unaligned_read_u64(buf + o->frame_back);
                        continue;
                }
                if (buf[o->iframe_owner] == PY_FRAME_OWNED_BY_CSTACK && o->iframe_is_entry == PY_OFF_NONE) {
                        /* 3.12+: the shim below an eval call's frames: the frame before it was its first. */
                        if (ret->n > 0)
                                ret->frames[ret->n - 1].entry = true;
                        frame = unaligned_read_u64(buf + o->iframe_previous);
                        continue;
                }
                rf = &ret->frames[ret->n++];
                *rf = (PyRawFrame) { .code = unaligned_read_u64(buf + o->iframe_code), .instr = unaligned_read_u64(buf + o->iframe_instr) };
                if (o->iframe_is_entry != PY_OFF_NONE)
                        rf->entry = buf[o->iframe_is_entry] != 0;
                frame = unaligned_read_u64(buf + o->iframe_previous);
        }
        /* The outermost frame ends its eval call, whatever the flags said. */
        if (ret->n > 0 && !frame)
                ret->frames[ret->n - 1].entry = true;
        return 0;
}

/* ---- code objects ---- */

/* Append code point C as UTF-8. */
static size_t put_utf8(char *out, uint32_t c) {
        if (c < 0x80) {
                out[0] = (char) c;
                return 1;
        }
        if (c < 0x800) {
                out[0] = (char) (0xc0 | (c >> 6));
                out[1] = (char) (0x80 | (c & 63));
                return 2;
        }
        if (c < 0x10000) {
                out[0] = (char) (0xe0 | (c >> 12));
                out[1] = (char) (0x80 | ((c >> 6) & 63));
                out[2] = (char) (0x80 | (c & 63));
                return 3;
        }
        if (c > 0x10ffff)
                c = 0xfffd;
        out[0] = (char) (0xf0 | (c >> 18));
        out[1] = (char) (0x80 | ((c >> 12) & 63));
        out[2] = (char) (0x80 | ((c >> 6) & 63));
        out[3] = (char) (0x80 | (c & 63));
        return 4;
}

/* A str object as UTF-8: compact ASCII, compact UCS-1/2/4, or (before 3.12) a legacy string's data pointer. At
 * most PY_STRING_CHARS_MAX characters ("…" marks a cut). -EBADMSG for what is not a string we can read. */
static int read_str(const PyProcess *p, uint64_t addr, char **ret) {
        const PyOffsets *o = &p->off;
        /* The head, and the characters of a short compact string after it (a name, a path) in the same read. */
        uint8_t head[PY_STR_HEAD_BYTES + PY_STR_INLINE_BYTES];
        _cleanup_free_ uint8_t *data = NULL;
        _cleanup_free_ char *out = NULL;
        uint64_t length, data_addr;
        unsigned kind, compact, ascii;
        uint32_t state;
        size_t n, k = 0;
        ssize_t got;

        got = py_read_upto(p, addr, head, o->unicode_compact_data + 8, sizeof head);
        if (got < 0)
                return -EBADMSG;
        length = unaligned_read_u64(head + o->unicode_length);
        memcpy(&state, head + o->unicode_state, sizeof state);
        kind = (state >> o->unicode_state_kind_shift) & 7;
        compact = (state >> (o->unicode_state_kind_shift + 3)) & 1;
        ascii = (state >> (o->unicode_state_kind_shift + 4)) & 1;
        if ((int64_t) length < 0 || (kind != 1 && kind != 2 && kind != 4) || (ascii && kind != 1))
                return -EBADMSG;
        n = MIN(length, (uint64_t) PY_STRING_CHARS_MAX);
        data_addr = ascii ? addr + o->unicode_ascii_data : addr + o->unicode_compact_data;
        if (!compact)
                data_addr = unaligned_read_u64(head + o->unicode_compact_data);
        data = malloc(n * kind + 1);
        out = malloc(n * 4 + sizeof "…");
        if (!data || !out)
                return -ENOMEM;
        if (n > 0 && data_addr >= addr && data_addr - addr + n * kind <= (uint64_t) got)
                memcpy(data, head + (data_addr - addr), n * kind);
        else if (n > 0 && py_read(p, data_addr, data, n * kind) < 0)
                return -EBADMSG;
        for (size_t i = 0; i < n; i++) {
                uint32_t c = kind == 1 ? data[i] : kind == 2 ? ((const uint16_t *) data)[i] : ((const uint32_t *) data)[i];

                k += put_utf8(out + k, c ?: 0xfffd);
        }
        if (n < length) {
                memcpy(out + k, "…", strlen("…"));
                k += strlen("…");
        }
        out[k] = '\0';
        *ret = TAKE_PTR(out);
        return 0;
}

static int read_bytes(const PyProcess *p, uint64_t addr, uint8_t **ret, size_t *ret_len) {
        const PyOffsets *o = &p->off;
        /* The head and, for a line table of a few hundred bytes, its data in one read. */
        uint8_t head[PY_BYTES_INLINE_BYTES];
        size_t min_n = MAX((size_t) o->varobject_size + 8, (size_t) o->bytes_data);
        uint64_t size;
        ssize_t got;
        uint8_t *b;

        if (min_n > sizeof head)
                return -EBADMSG;
        got = py_read_upto(p, addr, head, min_n, sizeof head);
        if (got < 0)
                return -EBADMSG;
        size = unaligned_read_u64(head + o->varobject_size);
        if (size > PY_LINETABLE_BYTES_MAX)
                return -EBADMSG;
        b = malloc(size ?: 1);
        if (!b)
                return -ENOMEM;
        if (o->bytes_data + size <= (uint64_t) got)
                memcpy(b, head + o->bytes_data, size);
        else if (size > 0 && py_read(p, addr + o->bytes_data, b, size) < 0) {
                free(b);
                return -EBADMSG;
        }
        *ret = b;
        *ret_len = size;
        return 0;
}

/* Whether TYPE is the type of code objects: it is named "code" (checked once; then the same pointer suffices). */
static bool is_code_type(PyProcess *p, uint64_t type) {
        uint64_t name;
        char tn[8];

        if (p->code_type)
                return type == p->code_type;
        if (py_read_ptr(p, type + p->off.type_name, &name) < 0 || py_read(p, name, tn, 5) < 0 ||
            memcmp(tn, "code", 5) != 0)
                return false;
        p->code_type = type;
        return true;
}

static int decode_code(PyProcess *p, PyCode *c) {
        const PyOffsets *o = &p->off;
        const uint32_t offs[] = { o->code_filename, o->code_name, o->code_qualname, o->code_firstlineno,
                                  o->code_linetable, o->object_type };
        size_t span = span_of(offs, ELEMENTSOF(offs));
        uint8_t buf[PY_CODE_BYTES];
        int r;

        /* The object and its type pointer in one read; its type checked before any field is used. */
        if (o->object_type == PY_OFF_NONE || span > sizeof buf || py_read(p, c->addr, buf, span) < 0 ||
            !is_code_type(p, unaligned_read_u64(buf + o->object_type)))
                return 0;
        r = read_str(p, unaligned_read_u64(buf + (o->code_qualname != PY_OFF_NONE ? o->code_qualname : o->code_name)),
                     &c->qualname);
        if (r == 0)
                r = read_str(p, unaligned_read_u64(buf + o->code_filename), &c->filename);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return 0;
        c->firstlineno = unaligned_read_i32(buf + o->code_firstlineno);
        r = read_bytes(p, unaligned_read_u64(buf + o->code_linetable), &c->linetable, &c->linetable_len);
        if (r == -ENOMEM)
                return r;
        c->valid = true;
        return 0;
}

/* The code object at ADDR, decoded on first use; P->overflow (not valid) when the cache is full; NULL on OOM. */
static PyCode *code_get(PyProcess *p, uint64_t addr) {
        PyCode *c;

        if (p->codes_used * 2 >= p->codes_size) {
                size_t size = MAX(p->codes_size * 2, (size_t) 64);
                PyCode *old = p->codes, *t;

                if (p->codes_used >= PY_CODES_MAX)
                        goto lookup;
                t = calloc(size, sizeof *t);
                if (!t)
                        return NULL;
                for (size_t i = 0; i < p->codes_size; i++) {
                        size_t h;

                        if (!old[i].addr)
                                continue;
                        for (h = hash_u64(old[i].addr) & (size - 1); t[h].addr; h = (h + 1) & (size - 1))
                                ;
                        t[h] = old[i];
                }
                free(old);
                p->codes = t;
                p->codes_size = size;
        }
lookup:
        for (size_t h = hash_u64(addr) & (p->codes_size - 1);; h = (h + 1) & (p->codes_size - 1)) {
                c = &p->codes[h];
                if (c->addr == addr)
                        return c;
                if (c->addr == 0)
                        break;
        }
        /* Full (PY_CODES_MAX): the frame is named unreadable, the capture goes on. */
        if (p->codes_used * 2 >= p->codes_size)
                return &p->overflow;
        c->addr = addr;
        p->codes_used++;
        if (decode_code(p, c) < 0)
                return NULL;
        return c;
}

/* The line F is at: the instruction's offset into the code, as each version records it. */
static int frame_line_decode(const PyProcess *p, const PyCode *c, const PyRawFrame *f);

static int frame_line(const PyProcess *p, PyCode *c, const PyRawFrame *f) {
        if (!c->memo || c->memo_instr != f->instr) {
                c->memo_line = frame_line_decode(p, c, f);
                c->memo_instr = f->instr;
                c->memo = true;
        }
        return c->memo_line;
}

static int frame_line_decode(const PyProcess *p, const PyCode *c, const PyRawFrame *f) {
        const PyOffsets *o = &p->off;
        uint64_t offset;
        int line;

        if (o->frames == PY_FRAMES_OBJECT) {
                int64_t lasti = (int64_t) f->instr;

                /* Not started yet: the function's first line. */
                if (lasti < 0)
                        return c->firstlineno;
                offset = o->lines == PY_LINES_LINETABLE ? (uint64_t) lasti * 2 : (uint64_t) lasti;
        } else {
                uint64_t code = c->addr + o->code_adaptive;

                if (f->instr < code)
                        return c->firstlineno;
                offset = f->instr - code;
        }
        line = py_line_for_offset(o->lines, c->linetable, c->linetable_len, c->firstlineno, offset);
        return line < 0 ? 0 : line;
}

/* ---- into the native stack ---- */

static bool is_eval_frame(const UserFrame *u) {
        return u->kind == FRAME_KIND_NATIVE && !u->inlined && u->function &&
               (streq(u->function, "_PyEval_EvalFrameDefault") ||
                startswith(u->function, "_PyEval_EvalFrameDefault."));
}

static int python_frame(PyProcess *p, const PyRawFrame *rf, UserFrame *ret) {
        PyCode *c = code_get(p, rf->code);

        *ret = (UserFrame) { .kind = FRAME_KIND_PYTHON, .module = -1 };
        if (!c)
                return -ENOMEM;
        if (!c->valid) {
                ret->function = strdup("<unreadable code object>");
                return ret->function ? 0 : -ENOMEM;
        }
        ret->function = strdup(c->qualname);
        ret->file = strdup(c->filename);
        if (!ret->function || !ret->file) {
                user_frame_done(ret);
                return -ENOMEM;
        }
        ret->line = (unsigned) frame_line(p, c, rf);
        return 0;
}

int py_merge_stack(PyProcess *p, const PyRawStack *raw, ThreadSnapshot *t) {
        _cleanup_free_ UserFrame *out = NULL;
        size_t n_out = 0, next = 0, cap = t->n_frames + raw->n;
        ThreadRuntime *rt = thread_runtime_add(t, RUNTIME_PYTHON);
        int r;

        if (!rt)
                return -ENOMEM;
        rt->known = raw->have_tstate;
        rt->holds_global_lock = raw->have_tstate && p->gil_holder == t->tid;
        rt->note = mfree(rt->note);
        if (!raw->have_tstate)
                return (rt->note = strdup("no Python thread state (a thread running only C code)")) ? 0 : -ENOMEM;
        if (raw->n == 0) {
                rt->note = strdup(raw->end[0] ? raw->end : "no Python frames");
                return rt->note ? 0 : -ENOMEM;
        }
        out = calloc(cap ?: 1, sizeof *out);
        if (!out)
                return -ENOMEM;
        for (size_t i = 0; i < t->n_frames; i++) {
                if (is_eval_frame(&t->frames[i]) && next < raw->n) {
                        /* This call runs the frames up to the next entry frame. */
                        for (bool done = false; next < raw->n && !done; next++) {
                                done = raw->frames[next].entry;
                                r = python_frame(p, &raw->frames[next], &out[n_out]);
                                if (r < 0)
                                        goto fail;
                                n_out++;
                        }
                        t->frames[i].interpreter = true;
                }
                out[n_out++] = t->frames[i];
        }
        /* The native unwind ended before the interpreter's outer calls: their frames go last. */
        for (; next < raw->n; next++) {
                r = python_frame(p, &raw->frames[next], &out[n_out]);
                if (r < 0)
                        goto fail;
                n_out++;
        }
        /* Cut like a native stack cut by --max-frames: the dump says so the same way (exit status 5). */
        if (raw->truncated)
                t->truncated = true;
        if (raw->end[0] && !(rt->note = strdup(raw->end))) {
                r = -ENOMEM;
                goto fail;
        }
        free(t->frames);
        t->frames = TAKE_PTR(out);
        t->n_frames = n_out;
        return 0;
fail:
        /* The native frames are still T's: free only the Python frames made here. */
        for (size_t i = 0; i < n_out; i++)
                if (out[i].kind == FRAME_KIND_PYTHON)
                        user_frame_done(&out[i]);
        for (size_t i = 0; i < t->n_frames; i++)
                t->frames[i].interpreter = false;
        return r;
}

/* ---- what a parked thread waits for ---- */

/* Words of a frame's locals and value stack looked through for the lock it waits on. */
#define PY_LOCK_SCAN_WORDS 64U

/* The type name of object OBJ into BUF ("" when unreadable). */
static void type_name(const PyProcess *p, uint64_t obj, char *buf, size_t n) {
        uint64_t type, name;

        buf[0] = '\0';
        if (py_read_ptr(p, obj + p->off.object_type, &type) < 0 || py_read_ptr(p, type + p->off.type_name, &name) < 0 ||
            py_read(p, name, buf, n - 1) < 0) {
                /* A name near the end of a mapping: read it shorter. */
                if (py_read(p, name, buf, 16) < 0)
                        return;
                buf[16] = '\0';
        }
        buf[n - 1] = '\0';
}

/* The lock object whose PyThread_type_lock is the semaphore at FUTEX (the futex word of a glibc sem_t is its first
 * word): among the words of the top frame's locals and value stack (at LOCALS), the object itself
 * (lock.acquire()), or the self of a bound builtin method there (`with lock:` keeps lock.__exit__ on the stack).
 * Exact equality with the futex address, never a guess: whatever word leads to it, the object found is the lock
 * whose semaphore the thread sleeps on. 0 when none. */
static uint64_t find_lock_object(const PyProcess *p, uint64_t locals, uint64_t futex) {
        const PyOffsets *o = &p->off;
        uint64_t words[PY_LOCK_SCAN_WORDS];

        if (py_read(p, locals, words, sizeof words) < 0)
                return 0;
        for (size_t i = 0; i < ELEMENTSOF(words); i++) {
                uint64_t obj[4], self;

                if (words[i] == 0 || words[i] % 8 != 0 || py_read(p, words[i], obj, sizeof obj) < 0)
                        continue;
                if (obj[o->lock_lock / 8] == futex)
                        return words[i];
                /* PyCFunctionObject: ob_refcnt, ob_type, m_ml, m_self. */
                self = obj[3];
                if (self && self % 8 == 0 && py_read(p, self, obj, sizeof obj) == 0 && obj[o->lock_lock / 8] == futex)
                        return self;
        }
        return 0;
}

/* The thread whose end Thread.join() waits for on FUTEX: the one whose tstate lock (the weakref its tstate keeps in
 * on_delete_data, 3.8-3.12: _thread._set_sentinel()) has FUTEX as its semaphore. 0 when none does. */
static pid_t joined_thread(const PyProcess *p, uint64_t futex) {
        const PyOffsets *o = &p->off;

        if (o->tstate_on_delete_data == PY_OFF_NONE || o->lock_lock == PY_OFF_NONE)
                return 0;
        for (size_t i = 0; i < p->n_threads; i++) {
                uint64_t wr, lock, sem;

                /* PyWeakReference: its object head, then wr_object. */
                if (py_read_ptr(p, p->threads[i].tstate + o->tstate_on_delete_data, &wr) < 0 || wr == 0 ||
                    py_read_ptr(p, wr + 16, &lock) < 0 || lock == 0 ||
                    py_read_ptr(p, lock + o->lock_lock, &sem) < 0)
                        continue;
                if (sem == futex)
                        return p->threads[i].tid;
        }
        return 0;
}

/* What the thread's top Python frame says it waits for: Condition.wait() and Event.wait() of threading.py block on
 * a fresh lock that the notifier releases, which has no owner to name; Thread.join() on the thread's end. */
static RuntimeWaitKind top_wait_kind(PyProcess *p, uint64_t frame_code) {
        PyCode *c = code_get(p, frame_code);

        if (!c || !c->valid || !endswith(c->filename, "/threading.py"))
                return RUNTIME_WAIT_NONE;
        if (streq(c->qualname, "Condition.wait") || streq(c->qualname, "Event.wait") || streq(c->qualname, "wait"))
                return RUNTIME_WAIT_CONDITION;
        /* Thread.join() waits on the thread's tstate lock, which the thread's end releases; from 3.13 on the
         * thread handle's event, from Thread.join itself (a C call: no frame of its own). */
        if (streq(c->qualname, "Thread._wait_for_tstate_lock") || streq(c->qualname, "_wait_for_tstate_lock") ||
            streq(c->qualname, "Thread.join"))
                return RUNTIME_WAIT_JOIN;
        return RUNTIME_WAIT_NONE;
}

int py_wait_of(PyProcess *p, pid_t tid, uint64_t futex, RuntimeWait *ret) {
        const PyOffsets *o = &p->off;
        const PyThreadRef *ref = find_thread(p, tid);
        uint64_t frame, code = 0, locals, lock;
        uint8_t buf[PY_FRAME_BYTES_MAX];
        char tn[32];

        *ret = (RuntimeWait) { .kind = RUNTIME_WAIT_NONE };
        if (!ref)
                return 0;
        if (p->gil && futex >= p->gil && futex < p->gil + PY_GIL_STATE_BYTES) {
                *ret = (RuntimeWait) { .kind = RUNTIME_WAIT_GIL, .owner = p->gil_holder };
                return 0;
        }
        if (current_frame(p, ref->tstate, &frame) < 0 || frame == 0)
                return 0;
        if (o->frames == PY_FRAMES_OBJECT) {
                /* A C call (lock.acquire()) has no frame of its own: the top frame is its caller's. */
                if (py_read_ptr(p, frame + o->frame_code, &code) < 0)
                        return 0;
                locals = o->frame_localsplus == PY_OFF_NONE ? 0 : frame + o->frame_localsplus;
        } else {
                if (o->iframe_size > sizeof buf)
                        return 0;
                for (unsigned i = 0; frame && i < 4; i++) {
                        if (py_read(p, frame, buf, o->iframe_size) < 0)
                                return 0;
                        if (buf[o->iframe_owner] != PY_FRAME_OWNED_BY_CSTACK || o->iframe_is_entry != PY_OFF_NONE) {
                                code = unaligned_read_u64(buf + o->iframe_code);
                                break;
                        }
                        frame = unaligned_read_u64(buf + o->iframe_previous);
                }
                /* The locals and the value stack follow the frame's fixed part. */
                locals = frame + o->iframe_size;
        }
        if (!code)
                return 0;
        ret->kind = top_wait_kind(p, code);
        if (ret->kind == RUNTIME_WAIT_JOIN)
                ret->owner = joined_thread(p, futex);
        if (ret->kind != RUNTIME_WAIT_NONE)
                return 0;
        /* The lock objects' locks are semaphores from 3.8 to 3.13 (PyMutexes from 3.14, whose waits are on a parking
         * lot, not on the lock). */
        if (!locals || o->lock_lock == PY_OFF_NONE || o->lock_lock % 8 != 0 || o->lock_lock >= 32)
                return 0;
        lock = find_lock_object(p, locals, futex);
        if (!lock)
                return 0;
        type_name(p, lock, tn, sizeof tn);
        if (streq(tn, "_thread.RLock")) {
                uint64_t owner = 0;

                *ret = (RuntimeWait) { .kind = RUNTIME_WAIT_RLOCK, .object = lock };
                if (py_read_ptr(p, lock + o->rlock_owner, &owner) == 0)
                        for (size_t i = 0; owner && i < p->n_threads; i++)
                                if (p->threads[i].ident == owner)
                                        ret->owner = p->threads[i].tid;
        } else if (streq(tn, "_thread.lock"))
                *ret = (RuntimeWait) { .kind = RUNTIME_WAIT_LOCK, .object = lock };
        return 0;
}

int py_thread_wait(PyProcess *p, ThreadSnapshot *t) {
        RuntimeWait w = { .kind = RUNTIME_WAIT_NONE };
        ThreadRuntime *rt;
        int r = 0;

        if (t->syscall.kind == PROC_SYSCALL_BLOCKED && streq_ptr(syscall_name(t->syscall.nr), "futex"))
                r = py_wait_of(p, t->tid, t->syscall.args[0], &w);
        rt = thread_runtime_add(t, RUNTIME_PYTHON);
        if (!rt)
                return -ENOMEM;
        rt->wait = w;
        return r;
}

/* ---- waits for wait chains: one interpreter per process, found on the first question about it and kept for the
 * reader's life (one capture's chain, or one poll of the daemon) ---- */

typedef struct PythonWaits PythonWaits;

/* Processes one reader remembers: a chain reaches a few, a poll judges at most a handful. */
#define PYTHON_WAITS_PROCESSES_MAX 64U

typedef struct PythonWaitsEntry {
        pid_t pid;
        PyProcess *py;          /* NULL: no CPython in it (or it could not be read) */
} PythonWaitsEntry;

struct PythonWaits {
        Symbolizer *sym;
        RuntimeMayRunFn may_run;
        void *may_run_userdata;
        PythonWaitsEntry entries[PYTHON_WAITS_PROCESSES_MAX];
        size_t n;
};

static int python_waits_new(Symbolizer *sym, PythonWaits **ret) {
        PythonWaits *w = calloc(1, sizeof *w);

        if (!w)
                return -ENOMEM;
        w->sym = sym;
        *ret = w;
        return 0;
}

static PythonWaits *python_waits_free(PythonWaits *w) {
        if (!w)
                return NULL;
        for (size_t i = 0; i < w->n; i++)
                py_process_free(w->entries[i].py);
        free(w);
        return NULL;
}
DEFINE_TRIVIAL_CLEANUP_FUNC(PythonWaits *, python_waits_free);

/* The interpreter of PID, opened on first use; NULL when it has none. -ENOMEM. */
static int interpreter_of(PythonWaits *w, pid_t pid, PyProcess **ret) {
        _cleanup_(unwind_process_freep) UnwindProcess *up = NULL;
        _cleanup_close_ int dirfd = -EBADF;
        _cleanup_free_ int *tids = NULL;
        PythonWaitsEntry *e;
        const char *why;
        size_t n = 0;
        int r;

        for (size_t i = 0; i < w->n; i++)
                if (w->entries[i].pid == pid) {
                        *ret = w->entries[i].py;
                        return 0;
                }
        *ret = NULL;
        if (w->n >= PYTHON_WAITS_PROCESSES_MAX)
                return 0;
        e = &w->entries[w->n++];
        *e = (PythonWaitsEntry) { .pid = pid };
        if (proc_open_dir(pid, 0, &dirfd) < 0 || proc_list_numeric(dirfd, "task", &tids, &n) < 0 ||
            unwind_process_new(pid, NULL, &up) < 0)
                return 0;
        r = py_process_open(pid, up, w->sym, tids, n, &e->py, &why);
        *ret = e->py;
        return r == -ENOMEM ? r : 0;
}

int python_gil_range(pid_t pid, Symbolizer *sym, uint64_t *ret_start, uint64_t *ret_size) {
        _cleanup_(python_waits_freep) PythonWaits *w = NULL;
        PyProcess *py;
        int r;

        r = python_waits_new(sym, &w);
        if (r < 0)
                return r;
        r = interpreter_of(w, pid, &py);
        if (r < 0)
                return r;
        return py ? py_process_gil_range(py, ret_start, ret_size) : -ENOENT;
}

static int python_waits_read(void *userdata, pid_t pid, pid_t tid, uint64_t futex, RuntimeWait *ret) {
        PythonWaits *w = userdata;
        PyProcess *py;
        int r;

        if (w->may_run && !w->may_run(w->may_run_userdata, RUNTIME_PYTHON, pid))
                return 0;
        r = interpreter_of(w, pid, &py);
        if (r < 0)
                return r;
        if (!py)
                return 0;
        r = py_wait_of(py, tid, futex, ret);
        if (r < 0)
                return r;
        return ret->kind != RUNTIME_WAIT_NONE;
}

static void python_waits_free_void(void *w) {
        python_waits_free(w);
}

int python_waits_attach(PeerResolver *r, Symbolizer *sym, RuntimeMayRunFn may_run, void *userdata) {
        PythonWaits *w;
        int k = python_waits_new(sym, &w);

        if (k < 0)
                return k;
        w->may_run = may_run;
        w->may_run_userdata = userdata;
        peer_resolver_set_runtime(r, RUNTIME_PYTHON, python_waits_read, w, python_waits_free_void);
        return 0;
}

/* ---- the runtime table's row ---- */

static int python_open(const RuntimeCapture *rc, void **ret) {
        _cleanup_(py_process_freep) PyProcess *p = NULL;
        const char *why = NULL;
        ProcessRuntime *pr;
        int r;

        *ret = NULL;
        r = py_process_open(rc->pid, rc->up, rc->sym, rc->tids, rc->n_tids, &p, &why);
        if (r == -ENOMEM)
                return r;
        if (r < 0) {
                (void) snapshot_add_error(rc->s, "Python frames not read: %s", why ?: strerror(-r));
                return 0;
        }
        if (!p)
                return 0;
        pr = snapshot_add_runtime(rc->s, RUNTIME_PYTHON);
        if (!pr || !(pr->version = strdup(py_process_version(p))))
                return -ENOMEM;
        pr->lock_holder = py_process_gil_holder(p);
        *ret = TAKE_PTR(p);
        return 0;
}

/* A thread's Python frames, copied within the same look as its stack: a thread parked in the same syscall before and
 * after ran no Python code in between (it does not hold the GIL, or holds it without running). */
static int python_read_thread(void *state, const RuntimeCapture *rc, pid_t tid, void **raw) {
        PyRawStack *st = *raw;

        if (!st) {
                st = calloc(1, sizeof *st);
                if (!st)
                        return -ENOMEM;
                *raw = st;
        }
        return py_read_stack(state, tid, rc->max_frames, st) == -ENOMEM ? -ENOMEM : 0;
}

static void python_thread_done(void *raw) {
        py_raw_stack_done(raw);
        free(raw);
}

static int python_merge_thread(void *state, const RuntimeCapture *rc, void *raw, ThreadSnapshot *t) {
        int r = py_merge_stack(state, raw ?: &(PyRawStack) {}, t);

        return r < 0 ? r : py_thread_wait(state, t);
}

static void python_close(void *state) {
        py_process_free(state);
}

const RuntimeOps python_runtime_ops = {
        .open = python_open,
        .read_thread = python_read_thread,
        .thread_done = python_thread_done,
        .merge_thread = python_merge_thread,
        .close = python_close,
        .waits_attach = python_waits_attach,
};
