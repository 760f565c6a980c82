// sigset_unmap: a signal set that another thread unmaps while the set is being passed.
// The mapper maps a page at one address and unmaps it again, over and over; the main thread
// blocks the set on that page (all zero: blocking it changes nothing) ROUNDS times. Natively
// each call either succeeds or fails with EFAULT, as the kernel's copy of the set finds the page
// or not. Under coreplane the runtime checked the set through the kernel, then read it itself:
// a page unmapped in between made the runtime fault (SIGSEGV) where natively the call fails.
//
//   sigset_unmap [ROUNDS]   prints "rounds=N" and exits 0 (3 on any other result)
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

static char *page;
static volatile int done, started;

static void *mapper(void *arg)
{
    long size = sysconf(_SC_PAGESIZE);
    while (!done) {
        if (mmap(page, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != page)
            exit(2);
        started = 1;
        munmap(page, size);
    }
    return arg;
}

int main(int argc, char **argv)
{
    long rounds = argc > 1 ? atol(argv[1]) : 200000;
    long size = sysconf(_SC_PAGESIZE);
    // An address of our own: reserved, then given back, so that nothing else is mapped there.
    page = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED || munmap(page, size) != 0)
        return 2;
    pthread_t t;
    if (pthread_create(&t, NULL, mapper, NULL) != 0)
        return 2;
    while (!started)
        ;
    for (long i = 0; i < rounds; i++) {
        long r = syscall(SYS_rt_sigprocmask, SIG_BLOCK, page, NULL, 8);
        if (r != 0 && !(r == -1 && errno == EFAULT))
            return 3;
    }
    done = 1;
    pthread_join(t, NULL);
    printf("rounds=%ld\n", rounds);
    return 0;
}
