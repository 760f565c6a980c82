// pool_signals: signals for a process while the runtime starts or retires its delegates, whose
// handler makes a delegated call of its own. The parent floods a child with SIGUSR1 while the
// child (1) makes the first delegated calls of a new process, 200 children in turn, then (2)
// changes its credentials (as root, its saved uid back and forth: the delegates are retired and
// started again at each change) and makes a call, 300 times. A handler that interrupted the thread holding the pool's lock waited
// for it for good, or posted a call to delegates that were ending; a new delegate that took the
// signal before blocking the program's signals ran the handler and waited for itself (mksh under
// --delegate all, `sleep 5 & kill $!`, hung so). A child not done after 20 s counts as hung.
// Prints "hung 0 of 201" on success.
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void on_usr1(int sig)
{
    (void)sig;
    getppid();
}

// Runs `body` in a child flooded with SIGUSR1; 1 if it hung (and was killed).
static int flooded(void (*body)(void))
{
    pid_t pid = fork();
    if (pid == 0) {
        body();
        _exit(0);
    }
    int status;
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (waitpid(pid, &status, WNOHANG) == 0) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec - t0.tv_sec > 20) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            return 1;
        }
        kill(pid, SIGUSR1);
    }
    return 0;
}

static void first_calls(void)
{
    for (int j = 0; j < 20; j++)
        getppid();
}

static void credential_changes(void)
{
    int root = geteuid() == 0;
    uid_t saved[2] = {root ? 65534 : (uid_t)-1, root ? 0 : (uid_t)-1};
    for (int j = 0; j < 300; j++) {
        setresuid(-1, -1, saved[j % 2]);
        getppid();
    }
}

int main(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGUSR1, &sa, NULL);
    int hung = 0, runs = 0;
    for (int i = 0; i < 200; i++, runs++)
        hung += flooded(first_calls);
    hung += flooded(credential_changes);
    runs++;
    printf("hung %d of %d\n", hung, runs);
    return hung != 0;
}
