/* Restricts itself with Landlock (a ruleset that handles writing files and allows it nowhere) and
 * then opens a file for writing: natively refused (EACCES). A Landlock domain belongs to the thread
 * that restricts itself and the threads it starts later: delegates started before it made the open
 * outside the domain, and it succeeded. Prints "write after landlock: refused"; exits 77 where the
 * kernel has no Landlock. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 2)
        return 2;
    getppid(); /* a first call, which may start delegates */
    struct landlock_ruleset_attr attr = {.handled_access_fs = LANDLOCK_ACCESS_FS_WRITE_FILE};
    int ruleset = syscall(SYS_landlock_create_ruleset, &attr, sizeof attr, 0);
    if (ruleset < 0)
        return errno == ENOSYS || errno == EOPNOTSUPP ? 77 : 1;
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || syscall(SYS_landlock_restrict_self, ruleset, 0))
        return 1;
    int fd = open(argv[1], O_WRONLY | O_CREAT, 0600);
    printf("write after landlock: %s\n", fd >= 0 ? "allowed" : errno == EACCES ? "refused" : "failed otherwise");
    return 0;
}
