/* More threads blocked in reads than the runtime has delegates (64): argv[1] threads each read
 * one byte from a pipe of its own and block; once all are blocked, the main thread writes each
 * pipe its byte. Prints "done N". Under `--delegate all` every read blocks a delegate, and the
 * writes that end them must not wait for a delegate that never comes free (hackbench -T hung so
 * before session 18). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static int (*pipes)[2];

static void *reader(void *arg) {
    char c;
    return read(pipes[(long)arg][0], &c, 1) == 1 ? NULL : (void *)1;
}

int main(int argc, char **argv) {
    int n = atoi(argv[1]);
    pipes = calloc(n, sizeof *pipes);
    pthread_t *threads = calloc(n, sizeof *threads);
    for (long i = 0; i < n; i++)
        if (pipe(pipes[i]) || pthread_create(&threads[i], NULL, reader, (void *)i))
            return 1;
    usleep(300 * 1000);
    for (int i = 0; i < n; i++)
        if (write(pipes[i][1], "x", 1) != 1)
            return 2;
    for (int i = 0; i < n; i++) {
        void *failed;
        pthread_join(threads[i], &failed);
        if (failed)
            return 3;
    }
    printf("done %d\n", n);
    return 0;
}
