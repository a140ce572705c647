/* stackctl-sources.h: which snapshot source (stackctl-source.h) the options choose, for list, show and problems:
 * the journal with --journal, a daemon with --socket or --host, else the archive directory. */
#pragma once

#include "stackctl-source.h"

/* An open source, closed by its _cleanup_. */
typedef struct Source {
        const SnapshotSourceType *type;
        void *state;
} Source;

/* Open the source the options ask for into *RET; an exit code (EXIT_*), logged when not EXIT_OK. */
int source_open(Source *ret);
void source_closep(Source *s);
