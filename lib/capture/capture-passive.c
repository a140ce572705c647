/* capture-passive.c: passive capture: a sleeping thread's user SP/PC from /proc and its stack via
 * process_vm_readv. The thread never stops, which is also the only way to read a D-state thread. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "base/macro.h"
#include "capture/capture-passive.h"
#include "proc/proc-read.h"
#include "unwind/arch.h"

int capture_passive_regs(const ProcSyscall *sc, UnwindRegs *ret) {
        return arch_regs_from_syscall(sc, ret);
}

int capture_thread_state(int taskfd) {
        char buf[1024];
        ProcStat st;
        ssize_t n;

        n = proc_read_small(taskfd, "stat", buf, sizeof buf);
        if (n < 0)
                return (int) n;
        if (proc_parse_stat(buf, (size_t) n, &st) < 0)
                return -EINVAL;
        return (unsigned char) st.state;
}

/* The length to copy from SP: up to MAX, within the mapping that holds SP; 0 when SP is in none. */
static size_t stack_extent(const ProcMap *maps, size_t n_maps, uint64_t sp, size_t max, bool *ret_truncated) {
        const ProcMap *m = proc_maps_find(maps, n_maps, sp);

        if (!m)
                return 0;
        if (ret_truncated)
                *ret_truncated = m->end - sp > max;
        return (size_t) MIN(m->end - sp, (uint64_t) max);
}

int capture_read_stack(pid_t pid, const ProcMap *maps, size_t n_maps, uint64_t sp, uint8_t *buf, size_t max,
                       UnwindStack *ret, bool *ret_truncated) {
        size_t len = stack_extent(maps, n_maps, sp, max, ret_truncated);
        ssize_t n;

        if (len == 0)
                return -EFAULT;
        n = proc_mem_read_upto(pid, sp, buf, len);
        if (n < 0)
                return (int) n;
        *ret = (UnwindStack) { .base = sp, .data = buf, .len = (size_t) n };
        return 0;
}

int capture_copy_stack(pid_t pid, const ProcMap *maps, size_t n_maps, uint64_t sp, size_t max, UnwindStack *ret,
                       bool *ret_truncated) {
        size_t len = stack_extent(maps, n_maps, sp, max, ret_truncated);
        uint8_t *buf;
        int r;

        if (len == 0)
                return -EFAULT;
        buf = malloc(len);
        if (!buf)
                return -ENOMEM;
        r = capture_read_stack(pid, maps, n_maps, sp, buf, len, ret, NULL);
        if (r < 0)
                free(buf);
        return r;
}
