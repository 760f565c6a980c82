/* A thread with a signal stack of its own (no SS_AUTODISARM: every Rust thread has one) under
 * its own filter, which allows write, munmap, sigaltstack and exit alone (sigaltstack for the
 * runtime, which withdraws an unmapped signal stack with it: natively none is made). The runtime's SIGSYS handler is
 * SA_ONSTACK, so each trap's frame lands on that stack while the program is off it, and the
 * runtime serves the call again from a copy of the frame on its own stack (`run_again`), then
 * returns from the copy by hand, giving its stack back last. The program then unmaps the
 * signal stack, a call whose trap is served from a copy below the program's stack pointer, and
 * writes again. Prints three lines as natively; exits 77 where filters are refused. */
#define _GNU_SOURCE
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#define ALLOW(n) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, n, 0, 1), BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)

int main(void) {
    const size_t size = 64 * 1024;
    void *alt = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    stack_t ss = {.ss_sp = alt, .ss_size = size};
    if (alt == MAP_FAILED || sigaltstack(&ss, NULL) != 0)
        return 1;
    struct sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        ALLOW(__NR_write), ALLOW(__NR_munmap), ALLOW(__NR_sigaltstack), ALLOW(__NR_exit), ALLOW(__NR_exit_group),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
    };
    struct sock_fprog prog = {.len = sizeof filter / sizeof filter[0], .filter = filter};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
        return 77;
    char line[64];
    for (int i = 0; i < 2; i++) {
        int n = snprintf(line, sizeof line, "write %d with a signal stack\n", i);
        if (write(1, line, n) != n)
            syscall(__NR_exit_group, 3);
    }
    if (munmap(alt, size) != 0)
        syscall(__NR_exit_group, 4);
    int n = snprintf(line, sizeof line, "write after its munmap\n");
    if (write(1, line, n) != n)
        syscall(__NR_exit_group, 5);
    syscall(__NR_exit_group, 0);
}
