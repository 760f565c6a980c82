// altstack_abandoned: stress-ng's signest pattern. A handler on a signal stack the program mapped
// raises its signal again (SA_NODEFER) and the inner handler leaves both by siglongjmp; the program
// then disables the signal stack, unmaps it, and makes more calls. The runtime's records of the
// calls the handlers were in (raise's) lay on that stack, and reading them at the next call
// faulted in the runtime (SIGSEGV). 50 rounds; prints "rounds 50" on success.
#define _GNU_SOURCE
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define SIZE (64 * 1024)
static sigjmp_buf back;
static volatile int depth;

static void on_usr1(int sig)
{
    if (++depth < 2)
        raise(sig);
    siglongjmp(back, 1);
}

int main(void)
{
    int rounds = 0;
    for (int i = 0; i < 50; i++) {
        void *stack = mmap(NULL, SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        stack_t ss = {.ss_sp = stack, .ss_size = SIZE};
        if (stack == MAP_FAILED || sigaltstack(&ss, NULL))
            return 2;
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_usr1;
        sa.sa_flags = SA_ONSTACK | SA_NODEFER;
        sigaction(SIGUSR1, &sa, NULL);
        depth = 0;
        if (sigsetjmp(back, 1) == 0)
            raise(SIGUSR1);
        signal(SIGUSR1, SIG_IGN);
        stack_t off = {.ss_flags = SS_DISABLE};
        if (sigaltstack(&off, NULL) || munmap(stack, SIZE))
            return 3;
        getppid();
        rounds += depth == 2;
    }
    printf("rounds %d\n", rounds);
    return 0;
}
