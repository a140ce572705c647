/* py-offsets-print.c: a test helper that prints the PyOffsets python-offsets gives for one CPython, as "name value"
 * lines ("none" for PY_OFF_NONE), the format of py-offsets-headers.c, for test_python_offsets.py to compare with
 * CPython's own headers and with a live interpreter.
 *
 *   py-offsets-print VERSION               py_offsets_for_version(VERSION), VERSION a PY_VERSION_HEX (0x030c01f0)
 *   py-offsets-print --debug PID ADDRESS   py_offsets_from_debug() on the first PY_DEBUG_OFFSETS_BYTES at ADDRESS
 *                                          (_PyRuntime) in process PID, read with process_vm_readv() as the
 *                                          capture reads a target: without stopping it
 *
 * Exits 0; 1 with the error on stderr when there is no table; 2 on a usage error. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "base/macro.h"
#include "base/parse-util.h"
#include "runtime/python-offsets.h"

#define FIELD(f) { #f, offsetof(PyOffsets, f) }

/* Every uint32_t offset of PyOffsets, in the header's order. */
static const struct {
        const char *name;
        size_t offset;
} fields[] = {
        FIELD(runtime_interpreters_head), FIELD(runtime_gil), FIELD(runtime_tstate_current),
        FIELD(interp_next), FIELD(interp_threads_head), FIELD(interp_gil),
        FIELD(gil_last_holder), FIELD(gil_locked),
        FIELD(tstate_next), FIELD(tstate_interp), FIELD(tstate_frame), FIELD(tstate_cframe),
        FIELD(cframe_current_frame), FIELD(tstate_thread_id), FIELD(tstate_native_thread_id),
        FIELD(tstate_on_delete_data),
        FIELD(frame_back), FIELD(frame_code), FIELD(frame_lasti), FIELD(frame_localsplus),
        FIELD(iframe_code), FIELD(iframe_previous), FIELD(iframe_instr), FIELD(iframe_is_entry), FIELD(iframe_owner),
        FIELD(iframe_size),
        FIELD(code_filename), FIELD(code_name), FIELD(code_qualname), FIELD(code_firstlineno), FIELD(code_linetable),
        FIELD(code_adaptive),
        FIELD(object_type), FIELD(type_name), FIELD(varobject_size), FIELD(bytes_data), FIELD(unicode_length),
        FIELD(unicode_state), FIELD(unicode_state_kind_shift), FIELD(unicode_ascii_data), FIELD(unicode_compact_data),
        FIELD(lock_lock), FIELD(rlock_lock), FIELD(rlock_owner), FIELD(rlock_count),
};

static void print_offsets(const PyOffsets *o) {
        static const char *const frames[] = { [PY_FRAMES_OBJECT] = "object", [PY_FRAMES_INTERP] = "interp" };
        static const char *const lines[] = {
                [PY_LINES_LNOTAB] = "lnotab", [PY_LINES_LINETABLE] = "linetable", [PY_LINES_LOCATIONS] = "locations",
        };

        printf("version %u\n", (unsigned) o->version);
        printf("frames %s\n", frames[o->frames]);
        printf("lines %s\n", lines[o->lines]);
        for (size_t i = 0; i < ELEMENTSOF(fields); i++) {
                uint32_t v;

                memcpy(&v, (const uint8_t *) o + fields[i].offset, sizeof v);
                if (v == PY_OFF_NONE)
                        printf("%s none\n", fields[i].name);
                else
                        printf("%s %u\n", fields[i].name, (unsigned) v);
        }
}

static int read_debug(const char *pid_arg, const char *address_arg, PyOffsets *ret) {
        uint8_t buf[PY_DEBUG_OFFSETS_BYTES];
        uint64_t address;
        int pid, r;

        r = parse_pid(pid_arg, &pid);
        if (r < 0)
                return r;
        r = safe_atou64_base(address_arg, 0, &address);
        if (r < 0)
                return r;
        struct iovec local = { .iov_base = buf, .iov_len = sizeof buf };
        struct iovec remote = { .iov_base = (void *) (uintptr_t) address, .iov_len = sizeof buf };
        ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
        if (n < 0)
                return -errno;
        return py_offsets_from_debug(buf, (size_t) n, ret);
}

int main(int argc, char *argv[]) {
        PyOffsets o;
        uint64_t version;
        int r;

        if (argc == 2) {
                r = safe_atou64_base(argv[1], 0, &version);
                if (r < 0 || version > UINT32_MAX) {
                        fprintf(stderr, "py-offsets-print: not a PY_VERSION_HEX: '%s'\n", argv[1]);
                        return 2;
                }
                r = py_offsets_for_version((uint32_t) version, &o);
        } else if (argc == 4 && streq(argv[1], "--debug"))
                r = read_debug(argv[2], argv[3], &o);
        else {
                fprintf(stderr, "usage: py-offsets-print VERSION | --debug PID ADDRESS\n");
                return 2;
        }
        if (r < 0) {
                fprintf(stderr, "py-offsets-print: no offsets: %s\n", strerror(-r));
                return 1;
        }
        print_offsets(&o);
        return 0;
}
