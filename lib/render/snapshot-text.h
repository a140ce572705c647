/* snapshot-text.h: eu-stack-shaped text and folded (flame graph) renderings of a snapshot. */
#pragma once

#define TEXT_GROUP_TID_RUNS_MAX 32

#include <stdbool.h>
#include <stdio.h>

#include "render/snapshot-svg.h"
#include "model/snapshot.h"

typedef struct TextOptions {
        bool kernel;            /* print kernel frames */
        bool modules;           /* print the module list (build-ids) at the end */
        bool locks;             /* print the lock table: each mutex waited for, its holder and its waiters */
        bool raw_names;         /* text: a frame's linkage name, as the binary has it, not the demangled one */
        int json_flags;         /* snapshot_render_stored()'s JSON: json-c's flags; 0: plain, one line */
        bool no_group;          /* text: every thread on its own, not threads alike grouped (thread-groups.h) */
        SvgOptions svg;         /* snapshot_render_stored()'s SVG: which picture (its kernel frames: KERNEL above) */
} TextOptions;

/* Every process-supplied string is escaped (control characters become \e, \n, \xNN). */
int snapshot_print_text(const Snapshot *s, const TextOptions *o, FILE *f);
/* One line per thread: "comm;outermost;…;innermost;kernel_outer_[k];…;kernel_inner_[k] 1". */
int snapshot_print_folded(const Snapshot *s, bool kernel, FILE *f);

/* The innermost MAX user frames of thread TID of S, one line each, "#0  read+0x12 (libc.so.6) at file.c:26"
 * (function and module escaped; kernel frames, "[k] schedule+0x1a", when the thread has no user frames): what an
 * alert or a journal record shows of a stack. *RET is NULL-terminated and NULL when TID has no frames. */
int snapshot_top_frames(const Snapshot *s, pid_t tid, size_t max, char ***ret);

/* The innermost runtime frame (Python, Java) of thread TID of S as "inner (app.py:12)" (escaped), *RET NULL when
 * it has none. */
int snapshot_top_runtime_frame(const Snapshot *s, pid_t tid, char **ret);

/* Thread TID of S as snapshot_print_text() prints it (its kernel and user stack), at most MAX bytes (cut with "…");
 * *RET is NULL when S has no thread TID. -ENOMEM. */
int snapshot_thread_text(const Snapshot *s, pid_t tid, const TextOptions *o, size_t max, char **ret);

/* How snapshot_render_stored() writes a document out. */
typedef enum SnapshotRender {
        SNAPSHOT_RENDER_JSON,   /* the document, written out again by json-c */
        SNAPSHOT_RENDER_TEXT,
        SNAPSHOT_RENDER_FOLDED,
        SNAPSHOT_RENDER_SVG,    /* snapshot_print_svg() */
        SNAPSHOT_RENDER_PPROF,  /* a gzipped pprof profile (snapshot-pprof.h): binary */
} SnapshotRender;

/* S as snapshot_print_svg() draws it, with O's SVG options and its kernel frames when O->kernel. */
int snapshot_render_svg(const Snapshot *s, const TextOptions *o, FILE *f);

/* A stored document is untrusted input: parse it within json_parse_bounded()'s bounds and write it to F as HOW
 * asks. JSON comes out of json-c, not as the file held it, so every control character is escaped. On a document
 * that is not a snapshot: -EBADMSG with *RET_WHY (static) saying why; -ENOMEM; -EIO when F fails. */
int snapshot_render_stored(const char *json, size_t len, SnapshotRender how, const TextOptions *o, FILE *f,
                           const char **ret_why);
