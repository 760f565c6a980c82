/* Opens /etc/shadow as root, drops to nobody (groups, gid, uid), and tries again: natively the
 * second open is refused. Prints both outcomes. Under delegation a delegate, a thread with the
 * credentials it was started with, made the second open as root until session 18. Before that,
 * a credential call that changes nothing (setresuid(-1, -1, -1)) must leave the process's
 * threads (the delegates among them) as they were: retiring them costs milliseconds. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <dirent.h>
#include <grp.h>
#include <string.h>
#include <stdio.h>
#include <unistd.h>

static void try_open(const char *when) {
    int fd = open("/etc/shadow", O_RDONLY);
    printf("%s: %s\n", when, fd >= 0 ? "opened" : "refused");
    if (fd >= 0)
        close(fd);
}

/* The process's thread ids, in the order /proc lists them. */
static void threads(char *out, size_t size) {
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    out[0] = 0;
    while (d && (e = readdir(d)))
        if (e->d_name[0] != '.' && strlen(out) + strlen(e->d_name) + 2 < size)
            strcat(strcat(out, e->d_name), " ");
    if (d)
        closedir(d);
}

int main(void) {
    char before[4096], after[4096];
    try_open("as root");
    threads(before, sizeof before);
    if (setresuid(-1, -1, -1))
        return 1;
    try_open("after a change of nothing");
    threads(after, sizeof after);
    printf("threads after a change of nothing: %s\n", strcmp(before, after) ? "others" : "the same");
    if (setgroups(0, NULL) || setresgid(65534, 65534, 65534) || setresuid(65534, 65534, 65534))
        return 1;
    try_open("as nobody");
    return 0;
}
