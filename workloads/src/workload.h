/* workload.h: helpers shared by the bundled workloads (clock, CPU lists, pinning, stop signals). */
#ifndef COREPLANE_WORKLOAD_H
#define COREPLANE_WORKLOAD_H
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static inline double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* Orders 64-bit times for qsort (the medians and minima the workloads print). */
static inline int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Expands "0-3,8" into cpus[]; returns how many (0 for an empty list). */
static inline int parse_cpu_list(const char *spec, int *cpus, int max) {
    int n = 0;
    char *copy = strdup(spec), *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int lo, hi;
        if (sscanf(tok, "%d-%d", &lo, &hi) != 2) hi = lo = atoi(tok);
        for (int c = lo; c <= hi && n < max; c++) cpus[n++] = c;
    }
    free(copy);
    return n;
}

/* Pins the calling thread to `cpu`, or exits with the kernel's reason. */
static inline void pin_self(const char *prog, int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    int err = pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    if (err) {
        fprintf(stderr, "%s: cannot pin to CPU %d: %s\n", prog, cpu, strerror(err));
        exit(2);
    }
}

/* Set by SIGINT/SIGTERM or when the duration runs out: background workloads poll it. */
static volatile sig_atomic_t workload_stop;

static inline void on_stop_signal(int sig) { (void)sig; workload_stop = 1; }

/* SIGINT/SIGTERM end the run cleanly; a positive `seconds` also ends it (via SIGALRM). */
static inline void stop_on_signal_or_after(double seconds) {
    signal(SIGINT, on_stop_signal);
    signal(SIGTERM, on_stop_signal);
    signal(SIGALRM, on_stop_signal);
    if (seconds > 0) {
        struct itimerspec spec = {0};
        timer_t timer;
        struct sigevent ev = {.sigev_notify = SIGEV_SIGNAL, .sigev_signo = SIGALRM};
        spec.it_value.tv_sec = (time_t)seconds;
        spec.it_value.tv_nsec = (long)((seconds - (time_t)seconds) * 1e9);
        timer_create(CLOCK_MONOTONIC, &ev, &timer);
        timer_settime(timer, 0, &spec, NULL);
    }
}
#endif
