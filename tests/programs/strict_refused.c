// strict_refused: a thread among others asks for seccomp strict mode with flags the kernel refuses (EINVAL),
// ends, and the main thread goes on. Natively: "strict: -1 22", then "main done", status 0.
#define _GNU_SOURCE
#include <errno.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
static void *s(void *a) {
    long r = syscall(SYS_seccomp, SECCOMP_SET_MODE_STRICT, 1, NULL);
    printf("strict: %ld %d\n", r, errno);
    fflush(stdout);
    return a;
}
int main(void) {
    pthread_t t;
    if (pthread_create(&t, NULL, s, NULL) || pthread_join(t, NULL)) return 2;
    struct timespec ts = {0, 200000000}; nanosleep(&ts, NULL);
    puts("main done");
    return 0;
}
