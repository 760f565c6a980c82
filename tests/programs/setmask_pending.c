// setmask_pending: SIG_SETMASK with a full set but one signal, which is pending: the kernel
// delivers it as the call returns. Under coreplane that delivery must find SIGSYS unblocked,
// or the handler's first trap (its rt_sigreturn) kills the process with SIGSYS.
#include <signal.h>
#include <stdio.h>

static volatile int got;

static void on_usr1(int sig)
{
    (void)sig;
    got++;
}

int main(void)
{
    struct sigaction sa = {0};
    sa.sa_handler = on_usr1;
    sigaction(SIGUSR1, &sa, 0);
    sigset_t usr1, all_but_usr1, none;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    sigfillset(&all_but_usr1);
    sigdelset(&all_but_usr1, SIGUSR1);
    sigemptyset(&none);
    for (int i = 0; i < 100; i++) {
        sigprocmask(SIG_BLOCK, &usr1, 0);
        raise(SIGUSR1);                             // pending
        sigprocmask(SIG_SETMASK, &all_but_usr1, 0);  // unblocks it: delivered on return
        sigprocmask(SIG_SETMASK, &none, 0);
    }
    printf("got=%d\n", got);
    return got == 100 ? 0 : 1;
}
