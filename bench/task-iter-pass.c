/* task-iter-pass: the BPF task iterator's raw pass alone, for bench/scan. Loads lib/proc/task-iter once, then
 * times ROUNDS calls of task_iter_read() (one read() of every thread's fixed-size record, no conversion, no
 * classifier), so the scan's cost can be split into the kernel's pass and what the daemon does with the records.
 *
 *   task-iter-pass ROUNDS [changed]  ->  "pass US US ..." (wall us per pass, pass 1 included), then "records N",
 *                                        "same N" and "groups N" (of the last pass)
 *
 * With "changed", passes after the first write whole records only for threads that ran or changed state (as the
 * daemon's scans do), the others as their tid alone or, where the kernel has open-coded task iterators, as a count
 * per process.
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
        TaskPass pass = {};
        int r;

        r = task_iter_new(&it, &why);
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
        }
        printf("\nrecords %zu\nsame %zu\ngroups %zu\n", pass.n_records, pass.n_same, pass.n_groups);
        task_iter_free(it);
        free(why);
        return 0;
}
