// thread_self: calls that name the calling thread implicitly (CLOCK_THREAD_CPUTIME_ID, pid 0 in
// sched_* and get_robust_list, who 0 in setpriority/getpriority, RUSAGE_THREAD) or act on it
// alone (personality), made from a second thread, must act on that thread even when a delegate
// makes them. Prints one line per check; exit 1 on a mismatch.
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/personality.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static int failed;

static void check(const char *what, int ok)
{
    printf("%s %s\n", what, ok ? "ok" : "WRONG");
    failed |= !ok;
}

static long ns(struct timespec ts) { return ts.tv_sec * 1000000000L + ts.tv_nsec; }

// Field `k` (1-based) of the calling thread's stat, after the command's parentheses. Named by
// tid: /proc/thread-self names the thread that opens it, a delegate under delegation (a known
// limit of the runtime, docs/architecture.md).
static long stat_field(int k)
{
    char buf[1024], path[64];
    snprintf(path, sizeof path, "/proc/self/task/%ld/stat", (long)syscall(SYS_gettid));
    FILE *f = fopen(path, "r");
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')') + 2;   // field 3
    for (int i = 3; i < k; i++)
        p = strchr(p, ' ') + 1;
    return strtol(p, NULL, 10);
}

static void *worker(void *arg)
{
    volatile unsigned long x = 0;
    for (unsigned long i = 0; i < 50000000UL; i++)
        x++;
    // The thread's own CPU clock, read by name and by its explicit id.
    clockid_t mine;
    pthread_getcpuclockid(pthread_self(), &mine);
    struct timespec implicit, explicit_;
    syscall(SYS_clock_gettime, CLOCK_THREAD_CPUTIME_ID, &implicit);
    syscall(SYS_clock_gettime, mine, &explicit_);
    long d = ns(explicit_) - ns(implicit);
    check("clock_gettime(CLOCK_THREAD_CPUTIME_ID)", d >= 0 && d < 2000000 && ns(implicit) > 10000000);
    // Sleeping on one's own CPU clock is refused natively (EOPNOTSUPP for the id, EINVAL for
    // the thread's own clock id); named by that id from a delegate it would sleep instead.
    struct timespec ms = {0, 1000000};
    long slept = syscall(SYS_clock_nanosleep, CLOCK_THREAD_CPUTIME_ID, 0, &ms, NULL);
    check("clock_nanosleep(CLOCK_THREAD_CPUTIME_ID)", slept == -1 && (errno == EOPNOTSUPP || errno == EINVAL));
    struct rusage ru;
    syscall(SYS_getrusage, RUSAGE_THREAD, &ru);
    long ru_ns = (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000L
                 + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000L;
    check("getrusage(RUSAGE_THREAD)", labs(ru_ns - ns(implicit)) < 5000000);
    // Nice value and scheduling policy of this thread (fields 19 and 41 of its stat).
    syscall(SYS_setpriority, PRIO_PROCESS, 0, 7);
    check("setpriority(PRIO_PROCESS, 0)", stat_field(19) == 7);
    check("getpriority(PRIO_PROCESS, 0)", syscall(SYS_getpriority, PRIO_PROCESS, 0) == 20 - 7);
    struct sched_param none = {0};
    syscall(SYS_sched_setscheduler, 0, SCHED_BATCH, &none);
    check("sched_setscheduler(0)", stat_field(41) == SCHED_BATCH);
    check("sched_getscheduler(0)", syscall(SYS_sched_getscheduler, 0) == SCHED_BATCH);
    // glibc registered this thread's robust-list head, in its thread descriptor (stress-ng read
    // the delegate's, NULL, and died of SIGSEGV).
    void *head = NULL;
    size_t len = 0;
    syscall(SYS_get_robust_list, 0, &head, &len);
    long from_self = (char *)head - (char *)pthread_self();
    check("get_robust_list(0)", head != NULL && len == 24 && labs(from_self) < 4096);
    // A thread's personality is its own (setarch -R turned nothing off under delegation).
    syscall(SYS_personality, ADDR_NO_RANDOMIZE);
    check("personality", syscall(SYS_personality, 0xffffffff) == ADDR_NO_RANDOMIZE);
    return arg;
}

int main(void)
{
    pthread_t t;
    pthread_create(&t, NULL, worker, NULL);
    pthread_join(t, NULL);
    // The main thread was not changed by its sibling's calls.
    check("main thread untouched", stat_field(19) == 0 && stat_field(41) == SCHED_OTHER
                                   && syscall(SYS_personality, 0xffffffff) == 0);
    return failed;
}
