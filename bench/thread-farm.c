/* thread-farm.c: N idle threads for bench/scan.
 *
 *   thread-farm N [STACK_KIB]
 *
 * Creates N threads with small stacks (default 64 KiB), each parked in read() on a pipe that is never
 * written. Once every one of them is asleep in read() (checked in /proc/self/task/TID/syscall), prints
 * "READY N" and then waits for EOF on stdin, and exits (without joining: the threads go with the process).
 * It also dies with its parent (PR_SET_PDEATHSIG), so a SIGKILLed bench does not leave it behind.
 * Built by bench/scan into a temp dir: gcc -O2 -pthread. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static int park_fd = -1;

static void *park(void *arg) {
        char c;
        (void) arg;
        for (;;)
                if (read(park_fd, &c, 1) <= 0 && errno != EINTR)
                        pause();
        return NULL;
}

/* How many threads other than main are asleep in read(park_fd): /proc/self/task/TID/syscall says "0 <fd> ...". */
static long count_parked(pid_t self) {
        char path[300], buf[256], want[32];
        struct dirent *de;
        long n = 0;
        DIR *d = opendir("/proc/self/task");

        if (!d)
                return -1;
        snprintf(want, sizeof want, "0 0x%x ", park_fd);
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
                        if (strncmp(buf, want, strlen(want)) == 0)
                                n++;
                }
        }
        closedir(d);
        return n;
}

int main(int argc, char **argv) {
        long n, stack_kib = 64;
        int p[2];
        pthread_attr_t attr;
        pid_t self = getpid();
        char c;

        if (argc < 2 || (n = strtol(argv[1], NULL, 10)) <= 0) {
                fprintf(stderr, "usage: thread-farm N [STACK_KIB]\n");
                return 2;
        }
        if (argc > 2)
                stack_kib = strtol(argv[2], NULL, 10);
        (void) prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() == 1)
                return 1;
        if (pipe2(p, O_CLOEXEC) < 0) {
                perror("pipe2");
                return 1;
        }
        park_fd = p[0];
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
                int r = pthread_create(&t, &attr, park, NULL);
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
                        fprintf(stderr, "thread-farm: only %ld of %ld threads parked in read()\n", k, n);
                        return 1;
                }
                usleep(10000);
        }
        printf("READY %ld\n", n);
        fflush(stdout);
        for (;;) {
                ssize_t k = read(STDIN_FILENO, &c, 1);
                if (k == 0 || (k < 0 && errno != EINTR))
                        break;
        }
        _exit(0);
}
