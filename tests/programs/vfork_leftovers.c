// vfork_leftovers: a process that runs many commands by vfork + exec (as dash does) and by
// posix_spawn (as CPython's subprocess and Rust's Command do) must not grow. The runtime's execve
// maps the new argument vector; a vfork child's exec left it mapped in its parent's memory,
// 4 KiB per command (and a nested vfork's block, ≈ 384 KiB). 100 commands each way after 20 to
// warm up: at 4 KiB a command that leak is 800 KiB (500 each way took 14-22 s under --delegate all
// on a loaded machine). Prints "growth 0 KiB" where the address space grew by less than 256 KiB:
// a delegate the pool starts under load adds its 64 KiB stack, which is not a leak.
#define _GNU_SOURCE
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static long vm_size_kb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmSize:", 7))
            sscanf(line + 7, "%ld", &kb);
    if (f)
        fclose(f);
    return kb;
}

static void run_true(int spawn)
{
    char *argv[] = {"true", NULL};
    pid_t pid;
    if (spawn) {
        if (posix_spawn(&pid, "/bin/true", NULL, NULL, argv, environ))
            return;
    } else if ((pid = vfork()) == 0) {
        execve("/bin/true", argv, environ);
        _exit(127);
    }
    waitpid(pid, NULL, 0);
}

int main(void)
{
    for (int i = 0; i < 20; i++) {
        run_true(0);
        run_true(1);
    }
    long before = vm_size_kb();
    for (int i = 0; i < 100; i++) {
        run_true(0);
        run_true(1);
    }
    long growth = vm_size_kb() - before;
    printf("growth %ld KiB\n", growth < 256 ? 0 : growth);
    return 0;
}
