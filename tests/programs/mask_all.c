// Blocks every signal with rt_sigprocmask from one site (rewritten after its first call, so
// the later calls come by the fast path), each time followed by a call from a site never run
// before (which traps into the runtime through SIGSYS: blocked, it would kill the process).
// Prints what the old mask said of SIGUSR1 each time, then "done".
#include <signal.h>
#include <stdio.h>
static long fresh_getppid(int i)
{
    long r;
    switch (i) { /* a distinct syscall site per round */
    case 0: __asm__ volatile("syscall" : "=a"(r) : "a"(110L) : "rcx", "r11", "memory"); break;
    case 1: __asm__ volatile("syscall" : "=a"(r) : "a"(110L) : "rcx", "r11", "memory"); break;
    default: __asm__ volatile("syscall" : "=a"(r) : "a"(110L) : "rcx", "r11", "memory"); break;
    }
    return r;
}
int main(void)
{
    sigset_t all, old;
    sigfillset(&all);
    for (int i = 0; i < 3; i++) {
        if (sigprocmask(SIG_SETMASK, &all, &old) != 0) return 2;
        printf("round %d: USR1 was blocked: %d, ppid > 0: %d\n", i, sigismember(&old, SIGUSR1), fresh_getppid(i) > 0);
    }
    sigemptyset(&all);
    sigprocmask(SIG_SETMASK, &all, NULL);
    printf("done\n");
    return 0;
}
