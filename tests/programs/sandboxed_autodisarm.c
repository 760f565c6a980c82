/* A thread under the program's own filter whose signal stack was set with SS_AUTODISARM: the
 * runtime's trap frame goes there (its handler is SA_ONSTACK) and the kernel disarms the stack
 * while the handler runs; only rt_sigreturn arms it again, so the runtime returns from such a
 * trap through rt_sigreturn (its fallback), which this filter allows along with write, exit and
 * sigaltstack. The program writes from a site it never reached before the filter, then checks
 * that its signal stack is still armed as it set it, and that a SIGUSR1 handler with SA_ONSTACK
 * runs on it. Prints "autodisarm stack kept" as natively; exits 77 where filters are refused. */
#define _GNU_SOURCE
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SS_AUTODISARM
#define SS_AUTODISARM (1U << 31)
#endif
#define ALLOW(n) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, n, 0, 1), BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)

static char altstack[64 * 1024] __attribute__((aligned(16)));
static volatile int on_alt;

static void on_usr1(int sig) {
    (void)sig;
    char here;
    on_alt = (uintptr_t)&here >= (uintptr_t)altstack && (uintptr_t)&here < (uintptr_t)altstack + sizeof altstack;
}

int main(void) {
    stack_t ss = {.ss_sp = altstack, .ss_size = sizeof altstack, .ss_flags = SS_AUTODISARM};
    struct sigaction act = {.sa_handler = on_usr1, .sa_flags = SA_ONSTACK};
    if (sigaltstack(&ss, NULL) != 0 || sigaction(SIGUSR1, &act, NULL) != 0)
        return 1;
    struct sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        ALLOW(__NR_write), ALLOW(__NR_exit), ALLOW(__NR_exit_group), ALLOW(__NR_rt_sigreturn),
        ALLOW(__NR_sigaltstack), ALLOW(__NR_getpid), ALLOW(__NR_gettid), ALLOW(__NR_tgkill),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
    };
    struct sock_fprog prog = {.len = sizeof filter / sizeof filter[0], .filter = filter};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
        return 77;
    char line[128];
    int n = snprintf(line, sizeof line, "write under the filter\n");
    if (write(1, line, n) != n)
        syscall(__NR_exit_group, 3);
    stack_t now;
    if (syscall(__NR_sigaltstack, NULL, &now) != 0)
        syscall(__NR_exit_group, 4);
    syscall(__NR_tgkill, syscall(__NR_getpid), syscall(__NR_gettid), SIGUSR1);
    n = snprintf(line, sizeof line, "%s, flags %#x, handler on it: %s\n",
                 now.ss_sp == altstack && now.ss_size == sizeof altstack ? "autodisarm stack kept" : "stack lost",
                 (unsigned)now.ss_flags, on_alt ? "yes" : "no");
    (void)!write(1, line, n);
    syscall(__NR_exit_group, 0);
}
