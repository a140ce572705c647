/* test-capture.c: capture decisions that need a kernel we do not have, driven through fake /proc task dirs. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "unit.h"

/* The static helpers under test (chrony's pattern: include the module rather than export its internals). */
#include "../../lib/capture/capture.c"

static int make_taskdir(char *tmpl, bool with_stack, const char *stack_text) {
        int dirfd, fd;

        ck_assert_ptr_nonnull(mkdtemp(tmpl));
        dirfd = open(tmpl, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ck_assert_int_ge(dirfd, 0);
        fd = openat(dirfd, "stat", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        ck_assert_int_ge(fd, 0);
        close(fd);
        if (with_stack) {
                fd = openat(dirfd, "stack", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
                ck_assert_int_ge(fd, 0);
                ck_assert_int_eq(write(fd, stack_text, strlen(stack_text)), (ssize_t) strlen(stack_text));
                close(fd);
        }
        return dirfd;
}

static void remove_taskdir(const char *path, int dirfd) {
        unlinkat(dirfd, "stat", 0);
        unlinkat(dirfd, "stack", 0);
        close(dirfd);
        rmdir(path);
}

START_TEST(test_kernel_without_proc_stack) {
        char tmpl[] = "/tmp/stackwatch-task-XXXXXX";
        int dirfd = make_taskdir(tmpl, false, NULL);
        CaptureOptions o;
        _cleanup_snapshot_free_ Snapshot *s = snapshot_new();
        ThreadSnapshot *t1 = snapshot_add_thread(s), *t2 = snapshot_add_thread(s);
        Capture c;

        capture_options_init(&o);
        c = (Capture) { .pid = 1, .o = &o, .s = s };
        ck_assert_int_eq(read_kernel_stack(&c, dirfd, t1), 0);
        ck_assert_int_eq(read_kernel_stack(&c, dirfd, t2), 0);
        /* Said once for the process, not once per thread, and the snapshot is marked partial. */
        ck_assert_ptr_nonnull(s->errors);
        ck_assert_str_eq(s->errors[0], "kernel stacks unavailable: this kernel has no /proc/PID/stack");
        ck_assert_ptr_null(s->errors[1]);
        ck_assert(s->partial);
        ck_assert_uint_eq(t1->n_kframes, 0);
        remove_taskdir(tmpl, dirfd);
}
END_TEST

START_TEST(test_kernel_stack_parsed) {
        char tmpl[] = "/tmp/stackwatch-task-XXXXXX";
        int dirfd = make_taskdir(tmpl, true, "[<0>] futex_do_wait+0x30/0x80\n[<0>] xfs_ilock+0x12/0x40 [xfs]\n");
        CaptureOptions o;
        _cleanup_snapshot_free_ Snapshot *s = snapshot_new();
        ThreadSnapshot *t = snapshot_add_thread(s);
        Capture c;

        capture_options_init(&o);
        c = (Capture) { .pid = 1, .o = &o, .s = s };
        ck_assert_int_eq(read_kernel_stack(&c, dirfd, t), 0);
        ck_assert_uint_eq(t->n_kframes, 2);
        ck_assert_str_eq(t->kframes[0].function, "futex_do_wait");
        ck_assert_uint_eq(t->kframes[0].offset, 0x30);
        ck_assert_str_eq(t->kframes[1].module, "xfs");
        ck_assert_ptr_null(s->errors);
        remove_taskdir(tmpl, dirfd);
}
END_TEST

START_TEST(test_options_defaults) {
        CaptureOptions o;

        capture_options_init(&o);
        ck_assert_int_eq(o.method, CAPTURE_METHOD_AUTO);
        ck_assert_int_eq(o.unwinder, UNWINDER_LIBDW);
        ck_assert(o.kernel);
        ck_assert_uint_eq(o.max_frames, CAPTURE_FRAMES_DEFAULT);
        ck_assert_uint_eq(o.stack_bytes, CAPTURE_STACK_BYTES_DEFAULT);
        ck_assert_str_eq(capture_method_to_string(CAPTURE_METHOD_PASSIVE), "passive");
        ck_assert_int_eq(capture_method_from_string("ptrace"), CAPTURE_METHOD_PTRACE);
        ck_assert_int_eq(capture_method_from_string("gdb"), -EINVAL);
        ck_assert_int_eq(unwinder_kind_from_string("fp"), UNWINDER_FP);
        ck_assert_int_eq(frame_method_from_string(NULL), -EINVAL);
}
END_TEST

UNIT_TEST_MAIN("capture", test_kernel_without_proc_stack, test_kernel_stack_parsed, test_options_defaults)
