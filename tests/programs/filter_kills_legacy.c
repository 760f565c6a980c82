/* A program under its own seccomp filter that kills the process for the legacy calls glibc
 * 2.36 no longer makes for its own wrappers (open, stat, fstat, lstat, pipe: it makes openat,
 * newfstatat, pipe2) and for readlink, dup2 and poll, which it makes only where a program calls
 * them by those names, then execs itself ("after"): the new image prints, reads a file it opens,
 * fstat's and stat's it, reads /proc/self/exe, passes a byte through a pipe it dup3's and ppoll's,
 * and writes from a thread, with no legacy call of its own. access stays allowed: ld.so makes
 * access("/etc/ld.so.preload") in every dynamic program. Natively it prints four lines and
 * exits 0. Before: the runtime's own start-up in the new image opened its files with open(2)
 * (and the exec's checks in the old one with open and fstat): killed by SIGSYS (exit 159).
 * Usage: filter_kills_legacy (by its canonical path). Exits 77 where filters are refused. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "answer_filter.h"

static const int legacy[] = {__NR_open, __NR_stat, __NR_fstat, __NR_lstat, __NR_readlink, __NR_pipe,
                             __NR_dup2, __NR_poll};
#define NLEGACY (sizeof legacy / sizeof legacy[0])

static int kill_legacy_calls(void) {
    return answer_calls(legacy, NLEGACY, SECCOMP_RET_KILL_PROCESS, 0);
}

static void *from_thread(void *arg) {
    printf("a thread writes\n");
    fflush(stdout);
    return arg;
}

/* Whether /proc/self/exe names `self` (a canonical path), read with readlinkat: glibc's
 * readlink and realpath make readlink. */
static int own_exe_is(const char *self) {
    char buf[4096];
    ssize_t n = syscall(__NR_readlinkat, AT_FDCWD, "/proc/self/exe", buf, sizeof buf - 1);
    if (n < 0)
        return 0;
    buf[n] = 0;
    return !strcmp(buf, self);
}

/* A byte through a pipe, its read end dup3'd to 10 and ppoll'd first. */
static int pipe_passes(void) {
    int p[2];
    char c = 0;
    if (pipe2(p, 0) != 0 || write(p[1], "x", 1) != 1 || dup3(p[0], 10, 0) != 10)
        return 0;
    struct pollfd pf = {.fd = 10, .events = POLLIN};
    struct timespec limit = {5, 0};
    return ppoll(&pf, 1, &limit, NULL) == 1 && read(10, &c, 1) == 1 && c == 'x';
}

static int after_exec(const char *self) {
    printf("the new image runs under the filter\n");
    fflush(stdout);
    struct stat a, b;
    FILE *f = fopen(self, "rb");
    char head[4] = {0};
    int same = f && fread(head, 1, 4, f) == 4 && fstat(fileno(f), &a) == 0 && stat(self, &b) == 0 &&
               a.st_ino == b.st_ino && !memcmp(head, "\177ELF", 4) && own_exe_is(self);
    printf("files %s\n", same ? "agree" : "differ");
    printf("the pipe %s\n", pipe_passes() ? "passes a byte" : "fails");
    fflush(stdout);
    pthread_t t;
    if (pthread_create(&t, NULL, from_thread, NULL) != 0 || pthread_join(t, NULL) != 0)
        return 3;
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 2 && !strcmp(argv[1], "after"))
        return after_exec(argv[0]);
    if (kill_legacy_calls() != 0)
        return 77;
    execl(argv[0], argv[0], "after", (char *)NULL);
    return 4;
}
