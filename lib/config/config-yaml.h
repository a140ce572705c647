/* config-yaml.h: one YAML configuration document → Config, through per-mapping key tables (libyaml). */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "config/config.h"

typedef struct ConfigYamlOptions {
        bool dropin;                    /* a rules.d file: only a top-level rules: list is allowed */
        unsigned ncpu;                  /* cpu_min may go up to 100 × this */
} ConfigYamlOptions;

/* Parse DATA (SIZE bytes, the contents of PATH) into C: the keys present overwrite C's fields and rules are
 * appended to C->rules. *RET_HAS_RULES says whether a rules: key was present. Every problem is recorded in ERRS
 * with PATH, line and column, and parsing goes on where it can; returns 0, -EINVAL when this document had errors
 * (C may then be partly updated), or -ENOMEM. */
int config_yaml_parse(Config *c, const char *path, const char *data, size_t size, const ConfigYamlOptions *o,
                      bool *ret_has_rules, ConfigErrors *errs);
