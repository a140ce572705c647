/* task-iter-pass: the BPF task iterator's raw pass alone, for bench/scan. Loads lib/proc/task-iter once, then
 * times ROUNDS calls of task_iter_read() (one read() of every thread's fixed-size record, no conversion, no
 * classifier), so the scan's cost can be split into the kernel's pass and what the daemon does with the records.
 *
 *   task-iter-pass ROUNDS [changed [WALK [PAUSE_MS]]]  ->  "pass US US ..." (wall us per pass, pass 1 included),
 *        then "records N", "same N", "groups N" and "laned N" (of the last pass), and "walk NAME"
 *
 * With "changed", passes after the first write whole records only for threads that ran or changed state (as the
 * daemon's scans do), the others as their tid alone or, where the kernel has open-coded task iterators, as a count
 * per process. WALK (lanes, list, per-task; default the best that loads) says how those passes meet the threads,
 * PAUSE_MS how long to sleep between passes: a second, as the daemon polls, finds the threads cold in the caches.
 *
 * Linked by bench/scan against the build tree's lib/libstackwatch.a (-lbpf -lelf -lz), as the daemon is. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "proc/task-iter.h"

static double now_us(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

int main(int argc, char **argv) {
        TaskIter *it = NULL;
        char *why = NULL;
        int rounds = argc > 1 ? atoi(argv[1]) : 10;
        int changed = argc > 2 && strcmp(argv[2], "changed") == 0;
        int pause_ms = argc > 4 ? atoi(argv[4]) : 0;
        TaskIterWalk walk = TASK_ITER_WALK_BEST;
        TaskPass pass = {};
        int r;

        for (TaskIterWalk w = TASK_ITER_WALK_LANES; argc > 3 && w < _TASK_ITER_WALK_MAX; w++)
                if (strcmp(argv[3], task_iter_walk_to_string(w)) == 0)
                        walk = w;
        r = task_iter_new_walk(&it, walk, &why);
        if (r < 0) {
                fprintf(stderr, "task_iter_new: %s (%s)\n", strerror(-r), why ? why : "?");
                return 1;
        }
        printf("pass");
        for (int i = 0; i < rounds; i++) {
                double t0 = now_us();

                r = task_iter_read(it, !changed || i == 0, &pass);
                if (r < 0) {
                        fprintf(stderr, "task_iter_read: %s\n", strerror(-r));
                        return 1;
                }
                printf(" %.1f", now_us() - t0);
                if (pause_ms > 0 && i + 1 < rounds)
                        usleep((useconds_t) pause_ms * 1000);
        }
        printf("\nrecords %zu\nsame %zu\ngroups %zu\nlaned %u\nwalk %s\n", pass.n_records, pass.n_same,
               pass.n_groups, pass.n_laned, task_iter_walk_to_string(task_iter_walk(it)));
        task_iter_free(it);
        free(why);
        return 0;
}
