/* snapshot-svg.h: a snapshot drawn as SVG by our own code: a flame graph of its threads and a picture of its wait
 * chain, for stackctl --svg, the daemon's ?format=svg and its web page. */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>

#include "model/snapshot.h"

typedef enum SvgPicture {
        SVG_PICTURE_ALL,        /* the wait chain on top (when the snapshot has one), then the flame graph */
        SVG_PICTURE_FLAME,
        SVG_PICTURE_CHAIN,
        _SVG_PICTURE_MAX,
        _SVG_PICTURE_INVALID = -EINVAL,
} SvgPicture;

/* "all", "flame", "chain". */
const char *svg_picture_to_string(SvgPicture p);
SvgPicture svg_picture_from_string(const char *s);

typedef struct SvgOptions {
        SvgPicture picture;
        bool icicle;            /* the flame graph upside down: the threads' classes on top, innermost frames below */
        bool kernel;            /* kernel frames above (below, icicle) the user frames */
} SvgOptions;

/* Bounds on what one picture draws: the boxes of a wait chain (its edges past them are counted, not drawn). */
#define SVG_CHAIN_BOXES_MAX 64

/* S as one standalone SVG document (O NULL: everything, no kernel frames). Coordinates are fixed-precision and
 * children ordered by name, so the same snapshot gives the same bytes. Every string of the snapshot is XML-escaped
 * (fputs_xml()). The flame graph's frames are <g class="frame"> elements with data-name, data-kind, data-s (first
 * thread), data-n (threads) and data-d (depth) attributes; one <script> attaches click-to-zoom and search to them
 * with addEventListener (no inline handlers), so a page that strips it can drive the same markup. -ENOMEM, -EIO. */
int snapshot_print_svg(const Snapshot *s, const SvgOptions *o, FILE *f);
