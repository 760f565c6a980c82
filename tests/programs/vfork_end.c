/* A vfork child's end is not its parent's: the child runs in its parent's memory, profile
 * mapping included, until it exits. A thread blocks, the main thread vforks a child that exits
 * with 7, sleeps 200 ms and exits 0, or, given an argument, kills itself. Under a profile the
 * parent's blocked thread ended when the child did, and a killed parent showed as exited with
 * the child's 7. */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

static void *blocked(void *arg)
{
    (void)arg;
    pause();
    return NULL;
}

int main(int argc, char **argv)
{
    (void)argv;
    pthread_t t;
    pthread_create(&t, NULL, blocked, NULL);
    usleep(20000);
    pid_t child = vfork();
    if (child == 0)
        _exit(7);
    int status;
    waitpid(child, &status, 0);
    printf("child %d\n", WEXITSTATUS(status));
    fflush(stdout);
    usleep(200000);
    if (argc > 1)
        kill(getpid(), SIGKILL);
    return 0;
}
