/* A signal handler sees the program's context and runs on the program's stack (or its signal
   stack for SA_ONSTACK) when the signal interrupts a blocking call, whichever way the runtime
   serves the call: trapped (a site's first call), from a rewritten site in the runtime's own
   code (ppoll with a mask, served on the runtime's stack), or delegated (read, with
   --delegate all). Each call is made from its own site with known values in the callee-saved
   registers; a timer interrupts it. Prints one line per call: whether the handler's stack,
   the context's stack pointer and its registers are the program's. A handler that runs off the
   signal stack while the interrupted call's trap is on it makes a trapped call of its own (Mono's
   stop handler does). Garbage collectors that stop
   threads with a signal (Boehm's in Guile, SBCL's, Mono's) read exactly these. */
#define _GNU_SOURCE
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <ucontext.h>
#include <unistd.h>

#define MARK 0x5a5a000000000000L

static char *stack_lo, *stack_hi;
static char altstack[1 << 16] __attribute__((aligned(16)));
static volatile uintptr_t handler_sp, ctx_sp;
static volatile long ctx_regs[6];
static volatile int handled, trap_in_handler;

/* A call from a site of the handler's own, made once: its first call traps. */
__attribute__((noinline)) static void handler_site(void) {
    long r;
    __asm__ volatile("syscall" : "=a"(r) : "a"((long)SYS_getppid) : "rcx", "r11", "memory");
}

static void handler(int sig, siginfo_t *si, void *ucv) {
    (void)sig, (void)si;
    ucontext_t *uc = ucv;
    volatile char here;
    handler_sp = (uintptr_t)&here;
    ctx_sp = uc->uc_mcontext.gregs[REG_RSP];
    int regs[6] = {REG_RBX, REG_RBP, REG_R12, REG_R13, REG_R14, REG_R15};
    for (int i = 0; i < 6; i++)
        ctx_regs[i] = uc->uc_mcontext.gregs[regs[i]];
    handled++;
    if (trap_in_handler)
        trap_in_handler = 0, handler_site();
}

/* One blocking call from the caller's own site, rbx, rbp and r12-r15 holding MARK + 1..6. */
#define MARKED_CALL(nr, a0, a1, a2, a3, a4, ret)                                                  \
    do {                                                                                           \
        register long r10_ asm("r10") = (long)(a3);                                                \
        register long r8_ asm("r8") = (long)(a4);                                                  \
        __asm__ volatile("sub $128, %%rsp\n push %%rbx\n push %%rbp\n push %%r12\n push %%r13\n push %%r14\n push %%r15\n" \
                         "movabs $0x5a5a000000000001, %%rbx\n movabs $0x5a5a000000000002, %%rbp\n"     \
                         "movabs $0x5a5a000000000003, %%r12\n movabs $0x5a5a000000000004, %%r13\n"     \
                         "movabs $0x5a5a000000000005, %%r14\n movabs $0x5a5a000000000006, %%r15\n"     \
                         "syscall\n"                                                               \
                         "pop %%r15\n pop %%r14\n pop %%r13\n pop %%r12\n pop %%rbp\n pop %%rbx\n add $128, %%rsp\n" \
                         : "=a"(ret)                                                               \
                         : "a"((long)(nr)), "D"((long)(a0)), "S"((long)(a1)), "d"((long)(a2)),     \
                           "r"(r10_), "r"(r8_)                                                     \
                         : "rcx", "r11", "memory");                                                \
    } while (0)

static int fds[2];

/* A ppoll with a signal mask, waiting on the pipe nobody writes to; each use is a site. */
#define PPOLL_SITE(name)                                                                          \
    __attribute__((noinline)) static long name(void) {                                           \
        struct pollfd p = {fds[0], POLLIN, 0};                                                     \
        sigset_t m;                                                                                \
        sigemptyset(&m);                                                                           \
        long r;                                                                                    \
        MARKED_CALL(SYS_ppoll, &p, 1, 0, &m, 8, r);                                                \
        return r;                                                                                  \
    }
PPOLL_SITE(ppoll_site_a)
PPOLL_SITE(ppoll_site_b)

__attribute__((noinline)) static long read_site(void) {
    char c;
    long r;
    MARKED_CALL(SYS_read, fds[0], &c, 1, 0, 0, r);
    return r;
}

static int on(uintptr_t x, char *lo, char *hi) { return (char *)x >= lo && (char *)x < hi; }

static void check(const char *what, long (*call)(void), int onstack) {
    struct itimerval t = {{0, 0}, {0, 30000}};
    int before = handled;
    setitimer(ITIMER_REAL, &t, 0);
    long r = call();
    int regs_ok = 1;
    for (int i = 0; i < 6; i++)
        regs_ok &= ctx_regs[i] == MARK + i + 1;
    int handler_ok = onstack ? on(handler_sp, altstack, altstack + sizeof altstack) : on(handler_sp, stack_lo, stack_hi);
    printf("%s: result=%ld handled=%d handler-stack=%s context-sp=%s registers=%s\n", what, r, handled - before,
           handler_ok ? "program" : "other", on(ctx_sp, stack_lo, stack_hi) ? "program" : "other",
           regs_ok ? "program" : "other");
}

static void set_handler(int onstack) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = handler;
    sa.sa_flags = SA_SIGINFO | (onstack ? SA_ONSTACK : 0);
    sigaction(SIGALRM, &sa, 0);
}

int main(void) {
    pthread_attr_t a;
    size_t size;
    void *lo;
    pthread_getattr_np(pthread_self(), &a);
    pthread_attr_getstack(&a, &lo, &size);
    stack_lo = lo, stack_hi = (char *)lo + size;
    if (pipe(fds))
        return 1;
    setvbuf(stdout, 0, _IONBF, 0);
    set_handler(0);
    check("ppoll trapped", ppoll_site_a, 0);
    check("ppoll rewritten", ppoll_site_a, 0);
    check("read trapped", read_site, 0);
    check("read rewritten", read_site, 0);
    stack_t ss = {altstack, 0, sizeof altstack};
    sigaltstack(&ss, 0);
    trap_in_handler = 1; /* the handler's trap must not overwrite the runtime's frame on the signal stack */
    check("ppoll trapped, signal stack, handler without SA_ONSTACK, trapping", ppoll_site_b, 0);
    set_handler(1);
    check("ppoll rewritten, SA_ONSTACK", ppoll_site_b, 1);
    check("read rewritten, SA_ONSTACK", read_site, 1);
    return 0;
}
