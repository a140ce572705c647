/* fuzz-snapshot-json.c: the stackwatch.snapshot/1 reader: an input is a JSON document (the seeds are real
 * "stackctl dump --json" output), parsed within json_parse_bounded()'s bounds into a Snapshot, then put through
 * everything that shows a stored or remote snapshot to someone: the text, folded, SVG and pprof renderings, an alert's top
 * frames and a thread's text, and the JSON writer, whose output must read back. */
#include <errno.h>

#include "base/escape.h"
#include "base/json-util.h"
#include "base/strv.h"
#include "render/render.h"
#include "render/snapshot-json.h"
#include "render/snapshot-text.h"
#include "fuzz.h"

static void render(const Snapshot *s, const RenderOptions *ro, const TextOptions *o) {
        for (RenderFormat f = 0; f < _RENDER_FORMAT_MAX; f++)
                (void) snapshot_render(s, f, ro, fuzz_sink());
        for (size_t i = 0; i < s->n_threads; i++) {
                _cleanup_strv_free_ char **top = NULL;
                _cleanup_free_ char *text = NULL;

                (void) snapshot_top_frames(s, s->threads[i].tid, 5, &top);
                (void) snapshot_thread_text(s, s->threads[i].tid, o, 4096, &text);
        }
}

/* What the writer makes of a snapshot the reader accepted is UTF-8, and a snapshot again. */
static void round_trip(const Snapshot *s) {
        _cleanup_snapshot_free_ Snapshot *again = NULL;
        _cleanup_free_ char *text = NULL;
        json_object *j = snapshot_to_json(s), *k = NULL;
        const char *why = NULL;
        size_t len, n;
        int r;

        if (!j || json_to_text(j, JSON_C_TO_STRING_PLAIN, &text, &len) < 0)
                abort();
        for (size_t i = 0; i < len; i += n)
                if ((n = utf8_sequence_len(text + i, len - i, NULL)) == 0) {
                        fprintf(stderr, "the JSON writer wrote a byte that is not UTF-8 at %zu\n", i);
                        abort();
                }
        r = json_parse_bounded(text, len, &k, &why);
        if (r >= 0)
                r = snapshot_from_json(k, &again, &why);
        if (r < 0) {
                fprintf(stderr, "a snapshot written out does not read back: %s\n", strna(why));
                abort();
        }
        json_object_put(k);
        json_object_put(j);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_free_ char *text = fuzz_memdup(data, size);
        _cleanup_snapshot_free_ Snapshot *s = NULL;
        TextOptions o = { .kernel = true, .modules = true, .locks = true, .raw_names = size & 1 };
        RenderOptions ro = { .kernel = true, .modules = true, .locks = true, .raw_names = size & 1, .icicle = true };
        const char *why = NULL;
        json_object *j = NULL;

        /* The stored-document path as the daemon's renderer and "stackctl show" take it. */
        (void) snapshot_render_stored(text, size, RENDER_JSON, &ro, fuzz_sink(), &why);

        if (json_parse_bounded(text, size, &j, &why) < 0)
                return 0;
        if (snapshot_from_json(j, &s, &why) >= 0) {
                render(s, &ro, &o);
                round_trip(s);
        }
        json_object_put(j);
        return 0;
}
