// A seccomp strict-mode thread whose tid word (its set_tid_address) is unmapped before it
// exits, as a joined thread's stack is freed: the thread writes its tid into a page of its own,
// names the page with set_tid_address, enters strict mode; the main thread unmaps the page and
// exits with pthread_exit, so the strict thread ends last, and its exit(7) ends the process
// with status 7 (the kernel's clear of the unmapped word fails silently, and wakes no one).
// Under coreplane the runtime's watcher waited on that word: a clear that never came (a hang)
// or a read of the unmapped page (SIGSEGV).
//
//   strict_tid_freed join: the strict thread runs on a stack of the program's, in which glibc
//   keeps its tid word; pthread_join returns once that word is cleared, and the main thread
//   unmaps the stack and exits 0 (prints "joined").
#define _GNU_SOURCE
#include <linux/seccomp.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
static volatile int main_tid;
static int fds[2];
static int *tid_page;
static void *strict_thread(void *arg)
{
    (void)arg;
    *tid_page = (int)syscall(SYS_gettid);
    syscall(SYS_set_tid_address, tid_page);
    if (syscall(SYS_seccomp, SECCOMP_SET_MODE_STRICT, 0, NULL) != 0) syscall(SYS_exit, 2);
    (void)write(fds[1], "s", 1);
    while (__atomic_load_n(&main_tid, __ATOMIC_ACQUIRE) != 0) /* cleared at the main thread's exit */
        ;
    syscall(SYS_exit, 7);
    return NULL;
}
static void *strict_then_exit(void *arg)
{
    (void)arg;
    if (syscall(SYS_seccomp, SECCOMP_SET_MODE_STRICT, 0, NULL) != 0) syscall(SYS_exit, 2);
    syscall(SYS_exit, 0);
    return NULL;
}
static int joined(void)
{
    size_t size = 256 * 1024;
    void *stack = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    pthread_attr_t attr;
    pthread_t t;
    if (stack == MAP_FAILED || pthread_attr_init(&attr) || pthread_attr_setstack(&attr, stack, size)) return 3;
    if (pthread_create(&t, &attr, strict_then_exit, NULL) != 0 || pthread_join(t, NULL) != 0) return 4;
    if (munmap(stack, size) != 0) return 5;
    printf("joined\n");
    return 0;
}
int main(int argc, char **argv)
{
    char c;
    pthread_t t;
    if (argc > 1 && strcmp(argv[1], "join") == 0)
        return joined();
    tid_page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (tid_page == MAP_FAILED || pipe(fds)) return 3;
    main_tid = (int)syscall(SYS_gettid);
    syscall(SYS_set_tid_address, &main_tid);
    if (pthread_create(&t, NULL, strict_thread, NULL) != 0 || read(fds[0], &c, 1) != 1) return 4;
    if (munmap(tid_page, 4096) != 0) return 5;
    printf("tid page unmapped\n");
    fflush(stdout);
    pthread_exit(NULL);
}
