// block_race: signals that arrive while a thread blocks a set holding SIGSYS with SIG_BLOCK.
// The worker blocks {SIGUSR2, SIGSYS} and unblocks them again, ROUNDS times; another thread
// sends it SIGUSR1 (not in the set) all the while, whose handler makes a call. Natively nothing
// happens but the handler running. Under coreplane, SIGSYS is the runtime's: it let the kernel
// block the program's set as given and unblocked SIGSYS right after, so a SIGUSR1 delivered as
// the first call returned ran its handler with SIGSYS blocked, and the handler's first trap
// (its call, or its rt_sigreturn) made the kernel kill the process with SIGSYS.
//
// Both threads run on the CPU the program starts on, as they do on a compute core under the
// runtime: across two vCPUs every tgkill interrupts the other one through the hypervisor, and a
// run took 6-22 s instead of 0.12 s.
//
//   block_race [ROUNDS]   prints "rounds=N" and exits 0
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

static volatile pid_t worker_tid;
static volatile int done;
static volatile long handled;

static void on_usr1(int sig)
{
    (void)sig;
    syscall(SYS_getppid);
    handled++;
}

static void *sender(void *arg)
{
    while (!worker_tid)
        sched_yield();
    while (!done)
        syscall(SYS_tgkill, getpid(), worker_tid, SIGUSR1);
    return arg;
}

int main(int argc, char **argv)
{
    long rounds = argc > 1 ? atol(argv[1]) : 200000;
    struct sigaction sa = {.sa_handler = on_usr1, .sa_flags = SA_RESTART};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR2);
    sigaddset(&set, SIGSYS);
    cpu_set_t here;
    CPU_ZERO(&here);
    CPU_SET(sched_getcpu(), &here);
    if (sched_setaffinity(0, sizeof here, &here) != 0) // the sender inherits it
        return 2;
    pthread_t t;
    if (pthread_create(&t, NULL, sender, NULL) != 0)
        return 2;
    worker_tid = (pid_t)syscall(SYS_gettid);
    while (!handled) // the sender is under way
        sched_yield();
    for (long i = 0; i < rounds; i++) {
        // Raw calls: glibc's sigprocmask would not change what the kernel is given, but say so.
        if (syscall(SYS_rt_sigprocmask, SIG_BLOCK, &set, NULL, 8) != 0 ||
            syscall(SYS_rt_sigprocmask, SIG_UNBLOCK, &set, NULL, 8) != 0)
            return 3;
    }
    done = 1;
    pthread_join(t, NULL);
    printf("rounds=%ld\n", rounds);
    return 0;
}
