/* setns(2) into the process's own mount and time namespaces after calls a delegate makes: the
 * kernel refuses a mount namespace to a process whose threads share its filesystem attributes
 * (EINVAL) and a time namespace to one with other threads (EUSERS). Each with its type and with
 * nstype 0; prints the results. Exits 77 unless it may join them (CAP_SYS_ADMIN). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <unistd.h>

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x80
#endif

static int join(const char *path, int nstype) {
    for (int i = 0; i < 3; i++) /* delegated calls first, so that delegates run */
        close(dup(1));
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    int r = fd < 0 ? -ENOENT : setns(fd, nstype) == 0 ? 0 : -errno;
    if (fd >= 0)
        close(fd);
    return r;
}

int main(void) {
    int mnt = join("/proc/self/ns/mnt", CLONE_NEWNS);
    if (mnt == -EPERM)
        return 77;
    printf("mnt %d, any %d\n", mnt, join("/proc/self/ns/mnt", 0));
    int time = join("/proc/self/ns/time", CLONE_NEWTIME);
    printf("time %d, any %d\n", time == -ENOENT ? 0 : time, time == -ENOENT ? 0 : join("/proc/self/ns/time", 0));
    return 0;
}
