/* execveat of a #! script through a close-on-exec descriptor: the script's or its directory's
 * (AT_EMPTY_PATH, or a name relative to it). The kernel gives the interpreter /dev/fd/N(/name),
 * which the exec closes, so it fails the call with ENOENT (BINPRM_FLAGS_PATH_INACCESSIBLE) before
 * it looks for the interpreter; the caller can fall back (glibc's fexecve). That is the script
 * case alone: an ELF program so runs, as does a script through a descriptor kept across the
 * exec, or named by an absolute path. Under coreplane the exec went ahead and the new image died
 * ("coreplane-rt: /proc/thread-self/fd/6: cannot open"). Then what the kernel refuses before it
 * resolves the path: a descriptor that is not open (EBADF; the runtime said ENOENT) and an empty
 * name without AT_EMPTY_PATH (ENOENT; the runtime said ENOTDIR). Each case from a forked child,
 * which prints what the exec'd program printed or execveat's errno. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static void run(const char *label, int dirfd, const char *path, int flags) {
    printf("%s: ", label);
    fflush(stdout);
    pid_t child = fork();
    if (child == 0) {
        char *argv[] = {"prog", "ran", NULL}, *envp[] = {"PATH=/usr/bin:/bin", NULL};
        syscall(SYS_execveat, dirfd, path, argv, envp, flags);
        printf("%s\n", strerrorname_np(errno));
        fflush(stdout);
        _exit(0);
    }
    int status;
    waitpid(child, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        printf("child ended with status 0x%x\n", status);
}

static void write_file(const char *dir, const char *name, const char *text, mode_t mode) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
    if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text))
        exit(2);
    close(fd);
}

/* A descriptor of `name` in `dir`, opened with `flags`. */
static int opened(const char *dir, const char *name, int flags) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return open(path, flags);
}

int main(void) {
    char dir[] = "/tmp/execveat-cloexec-XXXXXX", path[4200], cmd[4300];
    if (!mkdtemp(dir))
        return 2;
    write_file(dir, "script", "#!/bin/sh\necho script \"$1\"\n", 0755);
    write_file(dir, "no-interpreter", "#!/nonexistent/interpreter\n", 0755);
    write_file(dir, "not-executable-interpreter", "#!/etc/passwd\n", 0755);
    write_file(dir, "empty-line", "#!\n", 0755);
    write_file(dir, "not-executable", "#!/bin/sh\necho script \"$1\"\n", 0644);
    const int cloexec = O_RDONLY | O_CLOEXEC;
    run("script, close-on-exec", opened(dir, "script", cloexec), "", AT_EMPTY_PATH);
    run("script, kept", opened(dir, "script", O_RDONLY), "", AT_EMPTY_PATH);
    run("script, close-on-exec O_PATH", opened(dir, "script", O_PATH | O_CLOEXEC), "", AT_EMPTY_PATH);
    run("no interpreter, close-on-exec", opened(dir, "no-interpreter", cloexec), "", AT_EMPTY_PATH);
    run("interpreter not executable, close-on-exec", opened(dir, "not-executable-interpreter", cloexec), "", AT_EMPTY_PATH);
    run("empty #! line, close-on-exec", opened(dir, "empty-line", cloexec), "", AT_EMPTY_PATH);
    run("script not executable, close-on-exec", opened(dir, "not-executable", cloexec), "", AT_EMPTY_PATH);
    run("ELF, close-on-exec", open("/bin/echo", cloexec), "", AT_EMPTY_PATH);
    int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    run("directory close-on-exec, script", dirfd, "script", 0);
    run("directory kept, script", open(dir, O_RDONLY | O_DIRECTORY), "script", 0);
    snprintf(path, sizeof path, "%s/script", dir);
    run("directory close-on-exec, absolute script", dirfd, path, 0);
    run("descriptor not open", 999, "", AT_EMPTY_PATH);
    run("directory not open, script", 999, "script", 0);
    run("empty name without AT_EMPTY_PATH", opened(dir, "script", O_RDONLY), "", 0);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd);
}
