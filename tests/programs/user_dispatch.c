// user_dispatch: the program's own Syscall User Dispatch (as Wine uses it). With the selector at
// BLOCK, getppid is not made: the SIGSYS handler gets si_code SYS_USER_DISPATCH, the call's
// number in si_syscall and in rax, si_call_addr equal to the frame's instruction pointer, and
// answers 4242 in rax; at ALLOW the call is made. The site is warmed up first (a site the
// runtime rewrote must dispatch too). Bad arguments fail as the kernel fails them. Under the
// runtime the prctl was refused with EINVAL (stress-ng's usersyscall skipped itself). Exits 77
// where the kernel has no Syscall User Dispatch (EINVAL natively).
// Prints "dispatched 100 of 100, allowed 1, errors EINVAL EINVAL EFAULT, off again". With an argument,
// a call is made with the selector holding neither ALLOW nor BLOCK (`odd`: the kernel kills the
// process with SIGSYS, its handler unrun) or where it cannot be read (`unreadable`: SIGSEGV).
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#ifndef PR_SET_SYSCALL_USER_DISPATCH
#define PR_SET_SYSCALL_USER_DISPATCH 59
#define PR_SYS_DISPATCH_OFF 0
#define PR_SYS_DISPATCH_ON 1
#define SYSCALL_DISPATCH_FILTER_ALLOW 0
#define SYSCALL_DISPATCH_FILTER_BLOCK 1
#endif
#ifndef SYS_USER_DISPATCH
#define SYS_USER_DISPATCH 2
#endif

static volatile char selector = SYSCALL_DISPATCH_FILTER_ALLOW;
static volatile int good;

static void on_sigsys(int sig, siginfo_t *info, void *ctx)
{
    selector = SYSCALL_DISPATCH_FILTER_ALLOW;
    ucontext_t *uc = ctx;
    greg_t *g = uc->uc_mcontext.gregs;
    good += sig == SIGSYS && info->si_code == SYS_USER_DISPATCH && info->si_syscall == SYS_getppid
            && g[REG_RAX] == SYS_getppid && (greg_t)info->si_call_addr == g[REG_RIP];
    g[REG_RAX] = 4242;
}

static const char *name(int r)
{
    return r == 0 ? "ok" : errno == EINVAL ? "EINVAL" : errno == EFAULT ? "EFAULT" : "other";
}

/* With the dispatch off again, calls from a warm site leave a signal stack untouched: under
 * coreplane no trap (its SIGSYS handler, SA_ONSTACK, runs there) stops them any more. */
static int calls_leave_signal_stack(void)
{
    static char stack[64 * 1024];
    memset(stack, 0xa5, sizeof stack);
    stack_t ss = {.ss_sp = stack, .ss_size = sizeof stack};
    sigaltstack(&ss, NULL);
    for (int i = 0; i < 100; i++)
        syscall(SYS_getppid);
    int untouched = 1;
    for (size_t i = 0; i < sizeof stack; i++)
        untouched &= stack[i] == (char)0xa5;
    ss.ss_flags = SS_DISABLE;
    sigaltstack(&ss, NULL);
    return untouched;
}

/* The selector in the state `how` names, then a call: natively the process dies. */
static int bad_selector(const char *how)
{
    char *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    *page = SYSCALL_DISPATCH_FILTER_ALLOW;
    if (prctl(PR_SET_SYSCALL_USER_DISPATCH, PR_SYS_DISPATCH_ON, 0, 0, page))
        return errno == EINVAL ? 77 : 1;
    if (!strcmp(how, "odd"))
        *page = 7;
    else
        munmap(page, 4096);
    syscall(SYS_getppid);
    return 3;
}

int main(int argc, char **argv)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigsys;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGSYS, &sa, NULL);
    for (int i = 0; i < 20; i++)
        syscall(SYS_getppid);
    if (argc > 1)
        return bad_selector(argv[1]);
    if (prctl(PR_SET_SYSCALL_USER_DISPATCH, PR_SYS_DISPATCH_ON, 0, 0, &selector))
        return printf("prctl: %s\n", strerror(errno)), errno == EINVAL ? 77 : 1;
    int dispatched = 0;
    for (int i = 0; i < 100; i++) {
        selector = SYSCALL_DISPATCH_FILTER_BLOCK;
        dispatched += syscall(SYS_getppid) == 4242;
    }
    selector = SYSCALL_DISPATCH_FILTER_ALLOW;
    int allowed = syscall(SYS_getppid) == getppid() && getppid() != 4242;
    const char *off_bad = name(prctl(PR_SET_SYSCALL_USER_DISPATCH, PR_SYS_DISPATCH_OFF, 1, 0, 0));
    const char *wrap = name(prctl(PR_SET_SYSCALL_USER_DISPATCH, PR_SYS_DISPATCH_ON, -4096L, 8192, &selector));
    const char *far = name(prctl(PR_SET_SYSCALL_USER_DISPATCH, PR_SYS_DISPATCH_ON, 0, 0, (char *)-4096L));
    prctl(PR_SET_SYSCALL_USER_DISPATCH, PR_SYS_DISPATCH_OFF, 0, 0, 0);
    printf("dispatched %d of %d, allowed %d, errors %s %s %s, %s\n", dispatched == 100 && good == 100 ? 100 : dispatched,
           100, allowed, off_bad, wrap, far, calls_leave_signal_stack() ? "off again" : "still trapped");
    return 0;
}
