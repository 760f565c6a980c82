// A seccomp strict-mode thread that becomes the process's last thread: the main thread makes
// pipe calls (which a delegate makes under --delegate all), starts a thread that enters strict
// mode, and exits with pthread_exit; the strict thread waits for the kernel to clear the main
// thread's tid word (its exit) and then calls exit(7), which ends the process with status 7
// (issue 12: the runtime's delegate threads kept the process alive, forever).
#define _GNU_SOURCE
#include <linux/seccomp.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>
static volatile int main_tid;
static int fds[2];
static void *strict_thread(void *arg)
{
    (void)arg;
    if (syscall(SYS_seccomp, SECCOMP_SET_MODE_STRICT, 0, NULL) != 0) syscall(SYS_exit, 2);
    (void)write(fds[1], "s", 1);
    while (__atomic_load_n(&main_tid, __ATOMIC_ACQUIRE) != 0) /* cleared at the main thread's exit */
        ;
    syscall(SYS_exit, 7);
    return NULL;
}
int main(void)
{
    char c;
    pthread_t t;
    if (pipe(fds) || write(fds[1], "x", 1) != 1 || read(fds[0], &c, 1) != 1) return 3;
    main_tid = (int)syscall(SYS_gettid);
    syscall(SYS_set_tid_address, &main_tid);
    if (pthread_create(&t, NULL, strict_thread, NULL) != 0 || read(fds[0], &c, 1) != 1) return 4;
    printf("strict thread started\n");
    fflush(stdout);
    pthread_exit(NULL);
}
