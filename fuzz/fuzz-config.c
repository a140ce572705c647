/* fuzz-config.c: the configuration loader: an input is one YAML file (the seeds are conf/ and the golden configs),
 * loaded through config_load() twice, as the main file and as a rules.d drop-in, so that both key tables, the
 * value parsers, the cross-file checks and the error list all see it. On success each rule is matched against a
 * thread, which runs its globs. config_load() reads paths, so the input is written to a scratch directory first. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <sys/stat.h>

#include "config/config-load.h"
#include "config/rules.h"
#include "fuzz.h"

static char main_path[PATH_MAX], dropin_dir[PATH_MAX], dropin_path[PATH_MAX];

static void match_rules(const Config *c) {
        const ThreadFacts f = {
                .class = THREAD_CLASS_BLOCKED,
                .class_usec = 120 * USEC_PER_SEC,
                .state = 'D',
                .comm = "nginx: worker",
                .exe = "/usr/sbin/nginx",
                .unit = "nginx.service",
                .cgroup = "/system.slice/nginx.service",
                .wchan = "io_schedule",
                .uid = 33,
                .syscall_nr = 0,
                .cpu_percent = NAN,
        };

        for (size_t i = 0; i < c->n_rules; i++)
                (void) rule_matches(&c->rules[i], &f);
}

static void load(const char *path, const char *dir) {
        _cleanup_(config_freep) Config *c = NULL;
        ConfigErrors errs = {};
        int r;

        r = config_load(path, dir, &c, &errs);
        if (r >= 0)
                match_rules(c);
        else if (r == -EINVAL && config_errors_count(&errs) == 0)
                abort(); /* a refused file always says why */
        config_errors_print(&errs, fuzz_sink());
        config_errors_done(&errs);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
        const char *d = fuzz_scratch();

        snprintf(main_path, sizeof main_path, "%s/stackwatch.yaml", d);
        snprintf(dropin_dir, sizeof dropin_dir, "%s/rules.d", d);
        snprintf(dropin_path, sizeof dropin_path, "%s/50-fuzz.yaml", dropin_dir);
        if (mkdir(dropin_dir, 0700) < 0)
                abort();
        return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        fuzz_write_file(main_path, data, size);
        load(main_path, NULL);
        fuzz_write_file(dropin_path, data, size);
        load(NULL, dropin_dir);
        return 0;
}
