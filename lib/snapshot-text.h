/* snapshot-text.h: eu-stack-shaped text and folded (flame graph) renderings of a snapshot. */
#pragma once

#include <stdbool.h>
#include <stdio.h>

#include "snapshot.h"

typedef struct TextOptions {
        bool kernel;            /* print kernel frames */
        bool modules;           /* print the module list (build-ids) at the end */
} TextOptions;

/* Every process-supplied string is escaped (control characters become \e, \n, \xNN). */
int snapshot_print_text(const Snapshot *s, const TextOptions *o, FILE *f);
/* One line per thread: "comm;outermost;…;innermost;kernel_outer_[k];…;kernel_inner_[k] 1". */
int snapshot_print_folded(const Snapshot *s, bool kernel, FILE *f);
