/* N threads (default 80) hammer the syscall path at once: each preads its own byte of a file
 * many times and checks it, so a request answered for the wrong thread is caught. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static int fd, rounds;

static void *worker(void *arg) {
    long id = (long)arg;
    long bad = 0;
    for (int i = 0; i < rounds; i++) {
        unsigned char c;
        if (pread(fd, &c, 1, id) != 1 || c != (unsigned char)(id * 7 + 3)) bad++;
        if (getppid() <= 0) bad++;
    }
    return (void *)bad;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 80;
    rounds = argc > 2 ? atoi(argv[2]) : 200;
    char path[] = "/tmp/coreplane-threads-XXXXXX";
    fd = mkstemp(path);
    unlink(path);
    for (int i = 0; i < n; i++) {
        unsigned char c = (unsigned char)(i * 7 + 3);
        if (pwrite(fd, &c, 1, i) != 1) return 2;
    }
    pthread_t *t = calloc(n, sizeof *t);
    for (long i = 0; i < n; i++) pthread_create(&t[i], NULL, worker, (void *)i);
    long bad = 0;
    for (int i = 0; i < n; i++) {
        void *r;
        pthread_join(t[i], &r);
        bad += (long)r;
    }
    printf("threads=%d rounds=%d wrong=%ld\n", n, rounds, bad);
    return bad != 0;
}
