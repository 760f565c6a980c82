/* A signal stack unmapped (then moved away by mremap) while still set and not in use, as stress-ng
 * --vforkmany's stressor leaves its own: natively harmless until a signal comes. Each call is made
 * from a site of its own, run once, so under coreplane it traps, and the trap's handler
 * (SA_ONSTACK) first runs on that very stack, then would need it for every later trap. The
 * program still sees the stack it set; a new one is used; a forked child runs. The first query,
 * trapped, shows the stack not in use. The same for a stack set with SS_AUTODISARM, and for one
 * unmapped by a handler that then returns. Prints it all. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define SIZE (64 * 1024)
#ifndef SS_AUTODISARM
#define SS_AUTODISARM (1U << 31)
#endif
#define RAW(nr, a, b, c, d, e) ({                                                            \
    long r_;                                                                                 \
    register long r10_ __asm__("r10") = (d);                                                 \
    register long r8_ __asm__("r8") = (e);                                                   \
    __asm__ volatile("syscall" : "=a"(r_) : "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10_), "r"(r8_) \
                     : "rcx", "r11", "memory");                                              \
    r_; })

static char *map(void) {
    return mmap(NULL, SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
}

static int shown(char *set) {
    stack_t now;
    if (RAW(SYS_sigaltstack, 0, (long)&now, 0, 0, 0) != 0)
        return -1;
    return now.ss_sp == set && now.ss_size == SIZE && now.ss_flags == 0;
}

static int shown_disarmed(char *set) {
    stack_t now;
    if (RAW(SYS_sigaltstack, 0, (long)&now, 0, 0, 0) != 0)
        return -1;
    return now.ss_sp == set && now.ss_size == SIZE && (unsigned)now.ss_flags == SS_AUTODISARM;
}

static char *in_handler;
static volatile long unmapped_in_handler = -1;

static void on_usr2(int sig) {
    (void)sig;
    unmapped_in_handler = RAW(SYS_munmap, (long)in_handler, SIZE, 0, 0, 0);
}

static char *new_stack;
static volatile int on_new;

static void on_usr1(int sig) {
    char here;
    (void)sig;
    on_new = &here >= new_stack && &here < new_stack + SIZE;
}

int main(void) {
    char *a = map();
    stack_t ss = {.ss_sp = a, .ss_size = SIZE};
    sigaltstack(&ss, NULL);
    printf("set: shown %d\n", shown(a));
    long unmapped = RAW(SYS_munmap, (long)a, SIZE, 0, 0, 0);
    long calls = (RAW(SYS_getpid, 0, 0, 0, 0, 0) > 0) + (RAW(SYS_getppid, 0, 0, 0, 0, 0) > 0);
    printf("unmapped %ld: shown %d, calls %ld\n", unmapped, shown(a), calls);

    char *b = map(), *target = map();
    ss.ss_sp = b;
    sigaltstack(&ss, NULL);
    long moved = RAW(SYS_mremap, (long)b, SIZE, SIZE, MREMAP_MAYMOVE | MREMAP_FIXED, (long)target);
    calls = (RAW(SYS_gettid, 0, 0, 0, 0, 0) > 0) + (RAW(SYS_getuid, 0, 0, 0, 0, 0) >= 0);
    printf("moved %d: shown %d, calls %ld\n", moved == (long)target, shown(b), calls);

    char *c = map();
    ss.ss_sp = c;
    ss.ss_flags = SS_AUTODISARM;
    sigaltstack(&ss, NULL);
    int disarmed = shown_disarmed(c);
    unmapped = RAW(SYS_munmap, (long)c, SIZE, 0, 0, 0);
    calls = (RAW(SYS_getegid, 0, 0, 0, 0, 0) >= 0) + (RAW(SYS_geteuid, 0, 0, 0, 0, 0) >= 0);
    printf("autodisarm: shown %d, unmapped %ld, calls %ld\n", disarmed, unmapped, calls);

    in_handler = map();
    ss.ss_sp = in_handler;
    ss.ss_flags = 0;
    sigaltstack(&ss, NULL);
    struct sigaction on2 = {.sa_handler = on_usr2};
    sigaction(SIGUSR2, &on2, NULL);
    /* raise's own call made often enough to be rewritten: a handler run while a call traps
     * (its frames on the signal stack) and unmaps that stack is not covered (see
     * docs/conformance.md, session 20). */
    for (int i = 0; i < 16; i++)
        raise(SIGURG);
    raise(SIGUSR2);
    calls = (RAW(SYS_getgid, 0, 0, 0, 0, 0) >= 0) + (RAW(SYS_getpgrp, 0, 0, 0, 0, 0) > 0);
    printf("unmapped in a handler %ld: calls %ld\n", unmapped_in_handler, calls);

    pid_t child = fork();
    if (child == 0)
        _exit(RAW(SYS_getpgid, 0, 0, 0, 0, 0) > 0 ? 7 : 1);
    int status = 0;
    waitpid(child, &status, 0);

    new_stack = map();
    ss.ss_sp = new_stack;
    long set = RAW(SYS_sigaltstack, (long)&ss, 0, 0, 0, 0);
    struct sigaction act = {.sa_handler = on_usr1, .sa_flags = SA_ONSTACK};
    sigaction(SIGUSR1, &act, NULL);
    raise(SIGUSR1);
    printf("child exit %d; new stack set %ld, shown %d, handler on it %d\n",
           WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status), set, shown(new_stack), on_new);
    return 0;
}
