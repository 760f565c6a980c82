// thread_churn: starts THREADS threads one after another, each making one call and exiting,
// and prints how much the process's resident memory grew (KiB) from the 100th thread to the
// last: a runtime that kept anything per exited thread shows it here.
//
//   thread_churn [THREADS]   prints "threads=N rss_growth_kib=K"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static long rss_kib(void)
{
    char line[256];
    long kib = -1;
    FILE *f = fopen("/proc/self/status", "r");
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "VmRSS:", 6) == 0)
            kib = atol(line + 6);
    if (f)
        fclose(f);
    return kib;
}

static void *one_call(void *arg)
{
    syscall(SYS_getppid);
    return arg;
}

int main(int argc, char **argv)
{
    long threads = argc > 1 ? atol(argv[1]) : 2000, before = 0;
    for (long i = 0; i < threads; i++) {
        if (i == 100)
            before = rss_kib();
        pthread_t t;
        if (pthread_create(&t, NULL, one_call, NULL) != 0 || pthread_join(t, NULL) != 0)
            return 2;
    }
    printf("threads=%ld rss_growth_kib=%ld\n", threads, rss_kib() - before);
    return 0;
}
