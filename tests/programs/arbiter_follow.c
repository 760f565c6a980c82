/* arbiter_follow.c: an unmodified program for tests/test_arbiter_follow.py, run delegating
 * getppid under `coreplane run --mcp`. A worker thread makes getppid calls without end (each one
 * a delegated round trip), counting them and any wrong answer, and notes the CPU it last ran on.
 * For each line read on stdin the main thread prints one JSON line: the calls so far, the wrong
 * ones, the worker's CPU and its allowed CPUs (the kernel's list, as /proc shows it). */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

static atomic_long calls, wrong;
static atomic_int worker_tid, worker_cpu = -1;

static void *worker(void *arg) {
    long parent = (long)arg;
    atomic_store(&worker_tid, (int)syscall(SYS_gettid));
    for (;;) {
        if (syscall(SYS_getppid) != parent) atomic_fetch_add(&wrong, 1);
        atomic_fetch_add(&calls, 1);
        atomic_store(&worker_cpu, sched_getcpu());
    }
    return NULL;
}

int main(void) {
    pthread_t t;
    if (pthread_create(&t, NULL, worker, (void *)(long)getppid()) != 0) return 1;
    while (atomic_load(&worker_tid) == 0) sched_yield();  /* its tid names its status file */
    char line[64];
    while (fgets(line, sizeof line, stdin)) {
        char path[64], allowed[256] = "";
        snprintf(path, sizeof path, "/proc/self/task/%d/status", atomic_load(&worker_tid));
        FILE *f = fopen(path, "r");
        char text[256];
        while (f && fgets(text, sizeof text, f))
            if (sscanf(text, "Cpus_allowed_list: %255s", allowed) == 1) break;
        if (f) fclose(f);
        printf("{\"calls\": %ld, \"wrong\": %ld, \"cpu\": %d, \"allowed\": \"%s\"}\n", atomic_load(&calls),
               atomic_load(&wrong), atomic_load(&worker_cpu), allowed);
        fflush(stdout);
    }
    return 0;
}
