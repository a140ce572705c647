/* test-capture.c: capture decisions that need a kernel we do not have, driven through fake /proc task dirs; and the
 * hold on a thread that never stopped, on a real one. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
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

/* The state letter of PID, from the last ')' of /proc/PID/stat; '?' when unreadable. */
static char pid_state(pid_t pid) {
        char path[64], buf[512], *p;
        int fd;
        ssize_t n;

        snprintf(path, sizeof path, "/proc/%d/stat", (int) pid);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return '?';
        n = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (n <= 0)
                return '?';
        buf[n] = 0;
        p = strrchr(buf, ')');
        return p && p[1] && p[2] ? p[2] : '?';
}

static void wait_pid_state(pid_t pid, char want) {
        for (int i = 0; i < 5000 && pid_state(pid) != want; i++)
                nanosleep(&(struct timespec) { .tv_nsec = 1000000 }, NULL);
        ck_assert_msg(pid_state(pid) == want, "pid %d in state %c, not %c", (int) pid, pid_state(pid), want);
}

static int tracer_of(pid_t pid) {
        char path[64], line[256];
        int tracer = -1;
        FILE *f;

        snprintf(path, sizeof path, "/proc/%d/status", (int) pid);
        f = fopen(path, "re");
        ck_assert_ptr_nonnull(f);
        while (fgets(line, sizeof line, f))
                if (strncmp(line, "TracerPid:", 10) == 0)
                        tracer = (int) strtol(line + 10, NULL, 10);
        fclose(f);
        return tracer;
}

/* Issue #34: a thread that never stopped (a vfork parent: uninterruptible sleep) is kept attached, the capture keeps
 * its raised priority while it holds it, and releases it, then lowers, once it wakes and stops. */
START_TEST(test_held_thread_keeps_priority_until_released) {
        int go[2], before = getpriority(PRIO_PROCESS, 0);
        PtraceBatchItem it = {};
        CaptureOptions o;
        Capture c;
        bool raised;
        pid_t pid;

        ck_assert_int_eq(pipe2(go, O_CLOEXEC), 0);
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                char ch;

                /* The parent of a vfork sleeps uninterruptibly until its child exits. */
                if (vfork() == 0) {
                        (void) read(go[0], &ch, 1);
                        _exit(0);
                }
                for (;;)
                        pause();
        }
        close(go[0]);
        wait_pid_state(pid, 'D');

        capture_options_init(&o);
        c = (Capture) { .pid = pid, .o = &o, .dirfd = -EBADF };
        raised = capture_sched_begin(&c.sched);
        it.tid = pid;
        ck_assert_int_eq(capture_ptrace_batch(pid, NULL, 0, 4096, 20000, 20000, &it, 1, &c.held), 0);
        ck_assert_int_eq(it.error, -ETIMEDOUT);
        ck_assert_uint_eq(c.held.n, 1);
        ck_assert_int_eq(tracer_of(pid), (int) getpid());

        /* Still asleep: still held, still raised. */
        capture_lower(&c);
        ck_assert_uint_eq(c.held.n, 1);
        ck_assert_int_eq(getpriority(PRIO_PROCESS, 0), raised ? -20 : before);

        /* It wakes, takes the interrupt and stops; the next look releases it, then the priority drops. */
        ck_assert_int_eq(write(go[1], "x", 1), 1);
        wait_pid_state(pid, 't');
        capture_lower(&c);
        ck_assert_uint_eq(c.held.n, 0);
        ck_assert_int_eq(getpriority(PRIO_PROCESS, 0), before);
        wait_pid_state(pid, 'S');
        ck_assert_int_eq(tracer_of(pid), 0);

        capture_done(&c);
        close(go[1]);
        ck_assert_int_eq(kill(pid, SIGKILL), 0);
        ck_assert_int_eq(waitpid(pid, NULL, 0), pid);
}
END_TEST

UNIT_TEST_MAIN("capture", test_kernel_without_proc_stack, test_kernel_stack_parsed, test_options_defaults,
               test_held_thread_keeps_priority_until_released)
