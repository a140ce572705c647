/* stackctl-sources.c: the snapshot sources in the order they are asked whether the options want them. */
#include "base/macro.h"
#include "stackctl-sources.h"

/* The archive, last, says yes to all. */
static const SnapshotSourceType *const sources[] = {
        &snapshot_source_journal,
        &snapshot_source_daemon,
        &snapshot_source_archive,
};

static const SnapshotSourceType *source_wanted(void) {
        for (size_t i = 0; i < ELEMENTSOF(sources); i++)
                if (sources[i]->wanted())
                        return sources[i];
        return &snapshot_source_archive;
}

int source_open(Source *ret) {
        *ret = (Source) { .type = source_wanted() };
        return ret->type->open(&ret->state);
}

void source_closep(Source *s) {
        if (s->type && s->state)
                s->type->close(s->state);
        *s = (Source) {};
}
