/* A program under its own seccomp filter that execs: filters survive execve, so the new image
 * runs under it. The filter allows every call but rt_sigreturn, which kills the process (a call
 * this program never makes). Installed with prctl(PR_SET_SECCOMP) ("prctl"), with
 * seccomp(SECCOMP_FILTER_FLAG_TSYNC) ("tsync"), or by a forked child that then execs ("fork");
 * then this program is exec'd again ("after"), which writes, calls getpid, and writes from a
 * thread it starts: every call of the new image comes from a site it never reached, so under
 * coreplane each traps first. Natively it prints three lines and exits 0. Before: the new
 * image's runtime did not know the filter was the program's, its first trap returned through
 * rt_sigreturn, and the filter killed the process (SIGSYS).
 * Usage: sandboxed_exec prctl|tsync|fork. Exits 77 where filters are refused. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include "answer_filter.h"
#include <unistd.h>

static int kill_rt_sigreturn(int tsync) {
    const int sigreturn_only[] = {__NR_rt_sigreturn};
    return answer_calls(sigreturn_only, 1, SECCOMP_RET_KILL_PROCESS, tsync ? SECCOMP_FILTER_FLAG_TSYNC : 0);
}

static void *from_thread(void *arg) {
    printf("a thread of the new image writes\n");
    fflush(stdout);
    return arg;
}

static int after_exec(void) {
    printf("the new image runs under the filter\n");
    fflush(stdout);
    printf("getpid %s\n", syscall(__NR_getpid) == getpid() ? "agrees" : "differs");
    fflush(stdout);
    pthread_t t;
    if (pthread_create(&t, NULL, from_thread, NULL) != 0 || pthread_join(t, NULL) != 0)
        return 3;
    return 0;
}

static int filter_and_exec(const char *self, int tsync) {
    if (kill_rt_sigreturn(tsync) != 0)
        return 77;
    execl(self, self, "after", (char *)NULL);
    return 4;
}

int main(int argc, char **argv) {
    if (argc != 2)
        return 2;
    if (!strcmp(argv[1], "after"))
        return after_exec();
    if (strcmp(argv[1], "fork") != 0)
        return filter_and_exec(argv[0], !strcmp(argv[1], "tsync"));
    pid_t pid = fork();
    if (pid == 0)
        _exit(filter_and_exec(argv[0], 0));
    int status;
    if (pid < 0 || waitpid(pid, &status, 0) != pid)
        return 1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
