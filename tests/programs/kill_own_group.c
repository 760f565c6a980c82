/* Sends SIGUSR1 to its own process group (kill(0, ...), a script's `kill 0`) and prints how many
 * times its handler ran: natively once. Under `coreplane run` the launcher, in the same group,
 * got it too and passed it back until session 18: twice. */
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

static volatile sig_atomic_t handled;

static void count(int sig) {
    (void)sig;
    handled++;
}

int main(void) {
    signal(SIGUSR1, count);
    kill(0, SIGUSR1);
    for (int i = 0; i < 50; i++)
        usleep(10 * 1000); /* a copy passed back arrives within milliseconds */
    printf("handled %d\n", (int)handled);
    return 0;
}
