// A seccomp strict-mode thread among others whose last call comes from a syscall site that never
// ran before (inline assembly: no site the runtime rewrote lies on its way), so that under
// coreplane the call reached the kernel unseen (the runtime had stopped trapping the thread's
// calls when it entered strict mode).
//
//   strict_unseen last     the main thread exits with pthread_exit; the strict thread, now the
//                          last, exits with code 7: the process ends with status 7
//   strict_unseen killed   the same, but the strict thread's last call is one strict mode
//                          forbids (getppid): the kernel ends it with SIGKILL, and the process
//                          with it
//   strict_unseen joined   the main thread joins the strict thread, which exits with code 0,
//                          then exits with pthread_exit: status 0, after "joined"
//   strict_unseen second   a second strict thread exits with code 0 first (joined), then the
//                          first is killed by the kernel (a forbidden call; joined), then the
//                          main thread, now the last, exits with exit(2) code 5: status 5,
//                          after "joined both"
//   strict_unseen two      two strict threads: the first exits with code 0 (joined), the main
//                          thread exits with pthread_exit, and the second, now the last, exits
//                          with code 7: status 7
//   strict_unseen two-killed  the same, but the second's last call is getppid: SIGKILL
#define _GNU_SOURCE
#include <linux/seccomp.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static volatile int main_tid, go;
static int fds[2];
static const char *mode;

static void fresh_site_exit(int code)
{
    __asm__ volatile("syscall" : : "a"(SYS_exit), "D"(code) : "rcx", "r11", "memory");
    __builtin_unreachable();
}

static long fresh_site_getppid(void)
{
    long r;
    __asm__ volatile("syscall" : "=a"(r) : "a"(SYS_getppid) : "rcx", "r11", "memory");
    return r;
}

static void *second_strict_thread(void *arg)
{
    (void)arg;
    if (syscall(SYS_seccomp, SECCOMP_SET_MODE_STRICT, 0, NULL) != 0)
        syscall(SYS_exit, 2);
    fresh_site_exit(0);
    return NULL;
}

static volatile int first_go;

// The first of two strict threads: exits with code 0 once told to.
static void *first_of_two(void *arg)
{
    (void)arg;
    if (syscall(SYS_seccomp, SECCOMP_SET_MODE_STRICT, 0, NULL) != 0)
        syscall(SYS_exit, 2);
    (void)write(fds[1], "s", 1);
    while (!__atomic_load_n(&first_go, __ATOMIC_ACQUIRE))
        ;
    fresh_site_exit(0);
    return NULL;
}

// The second of two strict threads: once the main thread has ended, it is the last thread, and
// exits with code 7, or (two-killed) makes a call strict mode forbids.
static void *last_of_two(void *arg)
{
    (void)arg;
    if (syscall(SYS_seccomp, SECCOMP_SET_MODE_STRICT, 0, NULL) != 0)
        syscall(SYS_exit, 2);
    (void)write(fds[1], "s", 1);
    while (__atomic_load_n(&main_tid, __ATOMIC_ACQUIRE) != 0) /* cleared at the main thread's exit */
        ;
    if (strcmp(mode, "two-killed") == 0)
        fresh_site_getppid();
    fresh_site_exit(7);
    return NULL;
}

static void *strict_thread(void *arg)
{
    (void)arg;
    if (syscall(SYS_seccomp, SECCOMP_SET_MODE_STRICT, 0, NULL) != 0)
        syscall(SYS_exit, 2);
    (void)write(fds[1], "s", 1);
    if (strcmp(mode, "joined") == 0)
        fresh_site_exit(0);
    if (strcmp(mode, "second") == 0) {
        while (!__atomic_load_n(&go, __ATOMIC_ACQUIRE))
            ;
        fresh_site_getppid();
    }
    while (__atomic_load_n(&main_tid, __ATOMIC_ACQUIRE) != 0) /* cleared at the main thread's exit */
        ;
    if (strcmp(mode, "killed") == 0)
        fresh_site_getppid();
    fresh_site_exit(7);
    return NULL;
}

int main(int argc, char **argv)
{
    char c;
    pthread_t t;
    if (argc != 2 || (strcmp(argv[1], "last") && strcmp(argv[1], "killed") && strcmp(argv[1], "joined") &&
                      strcmp(argv[1], "second") && strcmp(argv[1], "two") && strcmp(argv[1], "two-killed"))) {
        fprintf(stderr, "usage: strict_unseen last|killed|joined|second|two|two-killed\n");
        return 2;
    }
    mode = argv[1];
    if (pipe(fds) || write(fds[1], "x", 1) != 1 || read(fds[0], &c, 1) != 1)
        return 3;
    main_tid = (int)syscall(SYS_gettid);
    syscall(SYS_set_tid_address, &main_tid);
    if (strncmp(mode, "two", 3) == 0) {
        pthread_t first, second;
        if (pthread_create(&first, NULL, first_of_two, NULL) != 0 || read(fds[0], &c, 1) != 1 ||
            pthread_create(&second, NULL, last_of_two, NULL) != 0 || read(fds[0], &c, 1) != 1)
            return 4;
        __atomic_store_n(&first_go, 1, __ATOMIC_RELEASE);
        if (pthread_join(first, NULL) != 0)
            return 5;
        pthread_exit(NULL);
    }
    if (pthread_create(&t, NULL, strict_thread, NULL) != 0 || read(fds[0], &c, 1) != 1)
        return 4;
    if (strcmp(mode, "second") == 0) {
        pthread_t second;
        if (pthread_create(&second, NULL, second_strict_thread, NULL) != 0 || pthread_join(second, NULL) != 0)
            return 6;
        __atomic_store_n(&go, 1, __ATOMIC_RELEASE);
        if (pthread_join(t, NULL) != 0)
            return 5;
        printf("joined both\n");
        fflush(stdout);
        syscall(SYS_exit, 5);
    }
    if (strcmp(mode, "joined") == 0) {
        if (pthread_join(t, NULL) != 0)
            return 5;
        printf("joined\n");
        fflush(stdout);
    }
    pthread_exit(NULL);
}
