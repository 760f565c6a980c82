/* A SIGALRM handler with SA_RESTART forks while the thread reads a socket with a receive
   time-out (SO_RCVTIMEO, 3 s): the kernel ends such a read with EINTR whatever SA_RESTART says,
   and the forked child, returning from the handler into its copy of the read, ends it so too.
   Usage: fork_timed_read N [nofork] (rounds; nofork: the handler forks nothing). Prints the
   outcomes of the parent's and the children's reads; a read that runs out its time-out fails
   with EAGAIN. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile pid_t child;
static int forking = 1;

static void on_alarm(int sig) {
    (void)sig;
    if (forking)
        child = fork();
}

/* A read's outcome: 0 EINTR, 1 EAGAIN (timed out), 2 anything else. */
static int outcome(long r, int err) {
    return r < 0 && err == EINTR ? 0 : r < 0 && err == EAGAIN ? 1 : 2;
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 3, sv[2], counts[2][3] = {{0}};
    forking = !(argc > 2 && argv[2][0] == 'n');
    struct timeval timeout = {3, 0};
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0 ||
        setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout) < 0)
        return 2;
    struct sigaction sa = {.sa_handler = on_alarm, .sa_flags = SA_RESTART};
    sigaction(SIGALRM, &sa, NULL);
    for (int i = 0; i < rounds; i++) {
        char b;
        /* Well after the read has blocked, and its delegate with it. */
        struct itimerval it = {{0, 0}, {0, 200000}};
        child = -1;
        setitimer(ITIMER_REAL, &it, NULL);
        long r = read(sv[0], &b, 1);
        int err = errno;
        if (child == 0)
            _exit(outcome(r, err));
        counts[0][outcome(r, err)]++;
        if (!forking)
            continue;
        int status;
        if (child < 0 || waitpid(child, &status, 0) != child || !WIFEXITED(status))
            return 3;
        counts[1][WEXITSTATUS(status) < 3 ? WEXITSTATUS(status) : 2]++;
    }
    printf("parent eintr=%d eagain=%d other=%d, child eintr=%d eagain=%d other=%d\n", counts[0][0], counts[0][1],
           counts[0][2], counts[1][0], counts[1][1], counts[1][2]);
    return 0;
}
