/* Calls every vDSO function through glibc N times and checks the answers against each other
   and against the kernel's syscalls; prints the counts made, so a profile can be compared. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static long long ns(struct timespec t) { return t.tv_sec * 1000000000LL + t.tv_nsec; }

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 1000;
    struct timespec prev = {0, 0}, now, res, raw;
    for (int i = 0; i < n; i++) {
        if (clock_gettime(CLOCK_MONOTONIC, &now) != 0 || ns(now) < ns(prev)) {
            fprintf(stderr, "clock_gettime went backwards or failed at call %d\n", i);
            return 1;
        }
        prev = now;
    }
    struct timeval tv;
    for (int i = 0; i < n; i++)
        if (gettimeofday(&tv, NULL) != 0) return 2;
    time_t t = 0;
    for (int i = 0; i < n; i++) t = time(NULL);
    if (clock_getres(CLOCK_MONOTONIC, &res) != 0 || res.tv_sec != 0 || res.tv_nsec <= 0) return 3;
    /* The vDSO's answers agree with the kernel's own. */
    syscall(SYS_clock_gettime, CLOCK_REALTIME, &raw);
    if (labs((long)(raw.tv_sec - t)) > 2 || labs((long)(raw.tv_sec - tv.tv_sec)) > 2) {
        fprintf(stderr, "time %ld, gettimeofday %ld, syscall %ld disagree\n", (long)t, (long)tv.tv_sec, (long)raw.tv_sec);
        return 4;
    }
    /* An invalid clock fails as natively (the vDSO falls back to the syscall). */
    if (clock_gettime((clockid_t)1234, &now) != -1) return 5;
    printf("%d %d %d 1\n", n, n, n);
    return 0;
}
