// setns(2) into a user namespace, which the kernel allows only in a single-threaded process:
// a child makes a user namespace and waits; the parent, after calls a delegate makes (pipe
// I/O), joins it with nstype CLONE_NEWUSER ("user") or 0 ("any", the kernel then finds the type
// from the fd), then makes pipe I/O again. Prints "setns: 0", the uid it then has and "piped"
// (issue 12: under --delegate all the delegate threads made it EINVAL).
#define _GNU_SOURCE
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
int main(int argc, char **argv)
{
    int nstype = argc > 1 && strcmp(argv[1], "any") == 0 ? 0 : CLONE_NEWUSER;
    int ready[2], done[2], data[2];
    char c, path[64], buf[8] = {0};
    if (pipe(ready) || pipe(done) || pipe(data)) return 2;
    pid_t child = fork();
    if (child == 0) {
        if (unshare(CLONE_NEWUSER) != 0) _exit(3);
        (void)write(ready[1], "r", 1);
        (void)read(done[0], &c, 1);
        _exit(0);
    }
    if (child < 0 || read(ready[0], &c, 1) != 1) return 4;
    snprintf(path, sizeof path, "/proc/%d/ns/user", child);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 5;
    int r = setns(fd, nstype);
    printf("setns: %d\n", r == 0 ? 0 : -1);
    printf("uid %d\n", (int)getuid());
    if (write(data[1], "piped", 5) != 5 || read(data[0], buf, 5) != 5) return 6;
    printf("%s\n", buf);
    (void)write(done[1], "d", 1);
    int status;
    waitpid(child, &status, 0);
    return r != 0 || status != 0;
}
