/* The program's listing of its own threads (/proc/self/task through opendir, and getdents64
 * with a buffer of one record at a time) while two threads of its own wait: natively 3 entries
 * besides . and ..; under coreplane the delegates (--delegate all) and the memory service's
 * threads were listed too. A forked child lists itself alone. Prints the counts. */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static pthread_barrier_t ready, done;

static void *waiter(void *arg) {
    (void)arg;
    pthread_barrier_wait(&ready);
    pthread_barrier_wait(&done);
    return NULL;
}

static int by_readdir(const char *path) {
    DIR *d = opendir(path);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        n += e->d_name[0] != '.';
    if (d)
        closedir(d);
    return n;
}

/* getdents64 into a buffer that holds one record at most: every batch is a single entry. */
static int one_at_a_time(void) {
    int fd = open("/proc/self/task", O_RDONLY | O_DIRECTORY);
    char buf[40];
    int n = 0;
    long r;
    while ((r = syscall(SYS_getdents64, fd, buf, sizeof buf)) > 0)
        for (long at = 0; at < r; at += *(unsigned short *)(buf + at + 16))
            n += buf[at + 19] != '.';
    close(fd);
    return r < 0 ? -1 : n;
}

int main(void) {
    /* Memory the pool serves and frees, so that --memory pool has threads of its own. */
    for (int i = 0; i < 4; i++) {
        char *p = mmap(NULL, 8 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        memset(p, 1, 8 << 20);
        munmap(p, 8 << 20);
    }
    getppid(); /* a call --delegate all hands to a delegate */
    pthread_barrier_init(&ready, NULL, 3);
    pthread_barrier_init(&done, NULL, 3);
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, waiter, NULL);
    pthread_barrier_wait(&ready);
    char own[64];
    snprintf(own, sizeof own, "/proc/%d/task/", getpid());
    int self = by_readdir("/proc/self/task"), by_pid = by_readdir(own), single = one_at_a_time();
    pthread_barrier_wait(&done);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    int status = 0;
    pid_t child = fork();
    if (child == 0)
        _exit(by_readdir("/proc/self/task"));
    waitpid(child, &status, 0);
    printf("self %d, by pid %d, one at a time %d, child %d\n", self, by_pid, single, WEXITSTATUS(status));
    return 0;
}
