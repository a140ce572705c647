/* scan-floor.c: the cost floor of reading every thread's /proc stat, for bench/scan.
 *
 *   scan-floor ROUNDS
 *
 * Lists /proc/PID/task/TID once, opens every TID's stat file once (kept descriptors; RLIMIT_NOFILE's soft
 * limit is raised to the hard one), then runs ROUNDS rounds. Every round times, one after the other:
 *
 *   pread   one pread() of each kept descriptor into a fixed 1 KiB buffer, no parsing (the floor)
 *   pread2  the same plus a second pread() at the returned offset, i.e. reading until EOF
 *   orc     per thread: openat(/proc fd, "PID/task/TID/stat"), read(), close() (no kept descriptors)
 *   walk    the directory walk alone: readdir /proc, and per process: openat PID, openat+pread+close its
 *           stat, openat PID/task and readdir it (no thread file is read)
 *
 * One untimed warm-up round first. Output (microseconds per whole round, one value per round):
 *
 *   threads T kept K listed L emfile M
 *   pread R1 R2 ...
 *   pread2 ...
 *   orc ...
 *   walk ...
 *   errors E
 *
 * T = threads whose stat could be opened and read at the start (K = T), L = threads listed (the difference
 * is threads that exited in between, and M opens that failed for lack of descriptors). E = failed reads in
 * the timed rounds (threads that exited meanwhile). Built by bench/scan into a temp dir: gcc -O2. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

typedef struct {
        int pid, tid, fd;
} Thr;

static int proc_fd;
static Thr *thr;
static size_t n_thr, alloc_thr;
static unsigned long errors;
static char buf[1024];

static uint64_t now_ns(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000000ULL + (uint64_t) ts.tv_nsec;
}

static int is_num(const char *s) {
        if (!*s)
                return 0;
        for (; *s; s++)
                if (*s < '0' || *s > '9')
                        return 0;
        return 1;
}

static void list_threads(void) {
        DIR *d = fdopendir(openat(proc_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
        struct dirent *de;

        if (!d) {
                perror("opendir /proc");
                exit(1);
        }
        while ((de = readdir(d))) {
                char path[300];
                DIR *td;
                struct dirent *te;
                int tfd;

                if (!is_num(de->d_name))
                        continue;
                snprintf(path, sizeof path, "%s/task", de->d_name);
                tfd = openat(proc_fd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (tfd < 0)
                        continue;
                td = fdopendir(tfd);
                if (!td) {
                        close(tfd);
                        continue;
                }
                while ((te = readdir(td))) {
                        if (!is_num(te->d_name))
                                continue;
                        if (n_thr == alloc_thr) {
                                alloc_thr = alloc_thr ? alloc_thr * 2 : 1024;
                                thr = realloc(thr, alloc_thr * sizeof *thr);
                                if (!thr) {
                                        perror("realloc");
                                        exit(1);
                                }
                        }
                        thr[n_thr++] = (Thr) { atoi(de->d_name), atoi(te->d_name), -1 };
                }
                closedir(td);
        }
        closedir(d);
}

static int stat_path(char *path, size_t size, const Thr *t) {
        return snprintf(path, size, "%d/task/%d/stat", t->pid, t->tid);
}

static void round_pread(int twice) {
        for (size_t i = 0; i < n_thr; i++) {
                ssize_t n = pread(thr[i].fd, buf, sizeof buf - 1, 0);
                if (n <= 0)
                        errors++;
                else if (twice && pread(thr[i].fd, buf + n, sizeof buf - 1 - (size_t) n, n) != 0)
                        errors++;
        }
}

static void round_orc(void) {
        char path[64];
        for (size_t i = 0; i < n_thr; i++) {
                int fd;
                stat_path(path, sizeof path, &thr[i]);
                fd = openat(proc_fd, path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
                if (fd < 0) {
                        errors++;
                        continue;
                }
                if (read(fd, buf, sizeof buf - 1) <= 0)
                        errors++;
                close(fd);
        }
}

static void round_walk(void) {
        DIR *d = fdopendir(openat(proc_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
        struct dirent *de;
        unsigned long tids = 0;

        if (!d) {
                errors++;
                return;
        }
        while ((de = readdir(d))) {
                char path[300];
                DIR *td;
                int pfd, sfd, tfd;

                if (de->d_type != DT_DIR || !is_num(de->d_name))
                        continue;
                pfd = openat(proc_fd, de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (pfd < 0)
                        continue;
                sfd = openat(pfd, "stat", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
                if (sfd >= 0) {
                        if (pread(sfd, buf, sizeof buf - 1, 0) <= 0)
                                errors++;
                        close(sfd);
                }
                close(pfd);
                snprintf(path, sizeof path, "%s/task", de->d_name);
                tfd = openat(proc_fd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (tfd < 0)
                        continue;
                td = fdopendir(tfd);
                if (!td) {
                        close(tfd);
                        continue;
                }
                while (readdir(td))
                        tids++;
                closedir(td);
        }
        closedir(d);
        if (tids == 0)
                errors++;
}

int main(int argc, char **argv) {
        struct rlimit rl;
        long rounds;
        size_t kept = 0, listed, k, emfile = 0;
        uint64_t *us[4];
        static const char *const names[4] = { "pread", "pread2", "orc", "walk" };
        char path[64];

        if (argc != 2 || (rounds = strtol(argv[1], NULL, 10)) <= 0) {
                fprintf(stderr, "usage: scan-floor ROUNDS\n");
                return 2;
        }
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
                rl.rlim_cur = rl.rlim_max;
                (void) setrlimit(RLIMIT_NOFILE, &rl);
        }
        proc_fd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (proc_fd < 0) {
                perror("/proc");
                return 1;
        }
        list_threads();
        listed = n_thr;
        /* Open and keep; drop the threads that are already gone (or when out of descriptors). */
        for (size_t i = 0; i < n_thr; i++) {
                stat_path(path, sizeof path, &thr[i]);
                thr[i].fd = openat(proc_fd, path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
                if (thr[i].fd < 0 && (errno == EMFILE || errno == ENFILE))
                        emfile++;
                if (thr[i].fd >= 0 && pread(thr[i].fd, buf, sizeof buf - 1, 0) <= 0) {
                        close(thr[i].fd);
                        thr[i].fd = -1;
                }
        }
        k = 0;
        for (size_t i = 0; i < n_thr; i++)
                if (thr[i].fd >= 0)
                        thr[k++] = thr[i];
        n_thr = kept = k;

        for (int m = 0; m < 4; m++)
                us[m] = calloc((size_t) rounds, sizeof **us);
        /* Warm-up. */
        round_pread(1);
        round_orc();
        round_walk();
        errors = 0;
        for (long r = 0; r < rounds; r++) {
                uint64_t t0 = now_ns();
                round_pread(0);
                uint64_t t1 = now_ns();
                round_pread(1);
                uint64_t t2 = now_ns();
                round_orc();
                uint64_t t3 = now_ns();
                round_walk();
                uint64_t t4 = now_ns();
                us[0][r] = t1 - t0;
                us[1][r] = t2 - t1;
                us[2][r] = t3 - t2;
                us[3][r] = t4 - t3;
        }
        printf("threads %zu kept %zu listed %zu emfile %zu\n", n_thr, kept, listed, emfile);
        for (int m = 0; m < 4; m++) {
                printf("%s", names[m]);
                for (long r = 0; r < rounds; r++)
                        printf(" %.1f", (double) us[m][r] / 1000.0);
                printf("\n");
        }
        printf("errors %lu\n", errors);
        return 0;
}
