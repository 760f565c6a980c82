// Calls whose arguments the kernel checks before it reads them, or reads only as far as it
// must, with those arguments at the end of a page followed by an unmapped one (as strace's
// tests place them): the runtime, which looks at some of them first, must fail each call as the
// kernel does (EINVAL, EFAULT, E2BIG), never fault itself (issue 12). Prints one line per call:
// its name, its result and errno.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <asm/prctl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

static void show(const char *what, long r)
{
    printf("%s %ld %d\n", what, r, r < 0 ? errno : 0);
}

int main(void)
{
    long page = sysconf(_SC_PAGESIZE);
    char *two = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (two == MAP_FAILED || munmap(two + page, page) != 0) return 2;
    char *end = two + page;  // the first byte that is not mapped
    memset(two, 0, page);

    // A sigset of 8 bytes of which 4 are mapped: EFAULT; a short size: EINVAL, nothing read.
    show("rt_sigprocmask-straddling", syscall(SYS_rt_sigprocmask, SIG_SETMASK, end - 4, NULL, 8));
    show("rt_sigprocmask-size", syscall(SYS_rt_sigprocmask, SIG_SETMASK, end - 4, NULL, 4));
    show("rt_sigsuspend-size", syscall(SYS_rt_sigsuspend, end - 4, 4));
    show("ppoll-straddling", syscall(SYS_ppoll, NULL, 0, NULL, end - 4, 8));
    show("ppoll-size", syscall(SYS_ppoll, NULL, 0, NULL, end - 4, 4));
    // pselect6's { sigset pointer, size } pair itself unreadable: EFAULT.
    show("pselect6-pair", syscall(SYS_pselect6, 0, NULL, NULL, NULL, NULL, end - 8));

    // clone3: struct clone_args (88 bytes known) at the page end, read no further than needed.
    uint64_t *args = (uint64_t *)(end - 88);
    show("clone3-past-end", syscall(SYS_clone3, args, 96));  // 8 unreadable zero-check bytes
    uint64_t *more = (uint64_t *)(end - 96);
    memset(more, 0, 96);
    more[11] = 1;  // a non-zero byte beyond the known fields, before the unreadable page
    show("clone3-nonzero-tail", syscall(SYS_clone3, more, 104));
    show("clone3-huge", syscall(SYS_clone3, args, page + 8));
    // Invalid exit signal, stack with no size, stack beyond user space: EINVAL before any use.
    uint64_t bad[11] = {0};
    bad[4] = 250;
    show("clone3-exit-signal", syscall(SYS_clone3, bad, 88));
    bad[4] = SIGCHLD;
    bad[5] = (uint64_t)(two + 64);
    show("clone3-stack-no-size", syscall(SYS_clone3, bad, 88));
    bad[5] = 0xface1e55beeff00dULL;
    bad[6] = 0x1000;
    show("clone3-stack-beyond", syscall(SYS_clone3, bad, 88));

    // The GS base (which the runtime keeps for the program): beyond user space EPERM, the old
    // base written to an unmapped address EFAULT.
    show("arch_prctl-set-gs-beyond", syscall(SYS_arch_prctl, ARCH_SET_GS, 0xbadfaceddeadbeefULL));
    show("arch_prctl-get-gs-null", syscall(SYS_arch_prctl, ARCH_GET_GS, NULL));
    show("arch_prctl-get-gs-past-end", syscall(SYS_arch_prctl, ARCH_GET_GS, end));

    // Paths and arrays the runtime looks into (/proc/self/exe, its own environment entries):
    // unreadable ones fail with EFAULT, and a string that ends just before the unmapped page is
    // read whole.
    char buf[64];
    show("readlink-path-unmapped", syscall(SYS_readlink, end, buf, sizeof buf));
    show("readlink-path-null", syscall(SYS_readlink, NULL, buf, sizeof buf));
    show("readlinkat-path-unmapped", syscall(SYS_readlinkat, AT_FDCWD, end, buf, sizeof buf));
    show("readlink-self-exe-buf-unmapped", syscall(SYS_readlink, "/proc/self/exe", end, sizeof buf));
    show("readlink-self-exe-size-0", syscall(SYS_readlink, "/proc/self/exe", buf, 0));
    memcpy(end - 15, "/proc/self/exe", 15);
    show("readlink-self-exe-at-page-end", syscall(SYS_readlink, end - 15, buf, sizeof buf) > 0);
    memcpy(end - 2, "x", 2);
    show("readlink-short-at-page-end", syscall(SYS_readlink, end - 2, buf, sizeof buf));
    show("execve-path-unmapped", syscall(SYS_execve, end, NULL, NULL));
    char *argv[] = {"true", NULL};
    show("execve-argv-unmapped", syscall(SYS_execve, "/bin/true", end - 8, NULL));
    show("execve-env-entry-unmapped", syscall(SYS_execve, "/bin/true", argv, (char *[]){end, NULL}));
    show("execveat-path-unmapped", syscall(SYS_execveat, 3, end, argv, NULL, 0));
    // The runtime keeps the program's handlers: a struct it cannot read or write fails so too.
    show("rt_sigaction-act-straddling", syscall(SYS_rt_sigaction, SIGUSR1, end - 8, NULL, 8));
    show("rt_sigaction-oldact-unmapped", syscall(SYS_rt_sigaction, SIGUSR1, NULL, end, 8));
    show("sigaltstack-unmapped", syscall(SYS_sigaltstack, end, NULL));
    show("sigaltstack-old-unmapped", syscall(SYS_sigaltstack, NULL, end));
    return 0;
}
