/* Namespaces and contexts the calling thread alone leaves with unshare(2) or setns(2), after
 * calls a delegate makes: later calls must see the new ones, other threads the old ones.
 *   alone   the only thread (of a child) unshares its network, UTS and IPC namespaces: interfaces, host name,
 *           a SysV key made outside
 *   setns   the only thread fails a setns (EBADF: nothing changes), then joins a child's network
 *           namespace by its fd, with nstype 0
 *   thread  one thread of two unshares its network and UTS namespaces; a thread it creates is
 *           in them too, the main thread is not
 *   fs      one thread of two unshares its filesystem context and changes directory
 *   pid     the only thread unshares its pid namespace: its child is pid 1 there
 *   mount   as `ip netns exec`: the only thread leaves its network namespace, then its mount
 *           namespace, makes its mounts slaves and mounts a tmpfs on /mnt: the caller does not
 *           see it (under delegates left behind the mount was made in the caller's namespace:
 *           `ip netns exec` replaced the host's /sys, its cgroup hierarchies with it)
 * Prints what each sees; exits 77 where the kernel refuses the namespaces (no CAP_SYS_ADMIN). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/ipc.h>
#include <sys/mount.h>
#include <sys/shm.h>
#include <sys/utsname.h>
#include <sys/wait.h>

#define KEY 0x4835

static void delegated_calls(void) {
    for (int i = 0; i < 3; i++) /* delegated calls first, so that delegates run */
        close(dup(1));
}

static void leave(int flags) {
    if (unshare(flags) == 0)
        return;
    if (errno == EPERM || errno == EINVAL)
        exit(77);
    perror("unshare");
    exit(2);
}

static int interfaces(void) {
    struct if_nameindex *ifs = if_nameindex(), *i; /* a netlink socket, made now */
    int n = 0;
    for (i = ifs; i && i->if_index; i++)
        n++;
    if_freenameindex(ifs);
    return n;
}

static const char *host(void) {
    static __thread struct utsname u;
    uname(&u);
    return u.nodename;
}

static void alone(void) {
    /* In a child, so that the segment made outside is removed outside. */
    int outside = shmget(KEY, 4096, IPC_CREAT | 0600);
    fflush(stdout);
    pid_t child = fork();
    if (child == 0) {
        delegated_calls();
        leave(CLONE_NEWNET | CLONE_NEWUTS | CLONE_NEWIPC);
        sethostname("apart", 5);
        int inside = shmget(KEY, 4096, 0600);
        printf("interfaces %d, host %s, key inside %s\n", interfaces(), host(), inside < 0 ? "no" : "yes");
        fflush(stdout);
        _exit(0);
    }
    int st = 0;
    waitpid(child, &st, 0);
    shmctl(outside, IPC_RMID, 0);
    if (WIFEXITED(st) && WEXITSTATUS(st))
        exit(WEXITSTATUS(st));
}

static void joined(void) {
    int ready[2], done[2];
    if (pipe(ready) || pipe(done))
        exit(2);
    pid_t child = fork();
    if (child == 0) {
        char c = unshare(CLONE_NEWNET) == 0 ? 'y' : 'n';
        write(ready[1], &c, 1);
        read(done[0], &c, 1);
        _exit(0);
    }
    char c = 'n';
    read(ready[0], &c, 1);
    if (c != 'y')
        exit(77);
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/ns/net", child);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    delegated_calls();
    int failed = setns(-1, CLONE_NEWNET) == 0 ? 0 : errno;
    int before = interfaces();
    int r = setns(fd, 0);
    printf("failed setns: errno %d, interfaces %s; setns %d, interfaces %d\n", failed,
           before > 1 ? "the host's" : "too few", r, interfaces());
    write(done[1], "x", 1);
    waitpid(child, 0, 0);
}

static int inner_count;

static void *inner(void *arg) {
    inner_count = interfaces();
    return arg;
}

static void *apart_thread(void *arg) {
    leave(CLONE_NEWNET | CLONE_NEWUTS);
    sethostname("apart", 5);
    pthread_t t;
    pthread_create(&t, 0, inner, 0);
    pthread_join(t, 0);
    printf("thread: interfaces %d, host %s, its thread's interfaces %d\n", interfaces(), host(), inner_count);
    return arg;
}

static void *fs_thread(void *arg) {
    leave(CLONE_FS);
    chdir("/");
    char cwd[256] = "";
    getcwd(cwd, sizeof cwd);
    printf("thread cwd %s\n", cwd);
    return arg;
}

static void among(void *(*body)(void *)) {
    delegated_calls();
    pthread_t t;
    pthread_create(&t, 0, body, 0);
    pthread_join(t, 0);
    char cwd[256] = "";
    getcwd(cwd, sizeof cwd);
    printf("main: interfaces %s, host %s, cwd %s\n", interfaces() > 1 ? "the host's" : "too few",
           strcmp(host(), "apart") ? "the host's" : "apart", strcmp(cwd, "/") ? "kept" : "/");
}

/* Whether this thread's mount namespace has a mount of source `what`. */
static int mounted(const char *what) {
    char line[1024], needle[64];
    snprintf(needle, sizeof needle, " - tmpfs %s ", what);
    FILE *f = fopen("/proc/thread-self/mountinfo", "r");
    int found = 0;
    while (f && !found && fgets(line, sizeof line, f))
        found = strstr(line, needle) != NULL;
    if (f)
        fclose(f);
    return found;
}

static void remount(void) {
    pid_t c = fork();
    if (c == 0) {
        delegated_calls();
        leave(CLONE_NEWNET);
        leave(CLONE_NEWNS);
        if (mount(NULL, "/", NULL, MS_SLAVE | MS_REC, NULL) || mount("cp-probe", "/mnt", "tmpfs", 0, NULL)) {
            perror("mount");
            _exit(2);
        }
        printf("inside: probe %s\n", mounted("cp-probe") ? "mounted" : "missing");
        fflush(stdout);
        _exit(0);
    }
    int st;
    waitpid(c, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st))
        exit(WIFEXITED(st) ? WEXITSTATUS(st) : 2);
    printf("outside: probe %s\n", mounted("cp-probe") ? "mounted" : "missing");
}

static void pid(void) {
    delegated_calls();
    leave(CLONE_NEWPID);
    fflush(stdout);
    pid_t child = fork();
    if (child == 0) {
        printf("child pid %d\n", getpid());
        fflush(stdout);
        _exit(0);
    }
    int st = 0;
    waitpid(child, &st, 0);
    printf("waited %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "alone";
    if (!strcmp(mode, "alone"))
        alone();
    else if (!strcmp(mode, "setns"))
        joined();
    else if (!strcmp(mode, "thread"))
        among(apart_thread);
    else if (!strcmp(mode, "fs"))
        among(fs_thread);
    else if (!strcmp(mode, "pid"))
        pid();
    else if (!strcmp(mode, "mount"))
        remount();
    else
        return 2;
    return 0;
}
