// thread_counts: the process's thread count as /proc shows it, read as CPython 3.12+ reads it
// before each fork (fread of /proc/self/stat, its 20th field), from /proc/self/status's
// `Threads:` line, and by read(2) of /proc/PID/stat; with one thread, then with a second one
// alive. Under delegation the runtime's threads were counted too (CPython then warned that a
// single-threaded program was multi-threaded). Prints "threads 1 1 1" then "threads 2 2 2".
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int stat_field_20(const char *path, int use_stdio)
{
    char line[512];
    size_t n;
    if (use_stdio) {
        FILE *f = fopen(path, "r");
        if (!f)
            return -1;
        n = fread(line, 1, sizeof line - 1, f);
        fclose(f);
    } else {
        int fd = open(path, O_RDONLY);
        if (fd < 0)
            return -1;
        ssize_t r = read(fd, line, sizeof line - 1);
        close(fd);
        n = r < 0 ? 0 : (size_t)r;
    }
    line[n] = 0;
    char *p = strrchr(line, ')');
    for (int spaces = 0; p && *p && spaces < 18; p++)
        spaces += *p == ' ';
    return p ? atoi(p) : -1;
}

static int status_threads(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    int n = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "Threads:", 8))
            n = atoi(line + 8);
    if (f)
        fclose(f);
    return n;
}

static void show(void)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", getpid());
    printf("threads %d %d %d\n", stat_field_20("/proc/self/stat", 1), status_threads(), stat_field_20(path, 0));
}

static pthread_barrier_t shown;

static void *second(void *arg)
{
    (void)arg;
    pthread_barrier_wait(&shown);
    return NULL;
}

int main(void)
{
    getppid(); // a first call, which may start delegates
    show();
    pthread_barrier_init(&shown, NULL, 2);
    pthread_t t;
    pthread_create(&t, NULL, second, NULL);
    show();
    pthread_barrier_wait(&shown);
    pthread_join(t, NULL);
    return 0;
}
