// A child process cloned (without CLONE_VM) onto a one-page stack above an unmapped page, as
// strace's clone-flags test does: it makes a few calls, asks for its signal stack (it has none)
// and exits 42. Prints "child 42, signal stack disabled: 1" (issue 12: under the runtime each of
// the child's dispatch traps put a ~7 KB frame on that page and the child died of SIGSEGV).
#define _GNU_SOURCE
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
static int child(void *arg)
{
    (void)arg;
    stack_t now;
    if (getpid() <= 0 || getppid() <= 0 || sigaltstack(NULL, &now) != 0) _exit(1);
    _exit(now.ss_flags & SS_DISABLE ? 42 : 2);
}
int main(void)
{
    long page = sysconf(_SC_PAGESIZE);
    char *two = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (two == MAP_FAILED || munmap(two, page) != 0) return 3;
    pid_t pid = clone(child, two + 2 * page, SIGCHLD, NULL);
    int status;
    if (pid < 0 || waitpid(pid, &status, 0) != pid) return 4;
    printf("child %d, signal stack disabled: %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status),
           WIFEXITED(status) && WEXITSTATUS(status) == 42);
    return 0;
}
