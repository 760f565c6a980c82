/* cachebuster: the interferer of ROS §5.2.2: allocates twice the last-level cache, divides it
 * among its threads and walks it with a 64-byte (cache-line) stride until stopped.
 * Usage: cachebuster [-t threads] [-m MiB (default 2 x LLC)] [-d seconds] [-c cpu,list] */
#include "workload.h"
#include <stdint.h>
#include <unistd.h>

static int threads = 1, ncpus_pin, pin_cpus[1024];
static size_t slice_bytes;
static unsigned char *arena;
static uint64_t *passes;

/* Size in bytes of the highest-level cache CPU 0 reports in sysfs (0 if none). */
static size_t llc_bytes(void) {
    size_t best = 0;
    int best_level = 0;
    for (int i = 0; i < 16; i++) {
        char path[96], buf[32];
        int level;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
        FILE *f = fopen(path, "r");
        if (!f) break;
        int ok = fscanf(f, "%d", &level) == 1;
        fclose(f);
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        if (!ok || !(f = fopen(path, "r"))) continue;
        if (fscanf(f, "%31s", buf) == 1 && level >= best_level) {
            size_t v = strtoull(buf, NULL, 10);
            char unit = buf[strspn(buf, "0123456789")];
            best = v * (unit == 'K' ? 1024 : unit == 'M' ? 1024 * 1024 : 1);
            best_level = level;
        }
        fclose(f);
    }
    return best;
}

static void *walker(void *arg) {
    long id = (long)arg;
    if (ncpus_pin) pin_self("cachebuster", pin_cpus[id % ncpus_pin]);
    volatile unsigned char *p = arena + id * slice_bytes;
    while (!workload_stop) {
        for (size_t i = 0; i < slice_bytes; i += 64) p[i]++;
        passes[id]++;
    }
    return NULL;
}

int main(int argc, char **argv) {
    int opt;
    double seconds = 0, mib = 0;
    while ((opt = getopt(argc, argv, "t:m:d:c:")) != -1) {
        switch (opt) {
        case 't': threads = atoi(optarg); break;
        case 'm': mib = atof(optarg); break;
        case 'd': seconds = atof(optarg); break;
        case 'c': ncpus_pin = parse_cpu_list(optarg, pin_cpus, 1024); break;
        default:
            fprintf(stderr, "usage: cachebuster [-t threads] [-m MiB] [-d seconds] [-c cpus]\n");
            return 2;
        }
    }
    size_t total = mib > 0 ? (size_t)(mib * 1024 * 1024) : 2 * llc_bytes();
    if (threads < 1 || total < 64 * (size_t)threads) {
        fprintf(stderr, "cachebuster: need >= 1 thread and a known LLC size (or -m)\n");
        return 2;
    }
    slice_bytes = total / threads / 64 * 64;
    arena = aligned_alloc(4096, (slice_bytes * threads + 4095) / 4096 * 4096);
    passes = calloc(threads, sizeof *passes);
    memset(arena, 1, slice_bytes * threads);
    stop_on_signal_or_after(seconds);
    pthread_t *tids = calloc(threads, sizeof *tids);
    double t0 = now_ns();
    for (long i = 0; i < threads; i++) pthread_create(&tids[i], NULL, walker, (void *)i);
    for (int i = 0; i < threads; i++) pthread_join(tids[i], NULL);
    double elapsed = (now_ns() - t0) / 1e9;
    uint64_t all = 0;
    for (int i = 0; i < threads; i++) all += passes[i];
    printf("{\"workload\": \"cachebuster\", \"bytes\": %zu, \"threads\": %d, \"passes\": %llu, "
           "\"seconds\": %.3f, \"lines_per_s\": %.0f}\n",
           slice_bytes * threads, threads, (unsigned long long)all, elapsed,
           all * (double)(slice_bytes / 64) / elapsed);
    return 0;
}
