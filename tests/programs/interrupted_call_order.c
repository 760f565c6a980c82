/* A timer's SIGALRM interrupts a blocking call, over and over; what the call returns and what the
   handler leaves behind must be the kernel's. The kernel interrupts the call first, then runs the
   handler: a handler without SA_RESTART that writes a byte into the pipe being read leaves the
   byte there (read fails with EINTR); with SA_RESTART the read restarts after the handler and
   returns that byte; poll, which SA_RESTART never restarts, fails with EINTR even so; nanosleep's
   remaining time is counted up to the interruption, not up to the handler's end. And the signal
   mask the handler leaves in its context's uc_sigmask is the thread's once it returns (as
   rt_sigreturn restores it): SIGUSR2 added there is blocked after the call, and unblocked when
   removed from there (blocked before). Each case is made from one site N times: its first calls
   trap under coreplane, the later ones run rewritten. A round whose signal came before the call
   began (the thread was preempted for the timer's 3 ms between arming it and the call, natively
   too) is made again, not counted.
   Usage: interrupted_call_order read|read_restart|poll_restart|nanosleep|mask_read|mask_ppoll|unmask_read N.
   Prints one line of counts. */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

static int fds[2];
static volatile int busy_ms, mask_usr2, in_call, early;
static struct timespec handler_start;

static void handler(int sig, siginfo_t *si, void *ucv) {
    (void)sig, (void)si;
    ucontext_t *uc = ucv;
    int saved = errno;
    clock_gettime(CLOCK_MONOTONIC, &handler_start);
    early = !in_call;
    if (busy_ms) {
        struct timespec now;
        do clock_gettime(CLOCK_MONOTONIC, &now);
        while ((now.tv_sec - handler_start.tv_sec) * 1000 + (now.tv_nsec - handler_start.tv_nsec) / 1000000 < busy_ms);
    }
    if (mask_usr2 > 0)
        sigaddset(&uc->uc_sigmask, SIGUSR2);
    if (mask_usr2 < 0)
        sigdelset(&uc->uc_sigmask, SIGUSR2);
    char b = 'x';
    if (write(fds[1], &b, 1) != 1)
        _exit(3);
    errno = saved;
}

static void on_alarm(int flags) {
    struct sigaction sa = {.sa_sigaction = handler, .sa_flags = SA_SIGINFO | flags};
    sigaction(SIGALRM, &sa, NULL);
}

/* SIGALRM in `us` microseconds, once. */
static void arm(long us) {
    struct itimerval it = {{0, 0}, {0, us}};
    setitimer(ITIMER_REAL, &it, NULL);
}

static double ms_between(struct timespec a, struct timespec b) {
    return (b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) / 1e6;
}

/* The byte a handler wrote, if the call left it in the pipe: taken out for the next round. */
static void drain(void) {
    char b;
    struct pollfd p = {fds[0], POLLIN, 0};
    while (poll(&p, 1, 0) == 1 && read(fds[0], &b, 1) == 1) {}
}

static int blocked_usr2(void) {
    sigset_t now;
    sigprocmask(SIG_SETMASK, NULL, &now);
    return sigismember(&now, SIGUSR2);
}

int main(int argc, char **argv) {
    if (argc < 3 || pipe(fds) < 0)
        return 2;
    const char *what = argv[1];
    int n = atoi(argv[2]), eintr = 0, byte = 0, other = 0, blocked = 0;
    sigset_t usr2;
    sigemptyset(&usr2);
    sigaddset(&usr2, SIGUSR2);
    on_alarm(strstr(what, "restart") ? SA_RESTART : 0);
    mask_usr2 = !strncmp(what, "mask_", 5) ? 1 : !strncmp(what, "unmask_", 7) ? -1 : 0;
    busy_ms = !strcmp(what, "nanosleep") ? 40 : 0;
    int remaining_ok = 0;
    int i = 0, tries = 0;
    for (; i < n && tries < 2 * n; tries++) {
        sigprocmask(mask_usr2 < 0 ? SIG_BLOCK : SIG_UNBLOCK, &usr2, NULL);
        char b;
        long r;
        struct pollfd p = {fds[0], POLLIN, 0};
        struct timespec start, left = {0, 0}, req = {1, 0};
        arm(3000);
        clock_gettime(CLOCK_MONOTONIC, &start);
        in_call = 1;
        if (!strcmp(what, "read") || !strcmp(what, "read_restart") || !strcmp(what, "mask_read")
            || !strcmp(what, "unmask_read"))
            r = read(fds[0], &b, 1);
        else if (!strcmp(what, "poll_restart"))
            r = poll(&p, 1, -1);
        else if (!strcmp(what, "mask_ppoll"))
            r = ppoll(&p, 1, NULL, NULL);
        else if (!strcmp(what, "nanosleep"))
            r = nanosleep(&req, &left);
        else
            return 2;
        in_call = 0;
        if (early) {
            early = 0;
            drain();
            continue;
        }
        i++;
        if (r < 0 && errno == EINTR)
            eintr++;
        else if (r == 1)
            byte++;
        else
            other++;
        blocked += blocked_usr2();
        /* The time left is 1 s less the time slept up to the interruption, which came before the
           handler's start (and its 40 ms of work): a margin of 20 ms. */
        double slept = ms_between(start, handler_start);
        remaining_ok += r < 0 && left.tv_sec * 1e3 + left.tv_nsec / 1e6 + slept > 1000 - 20;
        drain();
    }
    fprintf(stderr, "rounds made again (signal before the call): %d\n", tries - i);
    if (!strcmp(what, "nanosleep"))
        printf("%s: eintr=%d other=%d remaining-as-at-interruption=%d\n", what, eintr, other, remaining_ok);
    else if (mask_usr2)
        printf("%s: eintr=%d byte=%d other=%d usr2-blocked-after=%d\n", what, eintr, byte, other, blocked);
    else
        printf("%s: eintr=%d byte=%d other=%d\n", what, eintr, byte, other);
    return 0;
}
