/* fuzz-problems.c: the problems ledger (problems.jsonl) and the rows of GET /problems from other hosts: an input is
 * a ledger's text (the seeds are ledgers the daemon wrote). What parses is merged, sorted and written back out, as
 * stackctl problems and the API do; every row must have a valid signature and its counts add up. */
#include <errno.h>

#include "base/json-util.h"
#include "store/problems.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_(problem_table_done) ProblemTable t = {}, again = {};
        _cleanup_free_ char *text = fuzz_strndup(data, size);
        uint64_t total = 0, total_again = 0;

        if (!text || problems_ledger_parse(text, &t, NULL) < 0)
                return 0;
        problem_table_sort(&t);
        for (size_t i = 0; i < t.n; i++) {
                _cleanup_(json_object_putp) json_object *j = problem_to_json(&t.items[i]);
                _cleanup_(problem_done) Problem p = {};

                if (!archive_signature_is_valid(t.items[i].signature) || !j)
                        abort();
                (void) json_object_to_json_string(j);
                /* What is written reads back, and merges into the same counts. */
                if (problem_from_json(j, &p) < 0 || problem_table_merge(&again, &p) < 0)
                        abort();
                total += t.items[i].count;
        }
        for (size_t i = 0; i < again.n; i++)
                total_again += again.items[i].count;
        if (again.n != t.n || total != total_again)
                abort();
        return 0;
}
