/* config.c: the Config model: compiled defaults, value parsers, errors, and loading the main file and drop-ins. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config-yaml.h"
#include "config.h"
#include "macro.h"
#include "parse-util.h"
#include "strv.h"

/* ---- errors ---- */

void config_errors_done(ConfigErrors *e) {
        if (!e)
                return;
        for (size_t i = 0; i < e->n; i++) {
                free(e->errors[i].file);
                free(e->errors[i].message);
        }
        free(e->errors);
        *e = (ConfigErrors) {};
}

int config_errors_add(ConfigErrors *e, const char *file, unsigned line, unsigned column, const char *fmt, ...) {
        _cleanup_free_ char *f = NULL, *m = NULL;
        ConfigError *n;
        va_list ap;
        int r;

        if (e->n >= CONFIG_ERRORS_MAX) {
                e->n_dropped++;
                return 0;
        }
        va_start(ap, fmt);
        r = vasprintf(&m, fmt, ap);
        va_end(ap);
        if (r < 0) {
                m = NULL;
                return -ENOMEM;
        }
        f = strdup(file ?: "<unknown>");
        if (!f)
                return -ENOMEM;
        n = realloc(e->errors, (e->n + 1) * sizeof *n);
        if (!n)
                return -ENOMEM;
        e->errors = n;
        e->errors[e->n++] = (ConfigError) {
                .file = TAKE_PTR(f),
                .line = line,
                .column = column,
                .message = TAKE_PTR(m),
        };
        return 0;
}

void config_errors_print(const ConfigErrors *e, FILE *f) {
        for (size_t i = 0; i < e->n; i++) {
                const ConfigError *x = &e->errors[i];
                if (x->line > 0)
                        fprintf(f, "%s:%u:%u: %s\n", x->file, x->line, x->column, x->message);
                else
                        fprintf(f, "%s: %s\n", x->file, x->message);
        }
        if (e->n_dropped > 0)
                fprintf(f, "(%zu more error(s) not shown)\n", e->n_dropped);
}

static size_t config_errors_count(const ConfigErrors *e) {
        return e->n + e->n_dropped;
}

/* Where error I's file first appears among errors FROM.., so files keep the order they were loaded in. */
static size_t config_errors_file_rank(const ConfigErrors *e, size_t from, size_t i) {
        for (size_t k = from; k < i; k++)
                if (streq(e->errors[k].file, e->errors[i].file))
                        return k;
        return i;
}

/* Order the errors from FROM on by file (in load order), line and column: checks that run after a file was
 * walked (a missing key, a duplicate name) then read in place. Stable; at most CONFIG_ERRORS_MAX entries. */
static void config_errors_sort(ConfigErrors *e, size_t from) {
        size_t rank[CONFIG_ERRORS_MAX];

        if (from >= e->n)
                return;
        for (size_t i = from; i < e->n; i++)
                rank[i - from] = config_errors_file_rank(e, from, i);
        for (size_t i = from + 1; i < e->n; i++)
                for (size_t k = i; k > from; k--) {
                        ConfigError *a = &e->errors[k - 1], *b = &e->errors[k], t;
                        size_t ra = rank[k - 1 - from], rb = rank[k - from];

                        if (ra < rb || (ra == rb && (a->line < b->line ||
                                                     (a->line == b->line && a->column <= b->column))))
                                break;
                        t = *a, *a = *b, *b = t;
                        rank[k - 1 - from] = rb, rank[k - from] = ra;
                }
}

/* ---- the model and its defaults ---- */

Config *config_free(Config *c) {
        if (!c)
                return NULL;
        for (size_t i = 0; i < c->n_rules; i++)
                rule_done(&c->rules[i]);
        free(c->rules);
        free(c->archive_dir);
        free(c->http_socket);
        free(c->http_listen);
        free(c->http_token_file);
        strv_free(c->hook_command);
        free(c);
        return NULL;
}

/* The defaults without any rules: the starting point of a load. */
static int config_new_empty(Config **ret) {
        _cleanup_(config_freep) Config *c = NULL;

        c = malloc(sizeof *c);
        if (!c)
                return -ENOMEM;
        *c = CONFIG_DEFAULTS;
        c->archive_dir = strdup(CONFIG_DEFAULT_ARCHIVE_DIR);
        c->http_socket = strdup(CONFIG_DEFAULT_HTTP_SOCKET);
        if (!c->archive_dir || !c->http_socket)
                return -ENOMEM;
        *ret = TAKE_PTR(c);
        return 0;
}

/* The built-in rules: what "any thread stuck" means with no configuration at all. */
static const struct {
        const char *name;
        ThreadClass class;
        const char *states;
        uint64_t for_usec;
} builtin_rules[] = {
        { "hung-task", THREAD_CLASS_BLOCKED, "D", 120 * USEC_PER_SEC },
        { "busy-loop", THREAD_CLASS_BUSY_LOOP, NULL, 60 * USEC_PER_SEC },
        { "syscall-spin", THREAD_CLASS_SYSCALL_SPIN, NULL, 60 * USEC_PER_SEC },
};

int config_add_builtin_rules(Config *c) {
        Rule *n;

        n = realloc(c->rules, (c->n_rules + ELEMENTSOF(builtin_rules)) * sizeof *n);
        if (!n)
                return -ENOMEM;
        c->rules = n;
        for (size_t i = 0; i < ELEMENTSOF(builtin_rules); i++) {
                Rule *r = &c->rules[c->n_rules];

                *r = RULE_DEFAULTS;
                r->classes = 1U << builtin_rules[i].class;
                r->for_usec = builtin_rules[i].for_usec;
                r->name = strdup(builtin_rules[i].name);
                r->file = strdup("<built-in>");
                r->states = builtin_rules[i].states ? strdup(builtin_rules[i].states) : NULL;
                /* Counted before the checks, so config_free() releases a half-built rule. */
                c->n_rules++;
                if (!r->name || !r->file || (builtin_rules[i].states && !r->states))
                        return -ENOMEM;
        }
        return 0;
}

uint64_t config_poll_interval_auto(const Config *c) {
        uint64_t shortest = UINT64_MAX;

        if (c->n_rules == 0)
                return CONFIG_POLL_AUTO_MAX_USEC;
        for (size_t i = 0; i < c->n_rules; i++)
                shortest = MIN(shortest, c->rules[i].for_usec);
        shortest /= CONFIG_POLL_AUTO_DIVISOR;
        return MAX(MIN(shortest, CONFIG_POLL_AUTO_MAX_USEC), CONFIG_POLL_AUTO_MIN_USEC);
}

int config_new_default(Config **ret) {
        _cleanup_(config_freep) Config *c = NULL;
        int r;

        r = config_new_empty(&c);
        if (r < 0)
                return r;
        r = config_add_builtin_rules(c);
        if (r < 0)
                return r;
        c->poll_interval_usec = config_poll_interval_auto(c);
        *ret = TAKE_PTR(c);
        return 0;
}

/* ---- value parsers ---- */

static int digits_u64(const char **p, uint64_t *ret) {
        const char *s = *p;
        uint64_t v = 0;

        if (*s < '0' || *s > '9')
                return -EINVAL;
        for (; *s >= '0' && *s <= '9'; s++) {
                if (v > (UINT64_MAX - (uint64_t) (*s - '0')) / 10)
                        return -ERANGE;
                v = v * 10 + (uint64_t) (*s - '0');
        }
        *p = s;
        *ret = v;
        return 0;
}

/* "123" or "123.456": the integer part, and the fraction as FRAC / SCALE (SCALE a power of ten ≤ 10^18). */
static int parse_decimal_parts(const char **p, uint64_t *ret_int, uint64_t *ret_frac, uint64_t *ret_scale) {
        uint64_t i, frac = 0, scale = 1;
        const char *s = *p;
        int r;

        r = digits_u64(&s, &i);
        if (r < 0)
                return r;
        if (*s == '.') {
                s++;
                if (*s < '0' || *s > '9')
                        return -EINVAL;
                for (; *s >= '0' && *s <= '9'; s++) {
                        if (scale >= 1000000000000000000ULL) {
                                /* More precision than a 64-bit fraction holds: only trailing zeros may follow. */
                                if (*s != '0')
                                        return -EINVAL;
                                continue;
                        }
                        frac = frac * 10 + (uint64_t) (*s - '0');
                        scale *= 10;
                }
        }
        *p = s;
        *ret_int = i;
        *ret_frac = frac;
        *ret_scale = scale;
        return 0;
}

static const struct {
        const char *suffix;
        uint64_t usec;
} duration_units[] = {
        { "us", 1 },
        { "ms", USEC_PER_MSEC },
        { "s", USEC_PER_SEC },
        { "m", CONFIG_USEC_PER_MINUTE },
        { "h", CONFIG_USEC_PER_HOUR },
        { "d", CONFIG_USEC_PER_DAY },
};

int config_parse_duration(const char *s, uint64_t *ret_usec) {
        uint64_t i, frac, scale, unit = 0, whole;
        unsigned __int128 part;
        int r;

        if (!s)
                return -EINVAL;
        r = parse_decimal_parts(&s, &i, &frac, &scale);
        if (r < 0)
                return r;
        if (*s == 0)
                unit = USEC_PER_SEC;
        for (size_t k = 0; k < ELEMENTSOF(duration_units) && unit == 0; k++)
                if (streq(s, duration_units[k].suffix))
                        unit = duration_units[k].usec;
        if (unit == 0)
                return -EINVAL;

        if (__builtin_mul_overflow(i, unit, &whole))
                return -ERANGE;
        part = (unsigned __int128) frac * unit;
        if (part % scale != 0)
                return -EINVAL; /* a fraction of a microsecond */
        if (__builtin_add_overflow(whole, (uint64_t) (part / scale), &whole))
                return -ERANGE;
        *ret_usec = whole;
        return 0;
}

int config_parse_size(const char *s, uint64_t *ret_bytes) {
        static const char units[] = "KMGT";
        uint64_t v, factor = 1;
        const char *u;
        int r;

        if (!s)
                return -EINVAL;
        r = digits_u64(&s, &v);
        if (r < 0)
                return r;
        if (*s != 0) {
                if (s[1] != 0 || !(u = strchr(units, *s >= 'a' ? *s - ('a' - 'A') : *s)) || *u == 0)
                        return -EINVAL;
                for (const char *k = units; k <= u; k++)
                        factor *= 1024;
        }
        if (__builtin_mul_overflow(v, factor, &v))
                return -ERANGE;
        *ret_bytes = v;
        return 0;
}

int config_parse_listen(const char *s, struct sockaddr_storage *ret, socklen_t *ret_len) {
        struct sockaddr_storage ss = {};
        char host[INET6_ADDRSTRLEN + 1];
        const char *port;
        uint64_t p;
        socklen_t len;

        if (!s)
                return -EINVAL;
        if (s[0] == '[') {
                const char *end = strchr(s, ']');
                struct sockaddr_in6 *in6 = (struct sockaddr_in6 *) &ss;

                if (!end || end[1] != ':' || (size_t) (end - s - 1) >= sizeof host)
                        return -EINVAL;
                memcpy(host, s + 1, end - s - 1);
                host[end - s - 1] = 0;
                if (inet_pton(AF_INET6, host, &in6->sin6_addr) != 1)
                        return -EINVAL;
                in6->sin6_family = AF_INET6;
                port = end + 2;
                len = sizeof *in6;
        } else {
                const char *colon = strrchr(s, ':');
                struct sockaddr_in *in = (struct sockaddr_in *) &ss;

                in->sin_family = AF_INET;
                if (!colon) {
                        in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
                        port = s;
                } else {
                        if ((size_t) (colon - s) >= sizeof host)
                                return -EINVAL;
                        memcpy(host, s, colon - s);
                        host[colon - s] = 0;
                        if (inet_pton(AF_INET, host, &in->sin_addr) != 1)
                                return -EINVAL;
                        port = colon + 1;
                }
                len = sizeof *in;
        }
        if (safe_atou64(port, &p) < 0 || p > 65535)
                return -EINVAL;
        if (ss.ss_family == AF_INET6)
                ((struct sockaddr_in6 *) &ss)->sin6_port = htons((uint16_t) p);
        else
                ((struct sockaddr_in *) &ss)->sin_port = htons((uint16_t) p);
        if (ret)
                *ret = ss;
        if (ret_len)
                *ret_len = len;
        return 0;
}

int config_parse_mode(const char *s, unsigned *ret) {
        unsigned m = 0;
        size_t n;

        if (!s)
                return -EINVAL;
        n = strlen(s);
        if (n == 0 || n > 4)
                return -EINVAL;
        for (size_t i = 0; i < n; i++) {
                if (s[i] < '0' || s[i] > '7')
                        return -EINVAL;
                m = m * 8 + (unsigned) (s[i] - '0');
        }
        if (m > 0777)
                return -EINVAL;
        *ret = m;
        return 0;
}

int config_parse_bool(const char *s, bool *ret) {
        static const char *const yes[] = { "true", "yes", "on" }, *const no[] = { "false", "no", "off" };

        if (!s)
                return -EINVAL;
        for (size_t i = 0; i < ELEMENTSOF(yes); i++) {
                if (strcasecmp(s, yes[i]) == 0) {
                        *ret = true;
                        return 0;
                }
                if (strcasecmp(s, no[i]) == 0) {
                        *ret = false;
                        return 0;
                }
        }
        return -EINVAL;
}

int config_parse_decimal(const char *s, double *ret) {
        uint64_t i, frac, scale;
        int r;

        if (!s)
                return -EINVAL;
        r = parse_decimal_parts(&s, &i, &frac, &scale);
        if (r < 0)
                return r;
        if (*s != 0)
                return -EINVAL;
        *ret = (double) i + (double) frac / (double) scale;
        return 0;
}

char *config_format_duration(char *buf, size_t size, uint64_t usec) {
        if (usec == 0) {
                snprintf(buf, size, "0");
                return buf;
        }
        for (size_t k = ELEMENTSOF(duration_units); k > 0; k--)
                if (usec % duration_units[k - 1].usec == 0) {
                        snprintf(buf, size, "%llu%s", (unsigned long long) (usec / duration_units[k - 1].usec),
                                 duration_units[k - 1].suffix);
                        break;
                }
        return buf;
}

char *config_format_size(char *buf, size_t size, uint64_t bytes) {
        static const char units[] = "TGMK";
        unsigned shift = 40;

        for (const char *u = units; *u; u++, shift -= 10)
                if (bytes > 0 && bytes % (1ULL << shift) == 0) {
                        snprintf(buf, size, "%llu%c", (unsigned long long) (bytes >> shift), *u);
                        return buf;
                }
        snprintf(buf, size, "%llu", (unsigned long long) bytes);
        return buf;
}

/* ---- loading ---- */

/* Read PATH whole into *RET_DATA (NUL-terminated). A missing file returns -ENOENT without recording anything;
 * everything else that stops the read is recorded in ERRS and returns -EINVAL. */
static int config_read_file(const char *path, char **ret_data, size_t *ret_size, ConfigErrors *errs) {
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ char *data = NULL;
        size_t size = 0;
        struct stat st;
        int r;

        /* O_NONBLOCK so that a FIFO put there by mistake cannot block the open; fstat() then refuses it. */
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (fd < 0) {
                r = negative_errno();
                if (r == -ENOENT)
                        return r;
                r = config_errors_add(errs, path, 0, 0, "cannot open: %s", strerror(-r));
                return r < 0 ? r : -EINVAL;
        }
        if (fstat(fd, &st) < 0) {
                r = config_errors_add(errs, path, 0, 0, "cannot stat: %s", strerror(errno));
                return r < 0 ? r : -EINVAL;
        }
        if (S_ISDIR(st.st_mode)) {
                r = config_errors_add(errs, path, 0, 0, "is a directory, expected a YAML file");
                return r < 0 ? r : -EINVAL;
        }
        if (!S_ISREG(st.st_mode)) {
                r = config_errors_add(errs, path, 0, 0, "is not a regular file");
                return r < 0 ? r : -EINVAL;
        }

        /* One more byte than allowed, so that a file that grew past its fstat() size is still caught. */
        data = malloc(CONFIG_FILE_SIZE_MAX + 2);
        if (!data)
                return -ENOMEM;
        for (;;) {
                ssize_t n = read(fd, data + size, CONFIG_FILE_SIZE_MAX + 1 - size);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        r = config_errors_add(errs, path, 0, 0, "cannot read: %s", strerror(errno));
                        return r < 0 ? r : -EINVAL;
                }
                if (n == 0)
                        break;
                size += (size_t) n;
                if (size > CONFIG_FILE_SIZE_MAX) {
                        char b[CONFIG_FORMAT_MAX];
                        r = config_errors_add(errs, path, 0, 0, "file is too large (the limit is %s)",
                                              config_format_size(b, sizeof b, CONFIG_FILE_SIZE_MAX));
                        return r < 0 ? r : -EINVAL;
                }
        }
        data[size] = 0;
        *ret_data = TAKE_PTR(data);
        *ret_size = size;
        return 0;
}

static int config_load_file(Config *c, const char *path, const ConfigYamlOptions *o, bool *ret_has_rules,
                            ConfigErrors *errs) {
        _cleanup_free_ char *data = NULL;
        size_t size = 0;
        int r;

        r = config_read_file(path, &data, &size, errs);
        if (r < 0)
                return r;
        return config_yaml_parse(c, path, data, size, o, ret_has_rules, errs);
}

static int strcmp_ptr(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

static bool is_dropin_name(const char *name) {
        size_t n = strlen(name);
        return name[0] != '.' && n > strlen(".yaml") && streq(name + n - strlen(".yaml"), ".yaml");
}

/* The drop-in file names in DIR, sorted; an empty list for a missing directory. */
static int config_list_dropins(const char *dir, char ***ret, ConfigErrors *errs) {
        _cleanup_closedir_ DIR *d = NULL;
        _cleanup_strv_free_ char **names = NULL;
        size_t n = 0;
        struct dirent *de;
        int r;

        d = opendir(dir);
        if (!d) {
                r = negative_errno();
                if (r == -ENOENT) {
                        *ret = NULL;
                        return 0;
                }
                r = config_errors_add(errs, dir, 0, 0, "cannot open the rules directory: %s", strerror(-r));
                return r < 0 ? r : -EINVAL;
        }
        for (;;) {
                char **nn;

                errno = 0;
                de = readdir(d);
                if (!de) {
                        if (errno != 0) {
                                r = config_errors_add(errs, dir, 0, 0, "cannot read the rules directory: %s",
                                                      strerror(errno));
                                return r < 0 ? r : -EINVAL;
                        }
                        break;
                }
                if (!is_dropin_name(de->d_name))
                        continue;
                nn = realloc(names, (n + 2) * sizeof *nn);
                if (!nn)
                        return -ENOMEM;
                names = nn;
                names[n] = strdup(de->d_name);
                names[n + 1] = NULL;
                if (!names[n])
                        return -ENOMEM;
                n++;
        }
        if (n > 0)
                qsort(names, n, sizeof *names, strcmp_ptr);
        *ret = TAKE_PTR(names);
        return 0;
}

static int config_load_dropins(Config *c, const char *dir, const ConfigYamlOptions *o, ConfigErrors *errs) {
        _cleanup_strv_free_ char **names = NULL;
        int r;

        r = config_list_dropins(dir, &names, errs);
        if (r < 0)
                return r;
        for (char **name = names; name && *name; name++) {
                _cleanup_free_ char *path = NULL;
                bool has_rules;

                if (asprintf(&path, "%s/%s", dir, *name) < 0)
                        return -ENOMEM;
                r = config_load_file(c, path, o, &has_rules, errs);
                if (r == -ENOMEM)
                        return r;
                /* -ENOENT: removed since the listing; anything else is recorded, go on with the next file. */
        }
        return 0;
}

/* Checks across files: rule names are unique, and there are not more rules than the daemon evaluates. */
static int config_validate(const Config *c, ConfigErrors *errs) {
        int r;

        for (size_t i = 0; i < c->n_rules; i++) {
                const Rule *a = &c->rules[i];

                if (i == CONFIG_RULES_MAX) {
                        r = config_errors_add(errs, a->file, a->line, a->column, "too many rules (at most %d)",
                                              CONFIG_RULES_MAX);
                        if (r < 0)
                                return r;
                }
                if ((a->actions & RULE_ACTION_HOOK) && !a->hook && !c->hook_command) {
                        r = config_errors_add(errs, a->file, a->line, a->column,
                                              "rule \"%s\" has the hook action but no command: set \"hook\" in the "
                                              "rule or \"command\" in \"hooks\"", a->name);
                        if (r < 0)
                                return r;
                }
                if (a->hook && !(a->actions & RULE_ACTION_HOOK)) {
                        r = config_errors_add(errs, a->file, a->line, a->column,
                                              "rule \"%s\" sets \"hook\" but its actions do not include hook",
                                              a->name);
                        if (r < 0)
                                return r;
                }
                for (size_t k = 0; k < i; k++) {
                        const Rule *b = &c->rules[k];

                        if (!streq(a->name, b->name))
                                continue;
                        if (b->line == 0)
                                r = config_errors_add(errs, a->file, a->line, a->column,
                                                      "duplicate rule name \"%s\": a built-in rule has that name "
                                                      "(a rules: list in the main file replaces the built-in rules)",
                                                      a->name);
                        else
                                r = config_errors_add(errs, a->file, a->line, a->column,
                                                      "duplicate rule name \"%s\" (first defined at %s:%u:%u)",
                                                      a->name, b->file, b->line, b->column);
                        if (r < 0)
                                return r;
                        break;
                }
        }
        return 0;
}

int config_load(const char *main_path, const char *dropin_dir, Config **ret, ConfigErrors *errs) {
        _cleanup_(config_freep) Config *c = NULL;
        size_t n_errors = config_errors_count(errs), first_error = errs->n;
        ConfigYamlOptions o = { .ncpu = 1 };
        bool has_rules = false;
        long ncpu;
        int r;

        ncpu = sysconf(_SC_NPROCESSORS_CONF);
        if (ncpu > 1)
                o.ncpu = (unsigned) MIN(ncpu, 65536L);

        r = config_new_empty(&c);
        if (r < 0)
                return r;

        if (main_path) {
                r = config_load_file(c, main_path, &o, &has_rules, errs);
                if (r == -ENOMEM)
                        return r;
        }
        /* Without a rules: key in the main file the built-in rules stay, ahead of the drop-ins. */
        if (!has_rules) {
                r = config_add_builtin_rules(c);
                if (r < 0)
                        return r;
        }
        if (dropin_dir) {
                o.dropin = true;
                r = config_load_dropins(c, dropin_dir, &o, errs);
                if (r < 0)
                        return r;
        }
        r = config_validate(c, errs);
        if (r < 0)
                return r;

        if (config_errors_count(errs) > n_errors) {
                config_errors_sort(errs, first_error);
                return -EINVAL;
        }
        if (c->poll_interval_auto)
                c->poll_interval_usec = config_poll_interval_auto(c);
        *ret = TAKE_PTR(c);
        return 0;
}
