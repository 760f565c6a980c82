/* A program under its own allowlist-style seccomp filter, which kills the process for the legacy
 * open(2) (glibc uses openat), forks a child and starts a thread: natively "child 0" and
 * "thread ok". Under a profile the forked child's new profile file was created with open, and
 * the child died of SIGSYS. */
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static void *worker(void *arg)
{
    return arg;
}

int main(void)
{
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_open, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = { sizeof f / sizeof f[0], f };
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog))
        return perror("seccomp"), 2;
    pid_t child = fork();
    if (child == 0)
        _exit(0);
    int status;
    waitpid(child, &status, 0);
    printf("child %d\n", status);
    pthread_t t;
    if (pthread_create(&t, NULL, worker, NULL))
        return puts("no thread"), 1;
    pthread_join(t, NULL);
    puts("thread ok");
    return 0;
}
