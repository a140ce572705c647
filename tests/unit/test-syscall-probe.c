/* test-syscall-probe.c: the probe against real children: one spinning on read() = -EAGAIN, one blocked in read(),
 * one that receives a signal while probed, one polling for a lock and one only sleeping. Each is checked afterwards:
 * not stopped, not traced. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "capture/syscall-probe.h"
#include "unit.h"

static volatile sig_atomic_t got_usr1;

static void on_usr1(int sig) {
        (void) sig;
        got_usr1 = 1;
}

/* Read (state letter, TracerPid) of PID from /proc. */
static void proc_state(pid_t pid, char *state, int *tracer) {
        char path[64], line[256];
        FILE *f;

        snprintf(path, sizeof path, "/proc/%d/status", (int) pid);
        f = fopen(path, "re");
        ck_assert_ptr_nonnull(f);
        *state = '?';
        *tracer = -1;
        while (fgets(line, sizeof line, f)) {
                if (strncmp(line, "State:", 6) == 0)
                        sscanf(line + 6, " %c", state);
                else if (strncmp(line, "TracerPid:", 10) == 0)
                        *tracer = atoi(line + 10);
        }
        fclose(f);
}

static void assert_untouched(pid_t pid) {
        char state;
        int tracer;

        proc_state(pid, &state, &tracer);
        ck_assert_msg(state != 't' && state != 'T', "child left stopped (%c)", state);
        ck_assert_int_eq(tracer, 0);
}

/* Wait (with a deadline) until PID is in state WANT. */
static void wait_state(pid_t pid, char want) {
        for (int i = 0; i < 5000; i++) {
                char state;
                int tracer;

                proc_state(pid, &state, &tracer);
                if (state == want)
                        return;
                nanosleep(&(struct timespec) { .tv_nsec = 1000000 }, NULL);
        }
        ck_abort_msg("child %d never reached state %c", (int) pid, want);
}

/* Fork a child that reads a pipe until it gets 'q': spinning on -EAGAIN when NONBLOCK, blocked in read()
 * otherwise. *WRITE_END gets the pipe's write end; the child says "x" on READY once its handler is set. */
static pid_t spawn(bool nonblock, int ready[2], int *write_end) {
        int p[2];
        pid_t pid;

        ck_assert_int_eq(pipe2(p, nonblock ? O_NONBLOCK : 0), 0);
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                char c;

                close(ready[0]);
                signal(SIGUSR1, on_usr1);
                (void) write(ready[1], "x", 1);
                for (;;) {
                        ssize_t n = read(p[0], &c, 1);
                        if (n == 1 && c == 'q')
                                _exit(got_usr1 ? 7 : 0);
                }
        }
        close(p[0]);
        *write_end = p[1];
        return pid;
}

static pid_t start_child(bool nonblock, int *write_end) {
        int ready[2];
        char c;
        pid_t pid;

        ck_assert_int_eq(pipe2(ready, O_CLOEXEC), 0);
        pid = spawn(nonblock, ready, write_end);
        close(ready[1]);
        ck_assert_int_eq(read(ready[0], &c, 1), 1);
        close(ready[0]);
        return pid;
}

static int stop_child(pid_t pid, int write_end) {
        int status;

        ck_assert_int_eq(write(write_end, "q", 1), 1);
        close(write_end);
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert(WIFEXITED(status));
        return WEXITSTATUS(status);
}

/* The probe window: 30 ms, stretched as Check's own timeouts are (CK_TIMEOUT_MULTIPLIER; the arm64 VM sets 10, its
 * emulator being some 10-30 times slower), up to 30 times: the window stays under the 1 s the probe allows. */
static uint64_t probe_window(void) {
        const char *m = getenv("CK_TIMEOUT_MULTIPLIER");
        unsigned long k = m ? strtoul(m, NULL, 10) : 1;

        return 30000 * (k >= 1 && k <= 30 ? k : 1);
}

START_TEST(test_probe_names_the_spinning_call) {
        SyscallProbe p;
        int w;
        pid_t pid = start_child(true, &w);

        wait_state(pid, 'R');
        ck_assert_int_eq(syscall_probe(pid, probe_window(), &p), 0);
        assert_untouched(pid);
        ck_assert_int_eq(p.nr, SYS_read);
        ck_assert_int_eq(p.result, -EAGAIN);
        /* A few round trips at least: each syscall costs two stops, and on a loaded machine (3 spinners on 2 cores)
         * a 30 ms window saw 6. */
        ck_assert_uint_ge(p.count, 3);
        ck_assert_uint_ge(p.count * 10, p.syscalls * 9);
        ck_assert_uint_ge(p.window_usec, 30000);
        ck_assert_uint_lt(p.window_usec, 1000000);
        ck_assert_int_eq(stop_child(pid, w), 0);
}
END_TEST

START_TEST(test_probe_of_a_blocked_thread_sees_nothing_and_lets_go) {
        SyscallProbe p;
        int w;
        pid_t pid = start_child(false, &w);

        wait_state(pid, 'S');
        ck_assert_int_eq(syscall_probe(pid, 20000, &p), 0);
        assert_untouched(pid);
        ck_assert_int_eq(p.nr, -1);
        ck_assert_uint_eq(p.count, 0);
        /* Still blocked in read() and still reading: the probe's interrupt restarted the call, not failed it. */
        wait_state(pid, 'S');
        ck_assert_int_eq(stop_child(pid, w), 0);
}
END_TEST

START_TEST(test_probe_passes_signals_on) {
        SyscallProbe p;
        int w;
        pid_t pid = start_child(true, &w);

        pid_t killer;

        wait_state(pid, 'R');
        /* The signal arrives 20 ms into a 200 ms probe, while the child is traced. */
        killer = fork();
        ck_assert_int_ge(killer, 0);
        if (killer == 0) {
                nanosleep(&(struct timespec) { .tv_nsec = 20000000 }, NULL);
                _exit(kill(pid, SIGUSR1) < 0);
        }
        ck_assert_int_eq(syscall_probe(pid, 200000, &p), 0);
        ck_assert_int_eq(waitpid(killer, NULL, 0), killer);
        assert_untouched(pid);
        /* The handler ran (exit status 7): the signal was delivered, not swallowed by the tracer. */
        ck_assert_int_eq(stop_child(pid, w), 7);
}
END_TEST

/* A child that spins asking the nice of its parent (each ask a syscall, so a probe stop), until it reads 'q'; its
 * exit status is 20 + the lowest nice it saw. */
static pid_t start_nice_watcher(int *write_end) {
        int p[2];
        pid_t pid, parent = getpid();

        ck_assert_int_eq(pipe2(p, O_NONBLOCK), 0);
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                int lowest = 19;
                char c;

                close(p[1]);
                for (;;) {
                        int n;

                        errno = 0;
                        n = getpriority(PRIO_PROCESS, (id_t) parent);
                        if (errno == 0 && n < lowest)
                                lowest = n;
                        if (read(p[0], &c, 1) == 1 && c == 'q')
                                _exit(20 + lowest);
                }
        }
        close(p[0]);
        *write_end = p[1];
        return pid;
}

/* Issue #34: the probe holds its thread at nice -20 (if killed, its exit then releases the thread at once, even on
 * a starved machine), and is back at its nice afterwards. */
START_TEST(test_probe_holds_at_raised_priority) {
        SyscallProbe p;
        int w, before = getpriority(PRIO_PROCESS, 0);
        bool may_raise = setpriority(PRIO_PROCESS, 0, -20) == 0;
        pid_t pid;

        ck_assert_int_eq(setpriority(PRIO_PROCESS, 0, before), 0);
        pid = start_nice_watcher(&w);
        wait_state(pid, 'R');
        ck_assert_int_eq(syscall_probe(pid, probe_window(), &p), 0);
        assert_untouched(pid);
        ck_assert_uint_ge(p.count, 1);
        ck_assert_int_eq(getpriority(PRIO_PROCESS, 0), before);
        /* Seen from the traced thread itself, between two of its stops. */
        ck_assert_int_eq(stop_child(pid, w) - 20, (may_raise ? -20 : before));
}
END_TEST

START_TEST(test_probe_of_a_missing_thread) {
        SyscallProbe p;

        ck_assert_int_eq(syscall_probe(0x7ffffff0, 1000, &p), -ESRCH);
}
END_TEST

/* A child that polls for a write lock on bytes 100-109 of FD every 20 ms (or, POLL false, only sleeps that way), as
 * SQLite's busy handler does; it exits 0 once it gets the lock. */
static pid_t start_lock_poller(int fd, bool poll) {
        pid_t pid = fork();

        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 100, .l_len = 10 };

                for (;;) {
                        if (poll && fcntl(fd, F_SETLK, &fl) == 0)
                                _exit(0);
                        nanosleep(&(struct timespec) { .tv_nsec = 20000000 }, NULL);
                }
        }
        return pid;
}

START_TEST(test_lock_probe_sees_the_failing_try) {
        char path[] = "/tmp/test-lock-probe-XXXXXX";
        int fd = mkstemp(path), status;
        LockAttempt a;
        pid_t holder, poller, idle;

        ck_assert_int_ge(fd, 0);
        /* The holder: another process, as POSIX locks are per process. */
        holder = fork();
        ck_assert_int_ge(holder, 0);
        if (holder == 0) {
                struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0 };
                if (fcntl(fd, F_SETLK, &fl) < 0)
                        _exit(1);
                pause();
                _exit(0);
        }
        for (int i = 0; i < 5000; i++) {
                struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 100, .l_len = 10 };
                if (fcntl(fd, F_GETLK, &fl) == 0 && fl.l_type != F_UNLCK)
                        break;
                nanosleep(&(struct timespec) { .tv_nsec = 1000000 }, NULL);
        }
        poller = start_lock_poller(fd, true);
        idle = start_lock_poller(fd, false);

        ck_assert_int_eq(lock_retry_probe(poller, 300000, &a), 1);
        assert_untouched(poller);
        ck_assert_int_eq(a.nr, SYS_fcntl);
        ck_assert_int_eq(a.fd, fd);
        ck_assert_int_eq(a.cmd, F_SETLK);
        ck_assert(a.write);
        ck_assert_int_eq(a.whence, SEEK_SET);
        ck_assert_int_eq(a.start, 100);
        ck_assert_int_eq(a.len, 10);
        ck_assert(a.result == -EAGAIN || a.result == -EACCES);
        /* Seen at its first try: well within one 20 ms sleep and the window. */
        ck_assert_uint_lt(a.window_usec, 300000);

        /* The control sleeps the same way but never asks: the whole window, nothing seen, left as it was. */
        ck_assert_int_eq(lock_retry_probe(idle, 100000, &a), 0);
        assert_untouched(idle);
        ck_assert_int_eq(a.nr, -1);
        ck_assert_uint_ge(a.window_usec, 100000);

        /* The holder lets go: the poller gets the lock at its next try. */
        ck_assert_int_eq(kill(holder, SIGKILL), 0);
        ck_assert_int_eq(waitpid(holder, NULL, 0), holder);
        ck_assert_int_eq(waitpid(poller, &status, 0), poller);
        ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        ck_assert_int_eq(kill(idle, SIGKILL), 0);
        ck_assert_int_eq(waitpid(idle, NULL, 0), idle);
        close(fd);
        unlink(path);
}
END_TEST

UNIT_TEST_MAIN("syscall-probe", test_lock_probe_sees_the_failing_try,
               test_probe_names_the_spinning_call, test_probe_of_a_blocked_thread_sees_nothing_and_lets_go,
               test_probe_passes_signals_on, test_probe_of_a_missing_thread, test_probe_holds_at_raised_priority)
