/* A program's own seccomp filter that traps getppid (SECCOMP_RET_TRAP): with "handler" its SIGSYS
   handler sees the kernel's siginfo (SYS_SECCOMP, the syscall number) and answers the call by
   setting rax; with "default" the process dies of SIGSYS, as the kernel forces it. */
#define _GNU_SOURCE
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

static volatile int seen_code = -1, seen_nr = -1;

static void on_sigsys(int sig, siginfo_t *info, void *ctx) {
    ucontext_t *uc = ctx;
    seen_code = info->si_code;
    seen_nr = info->si_syscall;
    uc->uc_mcontext.gregs[REG_RAX] = 4242; /* the answer the program gets */
    (void)sig;
}

int main(int argc, char **argv) {
    int with_handler = argc > 1 && strcmp(argv[1], "handler") == 0;
    if (with_handler) {
        struct sigaction sa = {0};
        sa.sa_sigaction = on_sigsys;
        sa.sa_flags = SA_SIGINFO;
        sigaction(SIGSYS, &sa, NULL);
    }
    struct sock_filter code[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_getppid, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {sizeof code / sizeof code[0], code};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog)) {
        perror("seccomp");
        return 1;
    }
    long r = syscall(SYS_getppid);
    long r2 = getppid();
    printf("%ld %ld code=%d nr=%d\n", r, r2, seen_code, seen_nr);
    return 0;
}
