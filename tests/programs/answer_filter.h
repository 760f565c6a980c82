/* answer_filter.h: installs, with no_new_privs, a seccomp filter that answers `action` (a
 * SECCOMP_RET_* value) to each of the `n` system calls `nrs` (at most 16) and allows every other
 * call: the shape of the programs that test a filter of the program's own. `flags` are
 * seccomp(2)'s (SECCOMP_FILTER_FLAG_TSYNC); with 0 the filter goes in through prctl, as most
 * programs install theirs. Returns 0, or -1 with errno where the kernel refuses. */
#include <stddef.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

static int answer_calls(const int *nrs, int n, unsigned action, unsigned flags) {
    struct sock_filter filter[2 + 2 * 16];
    int k = 0;
    filter[k++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
    for (int i = 0; i < n && i < 16; i++) {
        filter[k++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, nrs[i], 0, 1);
        filter[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, action);
    }
    filter[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
    struct sock_fprog prog = {.len = (unsigned short)k, .filter = filter};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        return -1;
    if (flags)
        return (int)syscall(__NR_seccomp, SECCOMP_SET_MODE_FILTER, flags, &prog);
    return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog);
}
