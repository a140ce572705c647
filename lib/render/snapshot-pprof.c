/* snapshot-pprof.c: a snapshot as a gzipped pprof profile (snapshot-pprof.h).
 *
 * The protobuf is written by hand: profile.proto uses three wire types (varints, packed varints, length-delimited
 * messages and strings), and every message here is built bottom up into a byte buffer, so a schema compiler and its
 * runtime (protobuf-c) would bring a build step and a library for a hundred lines of varints. The profile's
 * messages refer to each other by id and to strings by index into one table, whose entry 0 is "": each table below
 * is a map from what makes an entry the same (the string's bytes; a function's three strings; a location's place)
 * to its id, so that a 2,000-thread snapshot of three stacks holds each frame once. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "base/alloc-util.h"
#include "base/macro.h"
#include "render/snapshot-pprof.h"
#include "render/thread-groups.h"

/* profile.proto's field numbers. */
enum {
        PROFILE_SAMPLE_TYPE = 1, PROFILE_SAMPLE = 2, PROFILE_MAPPING = 3, PROFILE_LOCATION = 4, PROFILE_FUNCTION = 5,
        PROFILE_STRING_TABLE = 6, PROFILE_TIME_NANOS = 9, PROFILE_DURATION_NANOS = 10, PROFILE_PERIOD_TYPE = 11,
        PROFILE_PERIOD = 12, PROFILE_COMMENT = 13,
        VALUE_TYPE_TYPE = 1, VALUE_TYPE_UNIT = 2,
        SAMPLE_LOCATION_ID = 1, SAMPLE_VALUE = 2, SAMPLE_LABEL = 3,
        LABEL_KEY = 1, LABEL_STR = 2, LABEL_NUM = 3,
        MAPPING_ID = 1, MAPPING_START = 2, MAPPING_LIMIT = 3, MAPPING_OFFSET = 4, MAPPING_FILENAME = 5,
        MAPPING_BUILD_ID = 6, MAPPING_HAS_FUNCTIONS = 7, MAPPING_HAS_FILENAMES = 8, MAPPING_HAS_LINE_NUMBERS = 9,
        MAPPING_HAS_INLINE_FRAMES = 10,
        LOCATION_ID = 1, LOCATION_MAPPING_ID = 2, LOCATION_ADDRESS = 3, LOCATION_LINE = 4,
        LINE_FUNCTION_ID = 1, LINE_LINE = 2,
        FUNCTION_ID = 1, FUNCTION_NAME = 2, FUNCTION_SYSTEM_NAME = 3, FUNCTION_FILENAME = 4,
};

enum { WIRE_VARINT = 0, WIRE_LEN = 2 };

/* A growing message. Out of memory is sticky and checked once at the end, so that a writer needs no branch. */
typedef struct Buf {
        uint8_t *data;
        size_t n, allocated;
        bool oom;
} Buf;

static void buf_done(Buf *b) {
        free(b->data);
        *b = (Buf) {};
}

static void buf_put(Buf *b, const void *p, size_t len) {
        if (b->oom || len == 0)
                return;
        if (!GREEDY_REALLOC(b->data, b->allocated, b->n + len)) {
                b->oom = true;
                return;
        }
        memcpy(b->data + b->n, p, len);
        b->n += len;
}

static void put_varint(Buf *b, uint64_t v) {
        uint8_t x[10];
        size_t n = 0;

        do {
                x[n++] = (v & 0x7f) | (v > 0x7f ? 0x80 : 0);
                v >>= 7;
        } while (v);
        buf_put(b, x, n);
}

/* A varint field; 0 is every field's default, left out as protobuf writers do. */
static void put_uint(Buf *b, unsigned field, uint64_t v) {
        if (v == 0)
                return;
        put_varint(b, (uint64_t) field << 3 | WIRE_VARINT);
        put_varint(b, v);
}

static void put_bytes(Buf *b, unsigned field, const void *p, size_t len) {
        put_varint(b, (uint64_t) field << 3 | WIRE_LEN);
        put_varint(b, len);
        buf_put(b, p, len);
}

/* A sub-message, which is then emptied for the next one. */
static void put_msg(Buf *b, unsigned field, Buf *m) {
        put_bytes(b, field, m->data, m->n);
        b->oom |= m->oom;
        m->n = 0;
}

/* A map from bytes (a string, or a fixed struct of ids) to an id, open addressing, never shrinking. */
typedef struct MapEntry {
        uint64_t hash;
        char *key;              /* NULL: free slot */
        size_t len;
        uint64_t id;
} MapEntry;

typedef struct Map {
        MapEntry *e;
        size_t size, n;
} Map;

static void map_done(Map *m) {
        for (size_t i = 0; i < m->size; i++)
                free(m->e[i].key);
        free(m->e);
        *m = (Map) {};
}

static uint64_t hash_bytes(const void *p, size_t len) {
        uint64_t h = 0xcbf29ce484222325ULL;

        for (size_t i = 0; i < len; i++) {
                h ^= ((const uint8_t *) p)[i];
                h *= 0x100000001b3ULL;
        }
        return h;
}

static MapEntry *map_slot(MapEntry *e, size_t size, uint64_t hash, const void *key, size_t len) {
        for (size_t i = hash & (size - 1);; i = (i + 1) & (size - 1))
                if (!e[i].key || (e[i].hash == hash && e[i].len == len && memcmp(e[i].key, key, len) == 0))
                        return &e[i];
}

/* KEY's id: its own when it is in M, else NEXT_ID, entered. 0 on OOM (no id is 0). */
static uint64_t map_get(Map *m, const void *key, size_t len, uint64_t next_id, bool *ret_added) {
        uint64_t hash = hash_bytes(key, len);
        MapEntry *slot;

        *ret_added = false;
        if ((m->n + 1) * 2 > m->size) {
                size_t size = m->size ? m->size * 2 : 256;
                MapEntry *e = calloc(size, sizeof *e);

                if (!e)
                        return 0;
                for (size_t i = 0; i < m->size; i++)
                        if (m->e[i].key)
                                *map_slot(e, size, m->e[i].hash, m->e[i].key, m->e[i].len) = m->e[i];
                free(m->e);
                m->e = e;
                m->size = size;
        }
        slot = map_slot(m->e, m->size, hash, key, len);
        if (slot->key)
                return slot->id;
        slot->key = malloc(len ?: 1);
        if (!slot->key)
                return 0;
        memcpy(slot->key, key, len);
        *slot = (MapEntry) { .hash = hash, .key = slot->key, .len = len, .id = next_id };
        m->n++;
        *ret_added = true;
        return next_id;
}

typedef struct Pprof {
        Buf out, strings, msg, fmsg, line;     /* MSG: a location or mapping, FMSG: a function, LINE: their parts */
        Map string_ids, function_ids, location_ids;
        uint64_t n_strings, n_functions, n_locations;
        bool oom;
} Pprof;

static void pprof_done(Pprof *p) {
        buf_done(&p->out);
        buf_done(&p->strings);
        buf_done(&p->msg);
        buf_done(&p->fmsg);
        buf_done(&p->line);
        map_done(&p->string_ids);
        map_done(&p->function_ids);
        map_done(&p->location_ids);
}

/* S's index in the string table; "" (and NULL) is entry 0, written first. */
static uint64_t string_id(Pprof *p, const char *s) {
        bool added;
        uint64_t id;

        if (!s || !*s)
                return 0;
        id = map_get(&p->string_ids, s, strlen(s), p->n_strings, &added);
        if (id == 0)
                p->oom = true;
        if (added) {
                put_bytes(&p->strings, PROFILE_STRING_TABLE, s, strlen(s));
                p->n_strings++;
        }
        return id;
}

static uint64_t function_id(Pprof *p, const char *name, const char *system_name, const char *filename) {
        uint64_t key[3] = { string_id(p, name), string_id(p, system_name), string_id(p, filename) };
        bool added;
        uint64_t id = map_get(&p->function_ids, key, sizeof key, p->n_functions + 1, &added);

        if (id == 0)
                p->oom = true;
        if (added) {
                p->n_functions++;
                put_uint(&p->fmsg, FUNCTION_ID, id);
                put_uint(&p->fmsg, FUNCTION_NAME, key[0]);
                put_uint(&p->fmsg, FUNCTION_SYSTEM_NAME, key[1]);
                put_uint(&p->fmsg, FUNCTION_FILENAME, key[2]);
                put_msg(&p->out, PROFILE_FUNCTION, &p->fmsg);
        }
        return id;
}

/* What makes two frames one location: the process, the pc and the number of inlined calls at it for a machine
 * frame, the function and line for a runtime's frame, the function and offset for a kernel frame. */
typedef struct LocationKey {
        uint64_t kind, process, a, b;
} LocationKey;

enum { LOCATION_NATIVE = 1, LOCATION_RUNTIME, LOCATION_KERNEL, LOCATION_NONE };

static void put_line(Pprof *p, uint64_t function, uint64_t line) {
        put_uint(&p->line, LINE_FUNCTION_ID, function);
        put_uint(&p->line, LINE_LINE, line);
        put_msg(&p->msg, LOCATION_LINE, &p->line);
}

/* The location of KEY; *RET_ADDED says that its lines are to be put into p->msg (then location_end()). */
static uint64_t location_begin(Pprof *p, const LocationKey *key, uint64_t mapping, uint64_t address, bool *ret_added) {
        uint64_t id = map_get(&p->location_ids, key, sizeof *key, p->n_locations + 1, ret_added);

        if (id == 0)
                p->oom = true;
        if (*ret_added) {
                p->n_locations++;
                put_uint(&p->msg, LOCATION_ID, id);
                put_uint(&p->msg, LOCATION_MAPPING_ID, mapping);
                put_uint(&p->msg, LOCATION_ADDRESS, address);
        }
        return id;
}

static void location_end(Pprof *p) {
        put_msg(&p->out, PROFILE_LOCATION, &p->msg);
}

static void put_str_label(Pprof *p, Buf *sample, const char *key, const char *value) {
        put_uint(&p->line, LABEL_KEY, string_id(p, key));
        put_uint(&p->line, LABEL_STR, string_id(p, value));
        put_msg(sample, SAMPLE_LABEL, &p->line);
}

static void put_num_label(Pprof *p, Buf *sample, const char *key, int64_t value) {
        put_uint(&p->line, LABEL_KEY, string_id(p, key));
        put_uint(&p->line, LABEL_NUM, (uint64_t) value);
        put_msg(sample, SAMPLE_LABEL, &p->line);
}

/* The class of G's threads, where the snapshot knows it: the rule's thread's class was judged over a window by the
 * daemon (the trigger); stopped and zombie are what the state letter says. Any other class needs that window: no
 * label rather than a guess. */
static const char *group_class(const Snapshot *s, const ThreadGroup *g, const ThreadSnapshot *t) {
        if (g->culprit && s->trigger && s->trigger->klass)
                return s->trigger->klass;
        if (t->state == 'T' || t->state == 't')
                return "stopped";
        if (t->state == 'Z')
                return "zombie";
        return NULL;
}

static void put_group_labels(Pprof *p, Buf *sample, const Snapshot *s, const ThreadGroup *g) {
        const ThreadSnapshot *t = &s->threads[g->threads[0]];
        _cleanup_free_ char *tids = NULL;
        size_t size = 0;
        FILE *f;
        char state[2] = { t->state, 0 };

        put_str_label(p, sample, "state", t->state == '\0' || t->state == '?' ? "not read" : state);
        if (group_class(s, g, t))
                put_str_label(p, sample, "class", group_class(s, g, t));
        f = open_memstream(&tids, &size);
        if (!f) {
                p->oom = true;
                return;
        }
        thread_group_put_tids(s, g, ",", SIZE_MAX, f);
        if (fclose(f) != 0) {
                p->oom = true;
                return;
        }
        put_str_label(p, sample, "tids", tids);
        /* Threads are alike by what they do, not by name: each name once. */
        for (size_t i = 0; i < g->n; i++) {
                const char *comm = s->threads[g->threads[i]].comm;
                bool seen = false;

                for (size_t k = 0; k < i && !seen; k++)
                        seen = streq_ptr(s->threads[g->threads[k]].comm, comm);
                if (comm && !seen)
                        put_str_label(p, sample, "thread", comm);
        }
        if (t->syscall.kind == PROC_SYSCALL_BLOCKED) {
                char other[32];

                snprintf(other, sizeof other, "syscall_%" PRId64, t->syscall.nr);
                put_str_label(p, sample, "syscall", syscall_name(t->syscall.nr) ?: other);
        }
        if (g->culprit && s->trigger)
                put_str_label(p, sample, "rule", s->trigger->rule);
        put_num_label(p, sample, "pid", s->pid);
}

/* Mapping ids: module I of S is BASE + I + 1. */
static void put_mappings(Pprof *p, const Snapshot *s, uint64_t base) {
        for (size_t i = 0; i < s->n_modules; i++) {
                const ModuleInfo *m = &s->modules[i];

                put_uint(&p->msg, MAPPING_ID, base + i + 1);
                put_uint(&p->msg, MAPPING_START, m->start);
                put_uint(&p->msg, MAPPING_LIMIT, m->end);
                /* No MAPPING_OFFSET: the snapshot keeps a module's load bias, not the file offset of its first
                 * mapped byte, and with every function named no reader needs it. */
                put_uint(&p->msg, MAPPING_FILENAME, string_id(p, m->path));
                put_uint(&p->msg, MAPPING_BUILD_ID, string_id(p, m->build_id));
                /* Every frame has a function (a name, or file+offset): a reader has nothing to symbolize again. */
                put_uint(&p->msg, MAPPING_HAS_FUNCTIONS, 1);
                put_uint(&p->msg, MAPPING_HAS_FILENAMES, m->debuginfo);
                put_uint(&p->msg, MAPPING_HAS_LINE_NUMBERS, m->debuginfo);
                put_uint(&p->msg, MAPPING_HAS_INLINE_FRAMES, m->debuginfo);
                put_msg(&p->out, PROFILE_MAPPING, &p->msg);
        }
}

static void put_kernel_frame(Pprof *p, const KernelFrame *k, Buf *ids) {
        _cleanup_free_ char *name = NULL;
        LocationKey key = { .kind = LOCATION_KERNEL, .b = k->offset };
        bool added;
        uint64_t id;

        /* A module's function as perf names it: "nfs_wait [nfs]". */
        if (k->module && asprintf(&name, "%s [%s]", k->function ?: "?", k->module) < 0) {
                p->oom = true;
                return;
        }
        key.a = function_id(p, name ?: k->function ?: "?", NULL, "[kernel]");
        id = location_begin(p, &key, 0, 0, &added);
        if (added) {
                put_line(p, key.a, 0);
                location_end(p);
        }
        put_varint(ids, id);
}

/* Frame I of T and the inlined calls before it at the same pc; returns the index after them. */
static size_t put_user_frame(Pprof *p, const Snapshot *s, uint64_t process, uint64_t mapping_base,
                             const ThreadSnapshot *t, size_t i, Buf *ids) {
        const UserFrame *u = &t->frames[i];
        LocationKey key = { .process = process };
        size_t end = i;
        bool added;
        uint64_t id, mapping;

        if (frame_kind_is_runtime(u->kind)) {
                key.kind = LOCATION_RUNTIME;
                key.a = function_id(p, u->function ?: "?", NULL, u->file);
                key.b = u->line;
                id = location_begin(p, &key, 0, 0, &added);
                if (added) {
                        put_line(p, key.a, u->line);
                        location_end(p);
                }
                put_varint(ids, id);
                return i + 1;
        }
        /* pprof's lines of a location: the innermost inlined call first, the function that holds the pc last. */
        while (end + 1 < t->n_frames && t->frames[end].inlined && t->frames[end + 1].pc == u->pc &&
               !frame_kind_is_runtime(t->frames[end + 1].kind))
                end++;
        key.kind = LOCATION_NATIVE;
        key.a = u->pc;
        /* A budget may cut a stack inside the inlined calls at a pc: that location has fewer lines. */
        key.b = end - i;
        mapping = snapshot_frame_module(s, u) ? mapping_base + (uint64_t) u->module + 1 : 0;
        id = location_begin(p, &key, mapping, u->pc, &added);
        if (added) {
                for (size_t k = i; k <= end; k++) {
                        const UserFrame *v = &t->frames[k];
                        _cleanup_free_ char *name = snapshot_frame_name(s, v);

                        if (!name)
                                p->oom = true;
                        put_line(p, function_id(p, name, v->function ? v->linkage_name : NULL, v->file), v->line);
                }
                location_end(p);
        }
        put_varint(ids, id);
        return end + 1;
}

static int put_process(Pprof *p, const Snapshot *s, uint64_t process, uint64_t mapping_base) {
        _cleanup_(buf_done) Buf sample = {}, ids = {};
        ThreadGroup *groups = NULL;
        size_t n = 0;
        int r;

        put_mappings(p, s, mapping_base);
        r = snapshot_group_threads(s, &groups, &n);
        if (r < 0)
                return r;
        for (size_t gi = 0; gi < n; gi++) {
                const ThreadSnapshot *t = &s->threads[groups[gi].threads[0]];

                ids.n = 0;
                for (size_t k = 0; k < t->n_kframes; k++)
                        put_kernel_frame(p, &t->kframes[k], &ids);
                for (size_t k = 0; k < t->n_frames;)
                        if (!user_frame_shown(&t->frames[k]))
                                k++;
                        else
                                k = put_user_frame(p, s, process, mapping_base, t, k, &ids);
                if (ids.n == 0) {
                        /* A thread counts even when none of its frames could be read. */
                        LocationKey key = { .kind = LOCATION_NONE };
                        bool added;
                        uint64_t id = location_begin(p, &key, 0, 0, &added);

                        if (added) {
                                put_line(p, function_id(p, "[no frames]", NULL, NULL), 0);
                                location_end(p);
                        }
                        put_varint(&ids, id);
                }
                put_bytes(&sample, SAMPLE_LOCATION_ID, ids.data, ids.n);
                sample.oom |= ids.oom;
                ids.n = 0;
                put_varint(&ids, groups[gi].n);
                put_bytes(&sample, SAMPLE_VALUE, ids.data, ids.n);
                put_group_labels(p, &sample, s, &groups[gi]);
                put_msg(&p->out, PROFILE_SAMPLE, &sample);
        }
        thread_groups_free(groups, n);
        return 0;
}

static void put_comment(Pprof *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put_comment(Pprof *p, const char *fmt, ...) {
        _cleanup_free_ char *s = NULL;
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = vasprintf(&s, fmt, ap);
        va_end(ap);
        if (r < 0) {
                p->oom = true;
                return;
        }
        put_uint(&p->out, PROFILE_COMMENT, string_id(p, s));
}

static int gzip_out(const Buf *b, FILE *f) {
        z_stream z = {};
        uint8_t chunk[65536];
        int r;

        if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16 /* a gzip header */, 8,
                         Z_DEFAULT_STRATEGY) != Z_OK)
                return -ENOMEM;
        /* A profile is far below 4 GiB (uInt): a snapshot document is bounded well below that. */
        if (b->n > UINT_MAX)
                return -E2BIG;
        z.next_in = b->data;
        z.avail_in = (uInt) b->n;
        do {
                z.next_out = chunk;
                z.avail_out = sizeof chunk;
                r = deflate(&z, Z_FINISH);
                if (r == Z_STREAM_ERROR || fwrite(chunk, 1, sizeof chunk - z.avail_out, f) != sizeof chunk - z.avail_out) {
                        deflateEnd(&z);
                        return r == Z_STREAM_ERROR ? -ENOMEM : -EIO;
                }
        } while (r != Z_STREAM_END);
        deflateEnd(&z);
        return fflush(f) == 0 ? 0 : -EIO;
}

int snapshot_write_pprof(const Snapshot *s, FILE *f) {
        _cleanup_(pprof_done) Pprof p = { .n_strings = 1 };
        _cleanup_(buf_done) Buf vt = {};
        uint64_t mapping_base = s->n_modules;
        int r;

        /* Entry 0 of the string table is "". */
        put_bytes(&p.strings, PROFILE_STRING_TABLE, "", 0);
        put_uint(&vt, VALUE_TYPE_TYPE, string_id(&p, "threads"));
        put_uint(&vt, VALUE_TYPE_UNIT, string_id(&p, "count"));
        put_bytes(&p.out, PROFILE_SAMPLE_TYPE, vt.data, vt.n);
        put_bytes(&p.out, PROFILE_PERIOD_TYPE, vt.data, vt.n);
        put_uint(&p.out, PROFILE_PERIOD, 1);
        put_uint(&p.out, PROFILE_TIME_NANOS, s->timestamp_usec * 1000);
        put_uint(&p.out, PROFILE_DURATION_NANOS, s->duration_usec * 1000);
        put_comment(&p, "stackwatch snapshot of PID %d (%s)", (int) s->pid, s->comm ?: "?");
        if (s->exe)
                put_comment(&p, "exe %s", s->exe);
        if (s->trigger)
                put_comment(&p, "rule %s: thread %d %s for %.1f s", s->trigger->rule ?: "?", (int) s->trigger->tid,
                            s->trigger->klass ?: "?", (double) s->trigger->duration_usec / 1e6);
        r = put_process(&p, s, 0, 0);
        for (size_t i = 0; r >= 0 && i < s->n_peers; i++) {
                put_comment(&p, "peer PID %d (%s), reached by the wait chain", (int) s->peers[i]->pid,
                            s->peers[i]->comm ?: "?");
                r = put_process(&p, s->peers[i], i + 1, mapping_base);
                mapping_base += s->peers[i]->n_modules;
        }
        if (r < 0)
                return r;
        buf_put(&p.out, p.strings.data, p.strings.n);
        if (p.oom || p.out.oom || p.strings.oom || p.msg.oom || p.fmsg.oom || p.line.oom || vt.oom)
                return -ENOMEM;
        return gzip_out(&p.out, f);
}
