/* vfork(2) (no stack of the child's own: the runtime returns the parent to the program from a
 * copy of its trap frame) on a process under its own filter, which allows vfork, wait4, write
 * and exit and answers EPERM to anything else, rt_sigreturn included; and clone, which the
 * runtime makes for vfork (CLONE_VM|CLONE_VFORK from a stack of its own). The program vforks once
 * before the filter (the runtime maps the memory its vforks use then), then twice under it; each
 * child exits at once. Prints "parent back from vfork N" and the child's status as natively;
 * exits 77 where filters are refused. */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define ALLOW(n) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, n, 0, 1), BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)

static int vfork_once(void) {
    pid_t pid = vfork();
    if (pid == 0)
        _exit(5);
    int status = -1;
    if (pid < 0 || waitpid(pid, &status, 0) != pid)
        return -1;
    return status;
}

int main(void) {
    if (vfork_once() != 5 << 8)
        return 1;
    struct sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        ALLOW(__NR_vfork), ALLOW(__NR_clone), ALLOW(__NR_wait4), ALLOW(__NR_write), ALLOW(__NR_exit), ALLOW(__NR_exit_group),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
    };
    struct sock_fprog prog = {.len = sizeof filter / sizeof filter[0], .filter = filter};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
        return 77;
    for (int i = 0; i < 2; i++) {
        int status = vfork_once();
        char line[64];
        int n = snprintf(line, sizeof line, "parent back from vfork %d, child status %#x\n", i, status);
        (void)!write(1, line, n);
    }
    syscall(__NR_exit_group, 0);
}
