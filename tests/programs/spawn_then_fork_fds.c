/* A vfork child that closes every descriptor above 2 before its execve (as spawners with
 * close_fds do), then a forked child: natively the forked child has its parent's descriptors,
 * and it prints "the forked child has its parent's descriptors". Before, under --profile, the
 * vfork child opened the profile directory again and remembered that descriptor's number in the
 * memory it shares with its parent, which the parent's forked child then found was not the
 * directory: it opened it once more, one descriptor more than its parent's. */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static int descriptors(void) {
    DIR *d = opendir("/proc/self/fd");
    int n = 0;
    while (d && readdir(d))
        n++;
    if (d)
        closedir(d);
    return n;
}

int main(void) {
    int status;
    pid_t pid = vfork();
    if (pid == 0) {
        syscall(SYS_close_range, 3, ~0U, 0);
        execl("/bin/true", "true", (char *)NULL);
        _exit(127);
    }
    if (pid < 0 || waitpid(pid, &status, 0) != pid || status != 0)
        return 1;
    int parent = descriptors();
    pid = fork();
    if (pid == 0)
        _exit(descriptors() == parent ? 0 : 3);
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
        return 1;
    printf(WEXITSTATUS(status) == 0 ? "the forked child has its parent's descriptors\n"
                                    : "the forked child has other descriptors than its parent\n");
    return 0;
}
