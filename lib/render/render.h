/* render.h: one call renders a snapshot in any format, and one table names the formats for the HTTP API's
 * ?format=, stackctl's flags and its requests to a daemon. */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>

#include "model/snapshot.h"
#include "render/snapshot-svg.h"

typedef enum RenderFormat {
        RENDER_TEXT,            /* eu-stack-shaped text, threads alike grouped (snapshot-text.h) */
        RENDER_JSON,            /* stackwatch.snapshot/1 (snapshot-json.h) */
        RENDER_FOLDED,          /* one line a stack, for flame graph tools */
        RENDER_SVG,             /* the wait chain and the flame graph, drawn by us (snapshot-svg.h) */
        RENDER_PPROF,           /* a gzipped pprof profile.proto (snapshot-pprof.h): binary */
        _RENDER_FORMAT_MAX,
        _RENDER_FORMAT_INVALID = -EINVAL,
} RenderFormat;

/* "text", "json", "folded", "svg", "pprof": the names of the API's ?format= and of stackctl's --json, --folded,
 * --svg and --pprof. */
const char *render_format_to_string(RenderFormat f);
RenderFormat render_format_from_string(const char *s);
/* Whether F's output is bytes, not text (a terminal must not get it). */
bool render_format_is_binary(RenderFormat f);

/* What every format takes; a format ignores what is not its own. */
typedef struct RenderOptions {
        bool kernel;            /* kernel frames (text, folded, SVG) */
        bool modules;           /* text: the module list (build-ids) at the end */
        bool locks;             /* text: the lock table, each mutex waited for with its holder and its waiters */
        bool raw_names;         /* text: a frame's linkage name, as the binary has it, not the demangled one */
        bool no_group;          /* text: every thread on its own, not threads alike grouped (thread-groups.h) */
        int json_flags;         /* JSON: json-c's flags; 0: plain, one line, no slash escaped */
        SvgPicture picture;     /* SVG: which picture */
        bool icicle;            /* SVG: the flame graph upside down */
} RenderOptions;

/* S written to F in FORMAT (O NULL: the defaults). Every process-supplied string is escaped for the format.
 * -ENOMEM, -EIO when F fails. */
int snapshot_render(const Snapshot *s, RenderFormat format, const RenderOptions *o, FILE *f);

/* A stored document is untrusted input: parse it within json_parse_bounded()'s bounds and render it as
 * snapshot_render() does. JSON comes out of json-c, not as the file held it, so every control character is escaped.
 * On a document that is not a snapshot: -EBADMSG with *RET_WHY (static) saying why; -ENOMEM; -EIO when F fails. */
int snapshot_render_stored(const char *json, size_t len, RenderFormat format, const RenderOptions *o, FILE *f,
                           const char **ret_why);
/* The parse of snapshot_render_stored(), for a caller that changes the snapshot before rendering it: the
 * snapshot, or -EBADMSG with *RET_WHY, -ENOMEM. */
int snapshot_parse_stored(const char *json, size_t len, Snapshot **ret, const char **ret_why);
