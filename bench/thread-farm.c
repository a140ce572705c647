/* thread-farm.c: N idle threads for bench/scan, bench/http and bench/daemon.
 *
 *   thread-farm N [STACK_KIB]
 *   thread-farm --mode pipe|futex|wake5 N [STACK_KIB]
 *
 * Creates N threads with small stacks (default 64 KiB), parked as the mode says:
 *
 *   pipe   (the default, and the only behaviour without --mode) each parked in read() on one pipe the process
 *          itself holds both ends of, never written;
 *   futex  each parked in a plain FUTEX_WAIT_PRIVATE with no timeout on a word of its own that nobody wakes (as a
 *          Go M or a thread pool's worker parks);
 *   wake5  each parked in read() on its group's pipe (groups of WAKE_GROUP threads, one pipe each); once all are
 *          parked, a driver thread writes one byte at a time into the groups' pipes, round-robin, so that 5 % of
 *          the N threads are woken each second (spread over 10 ticks a second); a woken thread reads its byte and
 *          parks again at once in the same read(). A pipe's readers wait exclusively and in FIFO order, so one byte
 *          wakes one thread, the one parked longest in its group.
 *
 * Once every one of the N threads is asleep in its call (checked in /proc/self/task/TID/syscall: the syscall
 * number, and the fd or the futex word, op and timeout), prints "READY N" (with --mode: "READY N mode=M
 * syscall=NR", NR being SYS_read or SYS_futex of this architecture) and then waits for EOF on stdin. At EOF, with
 * --mode, it prints "WAKES K S" (K reads or futex waits that returned in the S seconds since READY) and exits
 * (without joining: the threads go with the process). It also dies with its parent (PR_SET_PDEATHSIG), so a
 * SIGKILLed bench does not leave it behind. Built by the benches into a temp dir: gcc -O2 -pthread. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define WAKE_GROUP 100          /* wake5: threads per pipe */
#define WAKE_TICKS_PER_SEC 10

enum mode { MODE_PIPE, MODE_FUTEX, MODE_WAKE };

static enum mode mode = MODE_PIPE;
static int park_fd = -1;                /* pipe: the read end all threads read */
static int *words;                      /* futex: one word per thread, always 0 */
static long n_threads;
static int (*groups)[2];                /* wake: one pipe per group */
static long n_groups;
static unsigned char *is_group_fd;      /* wake: is_group_fd[fd] for the groups' read ends */
static int max_group_fd = -1;
static long wake_percent = 5;
static atomic_long wakes;

static void *park_pipe(void *arg) {
        int fd = (int) (intptr_t) arg;
        char c;

        for (;;) {
                ssize_t k = read(fd, &c, 1);
                if (k == 1)
                        atomic_fetch_add_explicit(&wakes, 1, memory_order_relaxed);
                else if (k <= 0 && errno != EINTR)
                        pause();
        }
        return NULL;
}

static void *park_futex(void *arg) {
        int *w = arg;

        for (;;) {
                /* Returns only on a signal (EINTR) or a spurious wake: nobody ever calls FUTEX_WAKE on it. */
                (void) syscall(SYS_futex, w, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
                atomic_fetch_add_explicit(&wakes, 1, memory_order_relaxed);
        }
        return NULL;
}

/* wake: write WAKE% of N bytes a second into the groups' pipes, one byte per write, round-robin over the groups. */
static void *driver(void *arg) {
        struct timespec next;
        double owed = 0;
        long g = 0;

        (void) arg;
        clock_gettime(CLOCK_MONOTONIC, &next);
        for (;;) {
                next.tv_nsec += 1000000000L / WAKE_TICKS_PER_SEC;
                if (next.tv_nsec >= 1000000000L) {
                        next.tv_nsec -= 1000000000L;
                        next.tv_sec++;
                }
                while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL) == EINTR)
                        ;
                owed += (double) n_threads * (double) wake_percent / 100.0 / WAKE_TICKS_PER_SEC;
                for (; owed >= 1.0; owed -= 1.0) {
                        char c = 'w';
                        if (write(groups[g][1], &c, 1) < 0 && errno != EAGAIN && errno != EINTR) {
                                perror("thread-farm: write");
                                _exit(1);
                        }
                        g = (g + 1) % n_groups;
                }
        }
        return NULL;
}

/* Whether the line of /proc/self/task/TID/syscall in BUF says the thread sleeps where its mode parks it. */
static bool parked_here(const char *buf) {
        unsigned long a[4] = {};
        long nr;

        if (sscanf(buf, "%ld %lx %lx %lx %lx", &nr, &a[0], &a[1], &a[2], &a[3]) != 5)
                return false;
        switch (mode) {
        case MODE_PIPE:
                return nr == SYS_read && a[0] == (unsigned long) park_fd;
        case MODE_FUTEX:
                return nr == SYS_futex && a[0] >= (unsigned long) (uintptr_t) words &&
                       a[0] < (unsigned long) (uintptr_t) (words + n_threads) && a[1] == FUTEX_WAIT_PRIVATE &&
                       a[3] == 0;
        case MODE_WAKE:
                return nr == SYS_read && (long) a[0] <= max_group_fd && is_group_fd[a[0]];
        }
        return false;
}

/* How many threads other than main are asleep in their parking call. */
static long count_parked(pid_t self) {
        char path[300], buf[256];
        struct dirent *de;
        long n = 0;
        DIR *d = opendir("/proc/self/task");

        if (!d)
                return -1;
        while ((de = readdir(d))) {
                int fd;
                ssize_t k;
                if (de->d_name[0] == '.' || atoi(de->d_name) == self)
                        continue;
                snprintf(path, sizeof path, "/proc/self/task/%s/syscall", de->d_name);
                fd = open(path, O_RDONLY | O_CLOEXEC);
                if (fd < 0)
                        continue;
                k = read(fd, buf, sizeof buf - 1);
                close(fd);
                if (k > 0) {
                        buf[k] = '\0';
                        if (parked_here(buf))
                                n++;
                }
        }
        closedir(d);
        return n;
}

static double now_s(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

static int usage(void) {
        fprintf(stderr, "usage: thread-farm [--mode pipe|futex|wake5] N [STACK_KIB]\n");
        return 2;
}

int main(int argc, char **argv) {
        long n, stack_kib = 64;
        int p[2], a = 1;
        bool with_mode = false;
        pthread_attr_t attr;
        pid_t self = getpid();
        const char *mode_name = "pipe";
        double t_ready;
        char c;

        if (argc > 1 && strncmp(argv[1], "--mode", 6) == 0) {
                if (argv[1][6] == '=')
                        mode_name = argv[1] + 7;
                else if (argv[1][6] == '\0' && argc > 2)
                        mode_name = argv[++a];
                else
                        return usage();
                a++;
                with_mode = true;
                if (strcmp(mode_name, "pipe") == 0)
                        mode = MODE_PIPE;
                else if (strcmp(mode_name, "futex") == 0)
                        mode = MODE_FUTEX;
                else if (strncmp(mode_name, "wake", 4) == 0 && (wake_percent = strtol(mode_name + 4, NULL, 10)) > 0 &&
                         wake_percent <= 100)
                        mode = MODE_WAKE;
                else
                        return usage();
        }
        if (argc <= a || (n = strtol(argv[a], NULL, 10)) <= 0)
                return usage();
        if (argc > a + 1)
                stack_kib = strtol(argv[a + 1], NULL, 10);
        n_threads = n;
        (void) prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() == 1)
                return 1;
        switch (mode) {
        case MODE_PIPE:
                if (pipe2(p, O_CLOEXEC) < 0) {
                        perror("pipe2");
                        return 1;
                }
                park_fd = p[0];
                break;
        case MODE_FUTEX:
                words = calloc((size_t) n, sizeof *words);
                if (!words) {
                        perror("calloc");
                        return 1;
                }
                break;
        case MODE_WAKE:
                n_groups = (n + WAKE_GROUP - 1) / WAKE_GROUP;
                groups = calloc((size_t) n_groups, sizeof *groups);
                if (!groups) {
                        perror("calloc");
                        return 1;
                }
                for (long g = 0; g < n_groups; g++) {
                        if (pipe2(groups[g], O_CLOEXEC) < 0) {
                                perror("pipe2");
                                return 1;
                        }
                        if (groups[g][0] > max_group_fd)
                                max_group_fd = groups[g][0];
                }
                is_group_fd = calloc((size_t) max_group_fd + 1, 1);
                if (!is_group_fd) {
                        perror("calloc");
                        return 1;
                }
                for (long g = 0; g < n_groups; g++)
                        is_group_fd[groups[g][0]] = 1;
                break;
        }
        pthread_attr_init(&attr);
        if (stack_kib * 1024 < PTHREAD_STACK_MIN)
                stack_kib = PTHREAD_STACK_MIN / 1024;
        if ((errno = pthread_attr_setstacksize(&attr, (size_t) stack_kib * 1024))) {
                perror("pthread_attr_setstacksize");
                return 1;
        }
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        for (long i = 0; i < n; i++) {
                pthread_t t;
                int r;

                if (mode == MODE_FUTEX)
                        r = pthread_create(&t, &attr, park_futex, &words[i]);
                else
                        r = pthread_create(&t, &attr, park_pipe,
                                           (void *) (intptr_t) (mode == MODE_PIPE ? park_fd : groups[i / WAKE_GROUP][0]));
                if (r) {
                        fprintf(stderr, "thread-farm: pthread_create #%ld: %s\n", i, strerror(r));
                        return 1;
                }
        }
        for (int tries = 0;; tries++) {
                long k = count_parked(self);
                if (k == n)
                        break;
                if (tries > 3000) {
                        fprintf(stderr, "thread-farm: only %ld of %ld threads parked in %s\n", k, n,
                                mode == MODE_FUTEX ? "futex()" : "read()");
                        return 1;
                }
                usleep(10000);
        }
        atomic_store(&wakes, 0);
        if (mode == MODE_WAKE) {
                pthread_t t;
                int r = pthread_create(&t, &attr, driver, NULL);
                if (r) {
                        fprintf(stderr, "thread-farm: pthread_create (driver): %s\n", strerror(r));
                        return 1;
                }
        }
        t_ready = now_s();
        if (with_mode)
                printf("READY %ld mode=%s syscall=%ld\n", n, mode_name,
                       (long) (mode == MODE_FUTEX ? SYS_futex : SYS_read));
        else
                printf("READY %ld\n", n);
        fflush(stdout);
        for (;;) {
                ssize_t k = read(STDIN_FILENO, &c, 1);
                if (k == 0 || (k < 0 && errno != EINTR))
                        break;
        }
        if (with_mode) {
                printf("WAKES %ld %.3f\n", atomic_load(&wakes), now_s() - t_ready);
                fflush(stdout);
        }
        _exit(0);
}
