// A child asks to be traced (PTRACE_TRACEME) and stops itself with SIGSTOP; its parent, the
// tracer, waits for that stop and lets it exit. Natively the tracer sees exactly the SIGSTOP
// stop (wait status 0x137f) and then the exit: prints "stop 0x137f" and "exit 0" (issue 12:
// under the runtime the tracer saw a SIGSYS stop, 0x1f7f, for the child's dispatch traps).
#include <signal.h>
#include <stdio.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>
int main(void)
{
    pid_t pid = fork();
    if (pid == 0) {
        if (ptrace(PTRACE_TRACEME, 0, 0, 0) != 0) _exit(2);
        raise(SIGSTOP);
        _exit(0);
    }
    int status;
    if (pid < 0 || waitpid(pid, &status, 0) != pid) return 1;
    printf("stop %#x\n", status);
    if (WIFSTOPPED(status)) {
        ptrace(PTRACE_CONT, pid, 0, 0);
        waitpid(pid, &status, 0);
    }
    printf("exit %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    return 0;
}
