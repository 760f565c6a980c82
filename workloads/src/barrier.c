/* barrier: a bulk-synchronous benchmark like PARSEC fluidanimate: N threads each do a fixed
 * compute quantum, then wait at a barrier, for S steps. One JSON line on stdout.
 * With -m, the quantum is -n dependent loads chasing a random cycle through a private working
 * set of -m MiB per thread (cache-sensitive, like fluidanimate's grid); otherwise it is an
 * ALU chain calibrated to -q microseconds.
 * Usage: barrier [-t threads] [-q quantum_us] [-s steps] [-b pthread|spin] [-c cpu,list]
 *                [-m MiB -n loads_per_step] */
#include "workload.h"
#include <stdatomic.h>
#include <stdint.h>
#include <unistd.h>

static int threads = 2, steps = 1000, use_spin = 0, ncpus_pin = 0, pin_cpus[1024];
static double quantum_us = 1000;
static uint64_t work_iterations;
static pthread_barrier_t pbarrier;
static _Atomic unsigned spin_count, spin_sense;
static double *step_ns; /* written by thread 0 only */
static double mem_mib;
static uint64_t loads_per_step = 20000;

/* The compute quantum: a dependent multiply-add chain the compiler cannot shorten. */
static uint64_t __attribute__((noinline)) work(uint64_t n, uint64_t x) {
    for (uint64_t i = 0; i < n; i++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        __asm__ volatile("" : "+r"(x));
    }
    return x;
}

/* Sense-reversing spin barrier: no sleeping, so only the slowest thread sets the pace. */
static void spin_barrier(unsigned *local_sense) {
    *local_sense = !*local_sense;
    if (atomic_fetch_add(&spin_count, 1) == (unsigned)threads - 1) {
        atomic_store(&spin_count, 0);
        atomic_store(&spin_sense, *local_sense);
    } else {
        while (atomic_load(&spin_sense) != *local_sense) __builtin_ia32_pause();
    }
}

/* A random cyclic chain through `bytes` of memory, one pointer per 64-byte line. */
static void **make_chain(size_t bytes, uint64_t seed) {
    size_t lines = bytes / 64;
    void **mem = aligned_alloc(64, lines * 64);
    size_t *order = malloc(lines * sizeof *order);
    for (size_t i = 0; i < lines; i++) order[i] = i;
    for (size_t i = lines - 1; i > 0; i--) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        size_t j = (seed >> 33) % (i + 1), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    for (size_t i = 0; i < lines; i++) mem[order[i] * 8] = &mem[order[(i + 1) % lines] * 8];
    void **start = &mem[order[0] * 8];
    free(order);
    return start;
}

static void **chase(void **p, uint64_t loads) {
    for (uint64_t i = 0; i < loads; i++) p = (void **)*p;
    return p;
}

static void *worker(void *arg) {
    long id = (long)arg;
    unsigned sense = 0;
    uint64_t x = id;
    if (ncpus_pin) pin_self("barrier", pin_cpus[id % ncpus_pin]);
    void **cursor = mem_mib > 0 ? make_chain((size_t)(mem_mib * 1024 * 1024), id + 1) : NULL;
    if (cursor) cursor = chase(cursor, (size_t)(mem_mib * 1024 * 1024) / 64); /* warm: one lap */
    double last = now_ns();
    for (int s = 0; s < steps; s++) {
        if (cursor) cursor = chase(cursor, loads_per_step);
        else x = work(work_iterations, x);
        if (use_spin) spin_barrier(&sense);
        else pthread_barrier_wait(&pbarrier);
        if (id == 0) {
            double t = now_ns();
            step_ns[s] = t - last;
            last = t;
        }
    }
    return (void *)(uintptr_t)((x & 1) | ((uintptr_t)cursor & 1));
}

static int cmp_double(const void *a, const void *b) {
    double d = *(const double *)a - *(const double *)b;
    return (d > 0) - (d < 0);
}

static double pct(const double *sorted, int n, double q) {
    int rank = (int)(q * n + 0.999999);
    if (rank < 1) rank = 1;
    if (rank > n) rank = n;
    return sorted[rank - 1];
}

/* Iterations taking quantum_us, from the fastest of several probes (robust to noise). */
static uint64_t calibrate(void) {
    const uint64_t probe = 200000;
    double best = 1e30;
    for (int i = 0; i < 30; i++) {
        double t0 = now_ns();
        work(probe, i);
        double dt = now_ns() - t0;
        if (dt < best) best = dt;
    }
    return (uint64_t)(probe * quantum_us * 1000.0 / best);
}

int main(int argc, char **argv) {
    int opt;
    while ((opt = getopt(argc, argv, "t:q:s:b:c:m:n:")) != -1) {
        switch (opt) {
        case 't': threads = atoi(optarg); break;
        case 'q': quantum_us = atof(optarg); break;
        case 's': steps = atoi(optarg); break;
        case 'b':
            if (strcmp(optarg, "spin") && strcmp(optarg, "pthread")) {
                fprintf(stderr, "barrier: -b %s: expected pthread or spin\n", optarg);
                return 2;
            }
            use_spin = strcmp(optarg, "spin") == 0;
            break;
        case 'c': ncpus_pin = parse_cpu_list(optarg, pin_cpus, 1024); break;
        case 'm': mem_mib = atof(optarg); break;
        case 'n': loads_per_step = strtoull(optarg, NULL, 10); break;
        default:
            fprintf(stderr, "usage: barrier [-t threads] [-q quantum_us] [-s steps] [-b pthread|spin] [-c cpus] "
                            "[-m MiB -n loads]\n");
            return 2;
        }
    }
    if (threads < 1 || steps < 1 || quantum_us <= 0) {
        fprintf(stderr, "barrier: threads, steps and quantum must be positive\n");
        return 2;
    }
    work_iterations = mem_mib > 0 ? 0 : calibrate();
    step_ns = calloc(steps, sizeof *step_ns);
    pthread_barrier_init(&pbarrier, NULL, threads);
    pthread_t *tids = calloc(threads, sizeof *tids);
    double t0 = now_ns();
    for (long i = 0; i < threads; i++) pthread_create(&tids[i], NULL, worker, (void *)i);
    for (int i = 0; i < threads; i++) pthread_join(tids[i], NULL);
    double runtime = now_ns() - t0;
    qsort(step_ns, steps, sizeof *step_ns, cmp_double);
    double sum = 0;
    for (int s = 0; s < steps; s++) sum += step_ns[s];
    printf("{\"workload\": \"barrier\", \"threads\": %d, \"steps\": %d, \"quantum_us\": %g, "
           "\"barrier\": \"%s\", \"work_iterations\": %llu, \"working_set_mib\": %g, \"loads_per_step\": %llu, "
           "\"runtime_s\": %.6f, \"ideal_s\": %.6f, "
           "\"step_us\": {\"min\": %.3f, \"p50\": %.3f, \"p90\": %.3f, \"p99\": %.3f, \"max\": %.3f, \"mean\": %.3f}}\n",
           threads, steps, quantum_us, use_spin ? "spin" : "pthread", (unsigned long long)work_iterations,
           mem_mib, (unsigned long long)(mem_mib > 0 ? loads_per_step : 0), runtime / 1e9, steps * quantum_us / 1e6, step_ns[0] / 1e3, pct(step_ns, steps, .5) / 1e3,
           pct(step_ns, steps, .9) / 1e3, pct(step_ns, steps, .99) / 1e3, step_ns[steps - 1] / 1e3,
           sum / steps / 1e3);
    return 0;
}
