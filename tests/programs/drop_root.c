/* Opens /etc/shadow as root, drops to nobody (groups, gid, uid), and tries again: natively the
 * second open is refused. Prints both outcomes. Under delegation a delegate, a thread with the
 * credentials it was started with, made the second open as root until session 18. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <grp.h>
#include <stdio.h>
#include <unistd.h>

static void try_open(const char *when) {
    int fd = open("/etc/shadow", O_RDONLY);
    printf("%s: %s\n", when, fd >= 0 ? "opened" : "refused");
    if (fd >= 0)
        close(fd);
}

int main(void) {
    try_open("as root");
    if (setgroups(0, NULL) || setresgid(65534, 65534, 65534) || setresuid(65534, 65534, 65534))
        return 1;
    try_open("as nobody");
    return 0;
}
