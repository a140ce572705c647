/* config-load.c: loading the main file and the rules.d drop-ins, then validating the whole. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/io-util.h"
#include "base/macro.h"
#include "base/strv.h"
#include "config/config-load.h"
#include "config/config-yaml.h"

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

        /* Read to the end rather than trusting fstat(): a file that grew past the limit is still caught. */
        r = read_full_fd(fd, CONFIG_FILE_SIZE_MAX, &data, &size);
        if (r == -ENOMEM)
                return r;
        if (r == -EFBIG) {
                char b[CONFIG_FORMAT_MAX];
                r = config_errors_add(errs, path, 0, 0, "file is too large (the limit is %s)",
                                      config_format_size(b, sizeof b, CONFIG_FILE_SIZE_MAX));
                return r < 0 ? r : -EINVAL;
        }
        if (r < 0) {
                r = config_errors_add(errs, path, 0, 0, "cannot read: %s", strerror(-r));
                return r < 0 ? r : -EINVAL;
        }
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
                if (strv_extend(&names, de->d_name) < 0)
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
