// Signals keep interrupting a read blocked on a pipe (handler without SA_RESTART) while another
// thread writes bytes 0, 1, 2, ... into it: a read that returns EINTR has consumed nothing, so
// the reader sees every byte once, in order. Prints "bytes N in order" and exits 0 when that holds,
// else names the first byte out of place and exits 1. Args: bytes (default 2000).
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static int fds[2], count;
static atomic_int done;
static atomic_long interrupted;

static void on_usr1(int sig) { (void)sig; }

static void pause_us(long us)
{
    struct timespec t = {0, us * 1000};
    while (nanosleep(&t, &t) < 0 && errno == EINTR) {}
}

static void *writer(void *arg)
{
    (void)arg;
    for (int k = 0; k < count; k++) {
        unsigned char b = (unsigned char)k;
        while (write(fds[1], &b, 1) != 1) {}
        pause_us(20);
    }
    return NULL;
}

static void *reader(void *arg)
{
    for (int k = 0; k < count; k++) {
        unsigned char b;
        ssize_t n;
        while ((n = read(fds[0], &b, 1)) < 0 && errno == EINTR)
            atomic_fetch_add(&interrupted, 1);
        if (n != 1 || b != (unsigned char)k) {
            printf("byte %d: read %zd bytes, value %u\n", k, n, b);
            exit(1);
        }
    }
    atomic_store(&done, 1);
    return arg;
}

int main(int argc, char **argv)
{
    count = argc > 1 ? atoi(argv[1]) : 2000;
    struct sigaction sa = {.sa_handler = on_usr1};
    sigaction(SIGUSR1, &sa, NULL);
    if (pipe(fds) < 0) return 2;
    pthread_t r, w;
    pthread_create(&r, NULL, reader, NULL);
    pthread_create(&w, NULL, writer, NULL);
    while (!atomic_load(&done)) {
        pthread_kill(r, SIGUSR1);
        pause_us(10);
    }
    pthread_join(r, NULL);
    pthread_join(w, NULL);
    printf("bytes %d in order\n", count);
    return 0;
}
