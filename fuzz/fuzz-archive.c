/* fuzz-archive.c: the archive file decoder: an input is the bytes of one snapshot file (the seeds are real ones the
 * daemon wrote), as archive_decode() takes them from the journal: the header frame, its JSON summary and the id
 * it names, then the zstd document frame. What a good file yields is used as "stackctl list" uses it. */
#include <errno.h>

#include "base/json-util.h"
#include "store/archive.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_(archive_summary_done) ArchiveSummary s = {};
        _cleanup_(json_object_putp) json_object *j = NULL;
        _cleanup_free_ char *json = NULL;
        size_t len = 0;

        if (archive_decode(data, size, &json, &len, &s) < 0)
                return 0;
        /* A decoded document is NUL-terminated at its size, and the header's id is one of ours. */
        if (json[len] != '\0' || !archive_id_is_valid(s.id) || archive_id_compare(s.id, s.id) != 0)
                abort();
        j = archive_summary_to_json(&s);
        if (!j)
                abort();
        (void) json_object_to_json_string(j);
        return 0;
}
