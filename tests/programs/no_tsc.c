// A thread whose rdtsc faults: after prctl(PR_SET_TSC, PR_TSC_SIGSEGV) (argument "tsc") or in
// seccomp strict mode (argument "strict", which also allows only read, write, exit and
// rt_sigreturn), its calls work as natively: prints "tsc: 3 calls" or "strict: written" and exits
// 0 (issue 12: the runtime timed the calls with rdtsc itself and died of SIGSEGV). With a count
// after "tsc", the thread then makes that many getppid calls from one site (rewritten after its
// first call: the fast path's timing of profiled calls used rdtsc too).
#include <linux/seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>
int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "strict") == 0) {
        static const char line[] = "strict: written\n";
        if (syscall(SYS_seccomp, SECCOMP_SET_MODE_STRICT, 0, NULL) != 0) return 2;
        if (write(1, line, sizeof line - 1) != sizeof line - 1) return 3;
        syscall(SYS_exit, 0);
    }
    if (prctl(PR_SET_TSC, PR_TSC_SIGSEGV, 0, 0, 0) != 0) return 2;
    int calls = (getpid() > 0) + (getppid() > 0);
    for (int i = argc > 2 ? atoi(argv[2]) : 0; i > 0; i--)
        if (syscall(SYS_getppid) <= 0) return 4;
    calls += prctl(PR_SET_TSC, PR_TSC_ENABLE, 0, 0, 0) == 0;
    printf("tsc: %d calls\n", calls);
    return 0;
}
