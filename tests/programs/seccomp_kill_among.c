/* A thread among others installs a seccomp filter and is later killed by it
 * (SECCOMP_RET_KILL_THREAD, for getsid, which the runtime never calls itself), unseen by
 * anything in user space. Natively the process ends with its last thread: by SIGSYS where the
 * killed thread was the last, with the last thread's exit code otherwise.
 *   killed-last:   the main thread exits first (exit(2)), the filtered thread is killed later;
 *   killed-first:  the filtered thread is killed, then the main thread exits with 5;
 *   child-last:    the filtered thread creates a thread (which carries the filter) and exits;
 *                  the main thread exits; the child is killed last;
 *   errno-only:    a filter that only fails getsid with EPERM adds no thread to the process;
 *   joined:        the main thread joins the killed thread, then ends with pthread_exit (0);
 *   leader-killed: the main thread installs the filter and is killed, the other thread ends
 *                  last, normally (0).
 * Exits 77 where filters are refused. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

static struct sock_filter kill_getsid[] = {
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
    BPF_JUMP(BPF_JMP | BPF_K | BPF_JEQ, __NR_getsid, 0, 1),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_THREAD),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
};
static struct sock_filter errno_getsid[] = {
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
    BPF_JUMP(BPF_JMP | BPF_K | BPF_JEQ, __NR_getsid, 0, 1),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
};
static const char *mode;
static volatile int refused;

static int install(struct sock_filter *f, unsigned short len) {
    struct sock_fprog prog = {.len = len, .filter = f};
    return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 && prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0;
}

static int tasks(void) {
    int n = 0;
    DIR *d = opendir("/proc/self/task");
    for (struct dirent *e; d && (e = readdir(d));)
        n += e->d_name[0] != '.';
    if (d)
        closedir(d);
    return n;
}

static void *killed_later(void *arg) {
    usleep(100000);
    syscall(SYS_getsid, 0);
    syscall(SYS_exit, 9);
    return arg;
}

static void *wait_then_return(void *arg) {
    usleep(200000);
    return arg;
}

static void *filtered(void *arg) {
    if (strcmp(mode, "errno-only") == 0) {
        if (!install(errno_getsid, 4)) {
            refused = 1;
            return arg;
        }
        long r = syscall(SYS_getsid, 0);
        printf("getsid %ld %d, tasks %d\n", r, r < 0 ? errno : 0, tasks());
        return arg;
    }
    if (!install(kill_getsid, 4)) {
        refused = 1;
        return arg;
    }
    if (strcmp(mode, "child-last") == 0) {
        pthread_t child;
        pthread_create(&child, 0, killed_later, 0);
        syscall(SYS_exit, 8);
    }
    if (strcmp(mode, "killed-first") == 0)
        syscall(SYS_getsid, 0);
    return killed_later(arg);
}

int main(int argc, char **argv) {
    mode = argc > 1 ? argv[1] : "killed-last";
    pthread_t t;
    printf("%s\n", mode);
    fflush(stdout);
    if (strcmp(mode, "leader-killed") == 0) {
        pthread_create(&t, 0, wait_then_return, 0);
        if (!install(kill_getsid, 4))
            return 77;
        syscall(SYS_getsid, 0);
        return 3;
    }
    pthread_create(&t, 0, filtered, 0);
    usleep(50000);
    if (refused)
        return 77;
    if (strcmp(mode, "errno-only") == 0) {
        pthread_join(t, 0);
        return 0;
    }
    if (strcmp(mode, "joined") == 0) {
        pthread_join(t, 0);
        pthread_exit(0);
    }
    if (strcmp(mode, "killed-first") == 0)
        usleep(200000);
    syscall(SYS_exit, 5);
}
