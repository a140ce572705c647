/* config-load.h: load the configuration from its main file and the rules.d drop-ins. */
#pragma once

#include "config/config.h"

/* Load MAIN_PATH (a missing file means the defaults), then the *.yaml files in DROPIN_DIR in name order (a
 * missing directory means none; NULL skips drop-ins). If the main file has a rules: key its rules replace the built-in
 * ones; drop-in rules are appended either way. On any error returns -EINVAL with every error found in ERRS and
 * *RET untouched; -ENOMEM on OOM. */
int config_load(const char *main_path, const char *dropin_dir, Config **ret, ConfigErrors *errs);
