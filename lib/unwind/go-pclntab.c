/* go-pclntab.c: Go 1.18/1.19's .gopclntab, read as the runtime reads it (src/runtime/symtab.go, go1.19.8): every
 * offset checked against the table's bounds, every string against its section's end. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/macro.h"
#include "base/unaligned.h"
#include "unwind/go-pclntab.h"

#define PCLNTAB_MAGIC_118 0xfffffff0U
/* _func (runtime2.go): entryoff, nameoff, args, deferreturn, pcsp, pcfile, pcln, npcdata, cuOffset (4 bytes each),
 * funcID, flag, pad, nfuncdata; then npcdata uint32 pcdata offsets, then nfuncdata uint32 funcdata offsets. */
#define FUNC_BYTES 40U
#define FUNC_NAMEOFF 4U
#define FUNC_PCSP 16U
#define FUNC_PCFILE 20U
#define FUNC_PCLN 24U
#define FUNC_NPCDATA 28U
#define FUNC_CUOFFSET 32U
#define FUNC_FUNCID 36U
#define FUNC_FLAG 37U
#define FUNCFLAG_TOPFRAME 1U
#define FUNC_NFUNCDATA 39U
/* inlinedCall: parent int16, funcID uint8, pad, file int32, line int32, func_ int32, parentPc int32. */
#define INLINED_CALL_BYTES 20U
#define INLINED_FUNCID 2U
#define INLINED_NAMEOFF 12U
#define INLINED_PARENTPC 16U
#define PCDATA_INLTREEINDEX 2U
#define FUNCDATA_INLTREE 3U
#define FUNCID_WRAPPER 21U
#define INLINE_DEPTH_MAX 32U

typedef struct Section {
        uint64_t addr;
        const uint8_t *data;
        size_t size;
} Section;

struct GoPclntab {
        const uint8_t *base;            /* the pcHeader */
        size_t size;                    /* bytes of .gopclntab from it */
        uint64_t text;                  /* textStart: function entries are offsets from it */
        uint64_t nfunc;
        size_t funcnames, cutab, filetab, pctab, pcln;  /* offsets from BASE */
        Section gofunc;                 /* the section holding go.func.* (funcdata offsets are from it) */
        uint64_t gofunc_addr;
};

/* N bytes at OFF of the table, NULL when they are not all in it. */
static const uint8_t *at(const GoPclntab *t, uint64_t off, size_t n) {
        if (off > t->size || n > t->size - off)
                return NULL;
        return t->base + off;
}

/* A NUL-terminated string at OFF, NULL when it does not end within the table. */
static const char *str_at(const GoPclntab *t, uint64_t off) {
        const uint8_t *p = at(t, off, 1);

        if (!p || !memchr(p, 0, t->size - off))
                return NULL;
        return (const char *) p;
}

static int section_data(Elf *elf, const char *name, Section *ret) {
        size_t shstrndx;

        if (elf_getshdrstrndx(elf, &shstrndx) < 0)
                return -EBADMSG;
        for (Elf_Scn *scn = elf_nextscn(elf, NULL); scn; scn = elf_nextscn(elf, scn)) {
                const char *sn;
                GElf_Shdr shdr;
                Elf_Data *d;

                if (!gelf_getshdr(scn, &shdr) || !(sn = elf_strptr(elf, shstrndx, shdr.sh_name)) || !streq(sn, name))
                        continue;
                if (shdr.sh_type == SHT_NOBITS || !(d = elf_getdata(scn, NULL)) || !d->d_buf)
                        return -ENOENT;
                *ret = (Section) { .addr = shdr.sh_addr, .data = d->d_buf, .size = d->d_size };
                return 0;
        }
        return -ENOENT;
}

/* The section that holds ELF address ADDR. */
static int section_of(Elf *elf, uint64_t addr, Section *ret) {
        for (Elf_Scn *scn = elf_nextscn(elf, NULL); scn; scn = elf_nextscn(elf, scn)) {
                GElf_Shdr shdr;
                Elf_Data *d;

                if (!gelf_getshdr(scn, &shdr) || !(shdr.sh_flags & SHF_ALLOC) || shdr.sh_type == SHT_NOBITS ||
                    addr < shdr.sh_addr || addr >= shdr.sh_addr + shdr.sh_size)
                        continue;
                if (!(d = elf_getdata(scn, NULL)) || !d->d_buf)
                        return -ENOENT;
                *ret = (Section) { .addr = shdr.sh_addr, .data = d->d_buf, .size = d->d_size };
                return 0;
        }
        return -ENOENT;
}

/* go.func.* from the symbol table: where funcdata offsets start. */
static int gofunc_symbol(Elf *elf, uint64_t *ret) {
        for (Elf_Scn *scn = elf_nextscn(elf, NULL); scn; scn = elf_nextscn(elf, scn)) {
                GElf_Shdr shdr;
                Elf_Data *d;

                if (!gelf_getshdr(scn, &shdr) || shdr.sh_type != SHT_SYMTAB || !(d = elf_getdata(scn, NULL)) ||
                    shdr.sh_entsize == 0)
                        continue;
                for (size_t i = 0; i < shdr.sh_size / shdr.sh_entsize; i++) {
                        const char *n;
                        GElf_Sym sym;

                        if (!gelf_getsym(d, (int) i, &sym) || !(n = elf_strptr(elf, shdr.sh_link, sym.st_name)))
                                continue;
                        if (streq(n, "go.func.*") || streq(n, "go:func.*")) {
                                *ret = sym.st_value;
                                return 0;
                        }
                }
        }
        return -ENOENT;
}

int go_pclntab_open(Elf *elf, GoPclntab **ret) {
        GoPclntab *t;
        Section s;
        const uint8_t *h;
        int r;

        *ret = NULL;
        r = section_data(elf, ".gopclntab", &s);
        if (r < 0)
                return r;
        if (s.size < 8 + 8 * 8)
                return -EBADMSG;
        h = s.data;
        if (unaligned_read_u32(h) != PCLNTAB_MAGIC_118)
                return -EPROTONOSUPPORT;
        /* pad1, pad2 0; minLC 1 (x86) or 4 (arm64); pointers of 8 bytes. */
        if (h[4] != 0 || h[5] != 0 || (h[6] != 1 && h[6] != 4) || h[7] != 8)
                return -EBADMSG;
        t = calloc(1, sizeof *t);
        if (!t)
                return -ENOMEM;
        *t = (GoPclntab) {
                .base = h,
                .size = s.size,
                .nfunc = unaligned_read_u64(h + 8),
                .text = unaligned_read_u64(h + 24),
                .funcnames = (size_t) unaligned_read_u64(h + 32),
                .cutab = (size_t) unaligned_read_u64(h + 40),
                .filetab = (size_t) unaligned_read_u64(h + 48),
                .pctab = (size_t) unaligned_read_u64(h + 56),
                .pcln = (size_t) unaligned_read_u64(h + 64),
        };
        if (t->nfunc == 0 || t->nfunc > t->size / 8 || !at(t, t->pcln, (t->nfunc + 1) * 8) || !at(t, t->funcnames, 1) ||
            !at(t, t->cutab, 4) || !at(t, t->filetab, 1) || !at(t, t->pctab, 1)) {
                free(t);
                return -EBADMSG;
        }
        /* Without go.func.* no inline tree can be read: the table still gives each physical frame. */
        if (gofunc_symbol(elf, &t->gofunc_addr) < 0 || section_of(elf, t->gofunc_addr, &t->gofunc) < 0)
                t->gofunc_addr = 0;
        *ret = t;
        return 0;
}

GoPclntab *go_pclntab_free(GoPclntab *t) {
        free(t);
        return NULL;
}

/* runtime.readvarint(): at most 5 bytes; false past the table's end. */
static bool varint(const GoPclntab *t, size_t *off, uint32_t *ret) {
        uint32_t v = 0;

        for (unsigned shift = 0; shift < 35; shift += 7) {
                const uint8_t *p = at(t, *off, 1);

                if (!p)
                        return false;
                (*off)++;
                v |= (uint32_t) (*p & 0x7f) << shift;
                if (!(*p & 0x80)) {
                        *ret = v;
                        return true;
                }
        }
        return false;
}

/* runtime.pcvalue(): the value of the table at pctab offset OFF for TARGET (ELF address), in the function that
 * starts at ENTRY; -1 when there is none. */
static int32_t pcvalue(const GoPclntab *t, uint32_t off, uint64_t entry, uint64_t target, unsigned quantum) {
        size_t p = t->pctab + off;
        uint64_t pc = entry;
        int32_t val = -1;

        if (off == 0)
                return -1;
        for (bool first = true;; first = false) {
                uint32_t uvdelta, pcdelta;

                if (!varint(t, &p, &uvdelta) || (uvdelta == 0 && !first))
                        return -1;
                val += (int32_t) (-(uvdelta & 1) ^ (uvdelta >> 1));
                if (!varint(t, &p, &pcdelta))
                        return -1;
                pc += (uint64_t) pcdelta * quantum;
                if (target < pc)
                        return val;
        }
}

/* The file of FILENO in the unit at CU, NULL when the table has none. */
static const char *file_of(const GoPclntab *t, uint32_t cu, int32_t fileno) {
        const uint8_t *c;
        uint32_t off;

        if (fileno < 0 || !(c = at(t, t->cutab + ((uint64_t) cu + (uint32_t) fileno) * 4, 4)))
                return NULL;
        off = unaligned_read_u32(c);
        return off == UINT32_MAX ? NULL : str_at(t, t->filetab + off);
}

/* runtime.findfunc(): the _func that holds PC (ELF address) and its entry, its pcdata and funcdata offsets checked
 * to be within the table; NULL when no Go function holds PC. */
static const uint8_t *find_func(const GoPclntab *t, uint64_t pc, uint64_t *ret_entry) {
        uint64_t lo = 0, hi = t->nfunc, entry;
        const uint8_t *ft, *f;
        uint32_t funcoff;

        if (pc < t->text)
                return NULL;
        /* The last function whose entry is at or before PC (functab is sorted; its last entry is the end). */
        ft = t->base + t->pcln;
        if (pc - t->text >= unaligned_read_u32(ft + t->nfunc * 8) || pc - t->text < unaligned_read_u32(ft))
                return NULL;
        while (hi - lo > 1) {
                uint64_t mid = lo + (hi - lo) / 2;

                if (unaligned_read_u32(ft + mid * 8) <= pc - t->text)
                        lo = mid;
                else
                        hi = mid;
        }
        entry = t->text + unaligned_read_u32(ft + lo * 8);
        funcoff = unaligned_read_u32(ft + lo * 8 + 4);
        f = at(t, t->pcln + (uint64_t) funcoff, FUNC_BYTES);
        if (!f || t->text + unaligned_read_u32(f) != entry ||
            !at(t, t->pcln + (uint64_t) funcoff + FUNC_BYTES, ((size_t) unaligned_read_u32(f + FUNC_NPCDATA) + f[FUNC_NFUNCDATA]) * 4))
                return NULL;
        *ret_entry = entry;
        return f;
}

int go_pclntab_spdelta(const GoPclntab *t, uint64_t pc, int32_t *ret_delta, bool *ret_top) {
        uint64_t entry;
        const uint8_t *f = find_func(t, pc, &entry);
        int32_t d;

        if (!f)
                return -ENOENT;
        *ret_top = f[FUNC_FLAG] & FUNCFLAG_TOPFRAME;
        d = pcvalue(t, unaligned_read_u32(f + FUNC_PCSP), entry, pc, t->base[6]);
        if (d < 0 || d % 8 != 0)
                return -EBADMSG;
        *ret_delta = d;
        return 0;
}

size_t go_pclntab_frames(const GoPclntab *t, uint64_t pc, GoPcFrame *out, size_t max) {
        unsigned quantum = t->base[6];
        uint64_t entry, tracepc = pc;
        const uint8_t *f;
        uint64_t inltree = UINT64_MAX;  /* the inline tree's offset in the go.func.* section, when there is one */
        uint32_t npcdata, nfuncdata, cu, pcfile, pcln;
        const char *name;
        size_t n = 0;

        if (max == 0 || !(f = find_func(t, pc, &entry)))
                return 0;
        npcdata = unaligned_read_u32(f + FUNC_NPCDATA);
        nfuncdata = f[FUNC_NFUNCDATA];
        cu = unaligned_read_u32(f + FUNC_CUOFFSET);
        pcfile = unaligned_read_u32(f + FUNC_PCFILE);
        pcln = unaligned_read_u32(f + FUNC_PCLN);
        name = str_at(t, t->funcnames + unaligned_read_u32(f + FUNC_NAMEOFF));
        if (!name)
                return 0;
        /* The inline tree (funcdata, from go.func.*) and the pc's index in it (pcdata). */
        if (FUNCDATA_INLTREE < nfuncdata && PCDATA_INLTREEINDEX < npcdata && t->gofunc_addr) {
                uint32_t off = unaligned_read_u32(f + FUNC_BYTES + npcdata * 4 + FUNCDATA_INLTREE * 4);
                uint64_t a = t->gofunc_addr + off;

                if (off != UINT32_MAX && a >= t->gofunc.addr && a < t->gofunc.addr + t->gofunc.size)
                        inltree = a - t->gofunc.addr;
        }
        for (unsigned depth = 0; inltree != UINT64_MAX && depth < INLINE_DEPTH_MAX && n + 1 < max; depth++) {
                int32_t ix = pcvalue(t, unaligned_read_u32(f + FUNC_BYTES + PCDATA_INLTREEINDEX * 4), entry, tracepc, quantum);
                const uint8_t *call;
                const char *iname;
                int32_t line;

                if (ix < 0)
                        break;
                if (inltree + ((uint64_t) ix + 1) * INLINED_CALL_BYTES > t->gofunc.size)
                        break;
                call = t->gofunc.data + inltree + (uint64_t) ix * INLINED_CALL_BYTES;
                iname = str_at(t, t->funcnames + unaligned_read_u32(call + INLINED_NAMEOFF));
                line = pcvalue(t, pcln, entry, tracepc, quantum);
                out[n++] = (GoPcFrame) { .function = iname ?: "?",
                                         .file = file_of(t, cu, pcvalue(t, pcfile, entry, tracepc, quantum)),
                                         .line = line > 0 ? (unsigned) line : 0, .inlined = true,
                                         .wrapper = call[INLINED_FUNCID] == FUNCID_WRAPPER, .entry = entry };
                /* Back to an instruction of the caller, whose position is the call site. */
                tracepc = entry + unaligned_read_u32(call + INLINED_PARENTPC);
        }
        {
                int32_t line = pcvalue(t, pcln, entry, tracepc, quantum);

                out[n++] = (GoPcFrame) { .function = name, .file = file_of(t, cu, pcvalue(t, pcfile, entry, tracepc,
                                                                                           quantum)),
                                         .line = line > 0 ? (unsigned) line : 0,
                                         .wrapper = f[FUNC_FUNCID] == FUNCID_WRAPPER, .entry = entry };
        }
        return n;
}
