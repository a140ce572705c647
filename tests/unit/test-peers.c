/* test-peers.c: sock_diag, the /proc/locks parser, the peer resolver and the wait-chain walk against real children:
 * a reader on a socketpair whose other end another child holds, two children reading from each other (a deadlock),
 * a reader whose peer the test itself holds (the resolver never names its own process), and a thread that
 * vanished. */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "chain/peers.h"
#include "chain/wait-chain.h"
#include "proc/fuse-conn.h"
#include "proc/sock-diag.h"
#include "runtime/runtime.h"
#include "unit.h"

/* Fork a child that closes CLOSE_FD (if >= 0) and then reads READ_FD forever (or pauses when READ_FD < 0). */
static pid_t spawn_reader(int read_fd, int close_fd) {
        pid_t pid = fork();

        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                char c;
                (void) prctl(PR_SET_PDEATHSIG, SIGKILL);
                alarm(60);
                if (close_fd >= 0)
                        close(close_fd);
                for (;;)
                        if (read_fd < 0)
                                pause();
                        else if (read(read_fd, &c, 1) == 0)
                                _exit(0);
        }
        return pid;
}

/* Wait (with a deadline) until PID sleeps in read() (syscall 0). */
static void wait_in_read(pid_t pid) {
        for (int i = 0; i < 5000; i++) {
                ThreadWait w;
                if (thread_wait_read(pid, pid, &w) == 0 && w.syscall.kind == PROC_SYSCALL_BLOCKED &&
                    w.syscall.nr == __NR_read)
                        return;
                nanosleep(&(struct timespec) { .tv_nsec = 1000000 }, NULL);
        }
        ck_abort_msg("child %d never blocked in read()", (int) pid);
}

static void reap(pid_t pid) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
}

START_TEST(test_sock_diag_finds_a_socketpair_and_its_peer) {
        UnixSock *socks = NULL;
        size_t n = 0;
        int sp[2];
        struct stat a, b;
        const UnixSock *u;

        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
        ck_assert_int_eq(fstat(sp[0], &a), 0);
        ck_assert_int_eq(fstat(sp[1], &b), 0);
        ck_assert_int_eq(sock_diag_unix(&socks, &n), 0);
        u = unix_socks_find(socks, n, a.st_ino);
        ck_assert_ptr_nonnull(u);
        ck_assert_uint_eq(u->peer, b.st_ino);
        ck_assert_ptr_null(u->name);
        ck_assert_ptr_null(unix_socks_find(socks, n, 0));
        unix_socks_free(socks, n);
        close(sp[0]);
        close(sp[1]);
}
END_TEST

START_TEST(test_reader_waits_on_the_child_holding_the_other_end) {
        _cleanup_(peer_resolver_freep) PeerResolver *r = NULL;
        _cleanup_(wait_chain_freep) WaitChain *c = calloc(1, sizeof *c);
        int sp[2];
        pid_t reader, holder;
        ThreadWait w;

        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
        reader = spawn_reader(sp[0], sp[1]);
        holder = spawn_reader(-1, sp[0]);
        close(sp[0]);
        close(sp[1]);
        wait_in_read(reader);

        ck_assert_int_eq(peer_resolver_new(&r), 0);
        ck_assert_int_eq(thread_wait_read(reader, reader, &w), 0);
        ck_assert_int_eq(peers_syscall_fd(&w.syscall), sp[0]);
        ck_assert_int_eq(peers_thread_edges(r, &w, c), 1);
        ck_assert_int_eq(c->edges[0].kind, WAIT_KIND_UNIX);
        ck_assert_int_eq(c->edges[0].fd, sp[0]);
        ck_assert_int_eq(c->edges[0].peer_pid, holder);
        ck_assert_int_eq(c->edges[0].peer_fd, sp[1]);
        ck_assert_str_eq(c->edges[0].syscall, "read");
        ck_assert(!c->edges[0].multiplexed);
        reap(reader);
        reap(holder);
}
END_TEST

START_TEST(test_the_resolver_never_names_its_own_process) {
        _cleanup_(peer_resolver_freep) PeerResolver *r = NULL;
        _cleanup_(wait_chain_freep) WaitChain *c = calloc(1, sizeof *c);
        int sp[2];
        pid_t reader;
        ThreadWait w;

        /* We hold the other end: a tool must not report itself as what the target waits on. */
        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
        reader = spawn_reader(sp[0], sp[1]);
        wait_in_read(reader);
        ck_assert_int_eq(peer_resolver_new(&r), 0);
        ck_assert_int_eq(thread_wait_read(reader, reader, &w), 0);
        ck_assert_int_eq(peers_thread_edges(r, &w, c), 1);
        ck_assert_int_eq(c->edges[0].peer_pid, 0);
        ck_assert_ptr_nonnull(c->edges[0].reason);
        reap(reader);
        close(sp[0]);
        close(sp[1]);
}
END_TEST

START_TEST(test_two_readers_of_each_other_are_a_deadlock_and_one_is_not) {
        _cleanup_(peer_resolver_freep) PeerResolver *r = NULL;
        _cleanup_(wait_chain_freep) WaitChain *c = NULL;
        _cleanup_free_ pid_t *peers = NULL;
        int s1[2], s2[2];
        pid_t a, b, lone;
        size_t n;

        /* A reads s1[0]; B holds s1[1] and reads s2[1]; A holds s2[0]. Each waits for the other to write. */
        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, s1), 0);
        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, s2), 0);
        a = spawn_reader(s1[0], s1[1]);
        b = spawn_reader(s2[1], s2[0]);
        /* Each child still holds the end the other reads from; the test must not. */
        close(s1[0]);
        close(s1[1]);
        close(s2[0]);
        close(s2[1]);
        wait_in_read(a);
        wait_in_read(b);

        ck_assert_int_eq(peer_resolver_new(&r), 0);
        ck_assert_int_eq(wait_chain_build(r, NULL, a, 0, 1, &c, &peers, &n), 0);
        ck_assert_uint_eq(n, 1);
        ck_assert_int_eq(peers[0], b);
        ck_assert(c->deadlock);
        ck_assert_uint_eq(c->n_cycle, 2);
        ck_assert_int_eq(c->cycle[0], a);
        ck_assert_int_eq(c->cycle[1], b);
        ck_assert_uint_gt(c->resolve_usec, 0);

        /* A depth of 0 sees only A's edge: no cycle to close. */
        c = wait_chain_free(c);
        peers = mfree(peers);
        ck_assert_int_eq(wait_chain_build(r, NULL, a, 0, 0, &c, &peers, &n), 0);
        ck_assert_uint_eq(n, 0);
        ck_assert(!c->deadlock);
        ck_assert_str_eq(c->edges[0].reason, "not followed: beyond the depth of 0");

        /* A process that waits on nothing another process holds: no edges, no deadlock. */
        lone = spawn_reader(-1, -1);
        c = wait_chain_free(c);
        peers = mfree(peers);
        ck_assert_int_eq(wait_chain_build(r, NULL, lone, 0, 2, &c, &peers, &n), 0);
        ck_assert(!c->deadlock);
        reap(a);
        reap(b);
        reap(lone);
}
END_TEST

START_TEST(test_a_vanished_process_is_an_error_in_the_chain) {
        _cleanup_(peer_resolver_freep) PeerResolver *r = NULL;
        _cleanup_(wait_chain_freep) WaitChain *c = NULL;
        _cleanup_free_ pid_t *peers = NULL;
        pid_t gone = spawn_reader(-1, -1);
        size_t n;

        reap(gone);
        ck_assert_int_eq(peer_resolver_new(&r), 0);
        ck_assert_int_eq(wait_chain_build(r, NULL, gone, 0, 1, &c, &peers, &n), 0);
        ck_assert_uint_eq(c->n_edges, 0);
        ck_assert_ptr_nonnull(c->errors);
        ck_assert_ptr_nonnull(strstr(c->errors[0], "exited"));
        ck_assert_int_eq(thread_wait_read(gone, gone, &(ThreadWait) {}), -ESRCH);
}
END_TEST

START_TEST(test_locks_lines) {
        char locks[] = "1: FLOCK  ADVISORY  WRITE 20681 fe:00:10952957 0 EOF\n"
                       "1: -> FLOCK  ADVISORY  WRITE 20685 fe:00:10952957 0 EOF\n"
                       "2: OFDLCK ADVISORY  WRITE -1 fe:00:10953251 0 EOF\n"
                       "3: POSIX  ADVISORY  WRITE 20686 fe:00:10953250 0 9\n"
                       "4: POSIX  ADVISORY  WRITE 1 no-device 0 EOF\n"
                       "6: POSIX  ADVISORY  READ  20687 fe:00:10953250 1073741824 1073742335\n"
                       "garbage\n"
                       "5: LEASE";
        _cleanup_free_ LockLine *l = NULL;
        size_t n = 0;

        ck_assert_int_eq(peer_tables_parse_locks(locks, &l, &n), 0);
        ck_assert_uint_eq(n, 5);
        ck_assert(!l[0].waiter && l[1].waiter && l[0].id == l[1].id);
        ck_assert_int_eq(l[1].pid, 20685);
        ck_assert_str_eq(l[2].type, "OFDLCK");
        ck_assert_int_eq(l[2].pid, -1);
        ck_assert_uint_eq(l[3].major, 0xfe);
        ck_assert_uint_eq(l[3].inode, 10953250);
        /* The mode and the byte range, which a lock retried without waiting is checked against. */
        ck_assert(l[0].write && l[0].start == 0 && l[0].end == UINT64_MAX);
        ck_assert(l[3].write && l[3].start == 0 && l[3].end == 9);
        ck_assert(!l[4].write && l[4].start == 1073741824 && l[4].end == 1073742335);
}
END_TEST

START_TEST(test_fuse_mounts_of_a_mountinfo) {
        char text[] = "22 27 0:21 / /proc rw,relatime - proc proc rw\n"
                      "86 27 0:41 / /mnt/a\\040dir rw,nosuid - fuse.sshfs me@host:/ rw,user_id=0\n"
                      "87 27 0:52 / /media/appimage ro - fuse.squashfuse squashfuse ro\n"
                      "88 27 8:17 / /mnt/win rw - fuseblk /dev/sdb1 rw\n"
                      "89 27 0:53 / /mnt/plain rw - fuse fxhang rw\n"
                      "90 27 0:54 / /mnt/notfuse rw - fusectl fusectl rw\n"
                      "91 27 0:55 /mnt/short\n"
                      "garbage - fuse.x\n";
        _cleanup_free_ FuseMount *m = NULL;
        size_t n = 0;

        ck_assert_int_eq(fuse_mounts_parse(text, &m, &n), 0);
        ck_assert_uint_eq(n, 4);
        ck_assert_str_eq(m[0].mountpoint, "/mnt/a dir");
        ck_assert_str_eq(m[0].fstype, "fuse.sshfs");
        ck_assert_int_eq(m[0].mnt_id, 86);
        /* The connection is the superblock's device, as fdinfo and /sys/fs/fuse/connections number it. */
        ck_assert_uint_eq(fuse_mount_connection(&m[0]), 41);
        ck_assert_uint_eq(fuse_mount_connection(&m[2]), 8U << 20 | 17);
        ck_assert_str_eq(m[3].fstype, "fuse");
        ck_assert_ptr_eq(fuse_mounts_by_dev(m, n, 0, 52), &m[1]);
        ck_assert_ptr_null(fuse_mounts_by_dev(m, n, 0, 54));
        /* A path is on the longest mount point that is a prefix of it at a component boundary. */
        ck_assert_ptr_eq(fuse_mounts_by_path(m, n, "/mnt/a dir/bin/app"), &m[0]);
        ck_assert_ptr_eq(fuse_mounts_by_path(m, n, "/mnt/plain"), &m[3]);
        ck_assert_ptr_null(fuse_mounts_by_path(m, n, "/mnt/a dirx/app"));
        ck_assert_ptr_null(fuse_mounts_by_path(m, n, "/usr/bin/app"));
}
END_TEST

START_TEST(test_a_fuse_connection_nobody_holds_answers) {
        _cleanup_(peer_resolver_freep) PeerResolver *r = NULL;
        char why[128] = "";

        /* The kernel aborts a connection when its last /dev/fuse closes: requests then fail at once. */
        ck_assert_int_eq(peer_resolver_new(&r), 0);
        ck_assert_int_eq(fuse_connection_answering(r, 0xfffff, why, sizeof why), 1);
        ck_assert_str_eq(why, "");
}
END_TEST

/* A chain asks a runtime about a process only where its maps name the runtime's interpreter, read once a process. */
START_TEST(test_a_runtime_is_asked_only_of_processes_that_map_it) {
        RuntimeMapped mapped = { INTMAP_NULL };
        pid_t py = fork();
        unsigned kinds = 0;

        ck_assert_int_ge(py, 0);
        if (py == 0) {
                (void) prctl(PR_SET_PDEATHSIG, SIGKILL);
                execl("/usr/bin/python3", "python3", "-c", "import time; time.sleep(60)", (char *) NULL);
                _exit(127);
        }
        for (int i = 0; i < 5000 && !(kinds & (1U << RUNTIME_PYTHON)); i++) {
                kinds = runtime_kinds_mapped(py);
                nanosleep(&(struct timespec) { .tv_nsec = 1000000 }, NULL);
        }
        ck_assert_uint_eq(kinds, 1U << RUNTIME_PYTHON);
        /* This test's own process runs no interpreter. */
        ck_assert_uint_eq(runtime_kinds_mapped(getpid()), 0);
        ck_assert(runtime_mapped_may_run(&mapped, RUNTIME_PYTHON, py));
        ck_assert(!runtime_mapped_may_run(&mapped, RUNTIME_RUBY, py));
        ck_assert(!runtime_mapped_may_run(&mapped, RUNTIME_PYTHON, getpid()));
        /* Read once: the answer stands after the process is gone (a chain is one moment). */
        reap(py);
        ck_assert_uint_eq(runtime_kinds_mapped(py), 0);
        ck_assert(runtime_mapped_may_run(&mapped, RUNTIME_PYTHON, py));
        runtime_mapped_done(&mapped);
}
END_TEST

UNIT_TEST_MAIN("peers", test_locks_lines, test_fuse_mounts_of_a_mountinfo, test_a_fuse_connection_nobody_holds_answers,
               test_sock_diag_finds_a_socketpair_and_its_peer,
               test_reader_waits_on_the_child_holding_the_other_end, test_the_resolver_never_names_its_own_process,
               test_two_readers_of_each_other_are_a_deadlock_and_one_is_not, test_a_vanished_process_is_an_error_in_the_chain,
               test_a_runtime_is_asked_only_of_processes_that_map_it)
