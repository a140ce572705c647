/* golang.c: a Go program's goroutines, read from outside with process_vm_readv, never stopping the process. The
 * runtime's own tables are read as its own readers read them (allglen before allgs), every g is checked before it
 * is believed, and a goroutine that moved while it was read is named as such rather than shown half-read. */
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/alloc-util.h"
#include "base/macro.h"
#include "base/time-util.h"
#include "base/unaligned.h"
#include "proc/proc-read.h"
#include "runtime/go-offsets.h"
#include "runtime/golang.h"
#include "unwind/go-pclntab.h"

/* runtime._Gscan: set while the GC scans a goroutine's stack, on top of its status. */
#define GO_STATUS_SCAN 0x1000U
#define GO_G_BYTES_MAX 1024U
/* A goroutine's stack copied up to this much from its saved sp (deeper frames are read one by one). */
#define GO_STACK_COPY_BYTES (16U * 1024)
#define GO_STACK_BYTES_MAX (1ULL << 30)
/* The goroutines (g structures) read into memory at once. */
#define GO_BATCH PROC_MEM_BATCH
#define GO_WAIT_REASONS_MAX 64U
#define GO_WAIT_REASON_CHARS 64U
/* runtime.semtable's size (runtime/sema.go: semTabSize, 251 from 1.0 to 1.23) and the sudogs walked in it. */
#define GO_SEMTAB_SIZE 251U
#define GO_SUDOGS_MAX 200000U
#define GO_TREAP_QUEUE 1024U

struct GoProcess {
        pid_t pid;
        GoOffsets off;
        bool from_dwarf;
        char version[64];
        uint64_t allglen, allgs, allgptr;       /* addresses of the runtime's variables */
        uint64_t semtable, semtable_size;
        char *reasons[GO_WAIT_REASONS_MAX];
        size_t n_reasons;
        GoPclntab *pcln;        /* the binary's own table of functions and lines (1.18, 1.19), NULL when not read */
        uint64_t pcln_bias;     /* its load bias: pc - bias is the ELF address */
        uint64_t *trampolines;  /* the entries of the compiler's wrappers, sorted (from DWARF) */
        size_t n_trampolines, n_trampolines_allocated;
};

/* ---- memory ---- */

static int go_read(const GoProcess *p, uint64_t addr, void *buf, size_t n) {
        return proc_mem_read(p->pid, addr, buf, n);
}

static int go_read_u64(const GoProcess *p, uint64_t addr, uint64_t *ret) {
        return go_read(p, addr, ret, sizeof *ret);
}

/* Read N blocks, block K of SIZES[K] bytes at ADDRS[K] into BUFS[K], batched (proc_mem_readv()); OK[K] says which
 * were read whole. */
static void go_read_many(const GoProcess *p, const uint64_t *addrs, const size_t *sizes, uint8_t *const *bufs,
                         bool *ok, size_t n) {
        ProcMemBlock b[PROC_MEM_BATCH];

        for (size_t done = 0, k; done < n; done += k) {
                k = MIN(n - done, (size_t) PROC_MEM_BATCH);
                for (size_t i = 0; i < k; i++)
                        b[i] = (ProcMemBlock) { .addr = addrs[done + i], .buf = bufs[done + i], .size = sizes[done + i] };
                (void) proc_mem_readv(p->pid, b, k, ok + done);
        }
}

/* A Go string header {data, len} at ADDR, at most MAX bytes of it. */
static int go_read_string(const GoProcess *p, uint64_t addr, char *buf, size_t max) {
        uint64_t hdr[2];
        size_t n;

        if (go_read(p, addr, hdr, sizeof hdr) < 0)
                return -EFAULT;
        n = MIN(hdr[1], (uint64_t) max - 1);
        if (n > 0 && go_read(p, hdr[0], buf, n) < 0)
                return -EFAULT;
        buf[n] = '\0';
        for (size_t i = 0; i < n; i++)
                if ((unsigned char) buf[i] < 0x20 || buf[i] == 0x7f)
                        buf[i] = '?';
        return 0;
}

/* ---- the layout, from the binary's DWARF ---- */

static int cmp_u64(const void *a, const void *b) {
        uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;

        return x < y ? -1 : x > y;
}

/* A wrapper the compiler made (a go statement's closure, a method value's): DW_AT_trampoline. Go's traceback does
 * not show them (runtime/traceback.go: funcID_wrapper), nor do we in a goroutine's frames. */
static int trampoline_add(GoProcess *p, Dwarf_Die *die, Dwarf_Addr bias) {
        Dwarf_Addr low;

        if (dwarf_lowpc(die, &low) != 0)
                return 0;
        if (!GREEDY_REALLOC(p->trampolines, p->n_trampolines_allocated, p->n_trampolines + 1))
                return -ENOMEM;
        p->trampolines[p->n_trampolines++] = low + bias;
        return 0;
}

static bool is_trampoline(const GoProcess *p, uint64_t entry) {
        return p->n_trampolines > 0 &&
               bsearch(&entry, p->trampolines, p->n_trampolines, sizeof *p->trampolines, cmp_u64);
}

typedef struct DwarfField {
        const char *type, *member;      /* "runtime.g", "sched" */
        uint32_t *dest;
        uint32_t plus;                  /* a nested struct's member offset, added (sched.sp) */
} DwarfField;

static int member_offset(Dwarf_Die *type, const char *name, uint32_t *ret) {
        Dwarf_Die child;

        if (dwarf_child(type, &child) != 0)
                return -ENOENT;
        do {
                Dwarf_Attribute attr;
                Dwarf_Word off;
                const char *n;

                if (dwarf_tag(&child) != DW_TAG_member)
                        continue;
                n = dwarf_diename(&child);
                if (!n || !streq(n, name))
                        continue;
                if (!dwarf_attr_integrate(&child, DW_AT_data_member_location, &attr) || dwarf_formudata(&attr, &off) != 0
                    || off > UINT32_MAX / 2)
                        return -EBADMSG;
                *ret = (uint32_t) off;
                return 0;
        } while (dwarf_siblingof(&child, &child) == 0);
        return -ENOENT;
}

/* The runtime's structures as this binary's DWARF lays them out. -ENOENT when it has no DWARF (-ldflags=-w) or lacks
 * one of them. */
static int layout_from_dwarf(GoProcess *p, Dwfl_Module *mod, GoOffsets *o) {
        enum { T_G, T_M, T_GOBUF, T_STACK, T_SUDOG, T_SEMAROOT, _T_MAX };
        static const char *const names[_T_MAX] = { "runtime.g", "runtime.m", "runtime.gobuf", "runtime.stack",
                                                   "runtime.sudog", "runtime.semaRoot" };
        Dwarf_Die types[_T_MAX];
        bool found[_T_MAX] = {};
        unsigned n_found = 0;
        uint32_t sched, stack, lo, hi, sp, pc, bp;
        Dwarf_Word gsize;
        Dwarf_Attribute attr;
        Dwarf_Addr bias;
        Dwarf_Off off = 0, next;
        size_t hsize;
        Dwarf *dw;

        dw = dwfl_module_getdwarf(mod, &bias);
        if (!dw)
                return -ENOENT;
        /* The types are top-level entries of some unit, and so are the functions: a look at each unit's top level,
         * no deeper. */
        while (dwarf_nextcu(dw, off, &next, &hsize, NULL, NULL, NULL) == 0) {
                Dwarf_Die cu, die;

                if (dwarf_offdie(dw, off + hsize, &cu) && dwarf_child(&cu, &die) == 0)
                        do {
                                const char *n;
                                int tag = dwarf_tag(&die);

                                if (tag == DW_TAG_subprogram) {
                                        if (dwarf_hasattr(&die, DW_AT_trampoline) && trampoline_add(p, &die, bias) < 0)
                                                return -ENOMEM;
                                        continue;
                                }
                                if (tag != DW_TAG_structure_type || n_found == _T_MAX)
                                        continue;
                                n = dwarf_diename(&die);
                                if (!n || !startswith(n, "runtime."))
                                        continue;
                                for (unsigned t = 0; t < _T_MAX; t++)
                                        if (!found[t] && streq(n, names[t])) {
                                                types[t] = die;
                                                found[t] = true;
                                                n_found++;
                                        }
                        } while (dwarf_siblingof(&die, &die) == 0);
                off = next;
        }
        qsort(p->trampolines, p->n_trampolines, sizeof *p->trampolines, cmp_u64);
        if (!found[T_G] || !found[T_M] || !found[T_GOBUF] || !found[T_STACK] || !found[T_SUDOG])
                return -ENOENT;
        *o = (GoOffsets) {};
        if (member_offset(&types[T_G], "stack", &stack) < 0 || member_offset(&types[T_STACK], "lo", &lo) < 0 ||
            member_offset(&types[T_STACK], "hi", &hi) < 0 || member_offset(&types[T_G], "sched", &sched) < 0 ||
            member_offset(&types[T_GOBUF], "sp", &sp) < 0 || member_offset(&types[T_GOBUF], "pc", &pc) < 0 ||
            member_offset(&types[T_GOBUF], "bp", &bp) < 0 || member_offset(&types[T_G], "m", &o->g_m) < 0 ||
            member_offset(&types[T_G], "syscallsp", &o->g_syscallsp) < 0 ||
            member_offset(&types[T_G], "syscallpc", &o->g_syscallpc) < 0 ||
            member_offset(&types[T_G], "atomicstatus", &o->g_atomicstatus) < 0 ||
            member_offset(&types[T_G], "goid", &o->g_goid) < 0 ||
            member_offset(&types[T_G], "waitsince", &o->g_waitsince) < 0 ||
            member_offset(&types[T_G], "waitreason", &o->g_waitreason) < 0 ||
            member_offset(&types[T_G], "lockedm", &o->g_lockedm) < 0 ||
            member_offset(&types[T_G], "gopc", &o->g_gopc) < 0 ||
            member_offset(&types[T_G], "startpc", &o->g_startpc) < 0 ||
            member_offset(&types[T_G], "waiting", &o->g_waiting) < 0 ||
            member_offset(&types[T_M], "procid", &o->m_procid) < 0 ||
            member_offset(&types[T_SUDOG], "g", &o->sudog_g) < 0 ||
            member_offset(&types[T_SUDOG], "next", &o->sudog_next) < 0 ||
            member_offset(&types[T_SUDOG], "prev", &o->sudog_prev) < 0 ||
            member_offset(&types[T_SUDOG], "elem", &o->sudog_elem) < 0 ||
            member_offset(&types[T_SUDOG], "waitlink", &o->sudog_waitlink) < 0 ||
            member_offset(&types[T_SUDOG], "c", &o->sudog_c) < 0)
                return -ENOENT;
        o->g_stack_lo = stack + lo;
        o->g_stack_hi = stack + hi;
        o->g_sched_sp = sched + sp;
        o->g_sched_pc = sched + pc;
        o->g_sched_bp = sched + bp;
        if (member_offset(&types[T_G], "parentGoid", &o->g_parentgoid) < 0)
                o->g_parentgoid = GO_OFF_NONE;
        o->semaroot_treap = GO_OFF_NONE;
        if (found[T_SEMAROOT] && member_offset(&types[T_SEMAROOT], "treap", &o->semaroot_treap) < 0)
                o->semaroot_treap = GO_OFF_NONE;
        if (!dwarf_attr_integrate(&types[T_G], DW_AT_byte_size, &attr) || dwarf_formudata(&attr, &gsize) != 0)
                return -ENOENT;
        o->g_size = (uint32_t) MIN(gsize, (Dwarf_Word) GO_G_BYTES_MAX);
        o->sudog_size = 0;
        if (dwarf_attr_integrate(&types[T_SUDOG], DW_AT_byte_size, &attr) && dwarf_formudata(&attr, &gsize) == 0)
                o->sudog_size = (uint32_t) MIN(gsize, (Dwarf_Word) GO_G_BYTES_MAX);
        return 0;
}

/* Every field the reader takes must lie within the bytes it reads of each structure. */
static bool layout_fits(const GoOffsets *o) {
        const uint32_t g[] = { o->g_stack_lo, o->g_stack_hi, o->g_m, o->g_sched_sp, o->g_sched_pc, o->g_sched_bp,
                               o->g_atomicstatus, o->g_goid, o->g_waitsince, o->g_lockedm, o->g_gopc,
                               o->g_startpc, o->g_waiting, o->g_parentgoid };
        const uint32_t s[] = { o->sudog_g, o->sudog_next, o->sudog_prev, o->sudog_elem, o->sudog_waitlink,
                               o->sudog_c };

        if (o->g_size == 0 || o->g_size > GO_G_BYTES_MAX || o->g_waitreason >= o->g_size)
                return false;
        for (size_t i = 0; i < ELEMENTSOF(g); i++)
                if (g[i] != GO_OFF_NONE && (uint64_t) g[i] + 8 > o->g_size)
                        return false;
        for (size_t i = 0; i < ELEMENTSOF(s); i++)
                if (o->sudog_size == 0 || (uint64_t) s[i] + 8 > o->sudog_size)
                        return false;
        return true;
}

/* ---- finding the runtime ---- */

/* The module of the executable EXE (as maps names it); NULL when it is not mapped, or is on a FUSE mount whose daemon
 * does not answer (unwind.h: not opened). */
static Dwfl_Module *exe_module(UnwindProcess *up, const char *exe) {
        const ProcMap *maps;
        size_t n_maps;

        maps = unwind_process_maps(up, &n_maps);
        for (size_t i = 0; i < n_maps; i++) {
                Dwfl_Module *mod;
                const char *name;

                if (!maps[i].path || !streq(maps[i].path, exe))
                        continue;
                mod = dwfl_addrmodule(unwind_process_dwfl(up), maps[i].start);
                name = mod ? dwfl_module_info(mod, NULL, NULL, NULL, NULL, NULL, NULL, NULL) : NULL;
                if (!name || unwind_process_module_not_read(up, name))
                        return NULL;
                return mod;
        }
        return NULL;
}

int go_process_open(pid_t pid, UnwindProcess *up, Symbolizer *sym, GoProcess **ret, const char **ret_why) {
        static const char *const roots[] = { "runtime.allgs", "runtime.allglen", "runtime.buildVersion",
                                             "runtime.waitReasonStrings", "runtime.allgptr", "runtime.semtable",
                                             ".go.buildinfo", ".gopclntab" };
        enum { R_ALLGS, R_ALLGLEN, R_VERSION, R_REASONS, R_ALLGPTR, R_SEMTABLE, R_BUILDINFO, R_PCLNTAB };
        uint64_t addrs[ELEMENTSOF(roots)], sizes[ELEMENTSOF(roots)];
        _cleanup_(go_process_freep) GoProcess *p = NULL;
        _cleanup_close_ int dirfd = -EBADF;
        _cleanup_free_ char *exe = NULL;
        Dwfl_Module *mod = NULL;
        unsigned major, minor;
        GElf_Addr bias;
        Elf *elf;
        int r;

        *ret = NULL;
        *ret_why = NULL;
        r = proc_open_dir(pid, 0, &dirfd);
        if (r == 0)
                r = proc_readlink(dirfd, "exe", &exe);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return 0;
        /* The runtime is in the executable (Go links it statically, cgo or not; a c-shared library is not read). */
        mod = exe_module(up, exe);
        if (!mod)
                return 0;
        r = symbolizer_find_symbols(sym, mod, roots, ELEMENTSOF(roots), addrs, sizes);
        if (r == -ENOMEM)
                return r;
        if (r <= 0)
                return 0;
        if (!addrs[R_ALLGS] || !addrs[R_ALLGLEN]) {
                if (!addrs[R_BUILDINFO] && !addrs[R_PCLNTAB])
                        return 0;
                *ret_why = "the binary is stripped of its symbols (-ldflags=-s): its threads are shown, not its goroutines";
                return -EPROTONOSUPPORT;
        }
        p = calloc(1, sizeof *p);
        if (!p)
                return -ENOMEM;
        p->pid = pid;
        p->allgs = addrs[R_ALLGS];
        p->allglen = addrs[R_ALLGLEN];
        p->allgptr = addrs[R_ALLGPTR];
        p->semtable = addrs[R_SEMTABLE];
        p->semtable_size = sizes[R_SEMTABLE];
        if (!addrs[R_VERSION] || go_read_string(p, addrs[R_VERSION], p->version, sizeof p->version) < 0)
                p->version[0] = '\0';
        r = layout_from_dwarf(p, mod, &p->off);
        if (r == -ENOMEM)
                return r;
        if (r == 0 && layout_fits(&p->off))
                p->from_dwarf = true;
        else {
                const GoOffsets *t;

                if (!go_parse_version(p->version, &major, &minor)) {
                        *ret_why = "Go binary without DWARF whose runtime version cannot be read: goroutines not read";
                        return -EPROTONOSUPPORT;
                }
                t = go_offsets_for(major, minor);
                if (!t || !layout_fits(t)) {
                        *ret_why = "Go release without DWARF that stackwatch has no layout for (1.17 and later are "
                                   "read): goroutines not read";
                        return -EPROTONOSUPPORT;
                }
                p->off = *t;
        }
        /* The binary's own table of functions (Go 1.18, 1.19): frame sizes for a goroutine in a syscall, and
         * without DWARF its lines and inlined calls, as Go's traceback has them. */
        elf = dwfl_module_getelf(mod, &bias);
        if (elf) {
                r = go_pclntab_open(elf, &p->pcln);
                if (r == -ENOMEM)
                        return r;
                p->pcln_bias = bias;
        }
        /* The runtime's own words for its wait reasons: an array of strings, one per waitReason. */
        if (addrs[R_REASONS] && sizes[R_REASONS] >= 16) {
                size_t n = MIN(sizes[R_REASONS] / 16, (uint64_t) GO_WAIT_REASONS_MAX);

                for (size_t i = 0; i < n; i++) {
                        char buf[GO_WAIT_REASON_CHARS];

                        if (go_read_string(p, addrs[R_REASONS] + 16 * i, buf, sizeof buf) < 0)
                                break;
                        p->reasons[i] = strdup(buf);
                        if (!p->reasons[i])
                                return -ENOMEM;
                        p->n_reasons = i + 1;
                }
        }
        *ret = TAKE_PTR(p);
        return 0;
}

GoProcess *go_process_free(GoProcess *p) {
        if (!p)
                return NULL;
        for (size_t i = 0; i < p->n_reasons; i++)
                free(p->reasons[i]);
        free(p->trampolines);
        go_pclntab_free(p->pcln);
        free(p);
        return NULL;
}

const char *go_process_version(const GoProcess *p) {
        return p->version;
}

const char *go_process_layout(const GoProcess *p) {
        return p->from_dwarf ? "dwarf" : "table";
}

const char *go_wait_reason(const GoProcess *p, uint8_t r) {
        if (r >= p->n_reasons || !p->reasons[r] || !p->reasons[r][0])
                return NULL;
        return p->reasons[r];
}

bool go_stack_top_function(const char *f) {
        /* runtime/traceback.go's topofstack(): the functions no frame is below (their funcIDs), with the ABI
         * wrappers' names the symbol table gives the assembly ones. */
        static const char *const tops[] = { "runtime.goexit", "runtime.mstart", "runtime.mcall", "runtime.morestack",
                                            "runtime.rt0_go", "runtime.systemstack_switch", "runtime.asmcgocall" };

        if (!f || !startswith(f, "runtime."))
                return false;
        for (size_t i = 0; i < ELEMENTSOF(tops); i++) {
                const char *e = f + strlen(tops[i]);

                if (startswith(f, tops[i]) && (*e == '\0' || streq(e, ".abi0")))
                        return true;
        }
        return false;
}

/* ---- the goroutines ---- */

void go_raw_set_done(GoRawSet *rs) {
        for (size_t i = 0; i < rs->n; i++)
                free(rs->gs[i].pcs);
        rs->gs = mfree(rs->gs);
        rs->n = 0;
}

/* A g's fields from the bytes read of it; false when they do not hold together as a goroutine that is not dead. */
static bool g_decode(const GoOffsets *o, const uint8_t *b, uint64_t addr, GoRawG *g) {
        uint32_t status = unaligned_read_u32(b + o->g_atomicstatus);

        *g = (GoRawG) {
                .addr = addr,
                .goid = unaligned_read_u64(b + o->g_goid),
                .status = status & ~GO_STATUS_SCAN,
                .waitreason = b[o->g_waitreason],
                .waitsince = (int64_t) unaligned_read_u64(b + o->g_waitsince),
                .gopc = unaligned_read_u64(b + o->g_gopc),
                .startpc = unaligned_read_u64(b + o->g_startpc),
                .parent_goid = o->g_parentgoid == GO_OFF_NONE ? 0 : unaligned_read_u64(b + o->g_parentgoid),
                .m = unaligned_read_u64(b + o->g_m),
                .lockedm = unaligned_read_u64(b + o->g_lockedm),
                .waiting = unaligned_read_u64(b + o->g_waiting),
                .sp = unaligned_read_u64(b + o->g_sched_sp),
                .pc = unaligned_read_u64(b + o->g_sched_pc),
                .bp = unaligned_read_u64(b + o->g_sched_bp),
                .lo = unaligned_read_u64(b + o->g_stack_lo),
                .hi = unaligned_read_u64(b + o->g_stack_hi),
                .syscallsp = unaligned_read_u64(b + o->g_syscallsp),
                .syscallpc = unaligned_read_u64(b + o->g_syscallpc),
        };
        if (g->status >= _GO_STATUS_MAX || g->status == GO_STATUS_DEAD || g->status == GO_STATUS_MORIBUND ||
            g->status == GO_STATUS_ENQUEUE || g->status == GO_STATUS_IDLE)
                return false;
        if (g->goid == 0 || (int64_t) g->goid < 0)
                return false;
        if (g->lo == 0 || g->hi <= g->lo || g->hi - g->lo > GO_STACK_BYTES_MAX)
                return false;
        return true;
}

/* The frames of a parked goroutine, walked by frame pointer in COPY (its stack from the saved sp, LEN bytes) and,
 * past it, in the process. */
static int g_walk(const GoProcess *p, GoRawG *g, const uint8_t *copy, size_t len, unsigned max_frames) {
        uint64_t pc = g->pc, bp = g->bp;

        g->pcs = calloc(max_frames ?: 1, sizeof(uint64_t));
        if (!g->pcs)
                return -ENOMEM;
        /* A goroutine that never ran waits at its function's entry, with nothing below it. */
        if (pc == g->startpc) {
                g->pcs[g->n_pcs++] = pc;
                g->entry = true;
                return 0;
        }
        while (pc != 0) {
                uint64_t frame[2];

                if (g->n_pcs >= max_frames) {
                        g->truncated = true;
                        break;
                }
                g->pcs[g->n_pcs++] = pc;
                /* The saved frame pointer and return address, within the goroutine's own stack and upwards only. */
                if (bp == 0)
                        break;
                if (bp < g->sp || bp + sizeof frame > g->hi || bp % 8 != 0)
                        break;
                if (bp + sizeof frame <= g->sp + len)
                        memcpy(frame, copy + (bp - g->sp), sizeof frame);
                else if (go_read(p, bp, frame, sizeof frame) < 0)
                        break;
                if (frame[0] != 0 && frame[0] <= bp)
                        break;
                pc = frame[1];
                bp = frame[0];
        }
        return 0;
}

/* A goroutine in a syscall, walked from where it entered it by each function's frame size at its pc (pclntab's
 * pcsp, as the runtime's own traceback does: x86-64, whose calls push the return address), in COPY (its stack from
 * syscallsp, LEN bytes) and past it in the process. Its thread's stack is the other way, but a passive capture has
 * no frame pointer to start from, and a binary without DWARF no CFI. */
static int g_walk_spdelta(const GoProcess *p, GoRawG *g, const uint8_t *copy, size_t len, unsigned max_frames) {
        uint64_t pc = g->syscallpc, sp = g->syscallsp;

        g->pcs = calloc(max_frames ?: 1, sizeof(uint64_t));
        if (!g->pcs)
                return -ENOMEM;
        while (pc != 0) {
                uint64_t ra;
                int32_t delta;
                bool top;

                if (g->n_pcs >= max_frames) {
                        g->truncated = true;
                        break;
                }
                g->pcs[g->n_pcs++] = pc;
                if (go_pclntab_spdelta(p->pcln, pc - p->pcln_bias, &delta, &top) < 0 || top)
                        break;
                ra = sp + (uint64_t) delta;
                if (ra < sp || ra + 8 > g->hi)
                        break;
                if (ra + 8 <= g->syscallsp + len)
                        memcpy(&pc, copy + (ra - g->syscallsp), sizeof pc);
                else if (go_read_u64(p, ra, &pc) < 0)
                        break;
                sp = ra + 8;
        }
        return 0;
}

/* The threads of the Ms that GS run on or are locked to: one read each. */
static void g_threads(const GoProcess *p, GoRawG *gs, size_t n) {
        for (size_t i = 0; i < n; i++) {
                GoRawG *g = &gs[i];
                uint64_t m = g->lockedm ?: (g->status == GO_STATUS_RUNNING || g->status == GO_STATUS_SYSCALL ? g->m : 0);
                uint64_t procid;

                if (m && go_read_u64(p, m + p->off.m_procid, &procid) == 0 && procid > 0 && procid <= INT32_MAX)
                        g->tid = (pid_t) procid;
        }
}

typedef struct AddrIndex {
        uint64_t addr;
        size_t index;
} AddrIndex;

static int cmp_addr_index(const void *a, const void *b) {
        uint64_t x = ((const AddrIndex *) a)->addr, y = ((const AddrIndex *) b)->addr;

        return x < y ? -1 : x > y;
}

static GoRawG *g_by_addr(GoRawG *gs, const AddrIndex *ix, size_t n, uint64_t addr) {
        AddrIndex key = { .addr = addr };
        const AddrIndex *hit = bsearch(&key, ix, n, sizeof *ix, cmp_addr_index);

        return hit ? &gs[hit->index] : NULL;
}

/* What the waiting goroutines wait on: a channel (their sudog's channel), or a semaphore (a sync.Mutex's,
 * WaitGroup's …: the sudogs queued in runtime.semtable, by the address they wait on). */
static int g_waits(const GoProcess *p, GoRawG *gs, size_t n) {
        const GoOffsets *o = &p->off;
        _cleanup_free_ uint64_t *queue = NULL;
        _cleanup_free_ AddrIndex *ix = NULL;
        size_t n_queue = 0, visited = 0;
        uint8_t sg[GO_G_BYTES_MAX];
        bool any_sema = false;

        for (size_t i = 0; i < n; i++) {
                GoRawG *g = &gs[i];
                const char *why = go_wait_reason(p, g->waitreason);
                uint64_t c;

                if (g->status != GO_STATUS_WAITING || !why)
                        continue;
                if ((streq(why, "chan receive") || streq(why, "chan send")) && g->waiting &&
                    go_read(p, g->waiting, sg, o->sudog_size) == 0 && unaligned_read_u64(sg + o->sudog_g) == g->addr &&
                    (c = unaligned_read_u64(sg + o->sudog_c)) != 0) {
                        g->wait_kind = "channel";
                        g->wait_addr = c;
                }
                any_sema = any_sema || startswith(why, "semacquire") || startswith(why, "sync.");
        }
        if (!any_sema || !p->semtable || o->semaroot_treap == GO_OFF_NONE || p->semtable_size < GO_SEMTAB_SIZE)
                return 0;
        /* Index the goroutines by g address, then walk each root's treap (prev and next are its children) and each
         * node's list of waiters on the same address (waitlink). */
        ix = calloc(n ?: 1, sizeof(AddrIndex));
        queue = calloc(GO_TREAP_QUEUE, sizeof(uint64_t));
        if (!ix || !queue)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++)
                ix[i] = (AddrIndex) { gs[i].addr, i };
        qsort(ix, n, sizeof *ix, cmp_addr_index);
        for (unsigned r = 0; r < GO_SEMTAB_SIZE; r++) {
                uint64_t root = p->semtable + r * (p->semtable_size / GO_SEMTAB_SIZE), treap;

                if (go_read_u64(p, root + o->semaroot_treap, &treap) < 0 || !treap)
                        continue;
                n_queue = 0;
                queue[n_queue++] = treap;
                while (n_queue > 0 && visited < GO_SUDOGS_MAX) {
                        uint64_t s = queue[--n_queue], elem;

                        visited++;
                        if (go_read(p, s, sg, o->sudog_size) < 0)
                                continue;
                        elem = unaligned_read_u64(sg + o->sudog_elem);
                        /* The treap's children, then the waiters on this address. */
                        for (uint64_t w = s; w && visited < GO_SUDOGS_MAX; visited++) {
                                uint8_t wb[GO_G_BYTES_MAX];
                                GoRawG *g;

                                if (w != s && go_read(p, w, wb, o->sudog_size) < 0)
                                        break;
                                g = g_by_addr(gs, ix, n, unaligned_read_u64((w == s ? sg : wb) + o->sudog_g));
                                if (g && g->status == GO_STATUS_WAITING && !g->wait_kind) {
                                        g->wait_kind = "semaphore";
                                        g->wait_addr = elem;
                                }
                                w = unaligned_read_u64((w == s ? sg : wb) + o->sudog_waitlink);
                        }
                        for (uint32_t child = 0; child < 2; child++) {
                                uint64_t c = unaligned_read_u64(sg + (child ? o->sudog_next : o->sudog_prev));

                                if (c && n_queue < GO_TREAP_QUEUE)
                                        queue[n_queue++] = c;
                        }
                }
        }
        return 0;
}

int go_read_goroutines(GoProcess *p, unsigned max_gs, unsigned max_frames, GoRawSet *ret, const char **ret_why) {
        const GoOffsets *o = &p->off;
        _cleanup_free_ uint64_t *ptrs = NULL, *addrs = NULL;
        _cleanup_free_ size_t *sizes = NULL, *which = NULL;
        _cleanup_free_ uint8_t *gbuf = NULL, *sbuf = NULL;
        _cleanup_free_ uint8_t **bufs = NULL;
        _cleanup_free_ bool *ok = NULL;
        uint64_t len, arr, sbytes = 0;
        struct timespec ts;
        size_t n, k;
        int r;

        *ret = (GoRawSet) {};
        *ret_why = NULL;
        max_gs = MIN(max_gs ?: GO_GOROUTINES_MAX, GO_GOROUTINES_MAX);
        max_frames = MIN(max_frames ?: GO_FRAMES_MAX, GO_FRAMES_MAX);
        /* As the runtime asks of its readers (runtime/proc.go, allglen): the length first, then the array; the array
         * only grows, and an older one stays valid for the length read before it. */
        if (go_read_u64(p, p->allglen, &len) < 0 ||
            (p->allgptr ? go_read_u64(p, p->allgptr, &arr) : go_read_u64(p, p->allgs, &arr)) < 0) {
                *ret_why = "the runtime's table of goroutines (runtime.allgs) cannot be read";
                return -EFAULT;
        }
        ret->total = len;
        if (len > GO_GOROUTINES_MAX * 16ULL) {
                *ret_why = "the runtime's count of goroutines (runtime.allglen) is not believable";
                return -EFAULT;
        }
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ret->now = (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
        if (len == 0)
                return 0;
        ptrs = calloc(len, sizeof(uint64_t));
        if (!ptrs)
                return -ENOMEM;
        if (go_read(p, arr, ptrs, len * sizeof *ptrs) < 0) {
                *ret_why = "the runtime's table of goroutines (runtime.allgs) cannot be read";
                return -EFAULT;
        }
        /* Every g in batches of reads into one batch's buffer (a million goroutines are not read into memory at
         * once), until the budget is full. */
        n = len;
        gbuf = malloc((size_t) GO_BATCH * o->g_size);
        bufs = calloc(n, sizeof(uint8_t *));
        sizes = calloc(n, sizeof(size_t));
        ok = calloc(n, sizeof(bool));
        ret->gs = calloc(MIN(n, (size_t) max_gs), sizeof(GoRawG));
        if (!gbuf || !bufs || !sizes || !ok || !ret->gs)
                return -ENOMEM;
        for (size_t done = 0; done < n && !ret->truncated; done += k) {
                k = MIN(n - done, (size_t) GO_BATCH);
                for (size_t i = 0; i < k; i++) {
                        bufs[i] = gbuf + i * o->g_size;
                        sizes[i] = o->g_size;
                }
                go_read_many(p, ptrs + done, sizes, bufs, ok, k);
                for (size_t i = 0; i < k; i++) {
                        GoRawG g;

                        if (!ok[i] || ptrs[done + i] == 0 || !g_decode(o, bufs[i], ptrs[done + i], &g))
                                continue;
                        if (ret->n >= max_gs) {
                                ret->truncated = true;
                                break;
                        }
                        ret->gs[ret->n++] = g;
                }
        }
        /* The parked ones' stacks, from the saved sp: one batch of reads, then each walked in its copy. */
        addrs = calloc(ret->n ?: 1, sizeof(uint64_t));
        which = calloc(ret->n ?: 1, sizeof(size_t));
        for (size_t i = 0; addrs && which && i < ret->n; i++) {
                GoRawG *g = &ret->gs[i];

                sizes[i] = 0;
#if defined(__x86_64__) /* aarch64 (a link register, no pushed return address): its thread's frames instead */
                if (g->status == GO_STATUS_SYSCALL && p->pcln && g->syscallsp >= g->lo && g->syscallsp < g->hi &&
                    g->syscallpc != 0) {
                        g->by_spdelta = true;
                        addrs[i] = g->syscallsp;
                        sizes[i] = MIN(g->hi - g->syscallsp, (uint64_t) GO_STACK_COPY_BYTES);
                        sbytes += sizes[i];
                        continue;
                }
#endif
                if (g->status == GO_STATUS_RUNNING || g->status == GO_STATUS_SYSCALL)
                        continue;       /* its frames are its thread's */
                if (g->sp < g->lo || g->sp >= g->hi || g->pc == 0) {
                        g->error = "its saved stack pointer is outside its stack (it moved while read)";
                        continue;
                }
                addrs[i] = g->sp;
                sizes[i] = MIN(g->hi - g->sp, (uint64_t) GO_STACK_COPY_BYTES);
                sbytes += sizes[i];
        }
        if (!addrs || !which)
                return -ENOMEM;
        sbuf = malloc(sbytes ?: 1);
        if (!sbuf)
                return -ENOMEM;
        for (size_t i = 0, off = 0; i < ret->n; i++) {
                bufs[i] = sbuf + off;
                off += sizes[i];
        }
        {
                /* Only those with a stack to read. */
                size_t m = 0;

                for (size_t i = 0; i < ret->n; i++)
                        if (sizes[i] > 0) {
                                addrs[m] = addrs[i];
                                bufs[m] = bufs[i];
                                sizes[m] = sizes[i];
                                which[m] = i;
                                m++;
                        }
                go_read_many(p, addrs, sizes, bufs, ok, m);
                for (size_t j = 0; j < m; j++) {
                        GoRawG *g = &ret->gs[which[j]];

                        if (!ok[j]) {
                                g->error = "its stack cannot be read";
                                continue;
                        }
                        r = g->by_spdelta ? g_walk_spdelta(p, g, bufs[j], sizes[j], max_frames)
                                          : g_walk(p, g, bufs[j], sizes[j], max_frames);
                        if (r < 0)
                                return r;
                }
        }
        /* Read again what a walk relied on: a goroutine that ran in between is not shown with a stack it left. */
        for (size_t i = 0; i < ret->n; i++) {
                size_t b = i % GO_BATCH;
                GoRawG *g = &ret->gs[i], again;

                if (b == 0) {
                        k = MIN(ret->n - i, (size_t) GO_BATCH);
                        for (size_t j = 0; j < k; j++) {
                                bufs[j] = gbuf + j * o->g_size;
                                addrs[j] = ret->gs[i + j].addr;
                                sizes[j] = o->g_size;
                        }
                        go_read_many(p, addrs, sizes, bufs, ok, k);
                }
                if (!g->pcs)
                        continue;
                if (!ok[b] || !g_decode(o, bufs[b], g->addr, &again) || again.goid != g->goid ||
                    again.sp != g->sp || again.pc != g->pc || again.bp != g->bp ||
                    (g->by_spdelta && (again.status != g->status || again.syscallsp != g->syscallsp))) {
                        g->pcs = mfree(g->pcs);
                        g->n_pcs = 0;
                        g->error = "it ran while its stack was read";
                }
        }
        g_threads(p, ret->gs, ret->n);
        return g_waits(p, ret->gs, ret->n);
}

/* ---- into the snapshot ---- */

static int cmp_goid(const void *a, const void *b) {
        uint64_t x = ((const GoRawG *) a)->goid, y = ((const GoRawG *) b)->goid;

        return x < y ? -1 : x > y;
}

static uint64_t pcs_hash(const GoRawG *g) {
        uint64_t h = hash_u64(g->n_pcs ^ ((uint64_t) g->entry << 32));

        for (size_t i = 0; i < g->n_pcs; i++)
                h = hash_u64(h ^ g->pcs[i]);
        return h;
}

static bool pcs_equal(const GoRawG *a, const GoRawG *b) {
        return a->n_pcs == b->n_pcs && a->entry == b->entry &&
               memcmp(a->pcs, b->pcs, a->n_pcs * sizeof *a->pcs) == 0;
}

static int frame_copy(UserFrame *dst, const UserFrame *src) {
        *dst = *src;
        dst->function = dst->linkage_name = dst->file = NULL;
        if ((src->function && !(dst->function = strdup(src->function))) ||
            (src->linkage_name && !(dst->linkage_name = strdup(src->linkage_name))) ||
            (src->file && !(dst->file = strdup(src->file)))) {
                user_frame_done(dst);
                return -ENOMEM;
        }
        return 0;
}

/* Move T's frames into a new stack of GR, up to the first where a goroutine's stack begins (runtime.goexit, which
 * Go does not show: "created by" says where it began). */
static int stack_from_frames(const GoProcess *p, GoRuntime *gr, ThreadSnapshot *t, bool truncated, bool copy,
                             ssize_t *ret) {
        GoStack *st = go_runtime_add_stack(gr);
        size_t n = 0, k = 0;

        if (!st)
                return -ENOMEM;
        /* A thread's frames found by stack scan are guesses: a goroutine's stack ends where the unwind stopped knowing
         * (without DWARF its frame pointers end at the goroutine's first function, whose saved one is 0). */
        while (n < t->n_frames && !go_stack_top_function(t->frames[n].function) &&
               !(copy && t->frames[n].method == FRAME_METHOD_SCAN))
                n++;
        /* A thread's frames end at runtime.mstart or runtime.mcall (its own stack's top) when they are not a
         * goroutine's: those are kept, they are where it is. */
        if (n < t->n_frames && !startswith(t->frames[n].function, "runtime.goexit"))
                n++;
        st->frames = calloc(n ?: 1, sizeof *st->frames);
        if (!st->frames)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                const UserFrame *u = &t->frames[i];

                if (!u->inlined && u->function && is_trampoline(p, u->pc - u->function_offset))
                        continue;
                if (copy) {
                        if (frame_copy(&st->frames[k], u) < 0)
                                return -ENOMEM;
                } else {
                        st->frames[k] = *u;
                        t->frames[i] = (UserFrame) {};
                }
                st->frames[k].kind = FRAME_KIND_GO;
                st->n_frames = ++k;
        }
        st->truncated = truncated;
        *ret = (ssize_t) (gr->n_stacks - 1);
        return 0;
}

/* Without DWARF: T's frames, one per pc of PCS[0..N) as the symbol table named them, expanded from the binary's
 * own table (pclntab) into Go's view: each pc's inlined calls, file and line, its compiler wrappers left out. A pc
 * the table does not know keeps its frame. -ENOMEM. */
static int pcln_expand(const GoProcess *p, const uint64_t *pcs, size_t n, bool entry, ThreadSnapshot *t) {
        _cleanup_free_ UserFrame *old = NULL;
        size_t n_old = t->n_frames;
        GoPcFrame pf[32];
        int r = 0;

        if (!p->pcln || p->from_dwarf || n_old != n)
                return 0;
        old = TAKE_PTR(t->frames);
        t->n_frames = 0;
        for (size_t k = 0; k < n_old; k++) {
                bool activation = (k == 0 && entry) || old[k].activation;
                uint64_t lookup = pcs[k] - (activation ? 0 : 1) - p->pcln_bias;
                size_t m = go_pclntab_frames(p->pcln, lookup, pf, ELEMENTSOF(pf));

                if (m == 0) {
                        UserFrame *u = thread_add_frame(t);

                        if (!u)
                                goto oom;
                        *u = old[k];
                        old[k] = (UserFrame) {};
                        continue;
                }
                for (size_t i = 0; i < m; i++) {
                        UserFrame *u;

                        if (pf[i].wrapper)
                                continue;
                        u = thread_add_frame(t);
                        if (!u)
                                goto oom;
                        *u = (UserFrame) { .kind = old[k].kind, .pc = old[k].pc, .activation = old[k].activation,
                                           .method = old[k].method, .module = old[k].module,
                                           .inlined = pf[i].inlined, .line = pf[i].line,
                                           .function_offset = pf[i].inlined ? 0 : pcs[k] - p->pcln_bias - pf[i].entry };
                        if (!(u->function = strdup(pf[i].function)) || (pf[i].file && !(u->file = strdup(pf[i].file))))
                                goto oom;
                }
        }
        goto out;
oom:
        r = -ENOMEM;
out:
        for (size_t k = 0; k < n_old; k++)
                user_frame_done(&old[k]);
        return r;
}

static void scratch_reset(ThreadSnapshot *t) {
        for (size_t i = 0; i < t->n_frames; i++)
                user_frame_done(&t->frames[i]);
        t->n_frames = 0;
}

/* The object a semaphore waiter waits on, named by the sync function it waits in (the sema's place in each type
 * is the same from Go 1.9 to 1.23: sync/mutex.go, rwmutex.go, waitgroup.go). */
static int sema_object(Goroutine *g, const GoStack *st, uint64_t elem) {
        static const struct {
                const char *function, *kind;
                uint64_t sema_offset;
        } objs[] = {
                { "sync.(*Mutex).lockSlow", "sync.Mutex", 4 },
                { "sync.(*Mutex).Lock", "sync.Mutex", 4 },
                { "sync.(*RWMutex).RLock", "sync.RWMutex", 12 },
                { "sync.(*RWMutex).Lock", "sync.RWMutex", 8 },
                { "sync.(*WaitGroup).Wait", "sync.WaitGroup", 8 },
        };

        for (size_t i = 0; st && i < st->n_frames; i++)
                for (size_t k = 0; k < ELEMENTSOF(objs); k++)
                        if (st->frames[i].function && streq(st->frames[i].function, objs[k].function)) {
                                g->wait_kind = strdup(objs[k].kind);
                                g->wait_address = elem - objs[k].sema_offset;
                                return g->wait_kind ? 0 : -ENOMEM;
                        }
        g->wait_kind = strdup("semaphore");
        g->wait_address = elem;
        return g->wait_kind ? 0 : -ENOMEM;
}

/* The go statements seen, by pc: most goroutines come from a few, resolved once each. */
typedef struct Creators {
        uint64_t *pcs;
        UserFrame *frames;
        size_t n_slots;
} Creators;

static void creators_done(Creators *c) {
        for (size_t i = 0; c->frames && i < c->n_slots; i++)
                user_frame_done(&c->frames[i]);
        free(c->pcs);
        free(c->frames);
}

/* FN's answer for the go statement at PC: the function that holds it, at the line of the (maybe inlined)
 * statement; its function NULL when not known. */
static int creator_resolve(const GoProcess *p, uint64_t pc, GoSymbolizeFn fn, void *userdata, ThreadSnapshot *scratch,
                           UserFrame *ret) {
        UnwindFrame uf = { .pc = pc, .method = FRAME_METHOD_FP };
        UserFrame *outer, *inner;
        int r;

        *ret = (UserFrame) { .module = -1 };
        scratch_reset(scratch);
        r = fn(userdata, &uf, 1, scratch);
        if (r == -ETIME)
                r = 0;
        if (r >= 0)
                r = pcln_expand(p, &pc, 1, false, scratch);
        if (r < 0 || scratch->n_frames == 0 || !scratch->frames[scratch->n_frames - 1].function)
                return MIN(r, 0);
        outer = &scratch->frames[scratch->n_frames - 1];
        inner = &scratch->frames[0];
        *ret = *outer;
        *outer = (UserFrame) {};
        ret->kind = FRAME_KIND_GO;
        ret->inlined = false;
        if (inner != outer && inner->file) {
                free(ret->file);
                ret->file = TAKE_PTR(inner->file);
                ret->line = inner->line;
                ret->column = inner->column;
        }
        return 0;
}

static int creator_of(const GoProcess *p, Creators *c, uint64_t pc, GoSymbolizeFn fn, void *userdata, ThreadSnapshot *scratch,
                      UserFrame *ret) {
        size_t h = hash_u64(pc) & (c->n_slots - 1);
        int r;

        while (c->pcs[h] != 0 && c->pcs[h] != pc)
                h = (h + 1) & (c->n_slots - 1);
        if (c->pcs[h] == 0) {
                r = creator_resolve(p, pc, fn, userdata, scratch, &c->frames[h]);
                if (r < 0)
                        return r;
                c->pcs[h] = pc;
        }
        if (!c->frames[h].function)
                return 0;
        return frame_copy(ret, &c->frames[h]);
}

/* Without DWARF, T's frames as the symbol table named them: into SCRATCH, expanded from the binary's own table as a
 * parked goroutine's are (file:line, inlined calls, as Go has them). 1 when SCRATCH has them, 0 when T's are to be
 * taken as they are (a binary with DWARF, or without pclntab), -ENOMEM. */
static int thread_frames_expanded(const GoProcess *p, const ThreadSnapshot *t, ThreadSnapshot *scratch) {
        _cleanup_free_ uint64_t *pcs = NULL;
        int r;

        if (!p->pcln || p->from_dwarf)
                return 0;
        scratch_reset(scratch);
        pcs = calloc(t->n_frames ?: 1, sizeof *pcs);
        if (!pcs)
                return -ENOMEM;
        for (size_t i = 0; i < t->n_frames; i++) {
                UserFrame *u = thread_add_frame(scratch);

                if (!u || frame_copy(u, &t->frames[i]) < 0)
                        return -ENOMEM;
                pcs[i] = t->frames[i].pc;
        }
        /* Each frame an activation or a return address as its unwind found it (a signal's frame in between). */
        r = pcln_expand(p, pcs, t->n_frames, false, scratch);
        return r < 0 ? r : 1;
}

/* Whether T's frames, captured before the goroutines were read, are those of the goroutine that started at STARTPC:
 * they run down to its stack's bottom (runtime.goexit), the function just inside it the one it started in. A goroutine
 * on a CPU when read may not be the one its M ran when the thread was captured: sysmon preempts one every 10 ms, and
 * another takes its place (three spinning goroutines on two CPUs showed each other's frames in a dump of three), or
 * the thread was in the scheduler. An unwind cut short by its budget cannot tell, and is taken as it is. */
static bool thread_runs_goroutine(const ThreadSnapshot *t, uint64_t startpc) {
        for (size_t i = 0; i < t->n_frames; i++) {
                const UserFrame *u;

                if (!go_stack_top_function(t->frames[i].function))
                        continue;
                if (i == 0 || !startswith(t->frames[i].function, "runtime.goexit"))
                        return false;
                u = &t->frames[i - 1];
                return !u->inlined && u->function && u->pc - u->function_offset == startpc;
        }
        return t->truncated;
}

static int goroutine_fill(GoProcess *p, const GoRawSet *raw, const GoRawG *rg, Goroutine *g, Snapshot *s,
                          GoSymbolizeFn fn, void *userdata, ThreadSnapshot *scratch, Creators *creators) {
        GoRuntime *gr = snapshot_go(s);
        const char *why = rg->status == GO_STATUS_WAITING ? go_wait_reason(p, rg->waitreason) : NULL;
        int r;

        g->goid = rg->goid;
        g->status = (GoStatus) rg->status;
        g->tid = rg->tid;
        g->locked = rg->lockedm != 0;
        g->parent_goid = rg->parent_goid;
        if (why && !(g->wait_reason = strdup(why)))
                return -ENOMEM;
        if ((rg->status == GO_STATUS_WAITING || rg->status == GO_STATUS_SYSCALL) && rg->waitsince > 0 &&
            raw->now >= rg->waitsince)
                g->wait_usec = (raw->now - rg->waitsince) / 1000;
        if (rg->error && !(g->error = strdup(rg->error)))
                return -ENOMEM;
        /* Running, or in a syscall: its frames are its thread's, captured with the threads. */
        if ((rg->status == GO_STATUS_RUNNING || rg->status == GO_STATUS_SYSCALL) && !rg->pcs) {
                ThreadSnapshot *t = NULL;
                bool unwound;

                for (size_t i = 0; rg->tid && i < s->n_threads; i++)
                        if (s->threads[i].tid == rg->tid)
                                t = &s->threads[i];
                unwound = t && t->n_frames > 0;
                /* On a CPU: the thread's frames only if they are its own (another goroutine's, else). */
                if (unwound && rg->status == GO_STATUS_RUNNING && !thread_runs_goroutine(t, rg->startpc)) {
                        if (!g->error && !(g->error = strdup("its thread ran something else when captured (the "
                                                             "goroutine was scheduled on it since)")))
                                return -ENOMEM;
                } else if (unwound) {
                        r = thread_frames_expanded(p, t, scratch);
                        if (r < 0)
                                return r;
                        r = r > 0 ? stack_from_frames(p, gr, scratch, t->truncated, false, &g->stack)
                                  : stack_from_frames(p, gr, t, t->truncated, true, &g->stack);
                        if (r < 0)
                                return r;
                } else if (!g->error) {
                        g->error = rg->tid ? (t ? strdup("its thread's stack was not unwound")
                                                : strdup("its thread was not captured"))
                                           : strdup("its thread is not known");
                        if (!g->error)
                                return -ENOMEM;
                }
        }
        /* The go statement that created it: a return address in its creator (goroutine 1's is the runtime's start,
         * which Go does not show either). */
        if (rg->gopc && rg->goid != 1)
                return creator_of(p, creators, rg->gopc, fn, userdata, scratch, &g->created_by);
        return 0;
}

int go_build(GoProcess *p, GoRawSet *raw, Snapshot *s, GoSymbolizeFn fn, void *userdata) {
        _cleanup_free_ ssize_t *slots = NULL;
        _cleanup_free_ size_t *owner = NULL;
        _cleanup_(creators_done) Creators creators = {};
        ThreadSnapshot scratch = {};
        size_t n_slots = 16;
        GoRuntime *gr;
        int r = 0;

        gr = snapshot_add_go(s);
        if (!gr)
                return -ENOMEM;
        gr->version = strdup(p->version);
        gr->layout = strdup(go_process_layout(p));
        if (!gr->version || !gr->layout)
                return -ENOMEM;
        gr->total = raw->total;
        gr->truncated = raw->truncated;
        qsort(raw->gs, raw->n, sizeof *raw->gs, cmp_goid);
        /* Distinct stacks by their pcs: open addressing, slots a power of two at least twice the goroutines. */
        while (n_slots < 2 * raw->n)
                n_slots *= 2;
        slots = malloc(n_slots * sizeof *slots);
        owner = calloc(raw->n ?: 1, sizeof *owner);
        creators = (Creators) { .pcs = calloc(n_slots, sizeof(uint64_t)), .frames = calloc(n_slots, sizeof(UserFrame)),
                                .n_slots = n_slots };
        if (!slots || !owner || !creators.pcs || !creators.frames)
                return -ENOMEM;
        for (size_t i = 0; i < n_slots; i++)
                slots[i] = -1;
        for (size_t i = 0; i < raw->n; i++) {
                GoRawG *rg = &raw->gs[i];
                Goroutine *g = go_runtime_add(gr);

                if (!g)
                        goto oom;
                r = goroutine_fill(p, raw, rg, g, s, fn, userdata, &scratch, &creators);
                if (r < 0)
                        goto out;
                if (rg->pcs && rg->n_pcs > 0) {
                        size_t h = pcs_hash(rg) & (n_slots - 1);

                        while (slots[h] >= 0 && !pcs_equal(&raw->gs[owner[slots[h]]], rg))
                                h = (h + 1) & (n_slots - 1);
                        if (slots[h] < 0) {
                                _cleanup_free_ UnwindFrame *uf = calloc(rg->n_pcs, sizeof *uf);

                                if (!uf)
                                        goto oom;
                                for (size_t k = 0; k < rg->n_pcs; k++)
                                        uf[k] = (UnwindFrame) { .pc = rg->pcs[k],
                                                                .activation = k == 0 && rg->entry,
                                                                .method = k == 0 ? FRAME_METHOD_INITIAL
                                                                                 : FRAME_METHOD_FP };
                                scratch_reset(&scratch);
                                r = fn(userdata, uf, rg->n_pcs, &scratch);
                                if (r == -ETIME) {
                                        /* Out of time: listed, without frames (what is left is not symbolized). */
                                        gr->unresolved++;
                                        free(g->error);
                                        g->error = strdup("not symbolized: the capture's time budget ran out");
                                        if (!g->error)
                                                goto oom;
                                        r = 0;
                                        goto wait;
                                }
                                if (r >= 0)
                                        r = pcln_expand(p, rg->pcs, rg->n_pcs, rg->entry, &scratch);
                                if (r < 0)
                                        goto out;
                                r = stack_from_frames(p, gr, &scratch, rg->truncated, false, &slots[h]);
                                if (r < 0)
                                        goto out;
                                owner[slots[h]] = i;
                        }
                        g->stack = slots[h];
                }
        wait:
                if (rg->wait_kind && streq(rg->wait_kind, "semaphore"))
                        r = sema_object(g, g->stack >= 0 ? &gr->stacks[g->stack] : NULL, rg->wait_addr);
                else if (rg->wait_kind) {
                        g->wait_kind = strdup(rg->wait_kind);
                        g->wait_address = rg->wait_addr;
                        r = g->wait_kind ? 0 : -ENOMEM;
                }
                if (r < 0)
                        goto out;
        }
        goto out;
oom:
        r = -ENOMEM;
out:
        scratch_reset(&scratch);
        free(scratch.frames);
        return r;
}

/* ---- the runtime table's row ---- */

/* A Go program in a capture: its runtime, its goroutines as read, and how long reading them took. */
typedef struct GoCapture {
        GoProcess *p;
        GoRawSet raw;
        uint64_t read_usec;
        bool unread;            /* the table of goroutines could not be read: nothing to build */
} GoCapture;

/* The Go runtime of the process, when it is a Go program; one that cannot be read is named (a stripped binary). */
static int go_open(const RuntimeCapture *rc, void **ret) {
        _cleanup_(go_process_freep) GoProcess *p = NULL;
        const char *why = NULL;
        GoCapture *g;
        int r;

        *ret = NULL;
        r = go_process_open(rc->pid, rc->up, rc->sym, &p, &why);
        if (r == -ENOMEM)
                return r;
        if (r < 0) {
                GoRuntime *gr = snapshot_add_go(rc->s);
                if (!gr || !(gr->error = strdup(why ?: strerror(-r))))
                        return -ENOMEM;
                (void) snapshot_add_error(rc->s, "Go goroutines not read: %s", why ?: strerror(-r));
                return 0;
        }
        if (!p)
                return 0;
        g = calloc(1, sizeof *g);
        if (!g)
                return -ENOMEM;
        g->p = TAKE_PTR(p);
        *ret = g;
        return 0;
}

/* Its goroutines, read without stopping anything: after the threads' copies, before they are unwound. */
static int go_read_process(void *state, const RuntimeCapture *rc) {
        uint64_t start = now_usec(CLOCK_MONOTONIC);
        const char *why = NULL;
        GoCapture *g = state;
        int r;

        r = go_read_goroutines(g->p, 0, rc->max_frames, &g->raw, &why);
        if (r == -ENOMEM)
                return r;
        if (r < 0) {
                (void) snapshot_add_error(rc->s, "Go goroutines not read: %s", why ?: strerror(-r));
                g->unread = true;
        }
        g->read_usec = now_usec(CLOCK_MONOTONIC) - start;
        return 0;
}

/* The goroutines into the snapshot, once the threads (a running goroutine's frames) are unwound. */
static int go_finish(void *state, const RuntimeCapture *rc) {
        uint64_t start = now_usec(CLOCK_MONOTONIC);
        GoCapture *g = state;
        Snapshot *s = rc->s;
        GoRuntime *gr;
        int r;

        if (g->unread)
                return 0;
        r = go_build(g->p, &g->raw, s, rc->symbolize, rc->userdata);
        if (r < 0)
                return r;
        gr = snapshot_go(s);
        if (gr->unresolved > 0) {
                s->truncated = true;
                (void) snapshot_add_error(s, "time budget (%llu ms) spent: %zu of %zu goroutines left without frames",
                                          (unsigned long long) (rc->time_budget_usec / USEC_PER_MSEC),
                                          gr->unresolved, gr->n_goroutines);
        }
        gr->read_usec = g->read_usec + (now_usec(CLOCK_MONOTONIC) - start);
        return 0;
}

static void go_close(void *state) {
        GoCapture *g = state;

        go_process_free(g->p);
        go_raw_set_done(&g->raw);
        free(g);
}

/* A Go thread's stack begins at runtime.mstart (or, on a goroutine's, runtime.goexit; runtime.mcall switched stacks):
 * what an unwinder finds beyond it is not a frame. Cut there, as Go's own traceback stops. */
static int go_trim_native(ThreadSnapshot *t, bool *ret_clean) {
        for (size_t i = 0; i < t->n_frames; i++) {
                if (!go_stack_top_function(t->frames[i].function))
                        continue;
                /* Whole: a stack copy cut short (a goroutine's stack is in the heap, whose mapping runs on past it)
                 * lost nothing. */
                t->truncated = false;
                for (size_t k = i + 1; k < t->n_frames; k++)
                        user_frame_done(&t->frames[k]);
                t->n_frames = i + 1;
                free(t->unwind_end);
                t->unwind_end = strdup("the outermost frame of a Go stack");
                if (!t->unwind_end)
                        return -ENOMEM;
                *ret_clean = true;
                break;
        }
        return 0;
}

const RuntimeOps go_runtime_ops = {
        .open = go_open,
        .read_process = go_read_process,
        .finish = go_finish,
        .close = go_close,
        .trim_native = go_trim_native,
};
