/* memscale: scalability loops of the memory calls, after will-it-scale's idea (XOS Fig. 5).
 * memscale page_fault|mmap|brk THREADS SECONDS
 *   page_fault: mmap 128 MiB, write one byte in every 4 KiB page, munmap; one op per page;
 *   mmap:       mmap 128 MiB and munmap it untouched; one op per pair;
 *   brk:        grow the break by one page and shrink it back (raw brk calls, all threads
 *               toggling between the same two breaks, so none frees another's memory); one op
 *               per pair.
 * Each thread loops on its operation and counts; the main thread reads the counts every
 * SAMPLE_S seconds, drops the first sample (warm-up) and prints one JSON line with the ops per
 * second of each remaining sample and their median. */
#include "workload.h"
#include <stdatomic.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define BLOCK (128ul << 20)
#define PAGE 4096ul
#define SAMPLE_S 0.25
#define MAX_THREADS 64
#define MAX_SAMPLES 4096

/* One counter per thread, each on its own cache line: the loops share nothing but the kernel. */
struct counter {
    _Atomic uint64_t ops;
    char pad[64 - sizeof(uint64_t)];
};

static struct counter counters[MAX_THREADS] __attribute__((aligned(64)));
static atomic_int stop, go;
static uintptr_t initial_break;

static void fail(const char *what) {
    perror(what);
    exit(1);
}

static void page_fault_loop(struct counter *c) {
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        volatile char *p = mmap(NULL, BLOCK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) fail("memscale: mmap");
        for (size_t off = 0; off < BLOCK; off += PAGE) {
            p[off] = 1;
            atomic_fetch_add_explicit(&c->ops, 1, memory_order_relaxed);
        }
        if (munmap((void *)p, BLOCK)) fail("memscale: munmap");
    }
}

static void mmap_loop(struct counter *c) {
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        void *p = mmap(NULL, BLOCK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) fail("memscale: mmap");
        if (munmap(p, BLOCK)) fail("memscale: munmap");
        atomic_fetch_add_explicit(&c->ops, 1, memory_order_relaxed);
    }
}

static void brk_loop(struct counter *c) {
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        /* The raw call: glibc's sbrk keeps the break in a global that threads would race on. */
        if ((uintptr_t)syscall(SYS_brk, initial_break + PAGE) != initial_break + PAGE) fail("memscale: brk grow");
        syscall(SYS_brk, initial_break);
        atomic_fetch_add_explicit(&c->ops, 1, memory_order_relaxed);
    }
}

static void (*loop)(struct counter *);

static void *worker(void *arg) {
    while (!atomic_load(&go)) sched_yield();
    loop(arg);
    return NULL;
}

static uint64_t total(int threads) {
    uint64_t sum = 0;
    for (int i = 0; i < threads; i++) sum += atomic_load_explicit(&counters[i].ops, memory_order_relaxed);
    return sum;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: memscale page_fault|mmap|brk THREADS SECONDS\n");
        return 2;
    }
    const char *test = argv[1];
    int threads = atoi(argv[2]);
    double seconds = atof(argv[3]);
    if (!strcmp(test, "page_fault")) loop = page_fault_loop;
    else if (!strcmp(test, "mmap")) loop = mmap_loop;
    else if (!strcmp(test, "brk")) loop = brk_loop;
    else {
        fprintf(stderr, "memscale: unknown test '%s' (page_fault, mmap, brk)\n", test);
        return 2;
    }
    int samples = (int)(seconds / SAMPLE_S);
    if (threads < 1 || threads > MAX_THREADS || samples < 2 || samples > MAX_SAMPLES) {
        fprintf(stderr, "memscale: THREADS must be 1-%d and SECONDS %.2f-%.0f\n", MAX_THREADS, 2 * SAMPLE_S,
                MAX_SAMPLES * SAMPLE_S);
        return 2;
    }
    pthread_t tids[MAX_THREADS];
    for (int i = 0; i < threads; i++)
        if (pthread_create(&tids[i], NULL, worker, &counters[i])) fail("memscale: pthread_create");
    /* Taken once the threads exist (creating them may grow malloc's heap), before they start:
     * the loops never go below the break malloc last set, and nothing allocates until they end. */
    initial_break = (uintptr_t)syscall(SYS_brk, 0);
    atomic_store(&go, 1);
    static double rates[MAX_SAMPLES];
    uint64_t last = total(threads);
    double t_last = now_ns();
    struct timespec tick = {0, (long)(SAMPLE_S * 1e9)};
    for (int s = 0; s < samples; s++) {
        nanosleep(&tick, NULL);
        uint64_t ops = total(threads);
        double t = now_ns();
        rates[s] = (double)(ops - last) / ((t - t_last) / 1e9);
        last = ops;
        t_last = t;
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < threads; i++) pthread_join(tids[i], NULL);
    printf("{\"test\": \"%s\", \"threads\": %d, \"sample_s\": %.2f, \"ops_per_s\": [", test, threads, SAMPLE_S);
    for (int s = 1; s < samples; s++) printf("%s%.0f", s > 1 ? ", " : "", rates[s]);
    qsort(rates + 1, (size_t)(samples - 1), sizeof *rates, by_value);
    printf("], \"median_ops_per_s\": %.0f}\n", rates[1 + (samples - 1) / 2]);
    return 0;
}
