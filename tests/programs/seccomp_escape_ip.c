/* A seccomp filter traps getppid (SECCOMP_RET_TRAP) unless it is made from the program's own
 * syscall instruction `escape_after` points behind, as Chromium's seccomp-bpf sandbox allows
 * its SIGSYS handler's calls by their instruction pointer; the handler answers each trapped
 * call with the escaped call's result + 1000000. Twelve calls from one site (trapped, then
 * rewritten), each checked. Exits 77 where filters are refused. */
#define _GNU_SOURCE
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>
extern char escape_after[];
static long escape_call(long nr) {
    long r;
    __asm__ volatile("syscall\n.globl escape_after\nescape_after:" : "=a"(r) : "a"(nr) : "rcx", "r11", "memory");
    return r;
}
static void on_sigsys(int sig, siginfo_t *si, void *ucv) {
    ucontext_t *uc = ucv;
    uc->uc_mcontext.gregs[REG_RAX] = escape_call(si->si_syscall) + 1000000;
}
int main(void) {
    unsigned long ip = (unsigned long)escape_after;
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, instruction_pointer)),
        BPF_JUMP(BPF_JMP | BPF_K | BPF_JEQ, (unsigned)ip, 0, 3),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, instruction_pointer) + 4),
        BPF_JUMP(BPF_JMP | BPF_K | BPF_JEQ, (unsigned)(ip >> 32), 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_K | BPF_JEQ, __NR_getppid, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {sizeof f / sizeof f[0], f};
    struct sigaction sa = {.sa_sigaction = on_sigsys, .sa_flags = SA_SIGINFO};
    sigaction(SIGSYS, &sa, 0);
    long expect = getppid() + 1000000;
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog))
        return 77;
    for (int i = 0; i < 12; i++) {
        long r = syscall(SYS_getppid);
        printf("%d:%s ", i, r == expect ? "ok" : "BAD");
    }
    printf("\n");
    return 0;
}
