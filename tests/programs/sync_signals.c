/* Signals a call raises on the thread that made it: SIGPIPE for a write to a pipe without
 * readers, SIGXFSZ for a write past RLIMIT_FSIZE. Prints what a handler saw (signal, si_code,
 * whether it came from this process, on which thread) and what the call returned. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

static volatile sig_atomic_t seen_sig, seen_code, seen_self, seen_thread;
static pthread_t writer;

static void on_signal(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    seen_sig = sig;
    seen_code = si->si_code;
    seen_self = si->si_pid == getpid();
    seen_thread = pthread_equal(pthread_self(), writer);
}

static void report(const char *what, ssize_t r)
{
    printf("%s: returned %zd errno=%s signal=%s code=%d from_self=%d same_thread=%d\n", what, r,
           r < 0 ? strerrorname_np(errno) : "-", seen_sig ? sigabbrev_np(seen_sig) : "none",
           (int)seen_code, (int)seen_self, (int)seen_thread);
    seen_sig = seen_code = seen_self = seen_thread = 0;
}

static void *work(void *arg)
{
    int p[2];
    (void)arg;
    pipe(p);
    close(p[0]);
    report("pipe write", write(p[1], "x", 1));

    /* The limit holds for stdout too: lifted again before the report is printed. */
    struct rlimit one = {1, RLIM_INFINITY}, all = {RLIM_INFINITY, RLIM_INFINITY};
    FILE *f = tmpfile();
    setrlimit(RLIMIT_FSIZE, &one);
    ssize_t r = write(fileno(f), "xy", 2) == 1 ? write(fileno(f), "z", 1) : -2;
    int saved = errno;
    setrlimit(RLIMIT_FSIZE, &all);
    errno = saved;
    report("file write past RLIMIT_FSIZE", r);
    return NULL;
}

int main(void)
{
    struct sigaction sa = {.sa_sigaction = on_signal, .sa_flags = SA_SIGINFO};
    sigaction(SIGPIPE, &sa, NULL);
    sigaction(SIGXFSZ, &sa, NULL);
    /* A second thread makes the calls: the signal must reach it, not the main thread. */
    pthread_create(&writer, NULL, work, NULL);
    pthread_join(writer, NULL);
    return 0;
}
