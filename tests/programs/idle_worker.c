// idle_worker: one thread computes (10^8 increments, ≈ 0.1 s of CPU) and ends, another sleeps in futex until the
// process exits (a pool's idle worker: its last call never returns, so no call of its table
// covers its life). Used to check the profile's per-thread CPU time (`cpu_ns`).
#include <pthread.h>
#include <stdio.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t never = PTHREAD_COND_INITIALIZER;

// A fixed amount of work, no calls: its CPU time does not depend on what else runs.
static void *busy(void *arg)
{
    volatile unsigned long x = 0;
    for (unsigned long i = 0; i < 100000000UL; i++)
        x++;
    return arg;
}

static void *idle(void *arg)
{
    pthread_mutex_lock(&lock);
    for (;;)
        pthread_cond_wait(&never, &lock);
    return arg;
}

int main(void)
{
    pthread_t a, b;
    pthread_create(&b, NULL, idle, NULL);
    pthread_create(&a, NULL, busy, NULL);
    pthread_join(a, NULL);
    printf("done\n");
    return 0;   // exit_group with the idle thread still in futex
}
