/* execve and execveat with an empty argv ({NULL}) or none (NULL), each from a forked child:
 * since Linux 5.18 the kernel gives the new program argc 1 and argv[0] "". A #! script exec'd
 * so gets [interpreter, its argument, the script's path] (the kernel drops the "" it put in).
 * Under coreplane the new image exited 127 ("coreplane-rt: usage: ..."): the runtime's own argv
 * was one entry short. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* execveat(dirfd, path, argv, {NULL}, flags) in a child; what it printed follows `label`. */
static void run(const char *label, int dirfd, const char *path, char **argv, int flags) {
    printf("%s: ", label);
    fflush(stdout);
    pid_t child = fork();
    if (child == 0) {
        char *envp[] = {NULL};
        syscall(SYS_execveat, dirfd, path, argv, envp, flags);
        perror("execveat");
        _exit(1);
    }
    int status;
    waitpid(child, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        printf("child ended with status 0x%x\n", status);
}

int main(int argc, char **argv) {
    if (argc == 1 && argv[0][0] == 0) {
        printf("argc 1, argv[0] \"\"\n");
        return 0;
    }
    if (argc > 1 && !strcmp(argv[1], "interpreter-argument")) {
        printf("argc %d:", argc); /* the interpreter's path, its argument, the script's path */
        for (int i = 0; i < argc; i++)
            printf(" %s", basename(argv[i]));
        printf("\n");
        return 0;
    }
    char *empty[] = {NULL}, self[4096], dir[] = "/tmp/exec-empty-argv-XXXXXX", script[4200];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n < 0 || !mkdtemp(dir))
        return 2;
    self[n] = 0;
    run("execve, {NULL}", AT_FDCWD, self, empty, 0);
    run("execve, NULL", AT_FDCWD, self, NULL, 0);
    int fd = open(self, O_RDONLY);
    run("execveat by descriptor, {NULL}", fd, "", empty, AT_EMPTY_PATH);
    run("execveat by descriptor, NULL", fd, "", NULL, AT_EMPTY_PATH);
    snprintf(script, sizeof script, "%s/script", dir);
    FILE *f = fopen(script, "w");
    fprintf(f, "#!%s interpreter-argument\n", self);
    fclose(f);
    chmod(script, 0755);
    run("script, {NULL}", AT_FDCWD, script, empty, 0);
    run("script, NULL", AT_FDCWD, script, NULL, 0);
    unlink(script);
    return rmdir(dir) != 0;
}
