/* The program's only thread installs a filter that kills the calling thread for getpid
 * (SECCOMP_RET_KILL_THREAD) after making calls that delegation sends to delegate threads, then
 * calls getpid. Natively the kernel kills the process's last thread with SIGSYS, and the process
 * with it. Exits 77 where filters are refused, 3 if getpid returned. */
#define _GNU_SOURCE
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

static const struct sock_filter filter[] = {
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
    BPF_JUMP(BPF_JMP | BPF_K | BPF_JEQ, __NR_getpid, 0, 1),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_THREAD),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
};

int main(void) {
    for (int i = 0; i < 50; i++)
        syscall(SYS_getppid);
    printf("before\n");
    fflush(stdout);
    struct sock_fprog prog = {.len = sizeof filter / sizeof filter[0], .filter = (struct sock_filter *)filter};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
        return 77;
    syscall(SYS_getpid);
    return 3;
}
