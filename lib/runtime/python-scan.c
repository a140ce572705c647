/* python-scan.c: _PyRuntime found by scanning a module's writable data for the one structure that holds together:
 * its copy read in chunks, candidates filtered on that copy, and the pointers they need followed in batches of
 * reads. Never more than PY_SCAN_BYTES_MAX of data, nor PY_SCAN_POINTERS_MAX pointers followed. */
#include <errno.h>
#include <gelf.h>
#include <stdlib.h>
#include <string.h>

#include "base/macro.h"
#include "base/unaligned.h"
#include "proc/proc-read.h"
#include "runtime/python-scan.h"

/* The bytes of one read of the data. */
#define PY_SCAN_CHUNK_BYTES (64U * 1024)
/* Distinct interpreter pointers followed at most: past that, the data is not what we look for. */
#define PY_SCAN_POINTERS_MAX 65536U
#define PY_SCAN_SEGMENTS_MAX 8U
/* interpreters.next_id, the count of interpreters created, is below this in a process we can read. */
#define PY_SCAN_INTERPRETERS_MAX (1LL << 20)

typedef struct ScanRange {
        uint64_t start, end;    /* in the target */
        uint8_t *data;          /* the copy: [start, end) */
} ScanRange;

typedef struct Scan {
        pid_t pid;
        const ProcMap *maps;
        size_t n_maps;
        ScanRange ranges[PY_SCAN_SEGMENTS_MAX];
        size_t n_ranges;
        uint8_t *copy;
} Scan;

/* The writable PT_LOAD segments of MOD as mapped (.data, .bss, and whatever else they hold, .PyRuntime renamed
 * included): its program headers, which no strip removes. */
static int scan_ranges(Scan *s, Dwfl_Module *mod) {
        GElf_Addr bias = 0;
        Elf *elf = dwfl_module_getelf(mod, &bias);
        size_t phnum, total = 0;

        if (!elf || elf_getphdrnum(elf, &phnum) < 0)
                return -ENOENT;
        for (size_t i = 0; i < phnum && s->n_ranges < PY_SCAN_SEGMENTS_MAX && total < PY_SCAN_BYTES_MAX; i++) {
                GElf_Phdr ph;
                uint64_t start, size;

                if (!gelf_getphdr(elf, (int) i, &ph) || ph.p_type != PT_LOAD || !(ph.p_flags & PF_W))
                        continue;
                /* Whole words only: the runtime is aligned, and so are the pointers in it. */
                start = (ph.p_vaddr + bias + 7) & ~(uint64_t) 7;
                if (ph.p_vaddr + bias + ph.p_memsz <= start + 8)
                        continue;
                size = MIN((ph.p_vaddr + bias + ph.p_memsz - start) & ~(uint64_t) 7, PY_SCAN_BYTES_MAX - total);
                s->ranges[s->n_ranges++] = (ScanRange) { .start = start, .end = start + size };
                total += size;
        }
        if (total == 0)
                return -ENOENT;
        s->copy = malloc(total);
        if (!s->copy)
                return -ENOMEM;
        total = 0;
        for (size_t i = 0; i < s->n_ranges; i++) {
                ScanRange *r = &s->ranges[i];

                r->data = s->copy + total;
                total += r->end - r->start;
        }
        return 0;
}

/* Copy the ranges, a chunk per read; a chunk that cannot be read reads as zeros (no pointer, no cookie). */
static int scan_copy(Scan *s) {
        for (size_t i = 0; i < s->n_ranges; i++) {
                const ScanRange *r = &s->ranges[i];

                for (uint64_t a = r->start; a < r->end; a += PY_SCAN_CHUNK_BYTES) {
                        size_t n = (size_t) MIN((uint64_t) PY_SCAN_CHUNK_BYTES, r->end - a);
                        uint8_t *to = r->data + (a - r->start);
                        ssize_t k = proc_mem_read_upto(s->pid, a, to, n);

                        if (k == -ESRCH)
                                return -ESRCH;
                        if (k < (ssize_t) n)
                                memset(to + MAX(k, (ssize_t) 0), 0, n - (size_t) MAX(k, (ssize_t) 0));
                }
        }
        return 0;
}

/* Whether [ADDR, ADDR + N) lies in one writable mapping: where interpreters and thread states live. */
static bool writable(const Scan *s, uint64_t addr, uint64_t n) {
        size_t lo = 0, hi = s->n_maps;

        if (addr == 0 || addr % 8 != 0 || addr + n < addr)
                return false;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                const ProcMap *m = &s->maps[mid];

                if (addr < m->start)
                        hi = mid;
                else if (addr >= m->end)
                        lo = mid + 1;
                else
                        return m->r && m->w && addr + n <= m->end;
        }
        return false;
}

/* VALS[i] = the word at ADDRS[i], OK[i] whether it could be read, batched (proc_mem_readv()). -ESRCH when the
 * process is gone. */
static int read_words(const Scan *s, const uint64_t *addrs, size_t n, uint64_t *vals, bool *ok) {
        ProcMemBlock b[PROC_MEM_BATCH];

        for (size_t i = 0, k; i < n; i += k) {
                k = MIN(n - i, (size_t) PROC_MEM_BATCH);
                for (size_t j = 0; j < k; j++)
                        b[j] = (ProcMemBlock) { .addr = addrs[i + j], .buf = &vals[i + j], .size = sizeof vals[0] };
                if (proc_mem_readv(s->pid, b, k, ok + i) == -ESRCH)
                        return -ESRCH;
        }
        return 0;
}

/* 3.13+: _PyRuntime starts with its _Py_DebugOffsets, whose cookie no other writable data has. A table of a layout
 * we do not know (a later 3.x) still marks the runtime: py_layout() then says why it is not read. */
static int scan_cookie(const Scan *s, uint64_t *ret) {
        uint64_t found = 0;
        unsigned n = 0;

        for (size_t i = 0; i < s->n_ranges; i++) {
                const ScanRange *r = &s->ranges[i];

                for (uint64_t a = r->start; a + 8 <= r->end; a += 8) {
                        const uint8_t *p = r->data + (a - r->start);
                        uint64_t version;
                        PyOffsets o;

                        if (a + 16 > r->end || memcmp(p, "xdebugpy", 8) != 0)
                                continue;
                        version = unaligned_read_u64(p + 8);
                        if (version > UINT32_MAX || version >> 24 != 3 || ((version >> 16) & 0xff) < 13 ||
                            py_offsets_from_debug(p, (size_t) MIN((uint64_t) PY_DEBUG_OFFSETS_BYTES, r->end - a),
                                                  &o) == -EBADMSG)
                                continue;
                        found = a;
                        n++;
                }
        }
        if (n != 1)
                return -ENOENT;
        *ret = found;
        return 0;
}

static int cmp_u64(const void *a, const void *b) {
        uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;

        return (x > y) - (x < y);
}

/* Whether X is in the sorted set SET[0..N) and holds together: its thread states' interp points back to it. */
static bool interp_valid(const uint64_t *set, const bool *valid, size_t n, uint64_t x) {
        const uint64_t *p = bsearch(&x, set, n, sizeof *set, cmp_u64);

        return p && valid[p - set];
}

/* The pointer scan: every aligned R whose interpreters.head, interpreters.main and interpreters.next_id look
 * right on the copy (writable pointers, a count), then the interpreters they name followed, each once. */
static int scan_pointers(const Scan *s, const PyOffsets *o, uint64_t *ret) {
        const uint64_t h = o->runtime_interpreters_head;
        _cleanup_free_ uint64_t *set = NULL, *addrs = NULL, *vals = NULL;
        _cleanup_free_ bool *ok = NULL, *valid = NULL;
        size_t n = 0, n_set = 0;
        uint64_t found = 0;
        unsigned hits = 0;
        int r;

        set = malloc(PY_SCAN_POINTERS_MAX * 2 * sizeof *set);
        if (!set)
                return -ENOMEM;
        /* The interpreters named by the candidates: head and main, interpreters' own fields readable. */
        for (size_t i = 0; i < s->n_ranges; i++) {
                const ScanRange *sr = &s->ranges[i];

                for (uint64_t a = sr->start; a + h + 24 <= sr->end; a += 8) {
                        const uint8_t *p = sr->data + (a - sr->start) + h;
                        uint64_t head = unaligned_read_u64(p), main = unaligned_read_u64(p + 8);
                        int64_t next_id = (int64_t) unaligned_read_u64(p + 16);

                        if (next_id < 1 || next_id >= PY_SCAN_INTERPRETERS_MAX ||
                            !writable(s, head, o->interp_threads_head + 8) ||
                            !writable(s, main, o->interp_threads_head + 8))
                                continue;
                        if (n + 2 > PY_SCAN_POINTERS_MAX * 2)
                                return -ENOENT;
                        set[n++] = head;
                        set[n++] = main;
                }
        }
        if (n == 0)
                return -ENOENT;
        qsort(set, n, sizeof *set, cmp_u64);
        for (size_t i = 0; i < n; i++)
                if (n_set == 0 || set[n_set - 1] != set[i])
                        set[n_set++] = set[i];
        if (n_set > PY_SCAN_POINTERS_MAX)
                return -ENOENT;
        addrs = calloc(n_set, sizeof *addrs);
        vals = calloc(n_set, sizeof *vals);
        ok = calloc(n_set, sizeof *ok);
        valid = calloc(n_set, sizeof *valid);
        if (!addrs || !vals || !ok || !valid)
                return -ENOMEM;
        /* Each interpreter's threads.head, then that thread state's interp: back to the interpreter. */
        for (size_t i = 0; i < n_set; i++)
                addrs[i] = set[i] + o->interp_threads_head;
        r = read_words(s, addrs, n_set, vals, ok);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n_set; i++) {
                valid[i] = ok[i] && writable(s, vals[i], o->tstate_interp + 8);
                addrs[i] = valid[i] ? vals[i] + o->tstate_interp : set[i] + o->interp_threads_head;
                ok[i] = false;
        }
        r = read_words(s, addrs, n_set, vals, ok);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n_set; i++)
                valid[i] = valid[i] && ok[i] && vals[i] == set[i];
        /* The runtime: the one R whose head holds together, and whose main is the same or holds together too. */
        for (size_t i = 0; i < s->n_ranges; i++) {
                const ScanRange *sr = &s->ranges[i];

                for (uint64_t a = sr->start; a + h + 24 <= sr->end; a += 8) {
                        const uint8_t *p = sr->data + (a - sr->start) + h;
                        uint64_t head = unaligned_read_u64(p), main = unaligned_read_u64(p + 8);
                        int64_t next_id = (int64_t) unaligned_read_u64(p + 16);

                        if (next_id < 1 || next_id >= PY_SCAN_INTERPRETERS_MAX ||
                            !interp_valid(set, valid, n_set, head) || !interp_valid(set, valid, n_set, main))
                                continue;
                        found = a;
                        hits++;
                }
        }
        if (hits != 1)
                return -ENOENT;
        *ret = found;
        return 0;
}

int py_scan_runtime(pid_t pid, Dwfl_Module *mod, const ProcMap *maps, size_t n_maps, const PyOffsets *o,
                    uint64_t *ret) {
        _cleanup_free_ uint8_t *copy = NULL;
        Scan s = { .pid = pid, .maps = maps, .n_maps = n_maps };
        int r;

        r = scan_ranges(&s, mod);
        copy = s.copy;
        if (r < 0)
                return r;
        r = scan_copy(&s);
        if (r < 0)
                return r;
        r = scan_cookie(&s, ret);
        if (r != -ENOENT || !o)
                return r;
        return scan_pointers(&s, o, ret);
}

/* "3.M.P" with an optional release level and serial and an optional "+" at DATA[I..], ending at a NUL inside N:
 * its PY_VERSION_HEX, 0 when the bytes there are not one. */
static uint32_t version_at(const uint8_t *data, size_t n, size_t i) {
        unsigned part[3] = {}, level = 0xf, serial = 0;
        size_t k = i;

        for (size_t j = 0; j < 3; j++) {
                size_t start = k;

                while (k < n && k - start < 3 && data[k] >= '0' && data[k] <= '9')
                        part[j] = part[j] * 10 + (unsigned) (data[k++] - '0');
                if (k == start || (k < n && data[k] >= '0' && data[k] <= '9'))
                        return 0;
                if (j < 2 && (k >= n || data[k++] != '.'))
                        return 0;
        }
        if (k < n && (data[k] == 'a' || data[k] == 'b' || data[k] == 'r')) {
                size_t start;

                level = data[k] == 'a' ? 0xa : data[k] == 'b' ? 0xb : 0xc;
                k += level == 0xc ? 2 : 1;
                if (level == 0xc && (k > n || data[k - 1] != 'c'))
                        return 0;
                start = k;
                while (k < n && k - start < 2 && data[k] >= '0' && data[k] <= '9')
                        serial = serial * 10 + (unsigned) (data[k++] - '0');
                if (k == start)
                        return 0;
        }
        if (k < n && data[k] == '+')
                k++;
        if (k >= n || data[k] != '\0' || part[0] != 3 || part[1] > 255 || part[2] > 255)
                return 0;
        return (part[0] << 24) | (part[1] << 16) | (part[2] << 8) | (level << 4) | serial;
}

int py_version_from_strings(const uint8_t *data, size_t n, uint32_t *ret) {
        uint32_t found = 0;

        for (const uint8_t *p = data; n >= 2 && (p = memmem(p, n - (size_t) (p - data), "3.", 2)); p++) {
                size_t i = (size_t) (p - data);
                uint32_t v;

                /* The start of the number: "13.9.1" holds no "3.9.1". */
                if (i > 0 && ((data[i - 1] >= '0' && data[i - 1] <= '9') || data[i - 1] == '.'))
                        continue;
                v = version_at(data, n, i);
                if (v == 0 || (v >> 8) == 0x030200)
                        continue;
                if (found == 0)
                        found = v;
                else if ((found >> 16) != (v >> 16))
                        return -ENOTUNIQ;
                else if (found != v)
                        found &= 0xffff0000U;
        }
        if (found == 0)
                return -ENOENT;
        *ret = found;
        return 0;
}

int py_scan_version(Dwfl_Module *mod, uint32_t *ret) {
        GElf_Addr bias = 0;
        Elf *elf = dwfl_module_getelf(mod, &bias);
        size_t shstrndx;

        if (!elf || elf_getshdrstrndx(elf, &shstrndx) < 0)
                return -ENOENT;
        for (Elf_Scn *scn = elf_nextscn(elf, NULL); scn; scn = elf_nextscn(elf, scn)) {
                GElf_Shdr shdr;
                const char *name;
                Elf_Data *d;

                if (!gelf_getshdr(scn, &shdr) || shdr.sh_type != SHT_PROGBITS)
                        continue;
                name = elf_strptr(elf, shstrndx, shdr.sh_name);
                if (!name || strcmp(name, ".rodata") != 0)
                        continue;
                if (shdr.sh_size > PY_VERSION_SCAN_BYTES_MAX || !(d = elf_getdata(scn, NULL)) || !d->d_buf)
                        return -ENOENT;
                return py_version_from_strings(d->d_buf, d->d_size, ret);
        }
        return -ENOENT;
}
