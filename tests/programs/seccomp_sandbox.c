/* What a sandbox's seccomp filter (TSYNC, on every thread) forbids the program, the runtime must
 * not need either: the filter traps membarrier and every prctl but PR_SET_NAME, as Chromium's
 * renderers do, and the program's SIGSYS handler reports a trapped call and exits 5. A thread
 * waits from before the filter; after it, a site is called twelve times (a rewrite with two
 * threads would need membarrier) and a second thread is made (arming Syscall User Dispatch in
 * it would need prctl). Exits 77 where filters are refused. */
#define _GNU_SOURCE
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

static void on_sigsys(int sig, siginfo_t *si, void *uc) {
    char m[] = "trapped call    \n";
    int nr = si->si_syscall;
    m[13] = '0' + nr / 100 % 10, m[14] = '0' + nr / 10 % 10, m[15] = '0' + nr % 10;
    write(1, m, sizeof m - 1);
    _exit(5);
}

static long fresh_site(void) {
    long r;
    __asm__ volatile("syscall" : "=a"(r) : "a"(SYS_getppid) : "rcx", "r11", "memory");
    return r;
}

static int gate[2];

static void *thread_main(void *arg) {
    char c;
    if (arg)
        read(gate[0], &c, 1);
    return arg;
}

int main(void) {
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_K | BPF_JEQ, __NR_membarrier, 4, 0),
        BPF_JUMP(BPF_JMP | BPF_K | BPF_JEQ, __NR_prctl, 0, 2),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])),
        BPF_JUMP(BPF_JMP | BPF_K | BPF_JEQ, PR_SET_NAME, 1, 2),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP),
    };
    struct sock_fprog prog = {sizeof f / sizeof f[0], f};
    struct sigaction sa = {.sa_sigaction = on_sigsys, .sa_flags = SA_SIGINFO};
    sigaction(SIGSYS, &sa, 0);
    pthread_t waiting, made;
    pipe(gate);
    pthread_create(&waiting, 0, thread_main, &gate);
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &prog))
        return 77;
    long ppid = getppid();
    int same = 0;
    for (int i = 0; i < 12; i++)
        same += fresh_site() == ppid;
    pthread_create(&made, 0, thread_main, 0);
    pthread_join(made, 0);
    write(gate[1], "x", 1);
    pthread_join(waiting, 0);
    printf("%d of 12 calls answered, thread joined\n", same);
    return 0;
}
