/* Signal state a thread sets with a syscall that (under coreplane) is served from the trap, the
 * first call at its site: the mask must stay blocked, a new thread must inherit it, the
 * signal stack must stay set, and a signal a waiting thread blocks must reach its sigwait,
 * as pbzip2's shutdown does. Prints what it sees; the test compares it with a native run. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

static void *waiter(void *arg) {
    sigset_t *set = arg, now;
    int sig = 0;
    pthread_sigmask(SIG_BLOCK, NULL, &now);
    printf("thread blocks USR1: %d\n", sigismember(&now, SIGUSR1));
    fflush(stdout);
    sigwait(set, &sig);
    printf("thread got signal %d from sigwait\n", sig);
    return NULL;
}

int main(void) {
    sigset_t set, now;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    pthread_sigmask(SIG_BLOCK, NULL, &now);
    printf("main blocks USR1: %d TERM: %d\n", sigismember(&now, SIGUSR1), sigismember(&now, SIGTERM));

    stack_t ss = {.ss_sp = malloc(65536), .ss_size = 65536, .ss_flags = 0}, got;
    sigaltstack(&ss, NULL);
    sigaltstack(NULL, &got);
    printf("signal stack set: %d size %zu\n", !(got.ss_flags & SS_DISABLE), got.ss_size);
    fflush(stdout);

    pthread_t t;
    pthread_create(&t, NULL, waiter, &set);
    struct timespec pause = {0, 50 * 1000 * 1000};
    nanosleep(&pause, NULL);
    pthread_kill(t, SIGUSR1);
    pthread_join(t, NULL);
    puts("main done");
    return 0;
}
