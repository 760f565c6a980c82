/* A seccomp filter that allows close and exit alone, installed once a few call sites have run a
 * few times (fewer than the runtime rewrites a site at): their later calls, the filter's own
 * installation and the exit must not need anything the filter kills for (under the runtime, a
 * trapped call returns through rt_sigreturn). Exits 0 as natively, 77 where filters are refused. */
#define _GNU_SOURCE
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

static const struct sock_filter filter[] = {
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
    BPF_JUMP(BPF_JMP | BPF_K | BPF_JEQ, __NR_close, 0, 1),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    BPF_JUMP(BPF_JMP | BPF_K | BPF_JEQ, __NR_exit_group, 0, 1),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
};

int main(void) {
    int fds[2];
    for (int i = 0; i < 3; i++) {
        if (pipe(fds) != 0 || close(fds[0]) != 0 || close(fds[1]) != 0)
            return 1;
    }
    struct sock_fprog prog = {.len = sizeof filter / sizeof filter[0], .filter = (struct sock_filter *)filter};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
        return 77;
    if (close(0) != 0)
        syscall(__NR_exit_group, 2);
    syscall(__NR_exit_group, 0);
}
