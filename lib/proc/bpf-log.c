/* bpf-log.c: libbpf's messages into our debug log (see bpf-log.h). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/log.h"
#include "proc/bpf-log.h"

#ifdef HAVE_BPF
#include <bpf/libbpf.h>

static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap) {
        char line[512];

        if (level == LIBBPF_DEBUG)
                return 0;
        vsnprintf(line, sizeof line, fmt, ap);
        line[strcspn(line, "\n")] = '\0';
        log_debug("libbpf: %s", line);
        return 0;
}

void bpf_log_to_debug(void) {
        libbpf_set_print(libbpf_print);
}
#else
void bpf_log_to_debug(void) {
}
#endif
