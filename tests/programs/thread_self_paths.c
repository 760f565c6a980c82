/* Paths under /proc/thread-self name the thread that makes the call (libselinux's getcon reads
 * /proc/thread-self/attr/current). In the main thread and in a second one, each named: open of
 * its comm and stat (the tid), readlink of /proc/thread-self (into a zeroed buffer, read as a
 * string), stat, fstatat and statx of it (the task directory's inode). Prints one line a check;
 * natively every one says "ok". */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>

static const char *verdict(int ok) {
    return ok ? "ok" : "DIFFERENT";
}

static int read_file(const char *path, char *buf, int size) {
    int fd = open(path, O_RDONLY);
    int n = fd < 0 ? -1 : read(fd, buf, size - 1);
    if (fd >= 0)
        close(fd);
    buf[n > 0 ? n : 0] = 0;
    return n;
}

static void check(const char *who) {
    char name[16], buf[512] = "", own[64], task[64];
    long tid = syscall(SYS_gettid);
    snprintf(name, sizeof name, "ts-%s", who);
    prctl(PR_SET_NAME, name);
    read_file("/proc/thread-self/comm", buf, sizeof buf);
    printf("%s comm: %s\n", who, verdict(strncmp(buf, name, strlen(name)) == 0));
    long stat_tid = 0;
    read_file("/proc/thread-self/stat", buf, sizeof buf);
    sscanf(buf, "%ld", &stat_tid);
    printf("%s stat's tid: %s\n", who, verdict(stat_tid == tid));
    snprintf(own, sizeof own, "%d/task/%ld", getpid(), tid);
    memset(buf, 0, sizeof buf);
    long n = readlink("/proc/thread-self", buf, sizeof buf - 1);
    printf("%s readlink: %s\n", who, verdict(n == (long)strlen(own) && strcmp(buf, own) == 0));
    snprintf(task, sizeof task, "/proc/self/task/%ld", tid);
    struct stat expected, st, at;
    struct statx sx;
    stat(task, &expected);
    printf("%s stat: %s\n", who, verdict(stat("/proc/thread-self", &st) == 0 && st.st_ino == expected.st_ino));
    int ok = fstatat(AT_FDCWD, "/proc/thread-self/", &at, 0) == 0 && at.st_ino == expected.st_ino;
    printf("%s fstatat: %s\n", who, verdict(ok));
    ok = statx(AT_FDCWD, "/proc/thread-self", 0, STATX_INO, &sx) == 0 && sx.stx_ino == expected.st_ino;
    printf("%s statx: %s\n", who, verdict(ok));
}

static void *second(void *arg) {
    check("second");
    return arg;
}

int main(void) {
    check("main");
    fflush(stdout);
    pthread_t t;
    pthread_create(&t, 0, second, 0);
    pthread_join(t, 0);
    return 0;
}
