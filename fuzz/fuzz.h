/* fuzz.h: what every libFuzzer harness here shares: quiet but complete logging (set up by including this), inputs
 * as C strings, a sink for rendered output, and a scratch directory removed at exit. */
#pragma once

#include <ftw.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/log.h"
#include "base/macro.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* Debug messages are formatted (a bad format argument is a bug the sanitizers should see) and thrown away. */
static inline void fuzz_log_discard(int level, int error, const char *file, int line, const char *func,
                                    const char *message) {
}

/* Before libFuzzer's main(), in every harness. */
__attribute__((constructor)) static void fuzz_log_init(void) {
        log_set_max_level(LOG_DEBUG);
        log_set_writer(fuzz_log_discard);
}

/* DATA as a malloc'd NUL-terminated string (an embedded NUL ends it early, as it would for the code under test);
 * aborts on OOM, which the fuzzer reports. */
static inline char *fuzz_strndup(const uint8_t *data, size_t size) {
        char *s = malloc(size + 1);

        if (!s)
                abort();
        memcpy(s, data, size);
        s[size] = '\0';
        return s;
}

/* DATA as a malloc'd buffer of exactly SIZE bytes (at least one allocated), no NUL added: a read past its end is
 * one ASan reports. */
static inline char *fuzz_memdup(const uint8_t *data, size_t size) {
        char *s = malloc(MAX(size, (size_t) 1));

        if (!s)
                abort();
        memcpy(s, data, size);
        return s;
}

/* Where rendered output goes: every byte is written, none kept. */
static inline FILE *fuzz_sink(void) {
        static FILE *f;

        if (!f && !(f = fopen("/dev/null", "we")))
                abort();
        return f;
}

/* ---- a scratch directory, removed at exit ---- */

static char fuzz_scratch_path[64];

static inline int fuzz_rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
        return remove(path);
}

static inline void fuzz_scratch_remove(void) {
        (void) nftw(fuzz_scratch_path, fuzz_rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* The scratch directory (under $TMPDIR or /tmp), made on first use. */
static inline const char *fuzz_scratch(void) {
        const char *tmp;

        if (fuzz_scratch_path[0])
                return fuzz_scratch_path;
        tmp = getenv("TMPDIR");
        snprintf(fuzz_scratch_path, sizeof fuzz_scratch_path, "%s/stackwatch-fuzz.XXXXXX",
                 tmp && *tmp && strlen(tmp) < 32 ? tmp : "/tmp");
        if (!mkdtemp(fuzz_scratch_path))
                abort();
        atexit(fuzz_scratch_remove);
        return fuzz_scratch_path;
}

/* Write DATA to PATH whole (created or truncated); aborts on failure, which is the machine's, not the input's. */
static inline void fuzz_write_file(const char *path, const uint8_t *data, size_t size) {
        FILE *f = fopen(path, "we");

        if (!f || (size > 0 && fwrite(data, size, 1, f) != 1) || fclose(f) != 0)
                abort();
}
