/* A single-threaded program asks the kernel how many threads it has, as Chromium's zygote does
 * before it sandboxes itself: the link count of /proc/self/task (two plus the threads) through
 * stat, fstatat on a /proc descriptor, statx and fstat of the opened directory; then the same in
 * a forked child; then, as root, through the /proc descriptor after a chroot into an empty
 * directory, as Chromium's sandbox checks again. Natively 3 everywhere. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
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
    if (WEXITSTATUS(status) != 0)
        return WEXITSTATUS(status);
    int proc = open("/proc", O_RDONLY | O_DIRECTORY);
    char empty[] = "/tmp/task_links.XXXXXX";
    struct stat st;
    /* the new root is removed from the host first: nothing is left behind */
    if (geteuid() != 0 || !mkdtemp(empty) || chdir(empty) != 0 || rmdir(empty) != 0 || chroot(".") != 0) {
        printf("chroot: skipped\n");
        return 0;
    }
    close(dup(1));
    printf("chroot: fstatat %ld\n", fstatat(proc, "self/task/", &st, 0) == 0 ? (long)st.st_nlink : -1);
    return 0;
}
