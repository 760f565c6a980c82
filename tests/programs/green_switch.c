/* green_switch [r]: a preemptive green-thread pattern. Green thread A (on a malloc'd stack S1)
 * blocks in pause() at a rewritten site (a fast-path call served in Rust on the runtime stack).
 * SIGALRM's handler (no SA_ONSTACK, so on S1 below A) swapcontext()s to green thread B on stack S2
 * (malloc'd after S1, so above it; "r": below it). B makes calls from a site that always traps
 * (anonymous executable code); the thread has a signal stack, so each trap is taken off it. A's
 * fast-path frames on the runtime stack are live: a trap's frame copied to that stack's top
 * would overwrite them (SIGSEGV 3 of 3 in a review of session 21's second version, which took
 * A's call for one a longjmp had left). Natively prints "ok". */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <ucontext.h>
#include <unistd.h>
#include "trapping_stub.h"
static ucontext_t mainctx, actx, bctx;
static ucontext_t hsave;
static long (*stub)(void);
static volatile int do_switch, b_done;
static volatile long b_result;
static long __attribute__((noinline)) raw0(long nr) { long r; __asm__ volatile("syscall" : "=a"(r) : "a"(nr) : "rcx", "r11", "memory"); return r; }
static void on_alrm(int sig) {
    (void)sig;
    if (do_switch) swapcontext(&hsave, &bctx);
}
static void b_func(void) {
    for (int i = 0; i < 4; i++) b_result += stub();
    b_done = 1;
    swapcontext(&bctx, &hsave);
}
static void a_func(void) {
    for (int i = 0; i < 4; i++) {
        struct itimerval it = {{0, 0}, {0, 10000}};
        setitimer(ITIMER_REAL, &it, 0);
        raw0(SYS_pause);
    }
    do_switch = 1;
    struct itimerval it = {{0, 0}, {0, 10000}};
    setitimer(ITIMER_REAL, &it, 0);
    long r = raw0(SYS_pause);
    do_switch = 0;
    printf("A back: pause=%ld b_done=%d b_result>0=%d\n", r, b_done, b_result > 0);
}
int main(int argc, char **argv) {
    stub = trapping_stub();
    stack_t ss = {.ss_sp = malloc(65536), .ss_size = 65536};
    sigaltstack(&ss, 0);
    char *s1 = malloc(65536), *s2 = malloc(65536);
    if (argc > 1 && argv[1][0] == 'r') { char *t = s1; s1 = s2; s2 = t; }
    fprintf(stderr, "S1=%p S2=%p alt=%p\n", s1, s2, ss.ss_sp);
    struct sigaction sa = {.sa_handler = on_alrm};
    sigaction(SIGALRM, &sa, 0);
    getcontext(&actx); actx.uc_stack.ss_sp = s1; actx.uc_stack.ss_size = 65536; actx.uc_link = &mainctx;
    makecontext(&actx, a_func, 0);
    getcontext(&bctx); bctx.uc_stack.ss_sp = s2; bctx.uc_stack.ss_size = 65536; bctx.uc_link = 0;
    makecontext(&bctx, b_func, 0);
    swapcontext(&mainctx, &actx);
    printf("ok\n");
    return 0;
}
