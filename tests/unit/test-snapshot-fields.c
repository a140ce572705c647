/* test-snapshot-fields.c: every row of the snapshot JSON field tables is written and read back equal, so a field
 * added to one side only (or with the wrong type or offset) fails here. */
#include "unit.h"
#include <stdlib.h>
#include <string.h>

#include "../../lib/render/snapshot-json.c"

static const struct {
        const char *name;
        const JsonField *fields;
        size_t n, size;
} tables[] = {
        { "thread head", thread_head_fields, ELEMENTSOF(thread_head_fields), sizeof(ThreadSnapshot) },
        { "thread tail", thread_tail_fields, ELEMENTSOF(thread_tail_fields), sizeof(ThreadSnapshot) },
        { "capture", capture_fields, ELEMENTSOF(capture_fields), sizeof(ThreadSnapshot) },
        { "kernel frame", kframe_fields, ELEMENTSOF(kframe_fields), sizeof(KernelFrame) },
        { "frame", frame_fields, ELEMENTSOF(frame_fields), sizeof(UserFrame) },
        { "process", process_fields, ELEMENTSOF(process_fields), sizeof(Snapshot) },
        { "module", module_fields, ELEMENTSOF(module_fields), sizeof(ModuleInfo) },
        { "runtime lock", runtime_lock_fields, ELEMENTSOF(runtime_lock_fields), sizeof(RuntimeLock) },
        { "python thread", python_thread_fields, ELEMENTSOF(python_thread_fields), sizeof(ThreadRuntime) },
        { "python process", python_process_fields, ELEMENTSOF(python_process_fields), sizeof(ProcessRuntime) },
        { "java thread", java_thread_fields, ELEMENTSOF(java_thread_fields), sizeof(ThreadRuntime) },
        { "java process", java_process_fields, ELEMENTSOF(java_process_fields), sizeof(ProcessRuntime) },
        { "runtime thread", generic_thread_fields, ELEMENTSOF(generic_thread_fields), sizeof(ThreadRuntime) },
        { "runtime process", generic_process_fields, ELEMENTSOF(generic_process_fields), sizeof(ProcessRuntime) },
};

/* A value for row I of a table that no other row shares, and that survives its type's JSON form. */
static void fill(const JsonField *f, size_t i, void *base) {
        switch (f->type) {
        case JF_INT:
        case JF_INDEX:
        case JF_PID_OR_NULL:
                *FIELD_AT(base, f, int) = 1000 + (int) i;
                break;
        case JF_U64:
                *FIELD_AT(base, f, uint64_t) = (1ULL << 40) + i;
                break;
        case JF_HEX:
                *FIELD_AT(base, f, uint64_t) = UINT64_MAX - i; /* past 2^53: a number would lose it */
                break;
        case JF_STRING:
                ck_assert_int_ge(asprintf(FIELD_AT(base, f, char *), "value of %s \x1b\n", f->key), 0);
                break;
        case JF_BOOL:
                *FIELD_AT(base, f, bool) = true;
                break;
        case JF_DOUBLE:
                *FIELD_AT(base, f, double) = 1.5 + (double) i;
                break;
        case JF_CHAR:
                *FIELD_AT(base, f, char) = (char) ('D' + i);
                break;
        case JF_UINT:
        case JF_UINT_OR_NULL:
                *FIELD_AT(base, f, unsigned) = 7 + (unsigned) i;
                break;
        case JF_UID:
                *FIELD_AT(base, f, uid_t) = 4000000000U - (uid_t) i; /* past INT32_MAX */
                break;
        case JF_STRV: {
                char **v = calloc(3, sizeof *v);
                ck_assert_ptr_nonnull(v);
                v[0] = strdup(f->key);
                v[1] = strdup("a\nb");
                *FIELD_AT(base, f, char **) = v;
                break;
        }
        }
}

static void same(const JsonField *f, const void *a, const void *b) {
        switch (f->type) {
        case JF_INT:
        case JF_INDEX:
        case JF_PID_OR_NULL:
                ck_assert_int_eq(*FIELD_CAT(a, f, int), *FIELD_CAT(b, f, int));
                break;
        case JF_U64:
        case JF_HEX:
                ck_assert_uint_eq(*FIELD_CAT(a, f, uint64_t), *FIELD_CAT(b, f, uint64_t));
                break;
        case JF_STRING:
                ck_assert_str_eq(*FIELD_CAT(a, f, char *), *FIELD_CAT(b, f, char *));
                break;
        case JF_BOOL:
                ck_assert_int_eq(*FIELD_CAT(a, f, bool), *FIELD_CAT(b, f, bool));
                break;
        case JF_DOUBLE:
                ck_assert_double_eq(*FIELD_CAT(a, f, double), *FIELD_CAT(b, f, double));
                break;
        case JF_CHAR:
                ck_assert_int_eq(*FIELD_CAT(a, f, char), *FIELD_CAT(b, f, char));
                break;
        case JF_UINT:
        case JF_UINT_OR_NULL:
                ck_assert_uint_eq(*FIELD_CAT(a, f, unsigned), *FIELD_CAT(b, f, unsigned));
                break;
        case JF_UID:
                ck_assert_uint_eq(*FIELD_CAT(a, f, uid_t), *FIELD_CAT(b, f, uid_t));
                break;
        case JF_STRV: {
                char *const *x = *FIELD_CAT(a, f, char **), *const *y = *FIELD_CAT(b, f, char **);
                ck_assert_uint_eq(strv_length(x), strv_length(y));
                for (size_t k = 0; x[k]; k++)
                        ck_assert_str_eq(x[k], y[k]);
                break;
        }
        }
}

static void free_strings(const JsonField *fields, size_t n, void *base) {
        for (size_t i = 0; i < n; i++)
                if (fields[i].type == JF_STRING)
                        free(*FIELD_AT(base, &fields[i], char *));
                else if (fields[i].type == JF_STRV)
                        strv_free(*FIELD_AT(base, &fields[i], char **));
}

START_TEST(test_tables_round_trip) {
        for (size_t t = 0; t < ELEMENTSOF(tables); t++) {
                void *in = calloc(1, tables[t].size), *out = calloc(1, tables[t].size);
                json_object *o = json_object_new_object(), *back;

                ck_assert_ptr_nonnull(in);
                ck_assert_ptr_nonnull(out);
                for (size_t i = 0; i < tables[t].n; i++)
                        fill(&tables[t].fields[i], i, in);
                fields_to_json(o, tables[t].fields, tables[t].n, in);
                /* Through text, as the archive and the API carry it. */
                back = json_tokener_parse(json_object_to_json_string(o));
                ck_assert_ptr_nonnull(back);
                ck_assert_int_eq(json_object_object_length(back), (int) tables[t].n);
                ck_assert_int_eq(fields_from_json(back, tables[t].fields, tables[t].n, out), 0);
                for (size_t i = 0; i < tables[t].n; i++)
                        same(&tables[t].fields[i], in, out);
                free_strings(tables[t].fields, tables[t].n, in);
                free_strings(tables[t].fields, tables[t].n, out);
                json_object_put(o);
                json_object_put(back);
                free(in);
                free(out);
        }
}
END_TEST

START_TEST(test_unknown_means_null_or_absent) {
        UserFrame f = { .module = -1 }, g = { .module = 5, .line = 3 };
        KernelFrame k = { .function = (char *) "schedule" };
        json_object *o = json_object_new_object(), *ko = json_object_new_object();

        /* No module, no line: null, and read back as -1 and 0. */
        fields_to_json(o, frame_fields, ELEMENTSOF(frame_fields), &f);
        ck_assert(json_object_object_get_ex(o, "module", NULL));
        ck_assert_ptr_null(json_object_object_get(o, "module"));
        ck_assert_ptr_null(json_object_object_get(o, "line"));
        ck_assert_int_eq(fields_from_json(o, frame_fields, ELEMENTSOF(frame_fields), &g), 0);
        ck_assert_int_eq(g.module, -1);
        ck_assert_uint_eq(g.line, 0);
        free(g.function);
        free(g.file);
        /* A kernel frame of vmlinux has no "module" key at all. */
        fields_to_json(ko, kframe_fields, ELEMENTSOF(kframe_fields), &k);
        ck_assert(!json_object_object_get_ex(ko, "module", NULL));
        json_object_put(o);
        json_object_put(ko);
}
END_TEST

UNIT_TEST_MAIN("snapshot-fields", test_tables_round_trip, test_unknown_means_null_or_absent)
