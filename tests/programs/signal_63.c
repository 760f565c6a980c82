/* The runtime interrupts its delegates with signal 63 (SIGRTMAX - 1); to the program it is an
   ordinary real-time signal. "handler": its handler runs with its siginfo; "default": the process
   dies of it; "ignore": nothing happens. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static volatile int seen = -1;
static void on_sig(int sig, siginfo_t *info, void *ctx) { (void)ctx; seen = sig * 1000 + info->si_value.sival_int; }

int main(int argc, char **argv) {
    int sig = SIGRTMAX - 1;
    if (argc > 1 && strcmp(argv[1], "handler") == 0) {
        struct sigaction sa = {0};
        sa.sa_sigaction = on_sig;
        sa.sa_flags = SA_SIGINFO;
        sigaction(sig, &sa, NULL);
    } else if (argc > 1 && strcmp(argv[1], "ignore") == 0) {
        signal(sig, SIG_IGN);
    }
    union sigval v = {.sival_int = 7};
    sigqueue(getpid(), sig, v);
    printf("signal %d seen %d\n", sig, seen);
    return 0;
}
