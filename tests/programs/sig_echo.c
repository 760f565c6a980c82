/* Prints the number of every signal it receives (1-31 but KILL and STOP, and SIGRTMIN+3 with its
 * sigqueue value), one per line, and exits 0 at SIGTERM. argv[1]: a file it writes "ready" to
 * once its handlers are in place. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

static void echo(int sig, siginfo_t *info, void *context) {
    char line[48];
    int n = sig == SIGRTMIN + 3 ? snprintf(line, sizeof line, "%d value %d\n", sig, info->si_value.sival_int)
                                : snprintf(line, sizeof line, "%d\n", sig);
    write(1, line, n);
    if (sig == SIGTERM)
        _exit(0);
}

int main(int argc, char **argv) {
    struct sigaction act = {.sa_sigaction = echo, .sa_flags = SA_SIGINFO | SA_RESTART};
    for (int sig = 1; sig < 32; sig++)
        if (sig != SIGKILL && sig != SIGSTOP)
            sigaction(sig, &act, 0);
    sigaction(SIGRTMIN + 3, &act, 0);
    FILE *ready = fopen(argv[1], "w");
    fputs("ready\n", ready);
    fclose(ready);
    for (;;)
        pause();
}
