/* A program under its own allowlist-style seccomp filter, which kills the process for the legacy
 * open(2) (glibc uses openat), forks a child and starts a thread: natively "child 0" and
 * "thread ok". Under a profile the forked child's new profile file was created with open, and
 * the child died of SIGSYS. */
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include "answer_filter.h"

static void *worker(void *arg)
{
    return arg;
}

int main(void)
{
    const int open_only[] = {__NR_open};
    if (answer_calls(open_only, 1, SECCOMP_RET_KILL_PROCESS, 0))
        return perror("seccomp"), 2;
    pid_t child = fork();
    if (child == 0)
        _exit(0);
    int status;
    waitpid(child, &status, 0);
    printf("child %d\n", status);
    pthread_t t;
    if (pthread_create(&t, NULL, worker, NULL))
        return puts("no thread"), 1;
    pthread_join(t, NULL);
    puts("thread ok");
    return 0;
}
