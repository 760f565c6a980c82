/* Files outside /proc reached through /proc/thread-self (its fd, root and cwd entries), which the
 * delegates share with the calling thread: opening one is an ordinary open, made once. Checks an
 * O_CREAT|O_EXCL that creates a file through root and through cwd, and a POSIX lock kept across
 * an open of its file through fd (closing any descriptor of a file drops the process's locks on
 * it; a child asks F_GETLK). Prints one line a check; natively every one says "ok". */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/wait.h>

static const char *verdict(int ok) {
    return ok ? "ok" : "DIFFERENT";
}

static int locked_elsewhere(const char *file) {
    pid_t child = fork();
    if (child == 0) {
        struct flock probe = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
        int fd = open(file, O_RDWR);
        _exit(fd >= 0 && fcntl(fd, F_GETLK, &probe) == 0 && probe.l_type != F_UNLCK ? 0 : 1);
    }
    int st = 1;
    waitpid(child, &st, 0);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

int main(void) {
    char dir[] = "/tmp/thread_self_filesXXXXXX", path[128], file[64];
    if (!mkdtemp(dir) || chdir(dir))
        return 2;
    snprintf(path, sizeof path, "/proc/thread-self/root%s/made", dir);
    printf("O_EXCL through root: %s\n", verdict(open(path, O_CREAT | O_EXCL | O_WRONLY, 0600) >= 0));
    int made = open("/proc/thread-self/cwd/made2", O_CREAT | O_EXCL | O_WRONLY, 0600);
    printf("O_EXCL through cwd: %s\n", verdict(made >= 0));
    snprintf(file, sizeof file, "%s/locked", dir);
    int fd = open(file, O_CREAT | O_RDWR, 0600);
    struct flock lock = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    if (fd < 0 || fcntl(fd, F_SETLK, &lock))
        return 3;
    snprintf(path, sizeof path, "/proc/thread-self/fd/%d", fd);
    int again = open(path, O_RDONLY);
    printf("lock kept across an open through fd: %s\n", verdict(again >= 0 && locked_elsewhere(file)));
    fflush(stdout);
    char cleanup[96];
    snprintf(cleanup, sizeof cleanup, "rm -rf %s", dir);
    return system(cleanup) != 0;
}
