/* mutex-abba.c: a mutex ABBA deadlock in one process, for bench/daemon.
 *
 *   mutex-abba --syscalls     print "read=NR futex=NR" (SYS_read, SYS_futex of this architecture) and exit
 *   mutex-abba                the deadlock, on "go"
 *
 * Two threads, A and B. Each waits at a start gate; main prints "READY TID_A TID_B MUTEX_A MUTEX_B" (the threads'
 * tids and the addresses of the two pthread mutexes, in hex: a thread stuck on a mutex sleeps in futex() on its
 * address, /proc/PID/task/TID/syscall's first argument) and waits for a line on stdin. Then it opens the gate: A
 * locks mutex A, B locks mutex B, both meet at a barrier (each knows the other holds its mutex), then A locks
 * mutex B and B locks mutex A: neither returns. Main joins A (forever). It dies with its parent
 * (PR_SET_PDEATHSIG), so a SIGKILLed bench does not leave it behind. Built by bench/daemon into a temp dir:
 * gcc -O2 -pthread. */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

static pthread_mutex_t mutex_a = PTHREAD_MUTEX_INITIALIZER, mutex_b = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t gate, held;
static pid_t tid_a, tid_b;

static void *thread_a(void *arg) {
        (void) arg;
        __atomic_store_n(&tid_a, (pid_t) syscall(SYS_gettid), __ATOMIC_RELEASE);
        pthread_barrier_wait(&gate);
        pthread_mutex_lock(&mutex_a);
        pthread_barrier_wait(&held);
        pthread_mutex_lock(&mutex_b);   /* never returns */
        return NULL;
}

static void *thread_b(void *arg) {
        (void) arg;
        __atomic_store_n(&tid_b, (pid_t) syscall(SYS_gettid), __ATOMIC_RELEASE);
        pthread_barrier_wait(&gate);
        pthread_mutex_lock(&mutex_b);
        pthread_barrier_wait(&held);
        pthread_mutex_lock(&mutex_a);   /* never returns */
        return NULL;
}

int main(int argc, char **argv) {
        pthread_t a, b;
        char line[64];
        int r;

        if (argc > 1 && strcmp(argv[1], "--syscalls") == 0) {
                printf("read=%ld futex=%ld\n", (long) SYS_read, (long) SYS_futex);
                return 0;
        }
        (void) prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() == 1)
                return 1;
        pthread_barrier_init(&gate, NULL, 3);
        pthread_barrier_init(&held, NULL, 2);
        if ((r = pthread_create(&a, NULL, thread_a, NULL)) || (r = pthread_create(&b, NULL, thread_b, NULL))) {
                fprintf(stderr, "mutex-abba: pthread_create: %s\n", strerror(r));
                return 1;
        }
        /* Both tids are set before either thread reaches the gate, and main cannot pass the gate before both
         * have, so wait at it only after "go": meanwhile spin briefly for the tids. */
        while (!__atomic_load_n(&tid_a, __ATOMIC_ACQUIRE) || !__atomic_load_n(&tid_b, __ATOMIC_ACQUIRE))
                usleep(1000);
        printf("READY %d %d %p %p\n", (int) tid_a, (int) tid_b, (void *) &mutex_a, (void *) &mutex_b);
        fflush(stdout);
        if (!fgets(line, sizeof line, stdin))
                return 1;
        pthread_barrier_wait(&gate);
        pthread_join(a, NULL);
        return 0;
}
