/* A program's SIGSYS handler for its own seccomp trap (getppid; the filter does not look at
 * where calls come from) leaves by siglongjmp, four times; then the program reads
 * /proc/self/exe and makes a thread. Prints the executable's name and "thread ok". Exits 77
 * where filters are refused. */
#define _GNU_SOURCE
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

static sigjmp_buf back;

static void on_sigsys(int sig, siginfo_t *info, void *context) {
    siglongjmp(back, 1);
}

static void *thread_main(void *arg) {
    return arg;
}

int main(void) {
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_K | BPF_JEQ, __NR_getppid, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {sizeof f / sizeof f[0], f};
    struct sigaction sa = {.sa_sigaction = on_sigsys, .sa_flags = SA_SIGINFO};
    sigaction(SIGSYS, &sa, 0);
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog))
        return 77;
    for (int i = 0; i < 4; i++)
        if (sigsetjmp(back, 1) == 0)
            syscall(SYS_getppid);
    char exe[256] = {0};
    readlink("/proc/self/exe", exe, sizeof exe - 1);
    pthread_t t;
    if (pthread_create(&t, 0, thread_main, 0) != 0)
        return 2;
    pthread_join(t, 0);
    printf("%s, thread ok\n", strrchr(exe, '/') ? strrchr(exe, '/') + 1 : exe);
    return 0;
}
