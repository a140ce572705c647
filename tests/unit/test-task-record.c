/* test-task-record.c: a BPF task record turned into what /proc shows (the state letter, the scaled CPU times,
 * starttime, the syscall file), on records shaped as the iterator writes them; no BPF needed. */
#include "unit.h"
#include <string.h>

#include "proc/task-iter.h"

static TaskRecord record(unsigned state) {
        TaskRecord r = { .tid = 7, .tgid = 5, .ppid = 1, .state = state, .num_threads = 3 };

        memcpy(r.comm, "worker", 7);
        return r;
}

START_TEST(test_state_letters) {
        /* task_state_index(): the raw bits (include/linux/sched.h) as /proc/PID/stat prints them. */
        static const struct {
                unsigned state, exit_state;
                char letter;
        } cases[] = {
                { 0x0000, 0, 'R' },
                { 0x0001, 0, 'S' },
                { 0x2001, 0, 'S' },     /* TASK_INTERRUPTIBLE | TASK_FREEZABLE */
                { 0x0002, 0, 'D' },
                { 0x2102, 0, 'D' },     /* a vfork() parent: UNINTERRUPTIBLE | WAKEKILL | FREEZABLE */
                { 0x0402, 0, 'I' },     /* TASK_IDLE: a kernel thread's idle sleep */
                { 0x0104, 0, 'T' },     /* TASK_STOPPED */
                { 0x0108, 0, 't' },     /* TASK_TRACED */
                { 0x0040, 0, 'P' },     /* TASK_PARKED */
                { 0x0000, 0x20, 'Z' },  /* EXIT_ZOMBIE */
                { 0x0000, 0x10, 'X' },  /* EXIT_DEAD */
                { 0x1000, 0, 'D' },     /* TASK_RTLOCK_WAIT */
                { 0x8000, 0, 'D' },     /* TASK_FROZEN: /proc says D (Linux 6.18) */
        };

        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
                TaskRecord r = record(cases[i].state);

                r.exit_state = cases[i].exit_state;
                ck_assert_msg(task_record_state(&r) == cases[i].letter, "state 0x%x exit 0x%x: %c, not %c",
                              cases[i].state, cases[i].exit_state, task_record_state(&r), cases[i].letter);
        }
}
END_TEST

START_TEST(test_frozen) {
        TaskRecord r = record(0x8000);

        ck_assert(task_record_frozen(&r));
        r = record(0x2001);
        ck_assert(!task_record_frozen(&r));
        r.have |= SW_TASK_CGROUP_FROZEN;
        ck_assert(task_record_frozen(&r));
}
END_TEST

START_TEST(test_stat) {
        TaskRecord r = record(0x0001);
        ProcStat st;

        /* The tick saw 3 parts user, 1 part system; the runtime is 2 s: /proc splits it 1.5 s and 0.5 s. */
        r.utime = 300000000;
        r.stime = 100000000;
        r.sum_exec_runtime = 2000000000;
        r.start_boottime = 123456789012;        /* ns: 12345 ticks at 100 Hz, truncated as nsec_to_clock_t() */
        r.min_flt = 10;
        r.maj_flt = 2;
        r.flags = 0x00200000;
        task_record_stat(&r, 100, &st);
        ck_assert_int_eq(st.pid, 7);
        ck_assert_int_eq(st.ppid, 1);
        ck_assert_int_eq(st.state, 'S');
        ck_assert_str_eq(st.comm, "worker");
        ck_assert_uint_eq(st.utime, 150);
        ck_assert_uint_eq(st.stime, 50);
        ck_assert_uint_eq(st.starttime, 12345);
        ck_assert_uint_eq(st.minflt + st.majflt, 12);
        ck_assert_uint_eq(st.num_threads, 3);
        ck_assert(st.flags & PROC_PF_KTHREAD);

        /* No system tick seen: all of the runtime is user time, and the other way round. */
        r.stime = 0;
        task_record_stat(&r, 100, &st);
        ck_assert_uint_eq(st.utime, 200);
        ck_assert_uint_eq(st.stime, 0);
        r.stime = 5;
        r.utime = 0;
        task_record_stat(&r, 100, &st);
        ck_assert_uint_eq(st.utime, 0);
        ck_assert_uint_eq(st.stime, 200);

        /* A comm of all 16 bytes, no NUL: cut, not overrun. */
        memset(r.comm, 'x', sizeof r.comm);
        task_record_stat(&r, 100, &st);
        ck_assert_uint_eq(strlen(st.comm), sizeof r.comm);
}
END_TEST

START_TEST(test_syscall) {
        TaskRecord r = record(0x0000);
        ProcSyscall sc;

        /* Runnable: "running", whatever the registers. */
        ck_assert(task_record_syscall(&r, &sc));
        ck_assert_int_eq(sc.kind, PROC_SYSCALL_RUNNING);

        /* Asleep, registers not read (a kernel thread, an exiting task): nothing to say. */
        r = record(0x0001);
        ck_assert(!task_record_syscall(&r, &sc));

        r.have = SW_TASK_HAVE_REGS;
        r.syscall_nr = 0;
        for (int i = 0; i < 6; i++)
                r.args[i] = 0x100 + (unsigned) i;
        r.sp = 0x7ffd0000;
        r.pc = 0x401000;
        ck_assert(task_record_syscall(&r, &sc));
        ck_assert_int_eq(sc.kind, PROC_SYSCALL_BLOCKED);
        ck_assert_int_eq(sc.nr, 0);
        ck_assert_uint_eq(sc.args[5], 0x105);
        ck_assert_uint_eq(sc.sp, 0x7ffd0000);
        ck_assert_uint_eq(sc.pc, 0x401000);

        /* Stopped outside a syscall: "-1 sp pc", no arguments. */
        r.syscall_nr = -1;
        ck_assert(task_record_syscall(&r, &sc));
        ck_assert_int_eq(sc.kind, PROC_SYSCALL_NONE);
        ck_assert_int_eq(sc.nr, -1);
        ck_assert_uint_eq(sc.args[0], 0);
        ck_assert_uint_eq(sc.pc, 0x401000);
}
END_TEST

START_TEST(test_wchan_and_io) {
        TaskRecord r = record(0x0002);
        ProcIo io;

        ck_assert_ptr_null(task_record_wchan(&r));
        r.have |= SW_TASK_HAVE_WCHAN;
        ck_assert_str_eq(task_record_wchan(&r), "");
        memcpy(r.wchan, "kernel_clone", 13);
        ck_assert_str_eq(task_record_wchan(&r), "kernel_clone");
        /* Not terminated within its field: none rather than a read past it. */
        memset(r.wchan, 'y', sizeof r.wchan);
        ck_assert_str_eq(task_record_wchan(&r), "");

        ck_assert(!task_record_io(&r, &io));
        r.have |= SW_TASK_HAVE_IO;
        r.rchar = 1;
        r.syscw = 4;
        ck_assert(task_record_io(&r, &io));
        ck_assert_uint_eq(io.rchar, 1);
        ck_assert_uint_eq(io.syscw, 4);
}
END_TEST

UNIT_TEST_MAIN("task-record", test_state_letters, test_frozen, test_stat, test_syscall, test_wchan_and_io)
