/* handler_write [SIZE [t]]: an 8 KiB signal stack; SIGUSR1's handler (SA_ONSTACK) makes a call from
 * a site that traps (its own syscall instruction), the signal raised by raise() (delivered as
 * the runtime unblocks it) or, with "t", by a tgkill from a site that traps: either way it
 * interrupts the runtime's own code. The runtime's handler's frame, the program handler's and
 * the trap's went on the signal stack and overflowed it (SIGSEGV, session 21's reviews; it did
 * before too). Natively prints "ok 1". */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>
static volatile int handled;
static void on_usr1(int sig) {
    (void)sig;
    long r; __asm__ volatile("syscall" : "=a"(r) : "a"(SYS_getppid) : "rcx", "r11", "memory");
    handled += r > 0;
}
int main(int argc, char **argv) {
    size_t size = argc > 1 ? strtoul(argv[1], 0, 0) : 8192;
    stack_t ss = {.ss_sp = malloc(size), .ss_size = size};
    sigaltstack(&ss, 0);
    struct sigaction sa = {.sa_handler = on_usr1, .sa_flags = SA_ONSTACK};
    sigaction(SIGUSR1, &sa, 0);
    if (argc > 2) {
        long r; __asm__ volatile("syscall" : "=a"(r) : "a"(SYS_tgkill), "D"(getpid()), "S"(gettid()), "d"(SIGUSR1) : "rcx", "r11", "memory");
    } else {
        raise(SIGUSR1);
    }
    printf("ok %d\n", handled);
    return 0;
}
