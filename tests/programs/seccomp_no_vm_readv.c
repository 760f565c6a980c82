// seccomp_no_vm_readv: a filter inherited across execve that kills on process_vm_readv, as an
// allowlist without the @debug group does; the exec'd program creates a thread that blocks
// SIGUSR1 (the runtime must read its signal sets without a call the filter sees).
#define _GNU_SOURCE
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>
static void *work(void *a) {
    sigset_t s; sigemptyset(&s); sigaddset(&s, SIGUSR1);
    for (int i = 0; i < 100; i++)
        if (pthread_sigmask(SIG_BLOCK, &s, NULL) || pthread_sigmask(SIG_UNBLOCK, &s, NULL)) return "fail";
    return NULL;
}
int main(int argc, char **argv) {
    if (argc > 1) {
        pthread_t t; void *r;
        if (pthread_create(&t, NULL, work, NULL)) return 3;
        pthread_join(t, &r);
        printf("%s\n", r ? "masks=failed" : "masks=ok");
        return 0;
    }
    struct sock_filter code[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_process_vm_readv, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {sizeof code / sizeof code[0], code};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog)) return 2;
    execl("/proc/self/exe", argv[0], "child", (char *)NULL);
    return 2;
}
