/* config-yaml.c: the YAML loader: per-mapping key tables → value parsers → offsetof() into Config and Rule, with
 * every problem reported as file:line:column from libyaml's marks. */
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

#include "base/alloc-util.h"
#include "base/escape.h"
#include "base/parse-util.h"
#include "base/strv.h"
#include "config/config-yaml.h"
#include "model/proc-parse.h"

/* Nodes walked per document, an alias counted each time it is walked: stops "billion laughs" alias bombs. The
 * bound is in work, relative to the document: aliases may make the walk this many times the document's own nodes
 * (a rule's list reused in a few rules), plus a floor for small files, and never more than the absolute cap. A
 * 10 KB bomb then stops after ~30k visits instead of 1M (3.4 s and 460 MB under ASan, where it timed out). */
#define CONFIG_YAML_VISITS_FACTOR 10U
#define CONFIG_YAML_VISITS_FLOOR 10000U
#define CONFIG_YAML_VISITS_MAX 1000000U
/* Bytes of a user-supplied value shown in an error message. */
#define CONFIG_YAML_QUOTE_MAX 64
/* Keys per table: the seen-set of a mapping is a 32-bit mask. */
#define CONFIG_YAML_TABLE_KEYS_MAX 32
/* getpwnam_r() buffer: start here, double up to the limit on ERANGE. */
#define CONFIG_YAML_PWBUF_MIN 1024
#define CONFIG_YAML_PWBUF_MAX (1024 * 1024)

#define DURATION_EXAMPLE "a duration like 120s, 5m or 1.5h"
#define SIZE_EXAMPLE "a size like 512M, 1G or 4096"

typedef enum ConfigNodeKind {
        CONFIG_NODE_SCALAR,
        CONFIG_NODE_LIST,
        CONFIG_NODE_SCALAR_OR_LIST,
        CONFIG_NODE_MAPPING,
} ConfigNodeKind;

typedef struct ConfigParser ConfigParser;
typedef struct ConfigKey ConfigKey;
typedef struct ConfigTable ConfigTable;

/* Parse NODE (already checked to be of the key's kind) into the struct at BASE, normally into the field at
 * K->offset. Returns 0, -EINVAL after recording an error, or -ENOMEM. */
typedef int (*ConfigParseFn)(ConfigParser *p, const ConfigKey *k, yaml_node_t *node, void *base);

struct ConfigKey {
        const char *key;
        ConfigNodeKind kind;
        ConfigParseFn parse;
        size_t offset;
        uint64_t min, max;              /* numbers, sizes and durations: the allowed range, inclusive */
        const ConfigTable *table;       /* CONFIG_NODE_MAPPING: the keys of the nested mapping */
};

struct ConfigTable {
        const char *where;              /* for "unknown key … in <where>" */
        const ConfigKey *keys;
        size_t n_keys;
};

struct ConfigParser {
        const char *path;
        const char *data;
        size_t size;
        const ConfigYamlOptions *o;
        yaml_document_t *doc;
        ConfigErrors *errs;
        unsigned visits, visits_max;
        bool too_complex;
        bool has_rules;
        bool failed;
};

#define FIELD(base, k, type) ((type *) ((uint8_t *) (base) + (k)->offset))

/* ---- errors ---- */

static int parser_error_at(ConfigParser *p, yaml_mark_t mark, const char *fmt, ...) _printf_(3, 4);
static int parser_error_at(ConfigParser *p, yaml_mark_t mark, const char *fmt, ...) {
        _cleanup_free_ char *m = NULL;
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = vasprintf(&m, fmt, ap);
        va_end(ap);
        if (r < 0) {
                m = NULL;
                return -ENOMEM;
        }
        p->failed = true;
        r = config_errors_add(p->errs, p->path, (unsigned) mark.line + 1, (unsigned) mark.column + 1, "%s", m);
        return r < 0 ? r : -EINVAL;
}
#define parser_error(p, node, ...) parser_error_at((p), (node)->start_mark, __VA_ARGS__)

/* "VALUE" with control characters escaped and long values cut; NULL on OOM. */
static char *quote(const char *s, size_t len) {
        _cleanup_free_ char *e = escape_cstring(s, MIN(len, (size_t) CONFIG_YAML_QUOTE_MAX));
        char *q;

        if (!e || asprintf(&q, "\"%s%s\"", e, len > CONFIG_YAML_QUOTE_MAX ? "..." : "") < 0)
                return NULL;
        return q;
}

/* What a node is, for "got …". */
static char *describe(const yaml_node_t *n) {
        switch (n->type) {
        case YAML_SCALAR_NODE:
                if (n->data.scalar.length == 0)
                        return strdup("an empty value");
                return quote((const char *) n->data.scalar.value, n->data.scalar.length);
        case YAML_SEQUENCE_NODE:
                return strdup("a list");
        case YAML_MAPPING_NODE:
                return strdup("a mapping");
        default:
                return strdup("nothing");
        }
}

/* "expected WHAT, got …". */
static int parser_expected(ConfigParser *p, const yaml_node_t *node, const char *what) {
        _cleanup_free_ char *d = describe(node);

        if (!d)
                return -ENOMEM;
        return parser_error(p, node, "expected %s, got %s", what, d);
}

/* "KEY" must be between MIN and MAX, got "VALUE". */
static int parser_range(ConfigParser *p, const ConfigKey *k, const yaml_node_t *node, const char *min,
                        const char *max) {
        _cleanup_free_ char *d = describe(node);

        if (!d)
                return -ENOMEM;
        return parser_error(p, node, "\"%s\" must be between %s and %s, got %s", k->key, min, max, d);
}

/* Merge one step's result into a running one: -ENOMEM wins, any error makes it -EINVAL. */
static int merge(int acc, int r) {
        if (acc == -ENOMEM || r == -ENOMEM)
                return -ENOMEM;
        return acc < 0 || r < 0 ? -EINVAL : 0;
}

/* ---- walking the document ---- */

static const char *scalar(const yaml_node_t *node) {
        return (const char *) node->data.scalar.value;
}

static int parser_visit(ConfigParser *p, int index, yaml_node_t **ret) {
        yaml_node_t *n;

        if (p->too_complex)
                return -EINVAL;
        n = yaml_document_get_node(p->doc, index);
        if (!n)
                return -EINVAL; /* libyaml composed the document: every index is valid */
        if (++p->visits > p->visits_max) {
                p->too_complex = true;
                return parser_error(p, n, "document too complex: more than %u nodes to walk (nested aliases?)",
                                    p->visits_max);
        }
        /* A "\0" escape puts a NUL inside a value: refused here, so that every scalar is a C string after. */
        if (n->type == YAML_SCALAR_NODE && strlen(scalar(n)) != n->data.scalar.length)
                return parser_error(p, n, "unexpected NUL byte in a value");
        *ret = n;
        return 0;
}

/* A plain "", "~" or "null": YAML's null, as an empty document has. */
static bool is_null(const yaml_node_t *n) {
        const char *v = scalar(n);

        return n->type == YAML_SCALAR_NODE && n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
               (streq(v, "") || streq(v, "~") || streq(v, "null"));
}

static bool kind_matches(ConfigNodeKind kind, const yaml_node_t *n) {
        switch (kind) {
        case CONFIG_NODE_SCALAR:
                return n->type == YAML_SCALAR_NODE;
        case CONFIG_NODE_LIST:
                return n->type == YAML_SEQUENCE_NODE;
        case CONFIG_NODE_SCALAR_OR_LIST:
                return n->type == YAML_SCALAR_NODE || n->type == YAML_SEQUENCE_NODE;
        case CONFIG_NODE_MAPPING:
                return n->type == YAML_MAPPING_NODE;
        }
        return false;
}

static const char *kind_to_string(ConfigNodeKind kind) {
        switch (kind) {
        case CONFIG_NODE_SCALAR:
                return "a single value";
        case CONFIG_NODE_LIST:
                return "a list";
        case CONFIG_NODE_SCALAR_OR_LIST:
                return "a list or a string";
        case CONFIG_NODE_MAPPING:
                return "a mapping";
        }
        return "something else";
}

static int unknown_key(ConfigParser *p, const ConfigTable *t, const yaml_node_t *key, const char *name) {
        _cleanup_free_ char *q = quote(name, strlen(name)), *list = NULL;
        size_t len = 0;

        if (!q)
                return -ENOMEM;
        for (size_t i = 0; i < t->n_keys; i++)
                len += strlen(t->keys[i].key) + 2;
        list = malloc(len + 1);
        if (!list)
                return -ENOMEM;
        list[0] = 0;
        for (size_t i = 0; i < t->n_keys; i++) {
                if (i > 0)
                        strcat(list, ", ");
                strcat(list, t->keys[i].key);
        }
        return parser_error(p, key, "unknown key %s %s (expected one of: %s)", q, t->where, list);
}

/* Walk the pairs of mapping NODE through table T into BASE. *RET_SEEN gets one bit per table key present. */
static int walk_mapping(ConfigParser *p, const ConfigTable *t, yaml_node_t *node, void *base, uint32_t *ret_seen) {
        yaml_mark_t marks[CONFIG_YAML_TABLE_KEYS_MAX];
        uint32_t seen = 0;
        int ret = 0, r;

        for (yaml_node_pair_t *pair = node->data.mapping.pairs.start; pair < node->data.mapping.pairs.top; pair++) {
                const ConfigKey *k = NULL;
                yaml_node_t *key, *value;
                const char *name;
                size_t i;

                r = parser_visit(p, pair->key, &key);
                if (r >= 0)
                        r = parser_visit(p, pair->value, &value);
                if (r < 0) {
                        ret = merge(ret, r);
                        if (ret == -ENOMEM || p->too_complex)
                                break;
                        continue;
                }
                if (key->type != YAML_SCALAR_NODE) {
                        ret = merge(ret, parser_expected(p, key, "a key name"));
                        continue;
                }
                name = scalar(key);
                for (i = 0; i < t->n_keys; i++)
                        if (streq(t->keys[i].key, name)) {
                                k = &t->keys[i];
                                break;
                        }
                if (!k)
                        r = unknown_key(p, t, key, name);
                else if (seen & (1U << i))
                        r = parser_error(p, key, "duplicate key \"%s\" (first set at line %u, column %u)", k->key,
                                         (unsigned) marks[i].line + 1, (unsigned) marks[i].column + 1);
                else if (k->kind == CONFIG_NODE_MAPPING && is_null(value)) {
                        /* "archive:" with every setting under it commented out, as the shipped file has it. */
                        seen |= 1U << i;
                        marks[i] = key->start_mark;
                        r = 0;
                } else if (!kind_matches(k->kind, value)) {
                        _cleanup_free_ char *d = describe(value);
                        seen |= 1U << i;
                        marks[i] = key->start_mark;
                        r = d ? parser_error(p, value, "expected %s for \"%s\", got %s", kind_to_string(k->kind),
                                             k->key, d)
                              : -ENOMEM;
                } else {
                        seen |= 1U << i;
                        marks[i] = key->start_mark;
                        r = k->parse(p, k, value, base);
                }
                ret = merge(ret, r);
                if (ret == -ENOMEM || p->too_complex)
                        break;
        }
        if (ret_seen)
                *ret_seen = seen;
        return ret;
}

static bool table_seen(const ConfigTable *t, uint32_t seen, const char *key) {
        for (size_t i = 0; i < t->n_keys; i++)
                if (streq(t->keys[i].key, key))
                        return seen & (1U << i);
        return false;
}

/* Call FN for a scalar, or for each scalar of a non-empty list. */
typedef int (*ConfigItemFn)(ConfigParser *p, const ConfigKey *k, const yaml_node_t *item, const char *value,
                            void *userdata);

static int for_each_item(ConfigParser *p, const ConfigKey *k, yaml_node_t *node, ConfigItemFn fn, void *userdata) {
        int ret = 0, r;

        if (node->type == YAML_SCALAR_NODE)
                return fn(p, k, node, scalar(node), userdata);
        if (node->data.sequence.items.start == node->data.sequence.items.top)
                return parser_error(p, node, "expected at least one value for \"%s\"", k->key);
        for (yaml_node_item_t *i = node->data.sequence.items.start; i < node->data.sequence.items.top; i++) {
                yaml_node_t *item;

                r = parser_visit(p, *i, &item);
                if (r >= 0) {
                        if (item->type != YAML_SCALAR_NODE) {
                                _cleanup_free_ char *d = describe(item);
                                r = d ? parser_error(p, item, "expected a string in the list for \"%s\", got %s",
                                                     k->key, d)
                                      : -ENOMEM;
                        } else
                                r = fn(p, k, item, scalar(item), userdata);
                }
                ret = merge(ret, r);
                if (ret == -ENOMEM || p->too_complex)
                        break;
        }
        return ret;
}

/* ---- value parsers for the tables ---- */

static int parse_section(ConfigParser *p, const ConfigKey *k, yaml_node_t *node, void *base) {
        return walk_mapping(p, k->table, node, base, NULL);
}

static int parse_path(ConfigParser *p, const ConfigKey *k, yaml_node_t *node, void *base) {
        char **field = FIELD(base, k, char *), *s;
        const char *v = scalar(node);

        if (v[0] != '/')
                return parser_expected(p, node, "an absolute path");
        s = strdup(v);
        if (!s)
                return -ENOMEM;
        free(*field);
        *field = s;
        return 0;
}

/* An unsigned whole number within the key's range into *RET. */
static int scalar_u64(ConfigParser *p, const ConfigKey *k, yaml_node_t *node, uint64_t *ret) {
        char min[24], max[24];
        const char *v = scalar(node);
        uint64_t u;
        int r;

        r = safe_atou64(v, &u);
        if (r == -EINVAL)
                return parser_expected(p, node, "a whole number");
        if (r < 0 || u < k->min || u > k->max) {
                snprintf(min, sizeof min, "%llu", (unsigned long long) k->min);
                snprintf(max, sizeof max, "%llu", (unsigned long long) k->max);
                return parser_range(p, k, node, min, max);
        }
        *ret = u;
        return 0;
}

static int parse_u64(ConfigParser *p, const ConfigKey *k, yaml_node_t *node, void *base) {
        return scalar_u64(p, k, node, FIELD(base, k, uint64_t));
}

static int parse_unsigned(ConfigParser *p, const ConfigKey *k, yaml_node_t *node, void *base) {
        uint64_t u;
        int r;

        assert_cc(sizeof(unsigned) == sizeof(uint32_t));
        r = scalar_u64(p, k, node, &u);
        if (r < 0)
                return r;
        *FIELD(base, k, unsigned) = (unsigned) u; /* the table's max keeps it in range */
        return 0;
}

static int scalar_duration(ConfigParser *p, const ConfigKey *k, yaml_node_t *node, uint64_t *ret) {
        char min[CONFIG_FORMAT_MAX], max[CONFIG_FORMAT_MAX];
        const char *v = scalar(node);
        uint64_t u;
        int r;

        r = config_parse_duration(v, &u);
        if (r == -EINVAL)
                return parser_expected(p, node, DURATION_EXAMPLE);
        if (r < 0 || u < k->min || u > k->max)
                return parser_range(p, k, node, config_format_duration(min, sizeof min, k->min),
                                    config_format_duration(max, sizeof max, k->max));
        *ret = u;
        return 0;
}

static int parse_duration(ConfigParser *p, const ConfigKey *k, yaml_node_t *node, void *base) {
        return scalar_duration(p, k, node, FIELD(base, k, uint64_t));
}

static int parse_size(ConfigParser *p, const ConfigKey *k, yaml_node_t *node, void *base) {
        char min[CONFIG_FORMAT_MAX], max[CONFIG_FORMAT_MAX];
        const char *v = scalar(node);
        uint64_t u;
        int r;

        r = config_parse_size(v, &u);
        if (r == -EINVAL)
                return parser_expected(p, node, SIZE_EXAMPLE);
        if (r < 0 || u < k->min || u > k->max)
                return parser_range(p, k, node, config_format_size(min, sizeof min, k->min),
                                    config_format_size(max, sizeof max, k->max));
        *FIELD(base, k, uint64_t) = u;
        return 0;
}

static int parse_bool(ConfigParser *p, const ConfigKey *k, yaml_node_t *node, void *base) {
        const char *v = scalar(node);

        if (config_parse_bool(v, FIELD(base, k, bool)) < 0)
                return parser_expected(p, node, "a boolean (true/false, yes/no, on/off)");
        return 0;
}

/* "auto", or an explicit duration (sets Config.poll_interval_auto too). */
static int parse_poll_interval(ConfigParser *p, const ConfigKey *k, yaml_node_t *node, void *base) {
        Config *c = base;
        const char *v = scalar(node);
        int r;

        if (streq(v, "auto")) {
                c->poll_interval_auto = true;
                return 0;
        }
        if (config_parse_duration(v, &(uint64_t) { 0 }) == -EINVAL)
                return parser_expected(p, node, "\"auto\" or " DURATION_EXAMPLE);
        r = scalar_duration(p, k, node, FIELD(base, k, uint64_t));
        if (r < 0)
                return r;
        c->poll_interval_auto = false;
        return 0;
}

/* "a, b, c": the names TO_STRING gives for 0..MAX-1 (NULL: not offered), into BUF. */
static const char *names_list(char *buf, size_t size, const char *(*to_string)(int), int max) {
        buf[0] = 0;
        for (int i = 0; i < max; i++) {
                if (!to_string(i))
                        continue;
                if (buf[0])
                        strncat(buf, ", ", size - strlen(buf) - 1);
                strncat(buf, to_string(i), size - strlen(buf) - 1);
        }
        return buf;
}

/* "unknown WHAT "VALUE" (expected one of: a, b, c)" for an enum. */
static int unknown_name(ConfigParser *p, const yaml_node_t *node, const char *what, const char *value,
                        const char *(*to_string)(int), int max) {
        _cleanup_free_ char *q = quote(value, strlen(value));
        char list[256];

        if (!q)
                return -ENOMEM;
        return parser_error(p, node, "unknown %s %s (expected one of: %s)", what, q,
                            names_list(list, sizeof list, to_string, max));
}

/* Adapters from the enums' typed *_to_string() to the int form unknown_name() iterates with. */
static const char *method_name(int i) {
        return i == CAPTURE_METHOD_NONE ? NULL : capture_method_to_string((CaptureMethod) i);
}
static const char *unwinder_name(int i) {
        return unwinder_kind_to_string((UnwinderKind) i);
}
static const char *class_name(int i) {
        return thread_class_to_string((ThreadClass) i);
}
static const char *action_name(int i) {
        return rule_action_type_to_string((RuleActionType) i);
}
static const char *severity_name(int i) {
        return rule_severity_to_string((RuleSeverity) i);
}

static const char *journal_mode_name(int i) {
        return config_journal_to_string((ConfigJournal) i);
}

static const char *scan_source_name(int i) {
        return config_scan_source_to_string((ConfigScanSource) i);
}

static int parse_scan_source(ConfigParser *p, const ConfigKey *k, yaml_node_t *node, void *base) {
        const char *v = scalar(node);
        ConfigScanSource src = config_scan_source_from_string(v);

        if (src < 0)
                return unknown_name(p, node, "scan source", v, scan_source_name, _CONFIG_SCAN_SOURCE_MAX);
#ifndef HAVE_BPF
        if (src == CONFIG_SCAN_BPF)
                return parser_error(p, node, "scan source \"bpf\" is not available in this build (configure "
                                             "--with-bpf)");
#endif
        *FIELD(base, k, ConfigScanSource) = src;
        return 0;
}

static int parse_journal_mode(ConfigParser *p, const ConfigKey *k, yaml_node_t *node, void *base) {
        const char *v = scalar(node);
        ConfigJournal j = config_journal_from_string(v);

        if (j < 0)
                return unknown_name(p, node, "journal mode", v, journal_mode_name, _CONFIG_JOURNAL_MAX);
        *FIELD(base, k, ConfigJournal) = j;
        return 0;
}

static int parse_capture_method(ConfigParser *p, const ConfigKey *k, yaml_node_t *node, void *base) {
        CaptureMethod m;
        const char *v = scalar(node);

        /* "none" describes a capture that got no registers; it is not a method one can ask for. */
        m = capture_method_from_string(v);
        if (m < 0 || m == CAPTURE_METHOD_NONE)
                return unknown_name(p, node, "capture method", v, method_name, _CAPTURE_METHOD_MAX);
        *FIELD(base, k, CaptureMethod) = m;
        return 0;
}

static int parse_unwinder(ConfigParser *p, const ConfigKey *k, yaml_node_t *node, void *base) {
        UnwinderKind u;
        const char *v = scalar(node);

        u = unwinder_kind_from_string(v);
        if (u < 0)
                return unknown_name(p, node, "unwinder", v, unwinder_name, _UNWINDER_MAX);
        if (!unwinder_kind_available(u))
                return parser_error(p, node, "unwinder \"%s\" is not available in this build", v);
        *FIELD(base, k, UnwinderKind) = u;
        return 0;
}

/* ---- rule fields ---- */

static int parse_rule_name(ConfigParser *p, _unused_ const ConfigKey *k, yaml_node_t *node, void *base) {
        Rule *rule = base;
        const char *v = scalar(node);

        if (!rule_name_is_valid(v)) {
                _cleanup_free_ char *q = quote(v, strlen(v));
                return q ? parser_error(p, node,
                                        "invalid rule name %s (expected 1 to %d characters of A-Z, a-z, 0-9, "
                                        "'_', '.' and '-')",
                                        q, RULE_NAME_MAX)
                         : -ENOMEM;
        }
        rule->name = strdup(v);
        if (!rule->name)
                return -ENOMEM;
        rule->line = (unsigned) node->start_mark.line + 1;
        rule->column = (unsigned) node->start_mark.column + 1;
        return 0;
}

static int class_item(ConfigParser *p, const ConfigKey *k, const yaml_node_t *item, const char *v, void *userdata) {
        ThreadClass c = thread_class_from_string(v);

        if (c < 0)
                return unknown_name(p, item, "thread class", v, class_name, _THREAD_CLASS_MAX);
        *FIELD(userdata, k, unsigned) |= 1U << c;
        return 0;
}

static int parse_rule_classes(ConfigParser *p, const ConfigKey *k, yaml_node_t *node, void *base) {
        return for_each_item(p, k, node, class_item, base);
}

static int state_item(ConfigParser *p, const ConfigKey *k, const yaml_node_t *item, const char *v, void *userdata) {
        char **states = FIELD(userdata, k, char *), *n;
        size_t len;

        if (strlen(v) != 1 || !strchr(RULE_STATES, v[0])) {
                _cleanup_free_ char *q = quote(v, strlen(v));
                char list[3 * sizeof(RULE_STATES)] = "";

                if (!q)
                        return -ENOMEM;
                for (size_t i = 0; i < strlen(RULE_STATES); i++)
                        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%c", i > 0 ? ", " : "",
                                 RULE_STATES[i]);
                return parser_error(p, item, "unknown thread state %s (expected one of: %s)", q, list);
        }
        if (*states && strchr(*states, v[0]))
                return 0;
        len = *states ? strlen(*states) : 0;
        n = realloc(*states, len + 2);
        if (!n)
                return -ENOMEM;
        n[len] = v[0];
        n[len + 1] = 0;
        *states = n;
        return 0;
}

static int parse_rule_states(ConfigParser *p, const ConfigKey *k, yaml_node_t *node, void *base) {
        return for_each_item(p, k, node, state_item, base);
}

static int glob_item(ConfigParser *p, const ConfigKey *k, const yaml_node_t *item, const char *v, void *userdata) {
        char ***globs = FIELD(userdata, k, char **);

        if (v[0] == 0)
                return parser_expected(p, item, "a glob pattern");
        return strv_extend(globs, v);
}

static int parse_globs(ConfigParser *p, const ConfigKey *k, yaml_node_t *node, void *base) {
        return for_each_item(p, k, node, glob_item, base);
}

/* A user name (looked up now, so a typo is an error at load and not a rule that never matches), or a uid. */
static int lookup_user(const char *name, uid_t *ret) {
        size_t size = CONFIG_YAML_PWBUF_MIN;

        for (;;) {
                _cleanup_free_ char *buf = malloc(size);
                struct passwd pw, *result = NULL;
                int r;

                if (!buf)
                        return -ENOMEM;
                r = getpwnam_r(name, &pw, buf, size, &result);
                if (r == ERANGE && size < CONFIG_YAML_PWBUF_MAX) {
                        size *= 2;
                        continue;
                }
                if (r != 0)
                        return -r;
                if (!result)
                        return -ESRCH;
                *ret = pw.pw_uid;
                return 0;
        }
}

static int parse_rule_user(ConfigParser *p, _unused_ const ConfigKey *k, yaml_node_t *node, void *base) {
        _cleanup_free_ char *q = NULL;
        Rule *rule = base;
        const char *v = scalar(node);
        unsigned uid;
        uid_t u = 0;
        int r;

        q = quote(v, strlen(v));
        if (!q)
                return -ENOMEM;
        if (v[0] >= '0' && v[0] <= '9') {
                r = safe_atou(v, &uid);
                if (r < 0 || (uid_t) uid == (uid_t) -1)
                        return parser_error(p, node, "invalid uid %s", q);
                u = (uid_t) uid;
        } else {
                r = lookup_user(v, &u);
                if (r == -ENOMEM)
                        return r;
                if (r == -ESRCH)
                        return parser_error(p, node, "unknown user %s", q);
                if (r < 0)
                        return parser_error(p, node, "cannot look up user %s: %s", q, strerror(-r));
        }
        rule->has_user = true;
        rule->user = u;
        return 0;
}

/* The number of the syscall NAME on the architecture we run on. x86-64 names that the generic table of aarch64
 * lacks stand for the call its C library makes instead, so that a rule written on one machine means the same
 * on the other: epoll_wait() is epoll_pwait there, poll() ppoll, open() openat. */
static int64_t syscall_from_name(const char *name) {
        static const struct {
                const char *name, *generic;
        } aliases[] = {
                { "open", "openat" },         { "creat", "openat" },        { "poll", "ppoll" },
                { "select", "pselect6" },     { "epoll_wait", "epoll_pwait" }, { "stat", "newfstatat" },
                { "lstat", "newfstatat" },    { "access", "faccessat" },    { "readlink", "readlinkat" },
                { "mkdir", "mkdirat" },       { "unlink", "unlinkat" },     { "rmdir", "unlinkat" },
                { "rename", "renameat" },     { "pause", "rt_sigsuspend" }, { "dup2", "dup3" },
                { "pipe", "pipe2" },          { "fork", "clone" },          { "vfork", "clone" },
                { "epoll_create", "epoll_create1" }, { "getdents", "getdents64" },
        };
        int64_t nr = syscall_nr_from_name(name);

        for (size_t i = 0; nr < 0 && i < ELEMENTSOF(aliases); i++)
                if (streq(aliases[i].name, name))
                        nr = syscall_nr_from_name(aliases[i].generic);
        return nr;
}

static int syscall_item(ConfigParser *p, _unused_ const ConfigKey *k, const yaml_node_t *item, const char *v,
                        void *userdata) {
        Rule *rule = userdata;
        int64_t nr = syscall_from_name(v);

        if (nr < 0) {
                _cleanup_free_ char *q = quote(v, strlen(v));
                return q ? parser_error(p, item, "unknown syscall %s (expected a syscall name like read or futex)",
                                                 q)
                         : -ENOMEM;
        }
        if (!GREEDY_REALLOC(rule->syscalls, rule->n_syscalls_allocated, rule->n_syscalls + 1))
                return -ENOMEM;
        rule->syscalls[rule->n_syscalls++] = nr;
        return 0;
}

static int parse_rule_syscalls(ConfigParser *p, const ConfigKey *k, yaml_node_t *node, void *base) {
        return for_each_item(p, k, node, syscall_item, base);
}

static int parse_rule_cpu_min(ConfigParser *p, const ConfigKey *k, yaml_node_t *node, void *base) {
        unsigned max = 100 * p->o->ncpu;
        char smax[24];
        const char *v = scalar(node);
        double d;
        int r;

        r = config_parse_decimal(v, &d);
        if (r == -EINVAL)
                return parser_expected(p, node, "a CPU percentage like 50 or 12.5");
        if (r < 0 || d > max) {
                snprintf(smax, sizeof smax, "%u", max);
                return parser_range(p, k, node, "0", smax);
        }
        *FIELD(base, k, double) = d;
        return 0;
}

static int action_item(ConfigParser *p, const ConfigKey *k, const yaml_node_t *item, const char *v, void *userdata) {
        RuleActionType a = rule_action_type_from_string(v);

        if (a < 0)
                return unknown_name(p, item, "action", v, action_name, _RULE_ACTION_TYPE_MAX);
        *FIELD(userdata, k, unsigned) |= 1U << a;
        return 0;
}

static int parse_rule_actions(ConfigParser *p, const ConfigKey *k, yaml_node_t *node, void *base) {
        *FIELD(base, k, unsigned) = 0; /* a list given replaces the default actions */
        return for_each_item(p, k, node, action_item, base);
}

static int parse_rule_severity(ConfigParser *p, const ConfigKey *k, yaml_node_t *node, void *base) {
        const char *v = scalar(node);
        RuleSeverity s = rule_severity_from_string(v);

        if (s < 0)
                return unknown_name(p, node, "severity", v, severity_name, _RULE_SEVERITY_MAX);
        *FIELD(base, k, RuleSeverity) = s;
        return 0;
}

/* ---- http and hooks ---- */

/* An absolute path, or "none" for no unix socket at all. */
static int parse_socket_path(ConfigParser *p, const ConfigKey *k, yaml_node_t *node, void *base) {
        char **field = FIELD(base, k, char *);

        if (streq(scalar(node), "none")) {
                free(*field);
                *field = NULL;
                return 0;
        }
        if (scalar(node)[0] != '/')
                return parser_expected(p, node, "an absolute path or \"none\"");
        return parse_path(p, k, node, base);
}

static int parse_mode(ConfigParser *p, const ConfigKey *k, yaml_node_t *node, void *base) {
        if (config_parse_mode(scalar(node), FIELD(base, k, unsigned)) < 0)
                return parser_expected(p, node, "an octal file mode like 0660");
        return 0;
}

/* A group name or gid, looked up now so that a typo is an error at load. */
static int parse_group(ConfigParser *p, _unused_ const ConfigKey *k, yaml_node_t *node, void *base) {
        Config *c = base;
        const char *v = scalar(node);
        size_t size = CONFIG_YAML_PWBUF_MIN;
        unsigned gid;

        if (safe_atou(v, &gid) >= 0) {
                c->http_socket_gid = (gid_t) gid;
                c->has_http_socket_group = true;
                return 0;
        }
        for (;;) {
                _cleanup_free_ char *buf = malloc(size);
                struct group gr, *result = NULL;
                int r;

                if (!buf)
                        return -ENOMEM;
                r = getgrnam_r(v, &gr, buf, size, &result);
                if (r == ERANGE && size < CONFIG_YAML_PWBUF_MAX) {
                        size *= 2;
                        continue;
                }
                if (r != 0 || !result) {
                        _cleanup_free_ char *q = quote(v, strlen(v));
                        return q ? parser_error(p, node, "no such group %s", q) : -ENOMEM;
                }
                c->http_socket_gid = gr.gr_gid;
                c->has_http_socket_group = true;
                return 0;
        }
}

static int parse_listen(ConfigParser *p, const ConfigKey *k, yaml_node_t *node, void *base) {
        char **field = FIELD(base, k, char *), *s;

        if (config_parse_listen(scalar(node), NULL, NULL) < 0)
                return parser_expected(p, node, "a listen address like 9177, 127.0.0.1:9177 or [::1]:9177");
        s = strdup(scalar(node));
        if (!s)
                return -ENOMEM;
        free(*field);
        *field = s;
        return 0;
}

static int argv_item(ConfigParser *p, const ConfigKey *k, const yaml_node_t *item, const char *v, void *userdata) {
        char ***argv = FIELD(userdata, k, char **);
        size_t len = strv_length(*argv);
        int r = 0;

        if (len >= CONFIG_HOOK_ARGS_MAX)
                return parser_error(p, item, "too many arguments (at most %d)", CONFIG_HOOK_ARGS_MAX);
        if (len == 0 && v[0] != '/')
                r = parser_expected(p, item, "an absolute path to the program (hooks run without a shell or $PATH)");
        /* Kept even when bad, so that the arguments after it are not taken for the program. */
        return strv_extend(argv, v) < 0 ? -ENOMEM : r;
}

/* A command: the program's absolute path alone, or a list of it and its arguments (argv, never a shell line). */
static int parse_argv(ConfigParser *p, const ConfigKey *k, yaml_node_t *node, void *base) {
        char ***argv = FIELD(base, k, char **);

        *argv = strv_free(*argv); /* a later key replaces an earlier one */
        return for_each_item(p, k, node, argv_item, base);
}

/* symbols.cache_dir: an absolute path, or "off". */
static int parse_cache_dir(ConfigParser *p, const ConfigKey *k, yaml_node_t *node, void *base) {
        Config *c = base;

        if (streq(scalar(node), "off")) {
                c->symbols_cache_dir = mfree(c->symbols_cache_dir);
                c->symbols_cache_off = true;
                return 0;
        }
        if (scalar(node)[0] != '/')
                return parser_expected(p, node, "an absolute path or \"off\"");
        c->symbols_cache_off = false;
        return parse_path(p, k, node, base);
}

/* symbols.debuginfod: server URLs separated by spaces (as DEBUGINFOD_URLS), or "off". */
static int parse_debuginfod(ConfigParser *p, _unused_ const ConfigKey *k, yaml_node_t *node, void *base) {
        Config *c = base;
        const char *v = scalar(node);
        char *s;

        if (streq(v, "off")) {
                c->symbols_debuginfod = mfree(c->symbols_debuginfod);
                c->symbols_debuginfod_off = true;
                return 0;
        }
        if (strlen(v) > CONFIG_DEBUGINFOD_URLS_MAX)
                return parser_error(p, node, "too long (at most %d characters)", CONFIG_DEBUGINFOD_URLS_MAX);
        for (const char *u = v + strspn(v, " "); *u; u += strcspn(u, " "), u += strspn(u, " "))
                if (!startswith(u, "http://") && !startswith(u, "https://") && !startswith(u, "file://"))
                        return parser_expected(p, node, "debuginfod URLs (http://, https:// or file://) separated by "
                                                        "spaces, or \"off\"");
        if (v[strspn(v, " ")] == 0)
                return parser_expected(p, node, "at least one debuginfod URL, or \"off\"");
        s = strdup(v);
        if (!s)
                return -ENOMEM;
        free(c->symbols_debuginfod);
        c->symbols_debuginfod = s;
        c->symbols_debuginfod_off = false;
        return 0;
}

/* ---- the tables ---- */

#define KEY(name, kind_, fn, type, field, ...)                                          \
        { .key = (name), .kind = (kind_), .parse = (fn), .offset = offsetof(type, field), __VA_ARGS__ }

/* A nested mapping whose keys are fields of the same struct. */
#define SECTION(name, table_) { .key = (name), .kind = CONFIG_NODE_MAPPING, .parse = parse_section, .table = (table_) }

static const ConfigKey archive_keys[] = {
        KEY("directory", CONFIG_NODE_SCALAR, parse_path, Config, archive_dir),
        KEY("max_snapshots", CONFIG_NODE_SCALAR, parse_u64, Config, max_snapshots, .min = CONFIG_MAX_SNAPSHOTS_MIN,
            .max = CONFIG_MAX_SNAPSHOTS_MAX),
        KEY("max_size", CONFIG_NODE_SCALAR, parse_size, Config, max_size, .min = CONFIG_MAX_SIZE_MIN,
            .max = CONFIG_SIZE_MAX),
        KEY("max_age", CONFIG_NODE_SCALAR, parse_duration, Config, max_age_usec, .min = CONFIG_MAX_AGE_MIN_USEC,
            .max = CONFIG_MAX_AGE_MAX_USEC),
        KEY("keep_free", CONFIG_NODE_SCALAR, parse_size, Config, keep_free, .min = 0, .max = CONFIG_SIZE_MAX),
        KEY("journal", CONFIG_NODE_SCALAR, parse_journal_mode, Config, journal),
        KEY("journal_max_size", CONFIG_NODE_SCALAR, parse_size, Config, journal_max_size,
            .min = CONFIG_JOURNAL_MAX_SIZE_MIN, .max = CONFIG_JOURNAL_MAX_SIZE_MAX),
        KEY("every_firing", CONFIG_NODE_SCALAR, parse_bool, Config, every_firing),
};
static const ConfigTable archive_table = { "in \"archive\"", archive_keys, ELEMENTSOF(archive_keys) };

static const ConfigKey capture_keys[] = {
        KEY("max_per_minute", CONFIG_NODE_SCALAR, parse_unsigned, Config, max_per_minute,
            .min = CONFIG_MAX_PER_MINUTE_MIN, .max = CONFIG_MAX_PER_MINUTE_MAX),
        KEY("method", CONFIG_NODE_SCALAR, parse_capture_method, Config, method),
        KEY("unwinder", CONFIG_NODE_SCALAR, parse_unwinder, Config, unwinder),
        KEY("max_frames", CONFIG_NODE_SCALAR, parse_unsigned, Config, max_frames, .min = CONFIG_MAX_FRAMES_MIN,
            .max = CONFIG_MAX_FRAMES_MAX),
        KEY("max_threads", CONFIG_NODE_SCALAR, parse_unsigned, Config, max_threads, .min = CONFIG_MAX_THREADS_MIN,
            .max = CONFIG_MAX_THREADS_MAX),
        KEY("stack_bytes", CONFIG_NODE_SCALAR, parse_size, Config, stack_bytes, .min = CONFIG_STACK_BYTES_MIN,
            .max = CONFIG_STACK_BYTES_MAX),
        KEY("time_budget", CONFIG_NODE_SCALAR, parse_duration, Config, time_budget_usec,
            .min = CONFIG_TIME_BUDGET_MIN_USEC, .max = CONFIG_TIME_BUDGET_MAX_USEC),
        KEY("kernel", CONFIG_NODE_SCALAR, parse_bool, Config, kernel),
        KEY("java", CONFIG_NODE_SCALAR, parse_bool, Config, java),
        KEY("node", CONFIG_NODE_SCALAR, parse_bool, Config, node),
        KEY("ruby", CONFIG_NODE_SCALAR, parse_bool, Config, ruby),
};
static const ConfigTable capture_table = { "in \"capture\"", capture_keys, ELEMENTSOF(capture_keys) };

static const ConfigKey http_keys[] = {
        KEY("socket", CONFIG_NODE_SCALAR, parse_socket_path, Config, http_socket),
        KEY("socket_mode", CONFIG_NODE_SCALAR, parse_mode, Config, http_socket_mode),
        KEY("socket_group", CONFIG_NODE_SCALAR, parse_group, Config, http_socket_gid),
        KEY("listen", CONFIG_NODE_SCALAR, parse_listen, Config, http_listen),
        KEY("token_file", CONFIG_NODE_SCALAR, parse_path, Config, http_token_file),
        KEY("read_token_file", CONFIG_NODE_SCALAR, parse_path, Config, http_read_token_file),
        KEY("tls_cert", CONFIG_NODE_SCALAR, parse_path, Config, http_tls_cert),
        KEY("tls_key", CONFIG_NODE_SCALAR, parse_path, Config, http_tls_key),
        KEY("allow_plain", CONFIG_NODE_SCALAR, parse_bool, Config, http_allow_plain),
        KEY("max_connections", CONFIG_NODE_SCALAR, parse_unsigned, Config, http_max_connections,
            .min = CONFIG_HTTP_MAX_CONNECTIONS_MIN, .max = CONFIG_HTTP_MAX_CONNECTIONS_MAX),
        KEY("timeout", CONFIG_NODE_SCALAR, parse_duration, Config, http_timeout_usec,
            .min = CONFIG_HTTP_TIMEOUT_MIN_USEC, .max = CONFIG_HTTP_TIMEOUT_MAX_USEC),
        KEY("max_captures_per_minute", CONFIG_NODE_SCALAR, parse_unsigned, Config, http_max_captures_per_minute,
            .min = CONFIG_MAX_PER_MINUTE_MIN, .max = CONFIG_MAX_PER_MINUTE_MAX),
};
static const ConfigTable http_table = { "in \"http\"", http_keys, ELEMENTSOF(http_keys) };

/* The TCP listener is never open without a token. */
static int parse_http_section(ConfigParser *p, const ConfigKey *k, yaml_node_t *node, void *base) {
        Config *c = base;
        int r;

        r = walk_mapping(p, k->table, node, base, NULL);
        if (r < 0)
                return r;
        if (c->http_listen && !c->http_token_file && !c->http_read_token_file)
                return parser_error(p, node, "\"listen\" needs \"token_file\" (or \"read_token_file\"): the TCP "
                                             "listener requires a bearer token");
        if (!c->http_tls_cert != !c->http_tls_key)
                return parser_error(p, node, "\"tls_cert\" and \"tls_key\" go together: set both, or neither");
        /* Tokens and stacks in the clear are for loopback only, unless the file says it knows better. */
        if (c->http_listen && !c->http_tls_cert && !c->http_allow_plain && !config_listen_is_loopback(c->http_listen))
                return parser_error(p, node, "\"listen\" on %s, not a loopback address, would send tokens and stacks "
                                             "in the clear: set \"tls_cert\" and \"tls_key\", or \"allow_plain: "
                                             "true\"", c->http_listen);
        return 0;
}

static const ConfigKey hooks_keys[] = {
        KEY("command", CONFIG_NODE_SCALAR_OR_LIST, parse_argv, Config, hook_command),
        KEY("timeout", CONFIG_NODE_SCALAR, parse_duration, Config, hook_timeout_usec,
            .min = CONFIG_HOOK_TIMEOUT_MIN_USEC, .max = CONFIG_HOOK_TIMEOUT_MAX_USEC),
        KEY("max_running", CONFIG_NODE_SCALAR, parse_unsigned, Config, hook_max_running,
            .min = CONFIG_HOOK_MAX_RUNNING_MIN, .max = CONFIG_HOOK_MAX_RUNNING_MAX),
        KEY("repeat_interval", CONFIG_NODE_SCALAR, parse_duration, Config, hook_repeat_usec,
            .min = CONFIG_HOOK_REPEAT_MIN_USEC, .max = CONFIG_HOOK_REPEAT_MAX_USEC),
};
static const ConfigTable hooks_table = { "in \"hooks\"", hooks_keys, ELEMENTSOF(hooks_keys) };

static const ConfigKey symbols_keys[] = {
        { .key = "cache_dir", .kind = CONFIG_NODE_SCALAR, .parse = parse_cache_dir,
          .offset = offsetof(Config, symbols_cache_dir) },
        KEY("cache_max_size", CONFIG_NODE_SCALAR, parse_size, Config, symbols_cache_max_size,
            .min = CONFIG_SYMBOLS_CACHE_MAX_SIZE_MIN, .max = CONFIG_SIZE_MAX),
        KEY("debuginfod", CONFIG_NODE_SCALAR, parse_debuginfod, Config, symbols_debuginfod),
};
static const ConfigTable symbols_table = { "in \"symbols\"", symbols_keys, ELEMENTSOF(symbols_keys) };

static const ConfigKey scan_keys[] = {
        KEY("source", CONFIG_NODE_SCALAR, parse_scan_source, Config, scan_source),
};
static const ConfigTable scan_table = { "in \"scan\"", scan_keys, ELEMENTSOF(scan_keys) };

static const ConfigKey rule_keys[] = {
        KEY("name", CONFIG_NODE_SCALAR, parse_rule_name, Rule, name),
        KEY("class", CONFIG_NODE_SCALAR_OR_LIST, parse_rule_classes, Rule, classes),
        KEY("for", CONFIG_NODE_SCALAR, parse_duration, Rule, for_usec, .max = CONFIG_RULE_DURATION_MAX_USEC),
        KEY("state", CONFIG_NODE_SCALAR_OR_LIST, parse_rule_states, Rule, states),
        KEY("comm", CONFIG_NODE_SCALAR_OR_LIST, parse_globs, Rule, comm),
        KEY("exe", CONFIG_NODE_SCALAR_OR_LIST, parse_globs, Rule, exe),
        KEY("unit", CONFIG_NODE_SCALAR_OR_LIST, parse_globs, Rule, unit),
        KEY("cgroup", CONFIG_NODE_SCALAR_OR_LIST, parse_globs, Rule, cgroup),
        KEY("user", CONFIG_NODE_SCALAR, parse_rule_user, Rule, user),
        KEY("syscall", CONFIG_NODE_SCALAR_OR_LIST, parse_rule_syscalls, Rule, syscalls),
        KEY("wchan", CONFIG_NODE_SCALAR_OR_LIST, parse_globs, Rule, wchan),
        KEY("cpu_min", CONFIG_NODE_SCALAR, parse_rule_cpu_min, Rule, cpu_min),
        KEY("deadlock", CONFIG_NODE_SCALAR, parse_bool, Rule, deadlock),
        KEY("lock_holder", CONFIG_NODE_SCALAR, parse_bool, Rule, lock_holder),
        KEY("actions", CONFIG_NODE_SCALAR_OR_LIST, parse_rule_actions, Rule, actions),
        KEY("peers", CONFIG_NODE_SCALAR, parse_unsigned, Rule, peers, .max = CONFIG_PEERS_MAX),
        KEY("cooldown", CONFIG_NODE_SCALAR, parse_duration, Rule, cooldown_usec, .max = CONFIG_RULE_DURATION_MAX_USEC),
        KEY("probe", CONFIG_NODE_SCALAR, parse_duration, Rule, probe_usec, .max = CONFIG_RULE_PROBE_MAX_USEC),
        KEY("hook", CONFIG_NODE_SCALAR_OR_LIST, parse_argv, Rule, hook),
        KEY("severity", CONFIG_NODE_SCALAR, parse_rule_severity, Rule, severity),
};
static const ConfigTable rule_table = { "in a rule", rule_keys, ELEMENTSOF(rule_keys) };

static int parse_rules(ConfigParser *p, _unused_ const ConfigKey *k, yaml_node_t *node, void *base);

static const ConfigKey top_keys[] = {
        KEY("poll_interval", CONFIG_NODE_SCALAR, parse_poll_interval, Config, poll_interval_usec,
            .min = CONFIG_POLL_INTERVAL_MIN_USEC, .max = CONFIG_POLL_INTERVAL_MAX_USEC),
        SECTION("scan", &scan_table),
        SECTION("archive", &archive_table),
        SECTION("capture", &capture_table),
        { .key = "http", .kind = CONFIG_NODE_MAPPING, .parse = parse_http_section, .table = &http_table },
        SECTION("hooks", &hooks_table),
        SECTION("symbols", &symbols_table),
        KEY("rules", CONFIG_NODE_LIST, parse_rules, Config, rules),
};
static const ConfigTable top_table = { "at the top level", top_keys, ELEMENTSOF(top_keys) };

/* A rules.d file adds rules and nothing else. */
static const ConfigKey dropin_keys[] = {
        KEY("rules", CONFIG_NODE_LIST, parse_rules, Config, rules),
};
static const ConfigTable dropin_table = { "in a drop-in", dropin_keys, ELEMENTSOF(dropin_keys) };

assert_cc(ELEMENTSOF(rule_keys) <= CONFIG_YAML_TABLE_KEYS_MAX);
assert_cc(ELEMENTSOF(archive_keys) <= CONFIG_YAML_TABLE_KEYS_MAX);
assert_cc(ELEMENTSOF(capture_keys) <= CONFIG_YAML_TABLE_KEYS_MAX);
assert_cc(ELEMENTSOF(top_keys) <= CONFIG_YAML_TABLE_KEYS_MAX);
assert_cc(ELEMENTSOF(http_keys) <= CONFIG_YAML_TABLE_KEYS_MAX);
assert_cc(ELEMENTSOF(hooks_keys) <= CONFIG_YAML_TABLE_KEYS_MAX);
assert_cc(ELEMENTSOF(symbols_keys) <= CONFIG_YAML_TABLE_KEYS_MAX);
assert_cc(ELEMENTSOF(scan_keys) <= CONFIG_YAML_TABLE_KEYS_MAX);

/* ---- rules ---- */

static int parse_rule(ConfigParser *p, Config *c, yaml_node_t *node) {
        _cleanup_(rule_done) Rule rule = RULE_DEFAULTS;
        uint32_t seen = 0;
        int r;

        r = walk_mapping(p, &rule_table, node, &rule, &seen);
        if (r == -ENOMEM)
                return r;
        if (!rule.name) {
                /* An invalid name was reported where it stands; a missing one is reported here. */
                if (!table_seen(&rule_table, seen, "name"))
                        return parser_error(p, node, "rule without a name (every rule needs \"name\" and \"class\")");
                return -EINVAL;
        }
        if (!table_seen(&rule_table, seen, "class")) {
                char list[256];
                r = merge(r, parser_error(p, node, "rule \"%s\" has no \"class\" (expected one of: %s)", rule.name,
                                          names_list(list, sizeof list, class_name, _THREAD_CLASS_MAX)));
        }
        if (r == -ENOMEM)
                return r;

        /* Kept even when some field was bad, so that a later duplicate of its name is still caught. */
        rule.file = strdup(p->path);
        if (!rule.file)
                return -ENOMEM;
        if (!GREEDY_REALLOC(c->rules, c->n_rules_allocated, c->n_rules + 1))
                return -ENOMEM;
        c->rules[c->n_rules++] = rule;
        rule = (Rule) {};
        return r;
}

static int parse_rules(ConfigParser *p, _unused_ const ConfigKey *k, yaml_node_t *node, void *base) {
        Config *c = base;
        int ret = 0, r;

        p->has_rules = true;
        for (yaml_node_item_t *i = node->data.sequence.items.start; i < node->data.sequence.items.top; i++) {
                yaml_node_t *item;

                r = parser_visit(p, *i, &item);
                if (r >= 0)
                        r = item->type == YAML_MAPPING_NODE ? parse_rule(p, c, item)
                                                            : parser_expected(p, item, "a rule (a mapping with "
                                                                                       "name, class, ...)");
                ret = merge(ret, r);
                if (ret == -ENOMEM || p->too_complex)
                        break;
        }
        return ret;
}

/* ---- the document ---- */

/* Line and column of a byte offset: libyaml's reader errors carry only the offset. */
static yaml_mark_t mark_from_offset(const ConfigParser *p, size_t offset) {
        yaml_mark_t m = { .index = offset };
        size_t line_start = 0;

        for (size_t i = 0; i < offset && i < p->size; i++)
                if (p->data[i] == '\n') {
                        m.line++;
                        line_start = i + 1;
                }
        m.column = offset - line_start;
        return m;
}

static int parser_syntax_error(ConfigParser *p, const yaml_parser_t *y) {
        const char *problem = y->problem ?: "unknown error";
        yaml_mark_t mark = y->problem_mark;
        char extra[160] = "";

        if (y->error == YAML_MEMORY_ERROR)
                return -ENOMEM;
        if (y->error == YAML_READER_ERROR) {
                mark = mark_from_offset(p, y->problem_offset);
                if (y->problem_value >= 0)
                        snprintf(extra, sizeof extra, " (byte 0x%02X)", (unsigned) y->problem_value & 0xFFu);
        } else if (mark.index < p->size && p->data[mark.index] == '\t')
                snprintf(extra, sizeof extra, " (tabs are not allowed for indentation)");
        else if (y->context)
                snprintf(extra, sizeof extra, " (%s at line %u, column %u)", y->context,
                         (unsigned) y->context_mark.line + 1, (unsigned) y->context_mark.column + 1);
        return parser_error_at(p, mark, "syntax error: %s%s", problem, extra);
}

static void yaml_parser_deletep(yaml_parser_t **y) {
        if (*y)
                yaml_parser_delete(*y);
}

static void yaml_document_deletep(yaml_document_t **d) {
        if (*d)
                yaml_document_delete(*d);
}

int config_yaml_parse(Config *c, const char *path, const char *data, size_t size, const ConfigYamlOptions *o,
                      bool *ret_has_rules, ConfigErrors *errs) {
        yaml_parser_t parser_storage;
        yaml_document_t doc_storage, next_storage;
        _cleanup_(yaml_parser_deletep) yaml_parser_t *y = NULL;
        _cleanup_(yaml_document_deletep) yaml_document_t *doc = NULL, *next = NULL;
        ConfigParser p = {
                .path = path,
                .data = data,
                .size = size,
                .o = o,
                .errs = errs,
        };
        yaml_node_t *root, *root2;
        int r = 0;

        if (!yaml_parser_initialize(&parser_storage))
                return -ENOMEM;
        y = &parser_storage;
        yaml_parser_set_input_string(y, (const unsigned char *) data, size);

        /* libyaml clears the document first and deletes what it built on failure: deleting after is safe. */
        doc = &doc_storage;
        if (!yaml_parser_load(y, doc))
                return parser_syntax_error(&p, y);
        p.doc = doc;

        root = yaml_document_get_root_node(doc);
        if (root && root->type == YAML_MAPPING_NODE) {
                size_t nodes = (size_t) (doc->nodes.top - doc->nodes.start);

                p.visits = 1;
                p.visits_max = (unsigned) MIN((size_t) CONFIG_YAML_VISITS_MAX,
                                              CONFIG_YAML_VISITS_FLOOR + CONFIG_YAML_VISITS_FACTOR * nodes);
                r = walk_mapping(&p, o->dropin ? &dropin_table : &top_table, root, c, NULL);
        } else if (root && !is_null(root))
                /* An empty document ("---" alone, or a bare "~") is as good as an empty file. */
                r = parser_expected(&p, root, o->dropin ? "a mapping with a rules: list" : "a mapping of settings");
        if (r == -ENOMEM)
                return r;

        /* One document per file: a second one is a mistake, not something to ignore. */
        if (root) {
                next = &next_storage;
                if (!yaml_parser_load(y, next))
                        r = merge(r, parser_syntax_error(&p, y));
                else if ((root2 = yaml_document_get_root_node(next)))
                        r = merge(r, parser_error(&p, root2, "only one YAML document is allowed per file"));
                if (r == -ENOMEM)
                        return r;
        }

        if (ret_has_rules)
                *ret_has_rules = p.has_rules;
        return p.failed ? -EINVAL : 0;
}
