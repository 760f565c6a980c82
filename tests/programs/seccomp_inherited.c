// seccomp_inherited: a seccomp filter of the program's on threads that did not install it.
// The filter kills the process on rt_sigprocmask with `how` = -1 (a call no program makes, the
// one the runtime used to check a signal set) and makes getppid fail with errno 99. A thread
// under it then blocks and unblocks a set and calls getppid, alone (after the main thread
// ended, so that no other thread could unmap the set), in one of three ways:
//   thread  the thread is created after the main thread installed the filter (clone inherits it)
//   tsync   the thread exists before; the main thread installs it with SECCOMP_FILTER_FLAG_TSYNC
//   exec    the main thread installs it and execs this program again ("exec child")
// Natively every such thread prints "masks=ok getppid=-1 errno=99". Under coreplane before,
// the thread was not known to be filtered: the runtime's check of the set killed the process
// (SIGSYS), and a delegated getppid escaped the filter.
#define _GNU_SOURCE
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

static int install(unsigned flags)
{
    struct sock_filter code[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_getppid, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | 99),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_rt_sigprocmask, 0, 3),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0xffffffff, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {sizeof code / sizeof code[0], code};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        return -1;
    return (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, flags, &prog);
}

static void *work(void *arg)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    for (int i = 0; i < 100; i++)
        if (pthread_sigmask(SIG_BLOCK, &set, NULL) != 0 || pthread_sigmask(SIG_UNBLOCK, &set, NULL) != 0)
            return "masks=failed";
    errno = 0;
    long r = syscall(SYS_getppid);
    printf("masks=ok getppid=%ld errno=%d\n", r, errno);
    fflush(stdout);
    return arg;
}

static volatile int filtered;
static pthread_t main_thread;

static void *alone_then_work(void *arg)
{
    while (!filtered)
        sched_yield();
    if (pthread_join(main_thread, NULL) != 0)
        return "join failed";
    return work(arg);
}

int main(int argc, char **argv)
{
    const char *how = argc > 1 ? argv[1] : "thread";
    pthread_t t;
    if (strcmp(how, "exec") == 0 && argc > 2) // the exec'd program, under the filter
        return work(NULL) != NULL;
    main_thread = pthread_self();
    if (strcmp(how, "tsync") == 0) {
        if (pthread_create(&t, NULL, alone_then_work, NULL) != 0 || install(SECCOMP_FILTER_FLAG_TSYNC) != 0)
            return 2;
    } else {
        if (install(0) != 0)
            return 2;
        if (strcmp(how, "exec") == 0) {
            execl("/proc/self/exe", argv[0], "exec", "child", (char *)NULL);
            return 2;
        }
        if (pthread_create(&t, NULL, alone_then_work, NULL) != 0)
            return 2;
    }
    filtered = 1;
    pthread_exit(NULL); // the worker's end ends the process with status 0
}
