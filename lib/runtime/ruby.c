/* ruby.c: CRuby's own frames, read from outside with process_vm_readv, never stopping the process. Every read is
 * bounded and every object checked by its type before it is read as one: a chain that does not hold ends with its
 * reason. The layouts are ruby-layouts.c's, one per range of releases. */
#include <errno.h>
#include <gelf.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc-util.h"
#include "base/log.h"
#include "base/macro.h"
#include "model/proc-parse.h"
#include "proc/proc-read.h"
#include "runtime/ruby-layouts.h"
#include "runtime/ruby.h"
#include "runtime/runtime-symbols.h"

#define RUBY_THREADS_MAX 65536U
#define RUBY_STRING_MAX 4096U
#define RUBY_ISEQS_MAX 65536U
#define RUBY_IDS_MAX 4096U
/* The bytes of a module's writable data scanned for the symbol table at most. */
#define RUBY_SCAN_BYTES_MAX (4U * 1024 * 1024)
#define RUBY_SCAN_SEGMENTS_MAX 8U

/* Object types and flags (include/ruby/internal/value_type.h, fl_type.h; internal/imemo.h), the same in every 3.x. */
#define RUBY_T_MASK 0x1fU
#define RUBY_T_STRING 0x05U
#define RUBY_T_ARRAY 0x07U
#define RUBY_T_HASH 0x08U
#define RUBY_T_IMEMO 0x1aU
#define RUBY_FL_USHIFT 12U
#define RUBY_FL_USER1 (1ULL << (RUBY_FL_USHIFT + 1)) /* RSTRING_NOEMBED, RARRAY_EMBED_FLAG */
#define RUBY_IMEMO_MASK 0x0fU
#define RUBY_IMEMO_MENT 6U
#define RUBY_IMEMO_ISEQ 7U
/* ≤3.1: RSTRING_EMBED_LEN_MASK is FL_USER2..FL_USER6. */
#define RUBY_STRING_EMBED_LEN_SHIFT (RUBY_FL_USHIFT + 2)
#define RUBY_STRING_EMBED_LEN_MASK 0x1fU
/* Control frames (vm_core.h): the magic in the frame's flags (ep[0]), and the frame that ends a vm_exec() call. */
#define RUBY_FRAME_MAGIC_MASK 0x7fff0001U
#define RUBY_FRAME_MAGIC_CFUNC 0x55550001U
#define RUBY_FRAME_FLAG_FINISH 0x0020U
/* The last operator ID (id.h's tLAST_OP_ID): an ID above it is a serial shifted by RUBY_ID_SCOPE_SHIFT. */
#define RUBY_LAST_OP_ID 0xa9U
/* enum rb_thread_status */
#define RUBY_THREAD_STOPPED_FOREVER 2U

typedef struct RbThread {
        pid_t tid;              /* 0: not matched to one */
        uint64_t th;            /* rb_thread_t * */
} RbThread;

/* An instruction sequence as decoded, cached per capture by address. */
typedef struct RbIseq {
        uint64_t addr;
        bool valid;             /* it is one, and its label and path could be read */
        char *label;
        char *path;
        int first_lineno;
        uint64_t encoded;       /* iseq_encoded */
        uint32_t size;          /* iseq_size, in VALUEs */
        uint64_t info;          /* insns_info.body */
        uint64_t positions;     /* insns_info.positions, 0 once the succinct table replaced it */
        uint32_t n_info;
        uint64_t succ;          /* insns_info.succ_index_table */
        bool tables_read;       /* the two below were tried */
        uint8_t *info_copy;     /* insns_info.body copied: n_info entries; NULL: not (too large, unreadable) */
        uint8_t *succ_copy;     /* the succinct table copied, succ_bytes of it; NULL: not */
        size_t succ_bytes;
        uint64_t memo_pc;       /* the line of the pc looked up last (a recursion repeats it) */
        unsigned memo_line;
} RbIseq;

typedef struct RbId {
        uint64_t id;
        char *name;             /* NULL: not readable */
} RbId;

typedef struct RbProcess {
        pid_t pid;
        RubyLayout l;
        char version[24];
        uint64_t vm, ractor;
        pid_t gvl_holder;
        RbThread *threads;
        size_t n_threads, n_threads_allocated;
        RbIseq *iseqs;          /* open addressing by address, size a power of two */
        size_t iseqs_size, iseqs_used;
        RbIseq overflow;
        RbId *ids;
        size_t n_ids, n_ids_allocated;
        uint64_t data[RUBY_SCAN_SEGMENTS_MAX][2]; /* the module's writable segments: where the symbol table is */
        size_t n_data;
        bool symbols_searched;
        uint64_t symbols_ids;   /* global_symbols.ids, 0: not found */
} RbProcess;

/* One control frame as copied while the thread held still: addresses only. */
typedef struct RbRawFrame {
        uint64_t pc, iseq, flags, me;
} RbRawFrame;

typedef struct RbRawStack {
        RbRawFrame *frames;     /* newest first */
        size_t n;
        bool truncated;
        uint8_t status;         /* enum rb_thread_status */
        uint64_t locking_mutex; /* VALUE, 0: none */
        uint64_t owner_fiber;   /* that Mutex's owner's fiber, 0: unknown */
        uint64_t fiber;         /* the fiber running on this thread */
        char end[128];          /* why the frames could not be read; "" */
} RbRawStack;

/* ---- memory and objects ---- */

static int rb_read(const RbProcess *p, uint64_t addr, void *buf, size_t n) {
        if (addr == 0)
                return -EFAULT;
        return proc_mem_read(p->pid, addr, buf, n);
}

static bool rb_word(const RbProcess *p, uint64_t addr, uint64_t *ret) {
        return rb_read(p, addr, ret, sizeof *ret) >= 0;
}

static uint64_t word_at(const uint8_t *buf, size_t off) {
        uint64_t v;
        memcpy(&v, buf + off, sizeof v);
        return v;
}

/* A heap object: not a special constant (Fixnum, flonum, static Symbol, nil, true, false, undef), aligned. */
static bool is_object(uint64_t v) {
        return v >= 4096 && (v & 7) == 0;
}

static bool object_flags(const RbProcess *p, uint64_t v, uint64_t *ret) {
        return is_object(v) && rb_word(p, v, ret);
}

/* The bytes of String V, at most RUBY_STRING_MAX, cut at a NUL: *RET NULL when V is no String. -ENOMEM. */
static int rb_string(const RbProcess *p, uint64_t v, char **ret) {
        uint8_t head[40];
        uint64_t flags, len, ptr;
        char *s;

        *ret = NULL;
        if (!is_object(v) || rb_read(p, v, head, sizeof head) < 0)
                return 0;
        flags = word_at(head, 0);
        if ((flags & RUBY_T_MASK) != RUBY_T_STRING)
                return 0;
        switch (p->l.string) {
        case RUBY_STRING_FLAGS_LEN:
                if (flags & RUBY_FL_USER1) {
                        len = word_at(head, 16);
                        ptr = word_at(head, 24);
                } else {
                        len = (flags >> RUBY_STRING_EMBED_LEN_SHIFT) & RUBY_STRING_EMBED_LEN_MASK;
                        ptr = v + 16;
                }
                break;
        case RUBY_STRING_EMBED_LEN:
                len = word_at(head, 16);
                ptr = flags & RUBY_FL_USER1 ? word_at(head, 24) : v + 24;
                break;
        default:
                len = word_at(head, 16);
                ptr = flags & RUBY_FL_USER1 ? word_at(head, 24) : v + 24;
                break;
        }
        len = MIN(len, (uint64_t) RUBY_STRING_MAX);
        s = malloc(len + 1);
        if (!s)
                return -ENOMEM;
        if (len > 0 && rb_read(p, ptr, s, len) < 0) {
                free(s);
                return 0;
        }
        s[len] = 0;
        *ret = s;
        return 0;
}

/* Element I of Array V; false when V is no Array or has no element I. */
static bool rb_array_get(const RbProcess *p, uint64_t v, uint64_t i, uint64_t *ret) {
        uint8_t head[40];
        uint64_t flags, len, ptr;

        if (!is_object(v) || rb_read(p, v, head, sizeof head) < 0)
                return false;
        flags = word_at(head, 0);
        if ((flags & RUBY_T_MASK) != RUBY_T_ARRAY)
                return false;
        if (flags & RUBY_FL_USER1) {
                len = (flags >> p->l.array_embed_len_shift) & p->l.array_embed_len_mask;
                ptr = v + 16;
        } else {
                len = word_at(head, 16);
                ptr = word_at(head, 32);
        }
        return i < len && rb_word(p, ptr + i * 8, ret);
}

/* ---- the symbol table: a C method's name ---- */

/* ruby_global_symbols is not exported: the one place in the module's writable data that holds a last ID, a table,
 * an Array of Arrays (ids) and a Hash. */
static void symbols_find(RbProcess *p) {
        _cleanup_free_ uint8_t *buf = NULL;
        uint64_t found = 0;
        size_t n_found = 0;

        p->symbols_searched = true;
        for (size_t s = 0; s < p->n_data && n_found < 2; s++) {
                uint64_t start = p->data[s][0], size = p->data[s][1] - p->data[s][0];

                free(buf);
                buf = malloc(size);
                if (!buf || rb_read(p, start, buf, size) < 0)
                        continue;
                for (size_t i = 0; i + 32 <= size && n_found < 2; i += 8) {
                        uint64_t last = word_at(buf, i), tbl = word_at(buf, i + 8), fl, first;
                        uint64_t ids = word_at(buf, i + p->l.symbols_ids);
                        uint64_t dsym = word_at(buf, i + p->l.symbols_ids + 8);

                        if (last < 64 || last > (1U << 24) || !is_object(tbl) || !is_object(ids) || !is_object(dsym))
                                continue;
                        if (!object_flags(p, ids, &fl) || (fl & RUBY_T_MASK) != RUBY_T_ARRAY ||
                            !object_flags(p, dsym, &fl) || (fl & RUBY_T_MASK) != RUBY_T_HASH)
                                continue;
                        if (!rb_array_get(p, ids, 0, &first) || !object_flags(p, first, &fl) ||
                            (fl & RUBY_T_MASK) != RUBY_T_ARRAY)
                                continue;
                        if (ids != found) {
                                found = ids;
                                n_found++;
                        }
                }
        }
        /* Two different tables: no guess. */
        p->symbols_ids = n_found == 1 ? found : 0;
        if (n_found != 1)
                log_debug("Ruby process %d: %s symbol table found", (int) p->pid, n_found ? "more than one" : "no");
}

/* The name of ID, borrowed from the cache; NULL when it cannot be read. -ENOMEM through *RET_ERR. */
static const char *id_name(RbProcess *p, uint64_t id, int *ret_err) {
        uint64_t serial, chunk, str;
        char *name = NULL;
        int r;

        for (size_t i = 0; i < p->n_ids; i++)
                if (p->ids[i].id == id)
                        return p->ids[i].name;
        if (!p->symbols_searched)
                symbols_find(p);
        if (p->n_ids >= RUBY_IDS_MAX || !p->symbols_ids || p->l.id_entry_unit == 0)
                return NULL;
        serial = id > RUBY_LAST_OP_ID ? id >> p->l.id_scope_shift : id;
        if (rb_array_get(p, p->symbols_ids, serial / p->l.id_entry_unit, &chunk) &&
            rb_array_get(p, chunk, (serial % p->l.id_entry_unit) * p->l.id_entry_size, &str)) {
                r = rb_string(p, str, &name);
                if (r < 0) {
                        *ret_err = r;
                        return NULL;
                }
        }
        if (!GREEDY_REALLOC(p->ids, p->n_ids_allocated, p->n_ids + 1)) {
                free(name);
                *ret_err = -ENOMEM;
                return NULL;
        }
        p->ids[p->n_ids++] = (RbId) { .id = id, .name = name };
        return name;
}

/* ---- instruction sequences ---- */

static void iseq_done(RbIseq *q) {
        free(q->label);
        free(q->path);
        free(q->info_copy);
        free(q->succ_copy);
        *q = (RbIseq) {};
}

/* The path of a location's pathobj: a String, or an Array [path, realpath]. */
static int pathobj_string(const RbProcess *p, uint64_t pathobj, char **ret) {
        uint64_t first;

        if (rb_array_get(p, pathobj, 0, &first))
                pathobj = first;
        return rb_string(p, pathobj, ret);
}

static int iseq_decode(RbProcess *p, RbIseq *q) {
        const RubyLayout *l = &p->l;
        uint8_t head[32], body[512];
        uint64_t flags, b, first;
        size_t need = MAX((size_t) l->body_location + 32, (size_t) l->body_insns_info + 32);
        int r;

        if (need > sizeof body || (size_t) l->iseq_body + 8 > sizeof head)
                return 0;
        if (rb_read(p, q->addr, head, sizeof head) < 0)
                return 0;
        flags = word_at(head, 0);
        if ((flags & RUBY_T_MASK) != RUBY_T_IMEMO || ((flags >> RUBY_FL_USHIFT) & RUBY_IMEMO_MASK) != RUBY_IMEMO_ISEQ)
                return 0;
        b = word_at(head, l->iseq_body);
        if (!is_object(b) || rb_read(p, b, body, need) < 0)
                return 0;
        memcpy(&q->size, body + l->body_iseq_size, sizeof q->size);
        q->encoded = word_at(body, l->body_iseq_encoded);
        first = word_at(body, l->body_location + 24);
        q->first_lineno = l->first_lineno_fixnum ? (int) ((int64_t) first >> 1) : (int) (uint32_t) first;
        q->info = word_at(body, l->body_insns_info);
        q->positions = word_at(body, l->body_insns_info + 8);
        memcpy(&q->n_info, body + l->body_insns_info + 16, sizeof q->n_info);
        q->succ = word_at(body, l->body_insns_info + 24);
        r = rb_string(p, word_at(body, l->body_location + 16), &q->label);
        if (r >= 0)
                r = pathobj_string(p, word_at(body, l->body_location), &q->path);
        if (r < 0)
                return r;
        q->valid = q->label && q->path;
        return 0;
}

static int iseqs_grow(RbProcess *p) {
        size_t size = p->iseqs_size ? p->iseqs_size * 2 : 64;
        RbIseq *n = calloc(size, sizeof *n);

        if (!n)
                return -ENOMEM;
        for (size_t i = 0; i < p->iseqs_size; i++) {
                RbIseq *o = &p->iseqs[i];
                size_t h;

                if (!o->addr)
                        continue;
                for (h = (o->addr >> 3) & (size - 1); n[h].addr; h = (h + 1) & (size - 1))
                        ;
                n[h] = *o;
        }
        free(p->iseqs);
        p->iseqs = n;
        p->iseqs_size = size;
        return 0;
}

/* The iseq at ADDR, decoded once per capture; NULL on -ENOMEM. */
static RbIseq *iseq_get(RbProcess *p, uint64_t addr) {
        size_t h;

        if (p->iseqs_used >= RUBY_ISEQS_MAX) {
                iseq_done(&p->overflow);
                p->overflow.addr = addr;
                return &p->overflow;
        }
        if ((p->iseqs_used + 1) * 2 > p->iseqs_size && iseqs_grow(p) < 0)
                return NULL;
        for (h = (addr >> 3) & (p->iseqs_size - 1); p->iseqs[h].addr; h = (h + 1) & (p->iseqs_size - 1))
                if (p->iseqs[h].addr == addr)
                        return &p->iseqs[h];
        p->iseqs[h].addr = addr;
        p->iseqs_used++;
        if (iseq_decode(p, &p->iseqs[h]) < 0)
                return NULL;
        return &p->iseqs[h];
}

/* ---- lines ---- */

#define SUCC_IMMEDIATE 54U      /* IMMEDIATE_TABLE_SIZE: positions below it are ranked in imm_part */
#define SUCC_IMM_BYTES 48U      /* uint64_t imm_part[54 / 9] */
#define SUCC_BLOCK_BITS 512U
#define SUCC_BLOCK_BYTES 80U    /* struct succ_dict_block: rank, small_block_ranks, bits[8] */

size_t ruby_succ_index_part(uint32_t pos, uint64_t *ret_offset) {
        if (pos < SUCC_IMMEDIATE) {
                *ret_offset = 0;
                return SUCC_IMM_BYTES;
        }
        *ret_offset = SUCC_IMM_BYTES + (uint64_t) ((pos - SUCC_IMMEDIATE) / SUCC_BLOCK_BITS) * SUCC_BLOCK_BYTES;
        return SUCC_BLOCK_BYTES;
}

int ruby_succ_index_lookup(const uint8_t *part, size_t n, uint32_t pos, uint32_t *ret) {
        uint64_t offset;
        uint32_t rank;

        if (ruby_succ_index_part(pos, &offset) > n)
                return -EBADMSG;
        if (pos < SUCC_IMMEDIATE) {
                /* 9 ranks of 7 bits a word. */
                rank = (uint32_t) (word_at(part, (pos / 9) * 8) >> ((pos % 9) * 7)) & 0x7f;
        } else {
                /* The block's rank, its small block's (9 bits each, from the second), then the bits up to POS. */
                uint32_t bit = (pos - SUCC_IMMEDIATE) % SUCC_BLOCK_BITS, small = bit / 64, base;
                uint64_t small_ranks = word_at(part, 8), bits = word_at(part, 16 + small * 8);

                memcpy(&base, part, sizeof base);
                rank = base + (small == 0 ? 0 : (uint32_t) (small_ranks >> ((small - 1) * 9)) & 0x1ff) +
                       (uint32_t) __builtin_popcountll(bits << (63 - bit % 64));
        }
        if (rank == 0)
                return -EBADMSG;
        *ret = rank - 1;
        return 0;
}

/* An iseq's line tables at most, copied. */
#define RUBY_LINE_TABLE_BYTES_MAX (256U * 1024)

/* Q's line tables, copied once per capture: the entries, and the succinct table over every position it has. */
static int iseq_tables(const RbProcess *p, RbIseq *q) {
        size_t info = (size_t) q->n_info * p->l.insn_info_entry_size;
        uint64_t offset;

        q->tables_read = true;
        if (info == 0 || info > RUBY_LINE_TABLE_BYTES_MAX)
                return 0;
        q->info_copy = malloc(info);
        if (!q->info_copy)
                return -ENOMEM;
        if (rb_read(p, q->info, q->info_copy, info) < 0) {
                q->info_copy = mfree(q->info_copy);
                return 0;
        }
        if (q->n_info < 2 || q->positions || q->size == 0)
                return 0;
        q->succ_bytes = ruby_succ_index_part(q->size - 1, &offset) + offset;
        if (q->succ_bytes > RUBY_LINE_TABLE_BYTES_MAX)
                return 0;
        q->succ_copy = malloc(q->succ_bytes);
        if (!q->succ_copy)
                return -ENOMEM;
        if (rb_read(p, q->succ, q->succ_copy, q->succ_bytes) < 0)
                q->succ_copy = mfree(q->succ_copy);
        return 0;
}

/* The line of iseq Q at PC, as Ruby's calc_pos() and rb_iseq_line_no() find it; 0 when unknown. -ENOMEM. */
static int iseq_line(const RbProcess *p, RbIseq *q, uint64_t pc, unsigned *ret) {
        uint32_t pos, index = 0;
        int32_t line;
        int r;

        *ret = 0;
        if (q->memo_pc == pc && pc) {
                *ret = q->memo_line;
                return 0;
        }
        if (pc < q->encoded || (pc - q->encoded) / 8 > q->size || q->n_info == 0) {
                *ret = q->first_lineno > 0 ? (unsigned) q->first_lineno : 0;
                return 0;
        }
        if (!q->tables_read && (r = iseq_tables(p, q)) < 0)
                return r;
        if (!q->info_copy)
                return 0;
        /* The pc is past the instruction it runs. */
        pos = (uint32_t) ((pc - q->encoded) / 8);
        if (pos > 0)
                pos--;
        if (q->n_info > 1 && q->positions) {
                uint32_t lo = 0, hi = MIN(q->n_info, 65536U);

                /* The last entry whose position is at most POS. */
                while (lo + 1 < hi) {
                        uint32_t mid = lo + (hi - lo) / 2, at;

                        if (rb_read(p, q->positions + (uint64_t) mid * 4, &at, sizeof at) < 0)
                                return 0;
                        if (at <= pos)
                                lo = mid;
                        else
                                hi = mid;
                }
                index = lo;
        } else if (q->n_info > 1) {
                uint64_t offset;
                size_t n = ruby_succ_index_part(pos, &offset);

                if (!q->succ_copy || offset + n > q->succ_bytes ||
                    ruby_succ_index_lookup(q->succ_copy + offset, n, pos, &index) < 0)
                        return 0;
        }
        if (index >= q->n_info)
                return 0;
        memcpy(&line, q->info_copy + (size_t) index * p->l.insn_info_entry_size, sizeof line);
        if (line > 0) {
                *ret = (unsigned) line;
                q->memo_pc = pc;
                q->memo_line = *ret;
        }
        return 0;
}

/* ---- threads ---- */

/* Bytes of rb_thread_t read: up to the last field the layout names. */
static size_t thread_bytes(const RubyLayout *l) {
        uint16_t offs[] = { l->thread_lt_node, l->thread_ec, l->thread_tid, l->thread_nt, l->thread_status,
                            l->thread_locking_mutex, l->thread_join_list };
        size_t end = 0;

        for (size_t i = 0; i < ELEMENTSOF(offs); i++)
                if (offs[i] != RUBY_OFF_NONE)
                        end = MAX(end, (size_t) offs[i] + 8);
        return end;
}

static const RbThread *thread_of_tid(const RbProcess *p, pid_t tid) {
        for (size_t i = 0; i < p->n_threads; i++)
                if (p->threads[i].tid == tid)
                        return &p->threads[i];
        return NULL;
}

static pid_t tid_of_thread(const RbProcess *p, uint64_t th) {
        for (size_t i = 0; i < p->n_threads; i++)
                if (p->threads[i].th == th)
                        return p->threads[i].tid;
        return 0;
}

/* The main ractor's threads, each matched to its TID (3.1 records it in the thread, 3.2+ in its native thread;
 * before, only the main thread is known: it is the process's). */
static int threads_read(RbProcess *p, uint64_t main_thread, const char **ret_why) {
        const RubyLayout *l = &p->l;
        uint64_t head = p->ractor + l->ractor_threads_set, node, owner = 0;
        size_t bytes = thread_bytes(l);
        uint8_t buf[1024];

        if (bytes > sizeof buf)
                return -EINVAL;
        if (!rb_word(p, head, &node)) {
                *ret_why = "its main ractor's threads cannot be read";
                return -EIO;
        }
        while (node != head) {
                uint64_t th = node - l->thread_lt_node;
                int32_t tid = 0;

                if (p->n_threads >= RUBY_THREADS_MAX || !is_object(node) || rb_read(p, th, buf, bytes) < 0) {
                        *ret_why = "its list of threads does not hold together";
                        return -EBADMSG;
                }
                if (l->thread_tid != RUBY_OFF_NONE)
                        memcpy(&tid, buf + l->thread_tid, sizeof tid);
                else if (l->thread_nt != RUBY_OFF_NONE && l->native_thread_tid != RUBY_OFF_NONE)
                        (void) rb_read(p, word_at(buf, l->thread_nt) + l->native_thread_tid, &tid, sizeof tid);
                else if (th == main_thread)
                        tid = p->pid;
                if (!GREEDY_REALLOC(p->threads, p->n_threads_allocated, p->n_threads + 1))
                        return -ENOMEM;
                p->threads[p->n_threads++] = (RbThread) { .tid = tid > 0 ? tid : 0, .th = th };
                node = word_at(buf, l->thread_lt_node);
        }
        if (rb_word(p, p->ractor + l->ractor_gvl_owner, &owner))
                p->gvl_holder = tid_of_thread(p, owner);
        return 0;
}

/* ---- one thread's frames, in the moment of its copy ---- */

static int ruby_read_thread(void *state, const RuntimeCapture *rc, pid_t tid, void **raw) {
        RbProcess *p = state;
        const RubyLayout *l = &p->l;
        const RbThread *th = thread_of_tid(p, tid);
        _cleanup_free_ uint8_t *frames = NULL;
        _cleanup_free_ ProcMemBlock *blocks = NULL;
        _cleanup_free_ bool *ok = NULL;
        uint8_t tbuf[1024], ecbuf[64];
        uint64_t ec, vm_stack, size, cfp, end, n, mutex = 0, data = 0;
        size_t max = MIN(rc->max_frames ?: RUBY_FRAMES_MAX, RUBY_FRAMES_MAX), eb;
        RbRawStack *st;

        *raw = NULL;
        if (!th)
                return 0;
        st = calloc(1, sizeof *st);
        if (!st)
                return -ENOMEM;
        *raw = st;
        eb = MAX(MAX((size_t) l->ec_vm_stack, (size_t) l->ec_vm_stack_size), MAX((size_t) l->ec_cfp,
                                                                                    (size_t) l->ec_fiber_ptr)) + 8;
        if (eb > sizeof ecbuf || rb_read(p, th->th, tbuf, thread_bytes(l)) < 0 ||
            rb_read(p, ec = word_at(tbuf, l->thread_ec), ecbuf, eb) < 0) {
                snprintf(st->end, sizeof st->end, "its thread's execution context cannot be read");
                return 0;
        }
        memcpy(&st->status, tbuf + l->thread_status, 1);
        st->status &= 3;
        st->fiber = word_at(ecbuf, l->ec_fiber_ptr);
        /* The Mutex it waits to lock, and its owner's fiber (the owner is the thread that runs that fiber). */
        if (l->thread_locking_mutex != RUBY_OFF_NONE && is_object(mutex = word_at(tbuf, l->thread_locking_mutex)) &&
            rb_word(p, mutex + l->typed_data_data, &data) && is_object(data)) {
                st->locking_mutex = data;
                (void) rb_word(p, data + l->mutex_fiber, &st->owner_fiber);
        }
        vm_stack = word_at(ecbuf, l->ec_vm_stack);
        size = word_at(ecbuf, l->ec_vm_stack_size);
        cfp = word_at(ecbuf, l->ec_cfp);
        end = vm_stack + size * 8;
        if (!is_object(vm_stack) || size == 0 || size > (1ULL << 28) || cfp < vm_stack || cfp > end ||
            (end - cfp) % l->cfp_size != 0) {
                snprintf(st->end, sizeof st->end, "its control frames do not hold together (a thread starting or "
                         "ending)");
                return 0;
        }
        n = (end - cfp) / l->cfp_size;
        /* The oldest is the thread's dummy top frame, which Ruby's backtraces leave out (vm_backtrace.c). */
        if (n > 0)
                n--;
        if (n > max) {
                n = max;
                st->truncated = true;
        }
        if (n == 0)
                return 0;
        frames = malloc(n * l->cfp_size);
        st->frames = calloc(n, sizeof *st->frames);
        blocks = calloc(n, sizeof *blocks);
        ok = calloc(n, sizeof *ok);
        if (!frames || !st->frames || !blocks || !ok)
                return -ENOMEM;
        if (rb_read(p, cfp, frames, n * l->cfp_size) < 0) {
                snprintf(st->end, sizeof st->end, "its control frames cannot be read");
                return 0;
        }
        /* Each frame's flags and method entry: ep[0] and ep[-2], in one call for all. */
        _cleanup_free_ uint64_t *eps = calloc(n * 3, sizeof *eps);
        if (!eps)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                uint64_t ep = word_at(frames, i * l->cfp_size + 32);

                st->frames[i] = (RbRawFrame) { .pc = word_at(frames, i * l->cfp_size),
                                               .iseq = word_at(frames, i * l->cfp_size + 16) };
                blocks[i] = (ProcMemBlock) { .addr = ep >= 16 ? ep - 16 : 0, .buf = &eps[i * 3], .size = 24 };
        }
        if (proc_mem_readv(p->pid, blocks, n, ok) < 0)
                return 0;
        for (size_t i = 0; i < n; i++)
                if (ok[i]) {
                        st->frames[i].flags = eps[i * 3 + 2];
                        st->frames[i].me = eps[i * 3];
                }
        st->n = n;
        return 0;
}

static void raw_stack_free(RbRawStack *st) {
        if (!st)
                return;
        free(st->frames);
        free(st);
}

static void ruby_thread_done(void *raw) {
        raw_stack_free(raw);
}

/* ---- into the native stack ---- */

/* A C method's frame: its name, at the line of the Ruby frame that called it, as Ruby's backtraces place it. */
static int cfunc_name(RbProcess *p, uint64_t me, char **ret) {
        const RubyLayout *l = &p->l;
        uint64_t flags, def, id;
        const char *name;
        int r = 0;

        *ret = NULL;
        if (!object_flags(p, me, &flags) || (flags & RUBY_T_MASK) != RUBY_T_IMEMO ||
            ((flags >> RUBY_FL_USHIFT) & RUBY_IMEMO_MASK) != RUBY_IMEMO_MENT || !rb_word(p, me + l->me_def, &def) ||
            !rb_word(p, def + l->def_original_id, &id))
                return 0;
        name = id_name(p, id, &r);
        if (r < 0)
                return r;
        *ret = strdup(name ?: "<C method>");
        return *ret ? 0 : -ENOMEM;
}

static bool is_vm_exec(const UserFrame *u) {
        return u->kind == FRAME_KIND_NATIVE && !u->inlined && u->function &&
               (streq(u->function, "rb_vm_exec") || streq(u->function, "vm_exec"));
}

/* The Ruby frames of ST, named, newest first, each with whether it ends its vm_exec() call: *N of them in OUT, also
 * on failure (the caller frees them). */
static int ruby_frames(RbProcess *p, const RbRawStack *st, UserFrame *out, bool *finish, size_t *ret_n) {
        size_t n = 0;
        int r = 0;

        for (size_t i = 0; i < st->n; i++) {
                const RbRawFrame *f = &st->frames[i];
                UserFrame u = { .kind = FRAME_KIND_RUBY, .module = -1 };

                if (f->iseq && f->pc) {
                        RbIseq *q = iseq_get(p, f->iseq);

                        if (!q) {
                                r = -ENOMEM;
                                break;
                        }
                        if (!q->valid)
                                continue;
                        u.function = strdup(q->label);
                        u.file = strdup(q->path);
                        r = iseq_line(p, q, f->pc, &u.line);
                        if (r < 0) {
                                user_frame_done(&u);
                                break;
                        }
                } else if ((f->flags & RUBY_FRAME_MAGIC_MASK) == RUBY_FRAME_MAGIC_CFUNC) {
                        r = cfunc_name(p, f->me, &u.function);
                        if (r < 0)
                                break;
                        if (!u.function)
                                continue;
                } else
                        continue;
                if (!u.function || (f->iseq && f->pc && !u.file)) {
                        user_frame_done(&u);
                        r = -ENOMEM;
                        break;
                }
                finish[n] = f->flags & RUBY_FRAME_FLAG_FINISH;
                out[n++] = u;
        }
        /* A C method is at its caller's place. */
        for (size_t i = n; r >= 0 && i-- > 0;)
                if (!out[i].file && i + 1 < n && out[i + 1].file) {
                        out[i].file = strdup(out[i + 1].file);
                        if (!out[i].file)
                                r = -ENOMEM;
                        out[i].line = out[i + 1].line;
                }
        *ret_n = n;
        return r;
}

static const char *status_name(uint8_t status) {
        switch (status) {
        case 0:
                return "run";
        case 1:
                return "sleep";
        case RUBY_THREAD_STOPPED_FOREVER:
                return "sleep (forever)";
        default:
                return "dead";
        }
}

/* The thread running FIBER: the owner of a Mutex that fiber locked. 0: none (a fiber suspended, or gone). */
static pid_t owner_of_fiber(const RbProcess *p, uint64_t fiber) {
        const RubyLayout *l = &p->l;

        for (size_t i = 0; fiber && i < p->n_threads; i++) {
                uint64_t ec, f;

                if (rb_word(p, p->threads[i].th + l->thread_ec, &ec) && rb_word(p, ec + l->ec_fiber_ptr, &f) &&
                    f == fiber)
                        return p->threads[i].tid;
        }
        return 0;
}

static int rb_wait_of(RbProcess *p, pid_t tid, uint64_t futex, RuntimeWait *ret);

static int ruby_merge_thread(void *state, const RuntimeCapture *rc, void *raw, ThreadSnapshot *t) {
        RbProcess *p = state;
        const RbRawStack *st = raw;
        _cleanup_free_ UserFrame *rf = NULL, *out = NULL;
        _cleanup_free_ bool *finish = NULL;
        size_t n_rf = 0, n_out = 0, next = 0;
        ThreadRuntime *rt;
        int r;

        if (!st)
                return 0;
        rt = thread_runtime_add(t, RUNTIME_RUBY);
        if (!rt)
                return -ENOMEM;
        rt->known = true;
        rt->holds_global_lock = p->gvl_holder == t->tid;
        rt->state = mfree(rt->state);
        rt->note = mfree(rt->note);
        if (!(rt->state = strdup(status_name(st->status))))
                return -ENOMEM;
        if (st->locking_mutex) {
                RuntimeLock *lk = thread_runtime_add_lock(rt);

                if (!lk)
                        return -ENOMEM;
                *lk = (RuntimeLock) { .kind = RUNTIME_LOCK_WAITING_TO_LOCK, .address = st->locking_mutex,
                                      .owner = owner_of_fiber(p, st->owner_fiber) };
                if (!(lk->klass = strdup("Thread::Mutex")))
                        return -ENOMEM;
        }
        /* What it waits for as Ruby parked it (a Mutex, a join, a Queue, the GVL), read while it is still parked. */
        if (t->syscall.kind == PROC_SYSCALL_BLOCKED)
                (void) rb_wait_of(p, t->tid, streq_ptr(syscall_name(t->syscall.nr), "futex") ? t->syscall.args[0] : 0,
                                  &rt->wait);
        if (st->end[0])
                return (rt->note = strdup(st->end)) ? 0 : -ENOMEM;
        rf = calloc(st->n ?: 1, sizeof *rf);
        finish = calloc(st->n ?: 1, sizeof *finish);
        if (!rf || !finish)
                return -ENOMEM;
        r = ruby_frames(p, st, rf, finish, &n_rf);
        if (r < 0)
                goto fail;
        if (n_rf == 0)
                return (rt->note = strdup("no Ruby frames")) ? 0 : -ENOMEM;
        out = calloc(t->n_frames + n_rf, sizeof *out);
        if (!out) {
                r = -ENOMEM;
                goto fail;
        }
        /* Each vm_exec() call runs the frames up to the one that finishes it: they go just above it. */
        for (size_t i = 0; i < t->n_frames; i++) {
                if (is_vm_exec(&t->frames[i]) && next < n_rf) {
                        for (bool done = false; next < n_rf && !done; next++) {
                                done = finish[next];
                                out[n_out++] = rf[next];
                        }
                        t->frames[i].interpreter = true;
                }
                out[n_out++] = t->frames[i];
        }
        for (; next < n_rf; next++)
                out[n_out++] = rf[next];
        if (st->truncated)
                t->truncated = true;
        free(t->frames);
        t->frames = TAKE_PTR(out);
        t->n_frames = n_out;
        return 0;
fail:
        for (size_t i = 0; i < n_rf; i++)
                user_frame_done(&rf[i]);
        for (size_t i = 0; i < t->n_frames; i++)
                t->frames[i].interpreter = false;
        return r;
}

/* Every thread merged: a cycle of Mutex owners among threads each read parked is a deadlock, as Ruby itself would
 * say if every thread of the process were in it. */
static int ruby_finish(void *state, const RuntimeCapture *rc) {
        ProcessRuntime *pr = snapshot_runtime(rc->s, RUNTIME_RUBY);
        Snapshot *s = rc->s;

        (void) state;
        if (!pr)
                return 0;
        for (size_t i = 0; i < s->n_threads; i++) {
                const ThreadSnapshot *t = &s->threads[i];
                pid_t seen[64];
                size_t n = 0;

                /* Count each cycle once: from its smallest TID. */
                while (t && n < ELEMENTSOF(seen)) {
                        const ThreadRuntime *rt = thread_runtime(t, RUNTIME_RUBY);
                        const RuntimeLock *lk = NULL;
                        bool cycle = false;

                        for (size_t k = 0; rt && k < rt->n_locks; k++)
                                if (rt->locks[k].kind == RUNTIME_LOCK_WAITING_TO_LOCK && rt->locks[k].owner > 0)
                                        lk = &rt->locks[k];
                        if (!lk || t->syscall.kind != PROC_SYSCALL_BLOCKED)
                                break;
                        seen[n++] = t->tid;
                        for (size_t j = 0; j < n; j++)
                                cycle = cycle || seen[j] == lk->owner;
                        if (cycle) {
                                bool smallest = lk->owner == s->threads[i].tid;

                                for (size_t j = 0; j < n; j++)
                                        smallest = smallest && s->threads[i].tid <= seen[j];
                                pr->deadlocks += smallest;
                                break;
                        }
                        t = snapshot_find_thread(s, lk->owner);
                }
        }
        return 0;
}

/* ---- finding the VM ---- */

/* The initialized part of MOD's writable PT_LOAD segments as mapped (.data: the symbol table is initialized, not in
 * .bss). */
static void data_segments(RbProcess *p, Dwfl_Module *mod) {
        GElf_Addr bias = 0;
        Elf *elf = dwfl_module_getelf(mod, &bias);
        size_t phnum, total = 0;

        if (!elf || elf_getphdrnum(elf, &phnum) < 0)
                return;
        for (size_t i = 0; i < phnum && p->n_data < RUBY_SCAN_SEGMENTS_MAX; i++) {
                GElf_Phdr ph;
                uint64_t start, size;

                if (!gelf_getphdr(elf, (int) i, &ph) || ph.p_type != PT_LOAD || !(ph.p_flags & PF_W))
                        continue;
                start = (ph.p_vaddr + bias + 7) & ~(uint64_t) 7;
                if (ph.p_vaddr + bias + ph.p_filesz <= start + 32 || total >= RUBY_SCAN_BYTES_MAX)
                        continue;
                size = MIN((ph.p_vaddr + bias + ph.p_filesz - start) & ~(uint64_t) 7, RUBY_SCAN_BYTES_MAX - total);
                p->data[p->n_data][0] = start;
                p->data[p->n_data][1] = start + size;
                p->n_data++;
                total += size;
        }
}

static void rb_process_free(RbProcess *p) {
        if (!p)
                return;
        for (size_t i = 0; i < p->iseqs_size; i++)
                iseq_done(&p->iseqs[i]);
        free(p->iseqs);
        iseq_done(&p->overflow);
        for (size_t i = 0; i < p->n_ids; i++)
                free(p->ids[i].name);
        free(p->ids);
        free(p->threads);
        free(p);
}
DEFINE_TRIVIAL_CLEANUP_FUNC(RbProcess *, rb_process_free);

/* The layout of P's release; *RET_WHY when there is none. */
static int ruby_layout(RbProcess *p, const char **ret_why) {
        unsigned major, minor, patch;
        const RubyLayout *l;

        if (sscanf(p->version, "%u.%u.%u", &major, &minor, &patch) != 3) {
                *ret_why = "its version (ruby_version) cannot be read";
                return -EPROTONOSUPPORT;
        }
        l = ruby_layout_for(major, minor, patch);
        if (!l) {
                *ret_why = "a Ruby release whose layout this reader does not know (it reads 3.0 to 3.4)";
                return -EPROTONOSUPPORT;
        }
        p->l = *l;
        return 0;
}

/* Open the Ruby VM of process PID (UP its modules, SYM to find their symbols) into *RET, NULL when it runs none; its
 * version into *RET_VERSION (when not NULL) as soon as it is read. -ENOMEM; a Ruby that cannot be read is *RET NULL
 * with *RET_WHY. */
static int rb_process_open(pid_t pid, UnwindProcess *up, Symbolizer *sym, RbProcess **ret, char **ret_version,
                           const char **ret_why) {
        static const char *const names[] = { "ruby_current_vm_ptr", "ruby_version" };
        _cleanup_(rb_process_freep) RbProcess *p = NULL;
        uint64_t main_thread, addrs[ELEMENTSOF(names)];
        Dwfl_Module *mod;
        bool seen;
        int r;

        *ret = NULL;
        *ret_why = NULL;
        /* libruby (or a ruby built without it) exports both. */
        r = runtime_find_exported(up, sym, RUNTIME_RUBY, names, ELEMENTSOF(names), &mod, addrs, &seen);
        if (r < 0)
                return r;
        if (r < (int) ELEMENTSOF(names))
                return 0;
        p = calloc(1, sizeof *p);
        if (!p)
                return -ENOMEM;
        p->pid = pid;
        if (rb_read(p, addrs[1], p->version, sizeof p->version - 1) < 0) {
                *ret_why = "its version (ruby_version) cannot be read";
                return -EPROTONOSUPPORT;
        }
        p->version[strnlen(p->version, sizeof p->version - 1)] = 0;
        if (ret_version && !(*ret_version = strdup(p->version)))
                return -ENOMEM;
        r = ruby_layout(p, ret_why);
        if (r < 0)
                return r;
        if (!rb_word(p, addrs[0], &p->vm) || !is_object(p->vm)) {
                *ret_why = "no Ruby VM yet (ruby_current_vm_ptr is not set)";
                return -EPROTONOSUPPORT;
        }
        if (!rb_word(p, p->vm + p->l.vm_main_ractor, &p->ractor) || !is_object(p->ractor) ||
            !rb_word(p, p->vm + p->l.vm_main_thread, &main_thread)) {
                *ret_why = "its VM's main ractor cannot be read";
                return -EPROTONOSUPPORT;
        }
        r = threads_read(p, main_thread, ret_why);
        if (r < 0)
                return r;
        data_segments(p, mod);
        *ret = TAKE_PTR(p);
        return 0;
}

static int ruby_open(const RuntimeCapture *rc, void **ret) {
        _cleanup_(rb_process_freep) RbProcess *p = NULL;
        _cleanup_free_ char *version = NULL;
        const char *why = NULL;
        ProcessRuntime *pr;
        int r;

        *ret = NULL;
        if (!rc->up)
                return 0;
        r = rb_process_open(rc->pid, rc->up, rc->sym, &p, &version, &why);
        if (r == -ENOMEM)
                return r;
        if (!p && !why)
                return 0;
        pr = snapshot_add_runtime(rc->s, RUNTIME_RUBY);
        if (!pr)
                return -ENOMEM;
        pr->version = TAKE_PTR(version);
        if (!p) {
                pr->error = strdup(why ?: "its VM cannot be read");
                return pr->error ? 0 : -ENOMEM;
        }
        pr->lock_holder = p->gvl_holder;
        *ret = TAKE_PTR(p);
        return 0;
}

/* ---- what a parked thread waits for ---- */

/* What Ruby says thread TID of P waits for (FUTEX its futex wait's word, 0 when it is in another call): the Mutex it
 * waits to lock and its owner, the thread it joins, a Queue or ConditionVariable (no owner: any thread may wake
 * it), or the GVL and its holder. 1 with *RET when Ruby parked it, 0 when not (a thread in a blocking region, IO say,
 * has its own call's edges). */
static int rb_wait_of(RbProcess *p, pid_t tid, uint64_t futex, RuntimeWait *ret) {
        const RubyLayout *l = &p->l;
        const RbThread *th = thread_of_tid(p, tid);
        uint8_t tbuf[1024];
        uint64_t mutex, data, fiber = 0, holder = 0;
        uint8_t status;

        *ret = (RuntimeWait) { .kind = RUNTIME_WAIT_NONE, .runtime = RUNTIME_RUBY };
        if (!th || rb_read(p, th->th, tbuf, thread_bytes(l)) < 0)
                return 0;
        status = tbuf[l->thread_status] & 3;
        if (l->thread_locking_mutex != RUBY_OFF_NONE && is_object(mutex = word_at(tbuf, l->thread_locking_mutex)) &&
            rb_word(p, mutex + l->typed_data_data, &data) && is_object(data)) {
                (void) rb_word(p, data + l->mutex_fiber, &fiber);
                *ret = (RuntimeWait) { .kind = RUNTIME_WAIT_RLOCK, .runtime = RUNTIME_RUBY, .object = data,
                                       .owner = owner_of_fiber(p, fiber) };
                return 1;
        }
        if (status == RUBY_THREAD_STOPPED_FOREVER) {
                /* A join: the thread whose list of joiners has it. */
                for (size_t i = 0; l->thread_join_list != RUBY_OFF_NONE && i < p->n_threads; i++) {
                        uint64_t w;

                        if (!rb_word(p, p->threads[i].th + l->thread_join_list, &w))
                                continue;
                        for (unsigned n = 0; is_object(w) && n < 64; n++) {
                                uint64_t waiter;

                                if (!rb_word(p, w + l->waiting_list_thread, &waiter))
                                        break;
                                if (waiter == th->th) {
                                        *ret = (RuntimeWait) { .kind = RUNTIME_WAIT_JOIN, .runtime = RUNTIME_RUBY,
                                                               .owner = p->threads[i].tid };
                                        return 1;
                                }
                                if (!rb_word(p, w + l->waiting_list_next, &w))
                                        break;
                        }
                }
                ret->kind = RUNTIME_WAIT_CONDITION;
                return 1;
        }
        /* Runnable, yet parked on a futex: waiting for the GVL, which another thread holds. */
        if (status == 0 && futex && rb_word(p, p->ractor + l->ractor_gvl_owner, &holder) && holder &&
            holder != th->th) {
                *ret = (RuntimeWait) { .kind = RUNTIME_WAIT_GIL, .runtime = RUNTIME_RUBY,
                                       .owner = tid_of_thread(p, holder) };
                return 1;
        }
        return 0;
}

/* Processes one reader remembers: a chain reaches a few, a poll judges at most a handful. */
#define RUBY_WAITS_PROCESSES_MAX 64U

typedef struct RubyWaits {
        Symbolizer *sym;
        RuntimeMayRunFn may_run;
        void *may_run_userdata;
        struct {
                pid_t pid;
                RbProcess *rb;  /* NULL: no Ruby in it (or it could not be read) */
        } entries[RUBY_WAITS_PROCESSES_MAX];
        size_t n;
} RubyWaits;

static void ruby_waits_free(void *userdata) {
        RubyWaits *w = userdata;

        for (size_t i = 0; w && i < w->n; i++)
                rb_process_free(w->entries[i].rb);
        free(w);
}

static int ruby_waits_read(void *userdata, pid_t pid, pid_t tid, uint64_t futex, RuntimeWait *ret) {
        RubyWaits *w = userdata;
        RbProcess *rb = NULL;
        size_t i;

        if (w->may_run && !w->may_run(w->may_run_userdata, RUNTIME_RUBY, pid))
                return 0;
        for (i = 0; i < w->n && w->entries[i].pid != pid; i++)
                ;
        if (i == w->n) {
                _cleanup_(unwind_process_freep) UnwindProcess *up = NULL;
                const char *why;
                int r;

                if (w->n >= RUBY_WAITS_PROCESSES_MAX)
                        return 0;
                w->entries[w->n].pid = pid;
                w->entries[w->n].rb = NULL;
                w->n++;
                if (unwind_process_new(pid, NULL, &up) < 0)
                        return 0;
                r = rb_process_open(pid, up, w->sym, &w->entries[i].rb, NULL, &why);
                if (r == -ENOMEM)
                        return r;
        }
        rb = w->entries[i].rb;
        return rb ? rb_wait_of(rb, tid, futex, ret) : 0;
}

static int ruby_waits_attach(PeerResolver *r, Symbolizer *sym, RuntimeMayRunFn may_run, void *userdata) {
        RubyWaits *w = calloc(1, sizeof *w);

        if (!w)
                return -ENOMEM;
        *w = (RubyWaits) { .sym = sym, .may_run = may_run, .may_run_userdata = userdata };
        peer_resolver_set_runtime(r, RUNTIME_RUBY, ruby_waits_read, w, ruby_waits_free);
        /* Ruby parks a thread in ppoll (the one that waits for signals too) or a condition variable alike. */
        peer_resolver_runtime_any_call(r, RUNTIME_RUBY);
        return 0;
}

static void ruby_close(void *state) {
        rb_process_free(state);
}

const RuntimeOps ruby_runtime_ops = {
        .open = ruby_open,
        .read_thread = ruby_read_thread,
        .thread_done = ruby_thread_done,
        .merge_thread = ruby_merge_thread,
        .finish = ruby_finish,
        .close = ruby_close,
        .waits_attach = ruby_waits_attach,
};
