/* A signal handler sees the program's context and runs on the program's stack (or its signal
   stack for SA_ONSTACK) when the signal interrupts a blocking call, whichever way the runtime
   serves the call: trapped (a site's first call), from a rewritten site in the runtime's own
   code (ppoll with a mask, served on the runtime's stack), or delegated (read, with
   --delegate all). Each call is made from its own site with known values in the callee-saved
   registers; a timer interrupts it. Prints one line per call: whether the handler's stack,
   the context's stack pointer, instruction pointer and registers are the program's, and whether
   the call's argument registers came back. A handler that runs off the
   signal stack while the interrupted call's trap is on it makes a trapped call of its own (Mono's
   stop handler does), and one leaves by longjmp. Garbage collectors that stop
   threads with a signal (Boehm's in Guile, SBCL's, Mono's) read exactly these. */
#define _GNU_SOURCE
#include <poll.h>
#include <setjmp.h>
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
static volatile uintptr_t handler_sp, ctx_sp, ctx_ip;
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
    ctx_ip = uc->uc_mcontext.gregs[REG_RIP];
    int regs[6] = {REG_RBX, REG_RBP, REG_R12, REG_R13, REG_R14, REG_R15};
    for (int i = 0; i < 6; i++)
        ctx_regs[i] = uc->uc_mcontext.gregs[regs[i]];
    handled++;
    if (trap_in_handler)
        trap_in_handler = 0, handler_site();
}

/* Whether a call's argument registers came back as they went (the kernel keeps them). */
static volatile int args_kept;

/* One blocking call from the caller's own site, rbx, rbp and r12-r15 holding MARK + 1..6; sets
   args_kept. The number is set right before the `syscall`, as compilers do, so that the runtime
   can rewrite the site. */
#define MARKED_CALL(nr, a0, a1, a2, a3, a4, ret)                                                  \
    do {                                                                                           \
        long d_ = (long)(a0), s_ = (long)(a1), dx_ = (long)(a2);                                   \
        register long r10_ asm("r10") = (long)(a3);                                                \
        register long r8_ asm("r8") = (long)(a4);                                                  \
        long d0 = d_, s0 = s_, dx0 = dx_, r100 = r10_, r80 = r8_;                                  \
        __asm__ volatile("sub $128, %%rsp\n push %%rbx\n push %%rbp\n push %%r12\n push %%r13\n push %%r14\n push %%r15\n" \
                         "movabs $0x5a5a000000000001, %%rbx\n movabs $0x5a5a000000000002, %%rbp\n"     \
                         "movabs $0x5a5a000000000003, %%r12\n movabs $0x5a5a000000000004, %%r13\n"     \
                         "movabs $0x5a5a000000000005, %%r14\n movabs $0x5a5a000000000006, %%r15\n"     \
                         "mov %[num], %%eax\n syscall\n"                                          \
                         "pop %%r15\n pop %%r14\n pop %%r13\n pop %%r12\n pop %%rbp\n pop %%rbx\n add $128, %%rsp\n" \
                         : "=a"(ret), "+D"(d_), "+S"(s_), "+d"(dx_), "+r"(r10_), "+r"(r8_)        \
                         : [num] "i"(nr)                                                           \
                         : "rcx", "r11", "memory");                                                \
        args_kept = d_ == d0 && s_ == s0 && dx_ == dx0 && r10_ == r100 && r8_ == r80;              \
    } while (0)

static int fds[2];

/* The last site entered: each site's function stores its own tag, so that the compiler cannot
   fold two of them into one (GCC's identical code folding, on at -O2). */
static volatile int site_tag;

/* A ppoll with a signal mask, waiting on the pipe nobody writes to; each use is a site. */
#define PPOLL_SITE(name, tag)                                                                     \
    __attribute__((noinline)) static long name(int warm) {                                       \
        site_tag = tag;                                                                            \
        struct pollfd p = {fds[0], POLLIN, 0};                                                     \
        struct timespec zero = {0, 0};                                                             \
        sigset_t m;                                                                                \
        sigemptyset(&m);                                                                           \
        long r;                                                                                    \
        MARKED_CALL(SYS_ppoll, &p, 1, warm ? &zero : 0, &m, 8, r);                                 \
        return r;                                                                                  \
    }
PPOLL_SITE(ppoll_site_a, 1)
PPOLL_SITE(ppoll_site_b, 2)

/* A read of the pipe nobody writes to; each use is a site. */
#define READ_SITE(name, tag)                                                                      \
    __attribute__((noinline)) static long name(int warm) {                                       \
        site_tag = tag;                                                                            \
        char c;                                                                                    \
        if (warm && write(fds[1], "x", 1) != 1)                                                    \
            return -1;                                                                             \
        long r;                                                                                    \
        MARKED_CALL(SYS_read, fds[0], &c, 1, 0, 0, r);                                             \
        return r;                                                                                  \
    }
READ_SITE(read_site, 3)
READ_SITE(read_site_2, 4)

static int on(uintptr_t x, char *lo, char *hi) { return (char *)x >= lo && (char *)x < hi; }

/* The runtime rewrites a site at its 8th trap: a "rewritten" case warms its site up first with
   calls that do not block. */
#define REWRITE_AT 8

static void check(const char *what, long (*call)(int), int onstack, int warmups) {
    struct itimerval t = {{0, 0}, {0, 30000}};
    for (int i = 0; i < warmups; i++)
        call(1);
    int before = handled;
    setitimer(ITIMER_REAL, &t, 0);
    long r = call(0);
    int regs_ok = 1;
    for (int i = 0; i < 6; i++)
        regs_ok &= ctx_regs[i] == MARK + i + 1;
    int handler_ok = onstack ? on(handler_sp, altstack, altstack + sizeof altstack) : on(handler_sp, stack_lo, stack_hi);
    /* The context's instruction pointer is behind the call's `syscall`, in the site's function. */
    int ip_ok = ctx_ip - (uintptr_t)call < 512;
    printf("%s: result=%ld handled=%d handler-stack=%s context-sp=%s context-ip=%s registers=%s arguments=%s\n",
           what, r, handled - before, handler_ok ? "program" : "other",
           on(ctx_sp, stack_lo, stack_hi) ? "program" : "other", ip_ok ? "site" : "other",
           regs_ok ? "program" : "other", args_kept ? "kept" : "changed");
}

static sigjmp_buf out;

static void leaving_handler(int sig) {
    (void)sig;
    siglongjmp(out, 1);
}

/* A handler that leaves by siglongjmp out of `call`: the program's signal stack is as it set it
   afterwards (from a call trapped on it, the handler ran off it). */
static void check_longjmp(const char *what, long (*call)(int)) {
    signal(SIGALRM, leaving_handler);
    struct itimerval t = {{0, 0}, {0, 30000}};
    if (!sigsetjmp(out, 1)) {
        setitimer(ITIMER_REAL, &t, 0);
        call(0);
    }
    stack_t now;
    sigaltstack(0, &now);
    printf("after a handler's longjmp out of %s: signal stack %s\n", what,
           now.ss_flags & SS_DISABLE ? "disabled" : now.ss_sp == altstack ? "as set" : "other");
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
    check("ppoll trapped", ppoll_site_a, 0, 0);
    check("ppoll rewritten", ppoll_site_a, 0, REWRITE_AT);
    check("read trapped", read_site, 0, 0);
    check("read rewritten", read_site, 0, REWRITE_AT);
    stack_t ss = {altstack, 0, sizeof altstack};
    sigaltstack(&ss, 0);
    trap_in_handler = 1; /* the handler's trap must not overwrite the runtime's frame on the signal stack */
    check("ppoll trapped, signal stack, handler without SA_ONSTACK, trapping", ppoll_site_b, 0, 0);
    set_handler(1);
    check("ppoll rewritten, SA_ONSTACK", ppoll_site_b, 1, REWRITE_AT);
    check("read rewritten, SA_ONSTACK", read_site, 1, 0);
    check_longjmp("a trapped read", read_site_2);
    /* The runtime's record of a call a handler left must not be taken for a live one later. */
    check_longjmp("a rewritten ppoll", ppoll_site_a);
    set_handler(0);
    check("ppoll rewritten, after a longjmp", ppoll_site_a, 0, 0);
    return 0;
}
