/* trap_window_race [SECONDS]: main has a signal stack and loops on open/close (fast-path calls
 * served in Rust on the runtime stack); another thread sends SIGUSR1, whose handler (no
 * SA_ONSTACK) calls getpid from a stub in anonymous executable memory, which traps every time.
 * A signal that lands in the fast path's switch to the runtime stack, before rt_sp is set or
 * after it is given back, runs its handler there; its trap, taken on the signal stack, must not
 * be copied to the runtime stack's top over the handler's frames (SIGSEGV in 4 of 6 runs in a
 * review of session 21's first version). Natively prints "ok 1". */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "trapping_stub.h"
static long (*stub)(void);
static volatile long handled, stop;
static pthread_t main_thread;
static void on_usr1(int sig) { (void)sig; if (stub() > 0) handled++; }
static void *sender(void *a) {
    (void)a;
    while (!stop) { pthread_kill(main_thread, SIGUSR1); for (volatile int i = 0; i < 2000; i++) {} }
    return 0;
}
int main(int argc, char **argv) {
    int secs = argc > 1 ? atoi(argv[1]) : 3;
    stub = trapping_stub();
    stack_t ss = {.ss_sp = malloc(65536), .ss_size = 65536};
    sigaltstack(&ss, 0);
    struct sigaction sa = {.sa_handler = on_usr1, .sa_flags = SA_RESTART};
    sigaction(SIGUSR1, &sa, 0);
    main_thread = pthread_self();
    pthread_t t;
    pthread_create(&t, 0, sender, 0);
    time_t end = time(0) + secs;
    long n = 0;
    while (time(0) < end) {
        int fd = open("/dev/null", O_RDONLY);
        close(fd);
        n++;
    }
    stop = 1;
    pthread_join(t, 0);
    printf("ok %d\n", handled > 0 && n > 0);
    return 0;
}
