/* thread_signal_stack: a thread with an 8 KiB signal stack below a guard page (as Rust's std gives
 * every thread) blocks in futex; another thread sends it SIGUSR1, whose handler is not SA_ONSTACK
 * (cargo's jobserver helper is woken so). The futex call trapped, and its trap's frame, the
 * runtime's frames and the signal's frame overflowed the stack: cargo build and rustc died of
 * SIGSEGV in every mode (helper-67's sweep, session 21). Natively prints "ok hits>0=1". */
#define _GNU_SOURCE
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <stdatomic.h>
static atomic_int word, hits;
static void usr1(int s, siginfo_t *si, void *uc) { (void)s; (void)si; (void)uc; hits++; }
static void *helper(void *a) {
    (void)a;
    char *m = mmap(0, 12288, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    mprotect(m, 4096, PROT_NONE);                       /* guard page, as Rust's std */
    stack_t ss = {.ss_sp = m + 4096, .ss_size = 8192, .ss_flags = 0};
    sigaltstack(&ss, 0);
    while (atomic_load(&word) == 0)
        syscall(SYS_futex, &word, FUTEX_WAIT_PRIVATE, 0, 0, 0, 0);   /* EINTR on each signal */
    ss.ss_flags = SS_DISABLE; sigaltstack(&ss, 0);
    munmap(m, 12288);
    return 0;
}
int main(void) {
    struct sigaction sa = {0};
    sa.sa_sigaction = usr1; sa.sa_flags = SA_SIGINFO;   /* no SA_ONSTACK, no SA_RESTART */
    sigaction(SIGUSR1, &sa, 0);
    for (int it = 0; it < 200; it++) {
        pthread_t t; atomic_store(&word, 0);
        pthread_create(&t, 0, helper, 0);
        for (int k = 0; k < 20; k++) { usleep(200); pthread_kill(t, SIGUSR1); }
        atomic_store(&word, 1);
        syscall(SYS_futex, &word, FUTEX_WAKE_PRIVATE, 1, 0, 0, 0);
        pthread_join(t, 0);
    }
    printf("ok hits>0=%d\n", hits > 0);
    return 0;
}
