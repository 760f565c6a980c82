/* vfork + execve, posix_spawn, and a child reporting through its exit status. */
#define _GNU_SOURCE
#include <spawn.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

int main(void) {
    fflush(stdout);
    pid_t p = vfork();
    if (p == 0) {
        execl("/bin/echo", "echo", "from vfork child", (char *)NULL);
        _exit(127);
    }
    int st;
    waitpid(p, &st, 0);
    printf("vfork child exit=%d\n", WEXITSTATUS(st));
    fflush(stdout);
    char *args[] = {"sh", "-c", "echo from posix_spawn; exit 5", NULL};
    if (posix_spawn(&p, "/bin/sh", NULL, NULL, args, environ) != 0) return 1;
    waitpid(p, &st, 0);
    printf("posix_spawn child exit=%d\n", WEXITSTATUS(st));
    return 0;
}
