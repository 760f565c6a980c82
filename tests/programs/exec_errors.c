/* execve of what the kernel refuses, in a forked child each, which prints the errno execve
 * returned (natively: a directory EACCES, a script whose interpreter does not exist ENOENT, a
 * file starting "\x7fELF" with nothing valid after ENOEXEC, a program whose dynamic loader does
 * not exist ENOENT). Under coreplane the new image exited 127 instead, or said ENOEXEC for the
 * directory. Files go in the directory given (default /tmp). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static void write_file(const char *path, const void *data, size_t len) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0755);
    if (fd < 0 || write(fd, data, len) != (ssize_t)len)
        exit(2);
    close(fd);
}

static void try_exec(const char *label, const char *path) {
    fflush(stdout);
    pid_t child = fork();
    if (child == 0) {
        char *argv[] = {(char *)path, NULL};
        execve(path, argv, environ);
        printf("%s: %s\n", label, strerrorname_np(errno));
        fflush(stdout);
        _exit(0);
    }
    int status;
    waitpid(child, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        printf("%s: child ended with status 0x%x\n", label, status);
}

int main(int argc, char **argv) {
    char dir[4096], path[4200];
    snprintf(dir, sizeof dir, "%s/exec-errors-%d", argc > 1 ? argv[1] : "/tmp", (int)getpid());
    mkdir(dir, 0755);
    try_exec("directory", dir);
    snprintf(path, sizeof path, "%s/script", dir);
    write_file(path, "#!/nonexistent/interpreter\necho hi\n", 35);
    try_exec("missing interpreter", path);
    snprintf(path, sizeof path, "%s/bad-elf", dir);
    write_file(path, "\x7f" "ELFjunk", 8);
    try_exec("bad ELF", path);
    /* /bin/true with one byte of its dynamic loader's name changed. */
    static char image[4 << 20];
    int fd = open("/bin/true", O_RDONLY);
    ssize_t n = read(fd, image, sizeof image);
    close(fd);
    char *interp = memmem(image, n > 0 ? n : 0, "/lib64/ld-linux-x86-64.so.2", 27);
    if (interp) {
        interp[26] = '9';
        snprintf(path, sizeof path, "%s/no-loader", dir);
        write_file(path, image, n);
        try_exec("missing loader", path);
    }
    char cmd[4300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd);
}
