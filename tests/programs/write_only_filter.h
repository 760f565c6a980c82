/* write_only_filter.h: installs the sshd-like seccomp filter the sandboxed_* programs share,
 * allowing write, exit and exit_group and answering `otherwise` (a SECCOMP_RET_* value) to
 * every other call. Returns 0, or -1 where the kernel refuses filters. */
#include <stddef.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#define ALLOW(n) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, n, 0, 1), BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)

static int allow_only_write_and_exit(unsigned otherwise) {
    struct sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        ALLOW(__NR_write), ALLOW(__NR_exit), ALLOW(__NR_exit_group),
        BPF_STMT(BPF_RET | BPF_K, otherwise),
    };
    struct sock_fprog prog = {.len = sizeof filter / sizeof filter[0], .filter = filter};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
        return -1;
    return 0;
}
