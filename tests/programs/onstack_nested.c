// onstack_nested: a thread blocked in read(2) takes SIGUSR1 200 times; its handler runs on the
// thread's own signal stack (SA_ONSTACK) and makes calls of its own (write, getppid) while the
// read is still in progress. Under delegation the read's runtime frame must survive the
// handler's calls. Prints "handled 200, read 'x'" on success.
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static int data[2], back[2];

static void handler(int sig)
{
    (void)sig;
    char c = getppid() > 0 ? 'h' : '?';
    write(back[1], &c, 1);
}

static void *reader(void *arg)
{
    stack_t ss = {.ss_sp = malloc(64 * 1024), .ss_size = 64 * 1024};
    sigaltstack(&ss, NULL);
    char c = 0;
    while (read(data[0], &c, 1) != 1)
        ;
    *(char *)arg = c;
    return arg;
}

int main(void)
{
    static char got;
    struct sigaction sa = {.sa_handler = handler, .sa_flags = SA_ONSTACK | SA_RESTART};
    sigaction(SIGUSR1, &sa, NULL);
    if (pipe(data) || pipe(back))
        return 2;
    pthread_t t;
    pthread_create(&t, NULL, reader, &got);
    int handled = 0;
    for (int i = 0; i < 200; i++) {
        pthread_kill(t, SIGUSR1);
        char c;
        if (read(back[0], &c, 1) == 1 && c == 'h')
            handled++;
    }
    write(data[1], "x", 1);
    pthread_join(t, NULL);
    printf("handled %d, read '%c'\n", handled, got);
    return 0;
}
