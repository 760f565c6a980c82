/* A single-threaded program asks the kernel how many threads it has, as Chromium's zygote does
 * before it sandboxes itself: the link count of /proc/self/task (two plus the threads) through
 * stat, fstatat on a /proc descriptor, statx and fstat of the opened directory; then the same in
 * a forked child. Natively 3 everywhere. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static void show(const char *who) {
    struct stat st;
    struct statx sx;
    int proc = open("/proc", O_RDONLY | O_DIRECTORY), task = open("/proc/self/task", O_RDONLY | O_DIRECTORY);
    long a = stat("/proc/self/task", &st) == 0 ? (long)st.st_nlink : -1;
    long b = fstatat(proc, "self/task/", &st, 0) == 0 ? (long)st.st_nlink : -1;
    long c = statx(AT_FDCWD, "/proc/self/task", 0, STATX_NLINK, &sx) == 0 ? (long)sx.stx_nlink : -1;
    long d = fstat(task, &st) == 0 ? (long)st.st_nlink : -1;
    printf("%s: stat %ld fstatat %ld statx %ld fstat %ld\n", who, a, b, c, d);
    fflush(stdout);
    close(proc);
    close(task);
}

int main(void) {
    for (int i = 0; i < 3; i++) /* a delegated call first, so that delegates run */
        close(dup(1));
    show("parent");
    pid_t child = fork();
    if (child == 0) {
        close(dup(1));
        show("child");
        _exit(0);
    }
    int status;
    waitpid(child, &status, 0);
    return WEXITSTATUS(status);
}
