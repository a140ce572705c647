/* test-proc-parse.c: /proc parsers against real-shaped and hostile inputs. */
#include "unit.h"
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>

#include "base/macro.h"
#include "base/strv.h"
#include "model/proc-parse.h"

#define STAT_TAIL " S 1 100 100 0 -1 4194560 120 0 3 0 17 9 0 0 20 0 3 0 4242 1000 200 18446744073709551615 " \
                  "1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0\n"

static int parse_stat(const char *s, ProcStat *st) {
        return proc_parse_stat(s, strlen(s), st);
}

START_TEST(test_stat_hostile_comm) {
        static const struct {
                const char *line;
                const char *comm;
        } cases[] = {
                { "123 (bash)" STAT_TAIL, "bash" },
                { "123 (a) b (c)" STAT_TAIL, "a) b (c" },
                { "123 (with space)" STAT_TAIL, "with space" },
                { "123 (new\nline)" STAT_TAIL, "new\nline" },
                { "123 ())))" STAT_TAIL, ")))" },
                { "123 (123456789012345)" STAT_TAIL, "123456789012345" },
                { "123 ()" STAT_TAIL, "" },
                { "123 (x) S 9 (y)" STAT_TAIL, "x) S 9 (y" },
        };
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
                ProcStat st;
                ck_assert_int_eq(parse_stat(cases[i].line, &st), 0);
                ck_assert_str_eq(st.comm, cases[i].comm);
                ck_assert_int_eq(st.pid, 123);
                ck_assert_int_eq(st.state, 'S');
                ck_assert_int_eq(st.ppid, 1);
                ck_assert_uint_eq(st.flags, 4194560);
                ck_assert_uint_eq(st.utime, 17);
                ck_assert_uint_eq(st.stime, 9);
                ck_assert_uint_eq(st.num_threads, 3);
                ck_assert_uint_eq(st.starttime, 4242);
                ck_assert_int_eq(st.processor, 1);
        }
}
END_TEST

START_TEST(test_stat_broken) {
        ProcStat st;
        const char *bad[] = {
                "",
                "123",
                "123 (bash",
                "(bash)" STAT_TAIL,
                "abc (bash)" STAT_TAIL,
                "123 (bash) S",                                   /* truncated */
                "123 (bash) S 1 100 100 0 -1 4194560 120 0 3 0", /* truncated before utime */
                "123 (bash) S 1 100 100 0 -1 4194560 120 0 3 0 99999999999999999999999 9 0 0 20 0 3 0 1",
                "123 (bash) SS 1 100 100 0 -1 4194560 120 0 3 0 17 9 0 0 20 0 3 0 1",
                "0 (bash)" STAT_TAIL,
        };
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
                ck_assert_msg(parse_stat(bad[i], &st) < 0, "accepted: %s", bad[i]);
        /* Huge values that fit are kept exactly. */
        ck_assert_int_eq(parse_stat("7 (x) R 1 1 1 0 -1 0 0 0 0 0 18446744073709551615 0 0 0 0 0 1 0 5", &st), 0);
        ck_assert_uint_eq(st.utime, UINT64_MAX);
        ck_assert_int_eq(st.processor, -1); /* absent on a short line */
}
END_TEST

START_TEST(test_syscall) {
        ProcSyscall sc;
        const char *in = "0 0x3 0x7ffd2e5e3a07 0x1 0x0 0x0 0x0 0x7ffd2e5e39f8 0x7f3c1a8e5a5d\n";

        ck_assert_int_eq(proc_parse_syscall(in, strlen(in), &sc), 0);
        ck_assert_int_eq(sc.kind, PROC_SYSCALL_BLOCKED);
        ck_assert_int_eq(sc.nr, 0);
        ck_assert_uint_eq(sc.args[0], 3);
        ck_assert_uint_eq(sc.args[1], 0x7ffd2e5e3a07);
        ck_assert_uint_eq(sc.sp, 0x7ffd2e5e39f8);
        ck_assert_uint_eq(sc.pc, 0x7f3c1a8e5a5d);

        ck_assert_int_eq(proc_parse_syscall("running\n", 8, &sc), 0);
        ck_assert_int_eq(sc.kind, PROC_SYSCALL_RUNNING);
        ck_assert_int_eq(proc_parse_syscall("-1 0x7ffc0 0x40100a\n", 20, &sc), 0);
        ck_assert_int_eq(sc.kind, PROC_SYSCALL_NONE);
        ck_assert_uint_eq(sc.sp, 0x7ffc0);
        ck_assert_uint_eq(sc.pc, 0x40100a);

        ck_assert_int_lt(proc_parse_syscall("", 0, &sc), 0);
        ck_assert_int_lt(proc_parse_syscall("0 0x3 0x7f", 10, &sc), 0);        /* truncated */
        ck_assert_int_lt(proc_parse_syscall("-2 0x1 0x2", 10, &sc), 0);
        ck_assert_int_lt(proc_parse_syscall("0 0x3 0x1 0x1 0x0 0x0 0xzz 0x1 0x2", 34, &sc), 0);
        ck_assert_int_lt(proc_parse_syscall("-1 0x11111111111111111111 0x1", 29, &sc), 0);
}
END_TEST

/* restart_syscall turned back into the call it continues, by the kernel function it sleeps in. */
START_TEST(test_syscall_restart) {
        /* The records as the kernel prints them, after the number: the architecture's own. */
        static const struct {
                int64_t nr_in;
                const char *rest, *wchan;
                int64_t nr;
                bool restarted;
        } cases[] = {
#ifdef __NR_poll /* aarch64 has no poll(), and its ppoll() never continues through the restart block */
                { __NR_restart_syscall, "0x7f303c5a4790 0x1 0xffffffff 0x1 0x0 0x0 0x7ff0 0x7f10",
                  "poll_schedule_timeout.constprop.0", __NR_poll, true },
#endif
                { __NR_restart_syscall, "0x55d0 0x80 0x0 0x7ffd 0x0 0x0 0x7ff0 0x7f10", "futex_wait_queue", __NR_futex,
                  true },
                { __NR_restart_syscall, "0x55d0 0x80 0x0 0x7ffd 0x0 0x0 0x7ff0 0x7f10", "futex_wait_queue_me",
                  __NR_futex, true },
                { __NR_restart_syscall, "0x7ffd1000 0x0 0x0 0x0 0x0 0x0 0x7ff0 0x7f10", "do_nanosleep", __NR_nanosleep,
                  true },
                { __NR_restart_syscall, "0x1 0x0 0x7ffd1000 0x0 0x0 0x0 0x7ff0 0x7f10", "do_nanosleep",
                  __NR_clock_nanosleep, true },
                /* Not known: left as it is. */
                { __NR_restart_syscall, "0x1 0x0 0x0 0x0 0x0 0x0 0x7ff0 0x7f10", "ep_poll", __NR_restart_syscall,
                  false },
                { __NR_restart_syscall, "0x1 0x0 0x0 0x0 0x0 0x0 0x7ff0 0x7f10", NULL, __NR_restart_syscall, false },
                { __NR_restart_syscall, "0x1 0x0 0x0 0x0 0x0 0x0 0x7ff0 0x7f10", "", __NR_restart_syscall, false },
                /* Only restart_syscall is touched. */
                { __NR_ppoll, "0x1 0x0 0x0 0x0 0x0 0x0 0x7ff0 0x7f10", "futex_wait_queue", __NR_ppoll, false },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                char line[128];
                ProcSyscall sc;

                snprintf(line, sizeof line, "%" PRIi64 " %s", cases[i].nr_in, cases[i].rest);
                ck_assert_int_eq(proc_parse_syscall(line, strlen(line), &sc), 0);
                proc_syscall_resolve_restart(&sc, cases[i].wchan);
                ck_assert_int_eq(sc.nr, cases[i].nr);
                ck_assert_int_eq(sc.restarted, cases[i].restarted);
        }
}
END_TEST

START_TEST(test_status) {
        const char *in = "Name:\tbash\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t4242\nNgid:\t0\nPid:\t4243\n"
                         "PPid:\t1\nTracerPid:\t77\nUid:\t1000\t1001\t1000\t1000\nGid:\t0\t0\t0\t0\n"
                         "voluntary_ctxt_switches:\t150\nnonvoluntary_ctxt_switches:\t3\n";
        ProcStatus st;

        ck_assert_int_eq(proc_parse_status(in, strlen(in), &st), 0);
        ck_assert_int_eq(st.tgid, 4242);
        ck_assert_int_eq(st.tracer_pid, 77);
        ck_assert_uint_eq(st.uid, 1000);
        ck_assert_uint_eq(st.euid, 1001);
        ck_assert_uint_eq(st.voluntary_ctxt_switches, 150);
        ck_assert_uint_eq(st.nonvoluntary_ctxt_switches, 3);
        /* A name that looks like a field does not fool the line-start match. */
        in = "Name:\tTracerPid: 5\nTgid:\t1\nTracerPid:\t0\nUid:\t0\t0\t0\t0\n";
        ck_assert_int_eq(proc_parse_status(in, strlen(in), &st), 0);
        ck_assert_int_eq(st.tracer_pid, 0);
        in = "Name:\tx\nTgid:\t1\n"; /* truncated */
        ck_assert_int_lt(proc_parse_status(in, strlen(in), &st), 0);
}
END_TEST

START_TEST(test_kstack) {
        const char *in = "[<0>] anon_pipe_read+0x366/0x4a0\n[<0>] vfs_read+0x32c/0x360\n"
                         "[<0>] xfs_ilock+0x12/0x40 [xfs]\ngarbage line\n[<0>] \n[<0>] do_syscall_64+0x71/0x280\n";
        ProcKernelFrame f[8];
        int n = proc_parse_kstack(in, strlen(in), f, 8);

        ck_assert_int_eq(n, 4);
        ck_assert_str_eq(f[0].function, "anon_pipe_read");
        ck_assert_uint_eq(f[0].offset, 0x366);
        ck_assert_uint_eq(f[0].size, 0x4a0);
        ck_assert_str_eq(f[2].function, "xfs_ilock");
        ck_assert_str_eq(f[2].module, "xfs");
        ck_assert_str_eq(f[3].function, "do_syscall_64");
        ck_assert_int_eq(proc_parse_kstack(in, strlen(in), f, 2), 2); /* bounded by MAX */
}
END_TEST

START_TEST(test_maps) {
        char in[] = "55d0c4a00000-55d0c4a01000 r--p 00000000 fe:01 1234 /usr/bin/x y\n"
                    "7ffd0000-7ffd2000 rw-p 00000000 00:00 0                          [stack]\n"
                    "bad line\n"
                    "7fff0000-7fff1000 r-xp 00000000 00:00 0\n";
        ProcMap *m = NULL;
        size_t n = 0;

        ck_assert_int_eq(proc_parse_maps(in, strlen(in), &m, &n), 0);
        ck_assert_uint_eq(n, 3);
        ck_assert_uint_eq(m[0].start, 0x55d0c4a00000);
        ck_assert_str_eq(m[0].path, "/usr/bin/x y");
        ck_assert_uint_eq(m[0].dev_major, 0xfe);
        ck_assert_uint_eq(m[0].inode, 1234);
        ck_assert(m[0].r && !m[0].w && !m[0].x);
        ck_assert_str_eq(m[1].path, "[stack]");
        ck_assert(m[2].x);
        ck_assert_str_eq(m[2].path, "");
        ck_assert_ptr_eq(proc_maps_find(m, n, 0x7ffd1fff), &m[1]);
        ck_assert_ptr_null(proc_maps_find(m, n, 0x7ffd2000));
        ck_assert_ptr_null(proc_maps_find(m, n, 0));
        free(m);

        /* The last line without its newline (found by fuzz-proc): it ends at the string's NUL, and nothing is
         * written past LEN. */
        char last[] = "7fff0000-7fff1000 r-xp 00000000 00:00 0 /lib/x.so";
        ck_assert_int_eq(proc_parse_maps(last, strlen(last), &m, &n), 0);
        ck_assert_uint_eq(n, 1);
        ck_assert_str_eq(m[0].path, "/lib/x.so");
        free(m);

        /* A newline in a path is "\012" in maps, the only byte the kernel escapes there. */
        char nl[] = "7fff0000-7fff1000 r-xp 00000000 00:00 0 /tmp/a\\012b\\e\\01/c\\012\n";
        ck_assert_int_eq(proc_parse_maps(nl, strlen(nl), &m, &n), 0);
        ck_assert_uint_eq(n, 1);
        ck_assert_str_eq(m[0].path, "/tmp/a\nb\\e\\01/c\n");
        free(m);
}
END_TEST

START_TEST(test_cmdline_cgroup_unit) {
        char **v = NULL, *path = NULL, *unit = NULL;
        const char cmd[] = "/bin/sleep\0" "10\0";
        const char *cg = "0::/system.slice/nginx.service\n";

        ck_assert_int_eq(proc_parse_cmdline(cmd, sizeof cmd - 1, &v), 0);
        ck_assert_uint_eq(strv_length(v), 2);
        ck_assert_str_eq(v[1], "10");
        strv_free(v);
        /* Rewritten argv without a trailing NUL still yields its last argument. */
        ck_assert_int_eq(proc_parse_cmdline("abc", 3, &v), 0);
        ck_assert_uint_eq(strv_length(v), 1);
        ck_assert_str_eq(v[0], "abc");
        strv_free(v);

        ck_assert_int_eq(proc_parse_cgroup(cg, strlen(cg), &path, &unit), 0);
        ck_assert_str_eq(path, "/system.slice/nginx.service");
        ck_assert_str_eq(unit, "nginx.service");
        free(path);
        free(unit);
        ck_assert_int_eq(cgroup_path_get_unit("/user.slice/user-1000.slice/user@1000.service/app.slice/x.service", &unit), 0);
        ck_assert_str_eq(unit, "user@1000.service");
        free(unit);
        ck_assert_int_eq(cgroup_path_get_unit("/", &unit), -ENXIO);
        ck_assert_int_eq(cgroup_path_get_unit("/docker/abcdef", &unit), -ENXIO);
        ck_assert_int_eq(proc_parse_cgroup("12:cpu:/x\n", 10, &path, &unit), -ENXIO);
}
END_TEST

/* The freezer's v1 hierarchy, alone or mounted with other controllers, and the unified one; a controller whose name
 * only starts like it is another. */
START_TEST(test_cgroup_hierarchy) {
        static const char cg[] = "9:name=systemd:/\n8:freezerx:/no\n6:cpu,freezer:/docker/abc\n0::/init.scope\n";
        char *path;

        ck_assert_int_eq(proc_parse_cgroup_hierarchy(cg, strlen(cg), "freezer", &path), 0);
        ck_assert_str_eq(path, "/docker/abc");
        free(path);
        ck_assert_int_eq(proc_parse_cgroup_hierarchy(cg, strlen(cg), "", &path), 0);
        ck_assert_str_eq(path, "/init.scope");
        free(path);
        ck_assert_int_eq(proc_parse_cgroup_hierarchy(cg, strlen(cg), "cpu", &path), 0);
        ck_assert_str_eq(path, "/docker/abc");
        free(path);
        ck_assert_int_eq(proc_parse_cgroup_hierarchy(cg, strlen(cg), "memory", &path), -ENXIO);
        ck_assert_int_eq(proc_parse_cgroup_hierarchy("6:freezer:/x", 12, "freezer", &path), 0);
        ck_assert_str_eq(path, "/x");
        free(path);
        ck_assert_int_eq(proc_parse_cgroup_hierarchy("6:freezer", 9, "freezer", &path), -ENXIO);
        ck_assert_int_eq(proc_parse_cgroup_hierarchy("10::/x\n", 7, "", &path), -ENXIO);
}
END_TEST

START_TEST(test_syscall_names) {
        /* The table is the build's own architecture's, generated from its kernel headers. */
#if defined(__x86_64__)
        ck_assert_str_eq(syscall_name(0), "read");
        ck_assert_str_eq(syscall_name(58), "vfork");
        ck_assert_str_eq(syscall_name(202), "futex");
#elif defined(__aarch64__)
        ck_assert_str_eq(syscall_name(63), "read");
        ck_assert_str_eq(syscall_name(98), "futex");
        ck_assert_str_eq(syscall_name(25), "fcntl");            /* named through __NR3264_fcntl */
        ck_assert_str_eq(syscall_name(79), "newfstatat");
        ck_assert_ptr_null(syscall_name(244));                  /* __NR_arch_specific_syscall: a bound */
#endif
        ck_assert_str_eq(syscall_name(__NR_restart_syscall), "restart_syscall");
        ck_assert_ptr_null(syscall_name(-1));
        ck_assert_ptr_null(syscall_name(100000));
}
END_TEST

START_TEST(test_schedstat) {
        const char ok[] = "123456789 2000 42\n";
        ProcSchedstat st = {};

        ck_assert_int_eq(proc_parse_schedstat(ok, strlen(ok), &st), 0);
        ck_assert_uint_eq(st.run_ns, 123456789);
        ck_assert_uint_eq(st.wait_ns, 2000);
        ck_assert_uint_eq(st.timeslices, 42);
        ck_assert_int_lt(proc_parse_schedstat("1 2\n", 4, &st), 0);
        ck_assert_int_lt(proc_parse_schedstat("", 0, &st), 0);
}
END_TEST

START_TEST(test_io) {
        const char ok[] = "rchar: 6976\nwchar: 12\nsyscr: 10\nsyscw: 1\nread_bytes: 0\nwrite_bytes: 0\n"
                          "cancelled_write_bytes: 0\n";
        /* A key must start its line: "xrchar:" is not "rchar:". */
        const char shifted[] = "xrchar: 1\nwchar: 2\nsyscr: 3\nsyscw: 4\n";
        ProcIo io;

        ck_assert_int_eq(proc_parse_io(ok, strlen(ok), &io), 0);
        ck_assert_uint_eq(io.rchar, 6976);
        ck_assert_uint_eq(io.wchar, 12);
        ck_assert_uint_eq(io.syscr, 10);
        ck_assert_uint_eq(io.syscw, 1);
        ck_assert_int_lt(proc_parse_io(shifted, strlen(shifted), &io), 0);
        ck_assert_int_lt(proc_parse_io(ok, 30, &io), 0); /* cut before syscw */
        ck_assert_int_lt(proc_parse_io("", 0, &io), 0);
}
END_TEST

START_TEST(test_fdinfo) {
        const char pipe[] = "pos:\t0\nflags:\t0100001\nmnt_id:\t15\nino:\t491111\n";
        const char epoll[] = "pos:\t0\nflags:\t02\nmnt_id:\t16\nino:\t1057\n"
                             "tfd:        5 events:       19 data:                5  pos:0 ino:77b31 sdev:8\n"
                             "tfd:        7 events:       1d data:                7  pos:0 ino:77b33 sdev:d\n"
                             "tfd: x events: 19\n";
        unsigned flags = 0;
        int fds[1] = {};

        ck_assert_int_eq(proc_parse_fdinfo_flags(pipe, strlen(pipe), &flags), 0);
        ck_assert_uint_eq(flags, 0100001);
        ck_assert_int_lt(proc_parse_fdinfo_flags("pos:\t0\n", 7, &flags), 0);
        ck_assert_int_lt(proc_parse_fdinfo_flags("flags:\t9\n", 9, &flags), 0); /* octal */
        {
                /* /dev/fuse on a kernel that names the connection (6.18 here). */
                static const char fuse[] = "pos:\t0\nflags:\t02100002\nmnt_id:\t24\nino:\t90\nfuse_connection:\t39\n";
                uint64_t v;

                ck_assert_int_eq(proc_parse_fdinfo_field(fuse, strlen(fuse), "fuse_connection", 10, &v), 0);
                ck_assert_uint_eq(v, 39);
                ck_assert_int_eq(proc_parse_fdinfo_field(fuse, strlen(fuse), "mnt_id", 10, &v), 0);
                ck_assert_uint_eq(v, 24);
                ck_assert_int_eq(proc_parse_fdinfo_field(fuse, strlen(fuse), "fuse", 10, &v), -ENOENT);
                ck_assert_int_eq(proc_parse_fdinfo_field("mnt_id:\tx\n", 10, "mnt_id", 10, &v), -EINVAL);
        }
        ck_assert_uint_eq(proc_parse_fdinfo_tfds(pipe, strlen(pipe), fds, 1), 0);
        /* Two fds, of which the first fits; the malformed line is not one. */
        ck_assert_uint_eq(proc_parse_fdinfo_tfds(epoll, strlen(epoll), fds, 1), 2);
        ck_assert_int_eq(fds[0], 5);
}
END_TEST

UNIT_TEST_MAIN("proc-parse", test_cgroup_hierarchy, test_schedstat, test_io, test_fdinfo, test_stat_hostile_comm, test_stat_broken, test_syscall,
               test_syscall_restart, test_status, test_kstack, test_maps, test_cmdline_cgroup_unit, test_syscall_names)
