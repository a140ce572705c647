/* walk-count.c: a test helper that counts one process's threads as the BPF scan's passes of changes meet them, with a
 * walk chosen by name, so that test_scan_source.py can hold each walk to /proc's count while threads come and go.
 *
 *   walk-count WALK PID    WALK: lanes, list or per-task
 *
 * Makes the first pass (every whole record), prints "READY", then one pass of changes for each line read on stdin
 * ("pass", or "pass MS": MS milliseconds after the last pass ended, as the daemon's polls come),
 * and for each one JSON line: {"walk":"lanes","seen":N,"twice":N,"laned":N,"overflowed":B,"ring_kib":N}: the
 * threads of PID the pass gave, as a whole record, a bare tid or a count; how many tids it gave more than once; how
 * many processes the pass walked along lanes; whether the walk's ring overflowed; and its size after the pass.
 * Exits 0 at the end of stdin; 1 with the reason on stderr when the walk cannot be loaded. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc-util.h"
#include "base/intmap.h"
#include "base/macro.h"
#include "proc/task-iter.h"

/* Whether thread TID is one of PID's: a bare tid says nothing else. */
static bool of_process(int pid, uint32_t tid) {
        char path[64];

        snprintf(path, sizeof path, "/proc/%d/task/%u", pid, tid);
        return access(path, F_OK) == 0;
}

/* Count TID once in SEEN, and in *TWICE when it was there already. */
static int count_tid(IntMap *seen, uint32_t tid, unsigned *n, unsigned *twice) {
        int r;

        if (intmap_get(seen, (int) tid)) {
                (*twice)++;
                return 0;
        }
        r = intmap_put(seen, (int) tid, (void *) (uintptr_t) 1);
        if (r < 0)
                return r;
        (*n)++;
        return 0;
}

int main(int argc, char *argv[]) {
        _cleanup_(task_iter_freep) TaskIter *it = NULL;
        _cleanup_free_ char *why = NULL;
        TaskIterWalk walk = _TASK_ITER_WALK_MAX;
        char line[64];
        TaskPass pass;
        int pid, r;

        for (TaskIterWalk w = TASK_ITER_WALK_LANES; argc == 3 && w < _TASK_ITER_WALK_MAX; w++)
                if (streq(argv[1], task_iter_walk_to_string(w)))
                        walk = w;
        if (walk == _TASK_ITER_WALK_MAX || (pid = atoi(argv[2])) <= 0) {
                fprintf(stderr, "usage: walk-count lanes|list|per-task PID\n");
                return 2;
        }
        r = task_iter_new_walk(&it, walk, &why);
        if (r < 0) {
                fprintf(stderr, "walk-count: no %s walk: %s\n", argv[1], why ?: strerror(-r));
                return 1;
        }
        r = task_iter_read(it, true, &pass);
        if (r < 0) {
                fprintf(stderr, "walk-count: reading the iterator: %s\n", strerror(-r));
                return 1;
        }
        printf("READY\n");
        fflush(stdout);
        while (fgets(line, sizeof line, stdin)) {
                _cleanup_(intmap_done) IntMap seen = {};
                unsigned n = 0, twice = 0, after_ms = 0;

                if (sscanf(line, "pass %u", &after_ms) == 1 && after_ms > 0)
                        usleep(after_ms * 1000U);
                r = task_iter_read(it, false, &pass);
                if (r < 0) {
                        fprintf(stderr, "walk-count: reading the iterator: %s\n", strerror(-r));
                        return 1;
                }
                for (size_t i = 0; i < pass.n_records && r >= 0; i++)
                        if ((int) pass.records[i].tgid == pid)
                                r = count_tid(&seen, pass.records[i].tid, &n, &twice);
                for (size_t i = 0; i < pass.n_same && r >= 0; i++)
                        if (of_process(pid, pass.same[i]))
                                r = count_tid(&seen, pass.same[i], &n, &twice);
                if (r < 0) {
                        fprintf(stderr, "walk-count: %s\n", strerror(-r));
                        return 1;
                }
                for (size_t i = 0; i < pass.n_groups; i++)
                        if ((int) pass.groups[i].tgid == pid)
                                n += pass.groups[i].same;
                printf("{\"walk\":\"%s\",\"seen\":%u,\"twice\":%u,\"laned\":%u,\"overflowed\":%s,"
                       "\"ring_kib\":%zu}\n",
                       task_iter_walk_to_string(task_iter_walk(it)), n, twice, pass.n_laned,
                       pass.overflowed ? "true" : "false", task_iter_ring_bytes(it) >> 10);
                fflush(stdout);
        }
        return 0;
}
