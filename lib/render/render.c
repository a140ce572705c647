/* render.c: one call renders a snapshot in any format. */
#include <json-c/json.h>

#include "base/json-util.h"
#include "base/macro.h"
#include "base/string-table.h"
#include "render/render.h"
#include "render/snapshot-json.h"
#include "render/snapshot-pprof.h"
#include "render/snapshot-text.h"

static const char *const render_format_table[_RENDER_FORMAT_MAX] = {
        [RENDER_TEXT] = "text",
        [RENDER_JSON] = "json",
        [RENDER_FOLDED] = "folded",
        [RENDER_SVG] = "svg",
        [RENDER_PPROF] = "pprof",
};

DEFINE_STRING_TABLE_LOOKUP(render_format, RenderFormat);

bool render_format_is_binary(RenderFormat f) {
        return f == RENDER_PPROF;
}

static int json_flags(const RenderOptions *o) {
        return o && o->json_flags ? o->json_flags : JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE;
}

int snapshot_render(const Snapshot *s, RenderFormat format, const RenderOptions *o, FILE *f) {
        static const RenderOptions defaults = {};
        json_object *j;
        int r;

        if (!o)
                o = &defaults;
        switch (format) {
        case RENDER_JSON:
                j = snapshot_to_json(s);
                if (!j)
                        return -ENOMEM;
                r = json_fputs(j, json_flags(o), f);
                json_object_put(j);
                return r;
        case RENDER_FOLDED:
                return snapshot_print_folded(s, o->kernel, f);
        case RENDER_SVG:
                return snapshot_print_svg(s, &(SvgOptions) { .picture = o->picture, .icicle = o->icicle,
                                                             .kernel = o->kernel },
                                          f);
        case RENDER_PPROF:
                return snapshot_write_pprof(s, f);
        case RENDER_TEXT:
        default:
                return snapshot_print_text(s,
                                           &(TextOptions) { .kernel = o->kernel, .modules = o->modules,
                                                            .locks = o->locks, .raw_names = o->raw_names,
                                                            .no_group = o->no_group },
                                           f);
        }
}

/* R of a parse: -EINVAL (not a snapshot, WHY says why) becomes -EBADMSG with *RET_WHY set. */
static int bad_document(int r, const char *why, const char **ret_why) {
        if (r != -EINVAL)
                return r;
        if (ret_why)
                *ret_why = why ?: "not a stackwatch snapshot";
        return -EBADMSG;
}

int snapshot_parse_stored(const char *json, size_t len, Snapshot **ret, const char **ret_why) {
        const char *why = NULL;
        json_object *j = NULL;
        int r;

        r = json_parse_bounded(json, len, &j, &why);
        if (r >= 0)
                r = snapshot_from_json(j, ret, &why);
        json_object_put(j);
        return bad_document(r, why, ret_why);
}

int snapshot_render_stored(const char *json, size_t len, RenderFormat format, const RenderOptions *o, FILE *f,
                           const char **ret_why) {
        _cleanup_snapshot_free_ Snapshot *s = NULL;
        const char *why = NULL;
        json_object *j = NULL;
        int r;

        /* JSON is written from the tree as it was parsed (what a later schema added stays), not from the model. */
        if (format == RENDER_JSON) {
                r = json_parse_bounded(json, len, &j, &why);
                if (r >= 0)
                        r = json_fputs(j, json_flags(o), f);
                json_object_put(j);
                return bad_document(r, why, ret_why);
        }
        r = snapshot_parse_stored(json, len, &s, ret_why);
        if (r < 0)
                return r;
        return snapshot_render(s, format, o, f);
}
