// unshare(CLONE_NEWUSER), which the kernel allows only in a single-threaded process, then
// calls that a delegate makes (pipe I/O, also from a new thread): prints "uid 0 in the new
// user namespace" and "piped" (issue 12: under --delegate all the delegate threads made it EINVAL).
// Then a child unshares a pid namespace, after which the kernel refuses it new threads, and
// makes pipe I/O: prints "child in a new pid namespace: 0" (under --delegate all its first
// delegated call waited forever for a delegate that could not be started).
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
static int fds[2];
static void *writer(void *arg)
{
    (void)arg;
    (void)write(fds[1], "piped", 5);
    return NULL;
}
int main(void)
{
    if (unshare(CLONE_NEWUSER) != 0) {
        perror("unshare");
        return 1;
    }
    printf("uid %d in the new user namespace\n", getuid() == 65534 ? 0 : (int)getuid());
    char buf[8] = {0};
    pthread_t t;
    if (pipe(fds) != 0 || pthread_create(&t, NULL, writer, NULL) != 0) return 2;
    if (read(fds[0], buf, 5) != 5) return 3;
    pthread_join(t, NULL);
    printf("%s\n", buf);
    fflush(stdout);
    pid_t child = fork();
    if (child == 0) {
        char again[8] = {0};
        if (unshare(CLONE_NEWPID) != 0) _exit(4);
        if (write(fds[1], "again", 5) != 5 || read(fds[0], again, 5) != 5) _exit(5);
        _exit(strcmp(again, "again") != 0);
    }
    int status;
    if (child < 0 || waitpid(child, &status, 0) != child) return 4;
    printf("child in a new pid namespace: %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
    return strcmp(buf, "piped") != 0 || status != 0;
}
