/* test-snapshot-pprof.c: a snapshot read from its JSON, written as a pprof profile, gunzipped and decoded here
 * with a reader of our own (profile.proto's fields only): one sample per group with its thread count and labels,
 * frames leaf first with their inlined calls, kernel and Python frames, mappings, and names of any bytes kept. */
#include "unit.h"
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "base/macro.h"
#include "render/snapshot-json.h"
#include "render/snapshot-pprof.h"

/* 5 threads reading alike (12-15 and 20), one in D running Python code (the rule's), one whose frames were not
 * read. Names from /proc are hostile: an escape sequence, a newline, a NUL-free byte soup. */
static const char SNAPSHOT[] =
        "{\"schema\": \"stackwatch.snapshot/1\", \"timestamp_usec\": 1700000000000000,"
        " \"process\": {\"pid\": 12, \"state\": \"S\", \"comm\": \"svc\\u001b[31m\\n\\u00ff;x\", \"exe\": \"/usr/bin/svc\"},"
        " \"capture\": {\"method\": \"auto\", \"duration_us\": 1500},"
        " \"trigger\": {\"rule\": \"stuck\", \"class\": \"blocked\", \"tid\": 30, \"state\": \"D\", \"duration_us\": 5000000},"
        " \"modules\": [{\"path\": \"/usr/bin/svc\", \"build_id\": \"abcdef01\", \"start\": \"0x400000\","
        "                \"end\": \"0x500000\", \"bias\": \"0x0\", \"debuginfo\": true}],"
        " \"threads\": ["
#define READER(tid)                                                                                               \
        "  {\"tid\": " #tid ", \"comm\": \"worker\", \"state\": \"S\", \"syscall\": {\"state\": \"blocked\", \"nr\": 0, \"name\": \"read\"},"   \
        "   \"kernel_stack\": [{\"function\": \"pipe_read\", \"offset\": 16, \"size\": 64},"                         \
        "                      {\"function\": \"nfs_wait\", \"offset\": 8, \"size\": 64, \"module\": \"nfs\"}],"    \
        "   \"frames\": [{\"pc\": \"0x401010\", \"function\": \"__libc_read\", \"module\": 0, \"file\": \"read.c\","  \
        "                 \"line\": 26, \"inlined\": true, \"method\": \"initial\"},"                                 \
        "                {\"pc\": \"0x401010\", \"function\": \"read\", \"module\": 0, \"file\": \"read.c\","         \
        "                 \"line\": 24, \"method\": \"initial\"},"                                                    \
        "                {\"pc\": \"0x402020\", \"function\": \"worker()\", \"linkage_name\": \"_Z6workerv\","        \
        "                 \"module\": 0, \"file\": \"svc.cc\", \"line\": 7, \"method\": \"cfi\"},"                    \
        "                {\"pc\": \"0x403030\", \"function\": null, \"module\": 0, \"method\": \"cfi\"}]}"
        READER(12) "," READER(13) "," READER(14) "," READER(15) "," READER(20) ","
        "  {\"tid\": 30, \"comm\": \"py\\u0001\\t<img src=x>\", \"state\": \"D\","
        "   \"frames\": [{\"kind\": \"python\", \"function\": \"Worker.run\\u001b]0;\", \"file\": \"app.py\", \"line\": 12},"
        "                {\"pc\": \"0x404040\", \"function\": \"_PyEval_EvalFrameDefault\", \"module\": 0,"
        "                 \"interpreter\": true, \"method\": \"cfi\"},"
        "                {\"pc\": \"0x405050\", \"function\": \"main\", \"module\": 0, \"method\": \"cfi\"}]},"
        "  {\"tid\": 31, \"comm\": \"lost\", \"state\": \"T\"}"
        " ]}";

typedef struct Slice {
        const uint8_t *p;
        size_t n;
} Slice;

/* The next field of M: its number, and its varint (*V) or bytes (*B). False at the end. */
static bool next_field(Slice *m, unsigned *field, uint64_t *v, Slice *b) {
        uint64_t key = 0, x = 0;

        if (m->n == 0)
                return false;
        for (int shift = 0;; shift += 7) {
                ck_assert_uint_gt(m->n, 0);
                key |= (uint64_t) (m->p[0] & 0x7f) << shift;
                m->n--;
                if (!(*m->p++ & 0x80))
                        break;
        }
        for (int shift = 0;; shift += 7) {
                ck_assert_uint_gt(m->n, 0);
                x |= (uint64_t) (m->p[0] & 0x7f) << shift;
                m->n--;
                if (!(*m->p++ & 0x80))
                        break;
        }
        *field = (unsigned) (key >> 3);
        if ((key & 7) == 0) {
                *v = x;
                return true;
        }
        ck_assert_uint_eq(key & 7, 2);
        ck_assert_uint_le(x, m->n);
        *b = (Slice) { m->p, x };
        m->p += x;
        m->n -= x;
        return true;
}

/* A packed repeated varint field's values. */
static size_t unpack(Slice b, uint64_t *out, size_t max) {
        size_t n = 0;

        while (b.n > 0) {
                uint64_t x = 0;

                for (int shift = 0;; shift += 7) {
                        x |= (uint64_t) (b.p[0] & 0x7f) << shift;
                        b.n--;
                        if (!(*b.p++ & 0x80))
                                break;
                }
                ck_assert_uint_lt(n, max);
                out[n++] = x;
        }
        return n;
}

#define N_MAX 64

typedef struct Label {
        uint64_t key, str, num;
} Label;

typedef struct Sample {
        uint64_t locations[N_MAX], values[N_MAX];
        size_t n_locations, n_values;
        Label labels[N_MAX];
        size_t n_labels;
} Sample;

typedef struct Location {
        uint64_t id, mapping, address;
        uint64_t functions[N_MAX], lines[N_MAX];
        size_t n_lines;
} Location;

typedef struct Function {
        uint64_t id, name, system_name, filename;
} Function;

typedef struct Mapping {
        uint64_t id, start, limit, filename, build_id, has_functions;
} Mapping;

typedef struct Profile {
        char *strings[1024];
        size_t n_strings;
        Sample samples[N_MAX];
        size_t n_samples;
        Location locations[N_MAX];
        size_t n_locations;
        Function functions[N_MAX];
        size_t n_functions;
        Mapping mappings[N_MAX];
        size_t n_mappings;
        uint64_t sample_type[2], time_nanos, comments[N_MAX];
        size_t n_comments;
} Profile;

static void decode(const uint8_t *data, size_t n, Profile *p) {
        Slice m = { data, n }, b, c, d;
        unsigned f, g, h;
        uint64_t v = 0;

        memset(p, 0, sizeof *p);
        while (next_field(&m, &f, &v, &b))
                switch (f) {
                case 1:
                        while (next_field(&b, &g, &v, &c))
                                p->sample_type[g - 1] = v;
                        break;
                case 2: {
                        Sample *s = &p->samples[p->n_samples++];

                        while (next_field(&b, &g, &v, &c))
                                if (g == 1)
                                        s->n_locations = unpack(c, s->locations, N_MAX);
                                else if (g == 2)
                                        s->n_values = unpack(c, s->values, N_MAX);
                                else if (g == 3) {
                                        Label *l = &s->labels[s->n_labels++];

                                        while (next_field(&c, &h, &v, &d))
                                                *(h == 1 ? &l->key : h == 2 ? &l->str : &l->num) = v;
                                }
                        break;
                }
                case 3: {
                        Mapping *mp = &p->mappings[p->n_mappings++];

                        while (next_field(&b, &g, &v, &c))
                                switch (g) {
                                case 1: mp->id = v; break;
                                case 2: mp->start = v; break;
                                case 3: mp->limit = v; break;
                                case 5: mp->filename = v; break;
                                case 6: mp->build_id = v; break;
                                case 7: mp->has_functions = v; break;
                                }
                        break;
                }
                case 4: {
                        Location *l = &p->locations[p->n_locations++];

                        while (next_field(&b, &g, &v, &c))
                                if (g == 1)
                                        l->id = v;
                                else if (g == 2)
                                        l->mapping = v;
                                else if (g == 3)
                                        l->address = v;
                                else if (g == 4) {
                                        while (next_field(&c, &h, &v, &d))
                                                *(h == 1 ? &l->functions[l->n_lines] : &l->lines[l->n_lines]) = v;
                                        l->n_lines++;
                                }
                        break;
                }
                case 5: {
                        Function *fn = &p->functions[p->n_functions++];

                        while (next_field(&b, &g, &v, &c))
                                *(g == 1 ? &fn->id : g == 2 ? &fn->name : g == 3 ? &fn->system_name : &fn->filename) = v;
                        break;
                }
                case 6:
                        ck_assert_uint_lt(p->n_strings, ELEMENTSOF(p->strings));
                        p->strings[p->n_strings] = strndup((const char *) b.p, b.n);
                        /* Any bytes but NUL survive: a NUL would end them here, and no /proc string has one. */
                        ck_assert_uint_eq(strlen(p->strings[p->n_strings]), b.n);
                        p->n_strings++;
                        break;
                case 9:
                        p->time_nanos = v;
                        break;
                case 13:
                        p->comments[p->n_comments++] = v;
                        break;
                }
}

static void profile_done(Profile *p) {
        for (size_t i = 0; i < p->n_strings; i++)
                free(p->strings[i]);
}

static const char *str(const Profile *p, uint64_t i) {
        ck_assert_uint_lt(i, p->n_strings);
        return p->strings[i];
}

static const Location *location(const Profile *p, uint64_t id) {
        for (size_t i = 0; i < p->n_locations; i++)
                if (p->locations[i].id == id)
                        return &p->locations[i];
        ck_abort_msg("no location %" PRIu64, id);
        return NULL;
}

static const Function *function(const Profile *p, uint64_t id) {
        for (size_t i = 0; i < p->n_functions; i++)
                if (p->functions[i].id == id)
                        return &p->functions[i];
        ck_abort_msg("no function %" PRIu64, id);
        return NULL;
}

/* The string labels KEY of S, joined by "|". */
static const char *label(const Profile *p, const Sample *s, const char *key, char *buf, size_t size) {
        buf[0] = 0;
        for (size_t i = 0; i < s->n_labels; i++)
                if (streq(str(p, s->labels[i].key), key)) {
                        if (buf[0])
                                strncat(buf, "|", size - strlen(buf) - 1);
                        strncat(buf, s->labels[i].str ? str(p, s->labels[i].str) : "#", size - strlen(buf) - 1);
                }
        return buf;
}

static const char *frame_name(const Profile *p, const Sample *s, size_t i, size_t line) {
        const Location *l = location(p, s->locations[i]);

        ck_assert_uint_lt(line, l->n_lines);
        return str(p, function(p, l->functions[line])->name);
}

static void write_profile(const char *json, uint8_t **ret, size_t *ret_n) {
        _cleanup_snapshot_free_ Snapshot *s = NULL;
        json_object *j = json_tokener_parse(json);
        const char *why = NULL;
        char *gz = NULL;
        size_t gz_n = 0, cap = 1 << 20;
        uint8_t *out = malloc(cap);
        z_stream z = {};
        FILE *f;

        ck_assert_ptr_nonnull(j);
        ck_assert_msg(snapshot_from_json(j, &s, &why) == 0, "%s", why ?: "?");
        json_object_put(j);
        f = open_memstream(&gz, &gz_n);
        ck_assert_int_eq(snapshot_write_pprof(s, f), 0);
        fclose(f);
        /* gzip's magic: a reader that sniffs (pprof does) takes it as compressed. */
        ck_assert_uint_ge(gz_n, 18);
        ck_assert_uint_eq((uint8_t) gz[0], 0x1f);
        ck_assert_uint_eq((uint8_t) gz[1], 0x8b);
        ck_assert_int_eq(inflateInit2(&z, 15 + 32), Z_OK);
        z.next_in = (uint8_t *) gz;
        z.avail_in = (uInt) gz_n;
        z.next_out = out;
        z.avail_out = (uInt) cap;
        ck_assert_int_eq(inflate(&z, Z_FINISH), Z_STREAM_END);
        *ret_n = cap - z.avail_out;
        inflateEnd(&z);
        free(gz);
        *ret = out;
}

START_TEST(test_groups_as_samples) {
        static Profile p;
        uint8_t *data;
        size_t n;
        char buf[512];
        const Sample *readers = NULL, *py = NULL, *lost = NULL;

        write_profile(SNAPSHOT, &data, &n);
        decode(data, n, &p);
        free(data);

        ck_assert_str_eq(p.strings[0], "");
        ck_assert_str_eq(str(&p, p.sample_type[0]), "threads");
        ck_assert_str_eq(str(&p, p.sample_type[1]), "count");
        ck_assert_uint_eq(p.time_nanos, UINT64_C(1700000000000000000));
        ck_assert_uint_eq(p.n_samples, 3);
        for (size_t i = 0; i < p.n_samples; i++) {
                ck_assert_uint_eq(p.samples[i].n_values, 1);
                if (p.samples[i].values[0] == 5)
                        readers = &p.samples[i];
                else if (streq(label(&p, &p.samples[i], "tids", buf, sizeof buf), "30"))
                        py = &p.samples[i];
                else
                        lost = &p.samples[i];
        }
        ck_assert_ptr_nonnull(readers);
        ck_assert_ptr_nonnull(py);
        ck_assert_ptr_nonnull(lost);

        /* The readers: one sample of 5 threads, TIDs as ranges, their labels. */
        ck_assert_str_eq(label(&p, readers, "tids", buf, sizeof buf), "12-15,20");
        ck_assert_str_eq(label(&p, readers, "state", buf, sizeof buf), "S");
        ck_assert_str_eq(label(&p, readers, "thread", buf, sizeof buf), "worker");
        ck_assert_str_eq(label(&p, readers, "syscall", buf, sizeof buf), "read");
        ck_assert_str_eq(label(&p, readers, "class", buf, sizeof buf), "");
        for (size_t i = 0; i < readers->n_labels; i++)
                if (streq(str(&p, readers->labels[i].key), "pid"))
                        ck_assert_uint_eq(readers->labels[i].num, 12);
        /* Leaf first: kernel frames, then the pc of read() with __libc_read inlined in it, then the callers. */
        ck_assert_uint_eq(readers->n_locations, 5);
        ck_assert_str_eq(frame_name(&p, readers, 0, 0), "pipe_read");
        ck_assert_str_eq(str(&p, function(&p, location(&p, readers->locations[0])->functions[0])->filename), "[kernel]");
        ck_assert_str_eq(frame_name(&p, readers, 1, 0), "nfs_wait [nfs]");
        ck_assert_uint_eq(location(&p, readers->locations[2])->n_lines, 2);
        ck_assert_str_eq(frame_name(&p, readers, 2, 0), "__libc_read");
        ck_assert_str_eq(frame_name(&p, readers, 2, 1), "read");
        ck_assert_uint_eq(location(&p, readers->locations[2])->lines[0], 26);
        ck_assert_uint_eq(location(&p, readers->locations[2])->address, 0x401010);
        ck_assert_str_eq(frame_name(&p, readers, 3, 0), "worker()");
        {
                const Function *w = function(&p, location(&p, readers->locations[3])->functions[0]);

                ck_assert_str_eq(str(&p, w->system_name), "_Z6workerv");
                ck_assert_str_eq(str(&p, w->filename), "svc.cc");
        }
        /* A frame without a name: its module's and the offset in it, as the folded output names it. */
        ck_assert_str_eq(frame_name(&p, readers, 4, 0), "svc+0x403030");

        /* The mapping the machine frames point at. */
        ck_assert_uint_eq(p.n_mappings, 1);
        ck_assert_uint_eq(p.mappings[0].start, 0x400000);
        ck_assert_uint_eq(p.mappings[0].limit, 0x500000);
        ck_assert_str_eq(str(&p, p.mappings[0].filename), "/usr/bin/svc");
        ck_assert_str_eq(str(&p, p.mappings[0].build_id), "abcdef01");
        ck_assert_uint_eq(p.mappings[0].has_functions, 1);
        ck_assert_uint_eq(location(&p, readers->locations[3])->mapping, p.mappings[0].id);

        /* The rule's thread: its class from the trigger, a Python frame with its file and line and no address, the
         * interpreter's frame left out, a hostile name kept byte for byte. */
        ck_assert_str_eq(label(&p, py, "class", buf, sizeof buf), "blocked");
        ck_assert_str_eq(label(&p, py, "rule", buf, sizeof buf), "stuck");
        ck_assert_str_eq(label(&p, py, "state", buf, sizeof buf), "D");
        ck_assert_str_eq(label(&p, py, "thread", buf, sizeof buf), "py\001\t<img src=x>");
        ck_assert_uint_eq(py->n_locations, 2);
        ck_assert_str_eq(frame_name(&p, py, 0, 0), "Worker.run\033]0;");
        ck_assert_uint_eq(location(&p, py->locations[0])->address, 0);
        ck_assert_uint_eq(location(&p, py->locations[0])->mapping, 0);
        ck_assert_uint_eq(location(&p, py->locations[0])->lines[0], 12);
        ck_assert_str_eq(str(&p, function(&p, location(&p, py->locations[0])->functions[0])->filename), "app.py");
        ck_assert_str_eq(frame_name(&p, py, 1, 0), "main");

        /* A thread with no frames still counts; stopped is what its state says. */
        ck_assert_str_eq(label(&p, lost, "class", buf, sizeof buf), "stopped");
        ck_assert_uint_eq(lost->values[0], 1);
        ck_assert_str_eq(frame_name(&p, lost, 0, 0), "[no frames]");

        /* Each frame once: 2 kernel, 3 of the readers' pcs, the Python frame, main, "[no frames]". */
        ck_assert_uint_eq(p.n_locations, 8);
        /* The process in a comment, its name as it is. */
        ck_assert_str_eq(str(&p, p.comments[0]), "stackwatch snapshot of PID 12 (svc\033[31m\n\303\277;x)");
        profile_done(&p);
}
END_TEST

/* 2,000 threads in 3 stacks are 3 samples, and the profile stays small. */
START_TEST(test_many_threads_few_samples) {
        static Profile p;
        _cleanup_free_ char *json = NULL;
        uint8_t *data;
        size_t n, len = 0;
        FILE *f = open_memstream(&json, &len);
        uint64_t total = 0;

        fputs("{\"schema\": \"stackwatch.snapshot/1\", \"process\": {\"pid\": 1000, \"comm\": \"srv\"},"
              " \"modules\": [], \"threads\": [", f);
        for (int i = 0; i < 2000; i++)
                fprintf(f, "%s{\"tid\": %d, \"comm\": \"w%d\", \"state\": \"S\", \"frames\": ["
                           "{\"pc\": \"0x%x\", \"function\": \"f%d\", \"module\": null, \"method\": \"cfi\"}]}",
                        i ? "," : "", 1000 + i, i % 2, 0x1000 + i % 3, i % 3);
        fputs("]}", f);
        fclose(f);
        write_profile(json, &data, &n);
        ck_assert_uint_lt(n, 32768);
        decode(data, n, &p);
        free(data);
        ck_assert_uint_eq(p.n_samples, 3);
        for (size_t i = 0; i < p.n_samples; i++) {
                char buf[64];

                total += p.samples[i].values[0];
                /* Two names among the group's threads: each once. */
                ck_assert_str_eq(label(&p, &p.samples[i], "thread", buf, sizeof buf),
                                 i == 1 ? "w1|w0" : "w0|w1");
        }
        ck_assert_uint_eq(total, 2000);
        profile_done(&p);
}
END_TEST

UNIT_TEST_MAIN("snapshot-pprof", test_groups_as_samples, test_many_threads_few_samples)
