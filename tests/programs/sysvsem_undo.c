// sysvsem_undo: a process's System V semaphore undo list, which its threads share (CLONE_SYSVSEM)
// and a forked child does not. A single-threaded parent and its child compare equal under
// kcmp(KCMP_SYSVSEM) (neither has a list); the runtime's delegates, started with CLONE_SYSVSEM,
// gave the parent one (kcmp said 2: stress-ng --kcmp failed). A child's semop with SEM_UNDO is
// undone when the child exits. Prints "kcmp 0, undone 1" on success.
#define _GNU_SOURCE
#include <linux/kcmp.h>
#include <stdio.h>
#include <sys/sem.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

int main(void)
{
    getppid(); // a first call, which may start delegates
    int sem = semget(IPC_PRIVATE, 1, 0600);
    if (sem < 0)
        return 2;
    int status, kcmp = -1;
    pid_t child = fork();
    if (child == 0) {
        struct sembuf up = {0, 1, SEM_UNDO};
        sleep(1);
        _exit(semop(sem, &up, 1) != 0 || semctl(sem, 0, GETVAL) != 1);
    }
    kcmp = syscall(SYS_kcmp, child, getpid(), KCMP_SYSVSEM, 0, 0);
    waitpid(child, &status, 0);
    int undone = WIFEXITED(status) && WEXITSTATUS(status) == 0 && semctl(sem, 0, GETVAL) == 0;
    semctl(sem, 0, IPC_RMID);
    printf("kcmp %d, undone %d\n", kcmp, undone);
    return 0;
}
