/* longjmp_fast_call [j]: an 8 KiB signal stack; a SIGALRM handler leaves, by siglongjmp, a call
 * made through the fast path (its site rewritten by an earlier call), then a signal is raised
 * from inside a trapped call. The longjmp left rt_sp below the runtime stack's top, after which
 * every trap of the thread stayed on the signal stack and overflowed it (a review of session
 * 21's first version). Natively prints "handled=2". */
#define _GNU_SOURCE
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <unistd.h>
static sigjmp_buf env;
static volatile int handled, jmp;
static void on_alrm(int sig) { (void)sig; if (jmp) siglongjmp(env, 1); }
static void on_usr1(int sig) { (void)sig; handled++; }
static long __attribute__((noinline)) raw0(long nr) { long r; __asm__ volatile("syscall" : "=a"(r) : "a"(nr) : "rcx", "r11", "memory"); return r; }
static long raw3(long nr, long a, long b, long c) {
    long r; __asm__ volatile("syscall" : "=a"(r) : "a"(nr), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory"); return r;
}
int main(int argc, char **argv) {
    stack_t ss = {.ss_sp = malloc(8192), .ss_size = 8192};
    sigaltstack(&ss, 0);
    struct sigaction sa = {.sa_handler = on_alrm, .sa_flags = 0};
    sigaction(SIGALRM, &sa, 0);
    sa.sa_handler = on_usr1; sa.sa_flags = SA_ONSTACK;
    sigaction(SIGUSR1, &sa, 0);
    for (int i = 0; i < 3; i++) {   /* the site traps, then is rewritten */
        struct itimerval it = {{0, 0}, {0, 20000}};
        setitimer(ITIMER_REAL, &it, 0);
        raw0(SYS_pause);
    }
    jmp = argc > 1;
    if (sigsetjmp(env, 1) == 0) {
        struct itimerval it = {{0, 0}, {0, 20000}};
        setitimer(ITIMER_REAL, &it, 0);
        raw0(SYS_pause);
    }
    raw3(SYS_tgkill, getpid(), gettid(), SIGUSR1);
    raw3(SYS_tgkill, getpid(), gettid(), SIGUSR1);
    printf("handled=%d\n", handled);
    return 0;
}
