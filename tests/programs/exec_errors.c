/* execve of what the kernel refuses, in a forked child each, which prints the errno execve
 * returned (natively: a directory EACCES, a script whose interpreter does not exist ENOENT, a
 * file starting "\x7fELF" with nothing valid after ENOEXEC, a program whose dynamic loader does
 * not exist ENOENT). Under coreplane the new image exited 127 instead, or said ENOEXEC for the
 * directory. Files go in the directory given (default /tmp).
 * `exec_errors privileged`, as root: copies of this program (set-user-ID root) and of /bin/true
 * (mode 0711, executable but not readable), each exec'd by a child that became nobody. Natively
 * the first runs with euid 0 and AT_SECURE, the second runs; under coreplane the runtime, not
 * the kernel, loaded them: the first ran without privileges, the second was refused (EACCES).
 * Exits 77 when not root or where /tmp is mounted nosuid. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

static void write_file(const char *path, const void *data, size_t len) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0755);
    if (fd < 0 || write(fd, data, len) != (ssize_t)len)
        exit(2);
    close(fd);
}

/* execve(path, {path, arg}) in a child, as nobody where `nobody`; prints its errno, or how the
 * child ended where that is not exit 0. */
static void try_exec(const char *label, const char *path, char *arg, int nobody) {
    fflush(stdout);
    pid_t child = fork();
    if (child == 0) {
        if (nobody && (setgid(65534) || setuid(65534)))
            _exit(2);
        char *argv[] = {(char *)path, arg, NULL};
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

static void copy(const char *from, const char *to, mode_t mode) {
    int in = open(from, O_RDONLY), out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0700);
    static char buf[65536];
    ssize_t n;
    while (in >= 0 && out >= 0 && (n = read(in, buf, sizeof buf)) > 0)
        if (write(out, buf, n) != n)
            exit(2);
    close(in);
    close(out);
    chmod(to, mode);
}

static int privileged(void) {
    struct statvfs fs;
    if (geteuid() != 0 || statvfs("/tmp", &fs) != 0 || fs.f_flag & ST_NOSUID)
        return 77;
    char dir[] = "/tmp/privileged-exec-XXXXXX", suid[64], xonly[64];
    if (!mkdtemp(dir) || chmod(dir, 0755) != 0)
        return 2;
    snprintf(suid, sizeof suid, "%s/suid", dir);
    snprintf(xonly, sizeof xonly, "%s/xonly", dir);
    copy("/proc/self/exe", suid, 04755);
    copy("/bin/true", xonly, 0711);
    try_exec("set-user-ID", suid, "report", 1);
    try_exec("execute-only", xonly, NULL, 1);
    unlink(suid);
    unlink(xonly);
    return rmdir(dir) != 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "report")) {
        printf("set-user-ID copy: uid %d euid %d secure %lu\n", getuid(), geteuid(), getauxval(AT_SECURE));
        return 0;
    }
    if (argc > 1 && !strcmp(argv[1], "privileged"))
        return privileged();
    char dir[4096], path[4200];
    snprintf(dir, sizeof dir, "%s/exec-errors-%d", argc > 1 ? argv[1] : "/tmp", (int)getpid());
    mkdir(dir, 0755);
    try_exec("directory", dir, NULL, 0);
    snprintf(path, sizeof path, "%s/script", dir);
    write_file(path, "#!/nonexistent/interpreter\necho hi\n", 35);
    try_exec("missing interpreter", path, NULL, 0);
    snprintf(path, sizeof path, "%s/bad-elf", dir);
    write_file(path, "\x7f" "ELFjunk", 8);
    try_exec("bad ELF", path, NULL, 0);
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
        try_exec("missing loader", path, NULL, 0);
    }
    char cmd[4300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd);
}
