/* Opens its own executable through /proc (self, thread-self, its pid) with open, openat and
 * openat2, 20 times each (so under coreplane from trapped and from rewritten sites), and prints
 * whether each descriptor is the file argv[0] names, its number and close-on-exec flag; also
 * what readlink gives for each name. Natively every line says "same". Run with a full path. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

static int open_by(int how, const char *path, int flags) {
    if (how == 0)
        return open(path, flags);
    if (how == 1)
        return openat(AT_FDCWD, path, flags);
    struct open_how oh = {.flags = (unsigned long long)flags};
    return (int)syscall(SYS_openat2, AT_FDCWD, path, &oh, sizeof oh);
}

int main(int argc, char **argv) {
    (void)argc;
    struct stat want;
    char real[PATH_MAX];
    if (stat(argv[0], &want) != 0 || !realpath(argv[0], real))
        return 2;
    char own[64];
    snprintf(own, sizeof own, "/proc/%d/exe", getpid());
    const char *names[] = {"/proc/self/exe", "/proc/thread-self/exe", own};
    const char *label[] = {"self", "thread-self", "pid"};
    const char *calls[] = {"open", "openat", "openat2"};
    for (int n = 0; n < 3; n++) {
        for (int how = 0; how < 3; how++) {
            int same = 0, cloexec = 0, lowest = 0;
            for (int i = 0; i < 20; i++) {
                int flags = (i % 2 ? O_RDONLY : O_PATH) | (i % 4 < 2 ? O_CLOEXEC : 0);
                int fd = open_by(how, names[n], flags);
                struct stat got;
                if (fd >= 0 && fstat(fd, &got) == 0 && got.st_ino == want.st_ino && got.st_dev == want.st_dev)
                    same++;
                if (fd >= 0 && !!(fcntl(fd, F_GETFD) & FD_CLOEXEC) == !!(flags & O_CLOEXEC))
                    cloexec++;
                lowest += fd == 3;
                close(fd);
            }
            printf("%s %s: same file %d/20, close-on-exec as asked %d/20, lowest descriptor %d/20\n",
                   calls[how], label[n], same, cloexec, lowest);
        }
        char link[PATH_MAX];
        memset(link, 0, sizeof link);
        ssize_t len = readlink(names[n], link, sizeof link - 1);
        int tail_untouched = strlen(link) == (size_t)(len < 0 ? 0 : len);
        link[len < 0 ? 0 : len] = 0;
        printf("readlink %s: %s\n", label[n], !tail_untouched ? "bytes written past its length"
               : strcmp(link, real) == 0 ? "same" : link);
    }
    return 0;
}
