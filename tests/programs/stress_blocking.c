// Stress for delegation (issue 12): N threads in a ring of pipes, each writing a byte to the next
// thread's pipe and blocking in read on its own, then sleeping a few microseconds, taking a shared
// mutex (futex) and meeting at a barrier, while the main thread keeps sending SIGUSR1 (no
// SA_RESTART: calls return EINTR and are made again) and some threads fork and exec /bin/true.
// Prints a line that does not depend on timing; exits 1 on any lost, reordered or failed call.
// Args: threads (64), iterations (100), microseconds between signals (200; 0: no signals).
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int nthreads, iterations;
static int (*pipes)[2];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t barrier;
static long shared_counter;
static atomic_long signals_seen, forks_done;
static atomic_int running;

static void on_usr1(int sig) { (void)sig; atomic_fetch_add(&signals_seen, 1); }

static void fail(const char *what, int i)
{
    fprintf(stderr, "thread %d: %s: %s\n", i, what, strerror(errno));
    exit(1);
}

static void write_byte(int fd, unsigned char b, int i)
{
    while (write(fd, &b, 1) != 1)
        if (errno != EINTR) fail("write", i);
}

static unsigned char read_byte(int fd, int i)
{
    unsigned char b;
    ssize_t n;
    while ((n = read(fd, &b, 1)) != 1) {
        if (n == 0) { errno = EPIPE; fail("read: end of file", i); }
        if (errno != EINTR) fail("read", i);
    }
    return b;
}

static void pause_us(long us)
{
    struct timespec t = {0, us * 1000};
    while (clock_nanosleep(CLOCK_MONOTONIC, 0, &t, &t) == EINTR) {}
}

static void fork_exec(int i)
{
    pid_t pid = fork();
    if (pid < 0) fail("fork", i);
    if (pid == 0) {
        execl("/bin/true", "true", (char *)NULL);
        _exit(127);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) fail("waitpid", i);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) { errno = ECHILD; fail("child status", i); }
    atomic_fetch_add(&forks_done, 1);
}

static void *worker(void *arg)
{
    int i = (int)(long)arg, next = (i + 1) % nthreads;
    unsigned seed = (unsigned)i * 2654435761u;
    for (int k = 0; k < iterations; k++) {
        write_byte(pipes[next][1], (unsigned char)k, i);
        unsigned char got = read_byte(pipes[i][0], i);
        if (got != (unsigned char)k) {
            fprintf(stderr, "thread %d: iteration %d read %u\n", i, k, got);
            exit(1);
        }
        pause_us(rand_r(&seed) % 50);
        pthread_mutex_lock(&lock);
        shared_counter++;
        pthread_mutex_unlock(&lock);
        if (i % 16 == 0 && k % 8 == 4)
            fork_exec(i);
        if (k % 10 == 9)
            pthread_barrier_wait(&barrier);
    }
    atomic_fetch_sub(&running, 1);
    return NULL;
}

int main(int argc, char **argv)
{
    nthreads = argc > 1 ? atoi(argv[1]) : 64;
    iterations = argc > 2 ? atoi(argv[2]) : 100;
    long signal_period_us = argc > 3 ? atol(argv[3]) : 200;
    iterations -= iterations % 10;  // every thread reaches every barrier
    struct sigaction sa = {.sa_handler = on_usr1};  // no SA_RESTART: blocked calls see EINTR
    sigaction(SIGUSR1, &sa, NULL);
    pipes = calloc(nthreads, sizeof *pipes);
    pthread_t *tids = calloc(nthreads, sizeof *tids);
    for (int i = 0; i < nthreads; i++)
        if (pipe(pipes[i]) < 0) fail("pipe", i);
    pthread_barrier_init(&barrier, NULL, nthreads);
    atomic_store(&running, nthreads);
    for (int i = 0; i < nthreads; i++)
        if (pthread_create(&tids[i], NULL, worker, (void *)(long)i) != 0) fail("pthread_create", i);
    unsigned seed = 1;
    long sent = 0;
    while (atomic_load(&running) > 0) {
        int t = rand_r(&seed) % nthreads;
        if (signal_period_us > 0 && pthread_kill(tids[t], SIGUSR1) == 0)
            sent++;
        pause_us(signal_period_us > 0 ? signal_period_us : 1000);
    }
    for (int i = 0; i < nthreads; i++)
        pthread_join(tids[i], NULL);
    if (shared_counter != (long)nthreads * iterations) {
        fprintf(stderr, "counter %ld, expected %ld\n", shared_counter, (long)nthreads * iterations);
        return 1;
    }
    long expected_forks = 0;
    for (int i = 0; i < nthreads; i += 16)
        expected_forks += (iterations + 3) / 8;
    printf("threads %d iterations %d forks %ld signals %s\n", nthreads, iterations,
           atomic_load(&forks_done), sent > 0 && atomic_load(&signals_seen) > 0 ? "delivered" : "none");
    return atomic_load(&forks_done) == expected_forks ? 0 : 1;
}
