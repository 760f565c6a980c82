/* A signal stack given up as Rust's main thread gives it up at exit: disabled, then unmapped,
 * each from a call site run once (so under coreplane the call traps, and its handler, which is
 * SA_ONSTACK, runs on that very stack). Also a handler running on the signal stack that tries to
 * replace it: natively EPERM. Prints the results. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

static long raw2(long nr, long a, long b) {
    long r;
    __asm__ volatile("syscall" : "=a"(r) : "a"(nr), "D"(a), "S"(b) : "rcx", "r11", "memory");
    return r;
}

static volatile long in_handler = 1;

static void on_usr1(int sig) {
    (void)sig;
    stack_t other = {.ss_sp = (void *)0x10000, .ss_size = 65536, .ss_flags = 0};
    in_handler = raw2(SYS_sigaltstack, (long)&other, 0);
}

int main(void) {
    size_t size = 64 * 1024;
    char *mem = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    stack_t ss = {.ss_sp = mem, .ss_size = size, .ss_flags = 0};
    if (sigaltstack(&ss, NULL) != 0)
        return 1;
    struct sigaction sa = {.sa_handler = on_usr1, .sa_flags = SA_ONSTACK};
    sigaction(SIGUSR1, &sa, NULL);
    raise(SIGUSR1);
    printf("replace from a handler on it: %ld\n", in_handler);
    stack_t off = {.ss_flags = SS_DISABLE}, old;
    long r = raw2(SYS_sigaltstack, (long)&off, (long)&old);
    printf("disable: %ld, old flags %d, size %zu\n", r, old.ss_flags, old.ss_size);
    r = raw2(SYS_munmap, (long)mem, (long)size);
    printf("unmap: %ld\n", r);
    stack_t now;
    sigaltstack(NULL, &now);
    printf("now: flags %d\n", now.ss_flags);
    return 0;
}
