/* A process that installs a seccomp filter allowing exit_group alone, and then exits, as
 * strace's prctl-seccomp-filter-v and seccomp-filter-v do: natively it exits 0. Under a profile
 * the runtime's own calls at the exit (clocks, resource usage) must not meet the filter. */
#include <stddef.h>
#include <stdio.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <linux/filter.h>
#include <linux/seccomp.h>

int main(void)
{
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_K | BPF_JEQ, __NR_exit_group, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
    };
    struct sock_fprog prog = { .len = sizeof f / sizeof f[0], .filter = f };
    printf("filtered\n");
    fflush(stdout);
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog))
        return perror("prctl"), 2;
    syscall(__NR_exit_group, 0);
    return 1;
}
