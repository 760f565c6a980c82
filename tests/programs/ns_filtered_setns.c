/* setns(2) with nstype 0 by a thread under its own seccomp filter, which refuses ioctl ("errno")
 * or kills for it ("kill"): the filter goes on while a second thread runs, which then ends, and
 * the only thread joins a child's mount namespace by its fd (natively allowed: its filesystem
 * context is its own). The runtime must not ask the fd's type itself (NS_GET_NSTYPE is an ioctl
 * the filter sees). Prints the result; exits 77 where the kernel refuses the namespace. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include "answer_filter.h"

static void delegated_calls(void) {
    for (int i = 0; i < 3; i++) /* delegated calls, so that delegates run */
        close(dup(1));
}

static void *second(void *arg) {
    delegated_calls();
    return arg;
}

static void filter_ioctl(unsigned action) {
    const int ioctl_only[] = {SYS_ioctl};
    if (answer_calls(ioctl_only, 1, action, 0)) {
        perror("seccomp");
        _exit(2);
    }
}

int main(int argc, char **argv) {
    unsigned action = argc > 1 && !strcmp(argv[1], "kill") ? SECCOMP_RET_KILL_PROCESS : SECCOMP_RET_ERRNO | EPERM;
    delegated_calls();
    int ready[2];
    if (pipe(ready))
        return 2;
    pid_t child = fork();
    if (child == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* ends with a killed parent */
        char ok = unshare(CLONE_NEWNS) == 0;
        write(ready[1], &ok, 1);
        pause();
        _exit(0);
    }
    char ok = 0, path[64];
    read(ready[0], &ok, 1);
    if (!ok) {
        kill(child, SIGKILL);
        return 77;
    }
    snprintf(path, sizeof path, "/proc/%d/ns/mnt", child);
    int fd = open(path, O_RDONLY);
    pthread_t t;
    pthread_create(&t, 0, second, 0);
    filter_ioctl(action);
    pthread_join(t, 0);
    int r = setns(fd, 0);
    printf("setns of a mount namespace, filtered, alone: %s\n", r ? strerror(errno) : "ok");
    kill(child, SIGKILL);
    waitpid(child, 0, 0);
    return 0;
}
