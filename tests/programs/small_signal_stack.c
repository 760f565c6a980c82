/* small_signal_stack [SIZE|+EXTRA]: gives the main thread a signal stack of SIZE bytes (default
 * 8192, glibc's old SIGSTKSZ and a Rust program's main thread; +EXTRA: AT_MINSIGSTKSZ + EXTRA), raises a signal whose handler runs
 * there, then makes calls from sites that trap under coreplane (getppid, open and close of a
 * /proc file, readlink of /proc/self/exe), raising the signal again from inside a trapped call
 * (tgkill). Prints what it saw; natively "handled=2 calls=20 readlink=1". Under coreplane the
 * trap's own kernel frame (3.4 KiB with AVX-512 state), the runtime's frames and the signal's
 * frame all went to that stack: killed by SIGSEGV, or hung with the heap below it overwritten. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/auxv.h>
#include <sys/syscall.h>
#include <unistd.h>

static volatile int handled;

static void on_usr1(int sig) {
    (void)sig;
    handled++;
}

int main(int argc, char **argv) {
    size_t size = argc > 1 ? strtoul(argv[1], 0, 0) : 8192;
    if (argc > 1 && argv[1][0] == '+') /* that much above the kernel's minimum for a frame */
        size = getauxval(AT_MINSIGSTKSZ) + strtoul(argv[1] + 1, 0, 0);
    stack_t ss = {.ss_sp = malloc(size), .ss_size = size};
    if (sigaltstack(&ss, 0) != 0) {
        perror("sigaltstack");
        return 2;
    }
    struct sigaction sa = {.sa_handler = on_usr1, .sa_flags = SA_ONSTACK};
    sigaction(SIGUSR1, &sa, 0);
    raise(SIGUSR1);
    int calls = 0;
    for (int i = 0; i < 20; i++) {
        calls += syscall(SYS_getppid) > 0;
        int fd = open("/proc/self/stat", O_RDONLY);
        if (fd >= 0)
            close(fd);
    }
    syscall(SYS_tgkill, getpid(), gettid(), SIGUSR1);
    char buf[256];
    printf("handled=%d calls=%d readlink=%d\n", handled, calls, readlink("/proc/self/exe", buf, sizeof buf) > 0);
    return 0;
}
