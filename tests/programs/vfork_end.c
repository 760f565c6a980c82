/* vfork_end exit|kill|exec: a vfork child's end is not its parent's: the child runs in its
 * parent's memory, profile mapping included, until it exits or execs. A thread blocks, the main
 * thread vforks a child that exits with 7 (exec: that runs `sh -c "exit 7"`), sleeps 200 ms and
 * exits 0, or (kill) kills itself. Under a profile the parent's blocked thread ended when the
 * child exited, a killed parent showed as exited with the child's 7, and an exec'd child's part
 * in its parent's file showed it running until the parent ended. */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
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
    pthread_t t;
    pthread_create(&t, NULL, blocked, NULL);
    usleep(20000);
    pid_t child = vfork();
    if (child == 0) {
        if (argc > 1 && !strcmp(argv[1], "exec"))
            execl("/bin/sh", "sh", "-c", "exit 7", (char *)NULL);
        _exit(7);
    }
    int status;
    waitpid(child, &status, 0);
    printf("child %d\n", WEXITSTATUS(status));
    fflush(stdout);
    usleep(200000);
    if (argc > 1 && !strcmp(argv[1], "kill"))
        kill(getpid(), SIGKILL);
    return 0;
}
