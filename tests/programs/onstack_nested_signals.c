// onstack_nested_signals: a handler on the program's signal stack (SA_ONSTACK, no
// SS_AUTODISARM) blocks in read(2), and a second SA_ONSTACK signal comes meanwhile, as in
// stress-ng's timer stressor (its timer handler's calls, SIGALRM nested in them). Natively the
// kernel puts the second frame below the first handler's stack pointer on the signal stack; a
// runtime that made the read on a stack of its own made the kernel start the second frame at the
// signal stack's top, over the first handler's frame. The main thread spins without calls.
// Prints "nested 100 of 100, canaries intact" on success.
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define ROUNDS 100
static int pipefd[2];
static pid_t main_tid;
static volatile int handled, nested, bad, inside;

static void nap(long us)
{
    struct timespec ts = {0, us * 1000};
    nanosleep(&ts, NULL);
}

static void outer(int sig)
{
    (void)sig;
    volatile unsigned long canary[32];
    for (int i = 0; i < 32; i++)
        canary[i] = 0x5eed0000ul + i;
    inside = 1;
    char c;
    while (read(pipefd[0], &c, 1) != 1)
        ;
    for (int i = 0; i < 32; i++)
        if (canary[i] != 0x5eed0000ul + i)
            bad++;
    inside = 0;
    handled++;
}

static void inner(int sig)
{
    (void)sig;
    if (inside)
        nested++;
    getppid();
}

static void *sender(void *arg)
{
    (void)arg;
    for (int i = 0; i < ROUNDS; i++) {
        int before = handled;
        syscall(SYS_tgkill, getpid(), main_tid, SIGUSR1);
        while (!inside)
            nap(100);
        nap(1000);
        syscall(SYS_tgkill, getpid(), main_tid, SIGUSR2);
        nap(1000);
        if (write(pipefd[1], "x", 1) != 1)
            abort();
        while (handled == before)
            nap(100);
    }
    return NULL;
}

int main(void)
{
    main_tid = syscall(SYS_gettid);
    if (pipe(pipefd))
        return 2;
    stack_t ss = {.ss_sp = malloc(64 * 1024), .ss_size = 64 * 1024};
    sigaltstack(&ss, NULL);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = outer;
    sa.sa_flags = SA_ONSTACK | SA_RESTART;
    sigaction(SIGUSR1, &sa, NULL);
    sa.sa_handler = inner;
    sigaction(SIGUSR2, &sa, NULL);
    pthread_t t;
    pthread_create(&t, NULL, sender, NULL);
    volatile unsigned long spin = 0;
    while (handled < ROUNDS)
        spin++;
    pthread_join(t, NULL);
    printf("nested %d of %d, canaries %s\n", nested, ROUNDS, bad ? "overwritten" : "intact");
    return bad != 0 || nested != ROUNDS;
}
