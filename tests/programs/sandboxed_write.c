/* sshd's pre-authentication child, reduced: a process (forked, or the program itself) installs
 * a seccomp filter that allows write and exit alone, then writes from a site it never reached
 * before, so that under coreplane the write traps after the filter applies. The filter's other
 * answer is argv[2]: errno (EPERM), kill (the thread) or kill_process. Natively the writes go
 * through and the program exits 0; under a runtime whose trap returns through rt_sigreturn the
 * filter refuses that call (errno: the restorer's ud2, SIGILL) or kills for it (SIGSYS).
 * Usage: sandboxed_write fork|nofork errno|kill|kill_process. Exits 77 where filters are refused. */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "write_only_filter.h"

static int child(unsigned otherwise) {
    if (allow_only_write_and_exit(otherwise) != 0)
        return 77;
    for (int i = 0; i < 3; i++) {
        char line[32];
        int n = snprintf(line, sizeof line, "sandboxed write %d\n", i);
        if (write(1, line, n) != n)
            return 3;
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 3)
        return 2;
    unsigned otherwise = !strcmp(argv[2], "errno") ? SECCOMP_RET_ERRNO | EPERM
                       : !strcmp(argv[2], "kill") ? SECCOMP_RET_KILL_THREAD : SECCOMP_RET_KILL_PROCESS;
    if (strcmp(argv[1], "fork") != 0)
        syscall(__NR_exit_group, child(otherwise));
    pid_t pid = fork();
    if (pid == 0)
        syscall(__NR_exit_group, child(otherwise));
    int status;
    if (pid < 0 || waitpid(pid, &status, 0) != pid)
        return 1;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 77)
        return 77;
    printf("child status %#x\n", status);
    return 0;
}
