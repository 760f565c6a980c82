/* memtouch: the memory service's benchmark workload (XOS Fig. 3 and Table III subsets).
 * memtouch mmap|sparse|malloc|rw SIZE_MIB ITERATIONS
 *   mmap:   mmap anonymous memory, write one byte in every 4 KiB page, munmap;
 *   sparse: the same, one byte in every sixteenth page (64 KiB apart);
 *   malloc: the same through malloc/free (whatever allocator is linked or preloaded);
 *   rw:     one block touched once, then timed passes that read (sum) and write (memset) it.
 * Prints one JSON line: the median and minimum time of one iteration (ns), and for rw the
 * read and write costs in ns per 4 KiB page. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "workload.h"

static void touch(volatile char *p, size_t n, size_t stride) {
    for (size_t i = 0; i < n; i += stride) p[i] = 1;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: memtouch mmap|sparse|malloc|rw SIZE_MIB ITERATIONS\n");
        return 2;
    }
    const char *mode = argv[1];
    size_t n = (size_t)atol(argv[2]) << 20;
    int iters = atoi(argv[3]);
    if (n == 0 || iters < 1 || iters > 100000) {
        fprintf(stderr, "memtouch: bad size or iteration count\n");
        return 2;
    }
    uint64_t *t = calloc((size_t)iters, sizeof *t), *w = calloc((size_t)iters, sizeof *w);
    volatile uint64_t sink = 0;
    char *keep = NULL;
    if (strcmp(mode, "rw") == 0) {
        keep = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (keep == MAP_FAILED) { perror("memtouch: mmap"); return 1; }
        memset(keep, 1, n);
    }
    for (int i = 0; i < iters; i++) {
        uint64_t t0 = now_ns();
        if (strcmp(mode, "mmap") == 0 || strcmp(mode, "sparse") == 0) {
            char *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (p == MAP_FAILED) { perror("memtouch: mmap"); return 1; }
            touch(p, n, strcmp(mode, "mmap") == 0 ? 4096 : 65536);
            munmap(p, n);
        } else if (strcmp(mode, "malloc") == 0) {
            char *p = malloc(n);
            if (!p) { fprintf(stderr, "memtouch: malloc failed\n"); return 1; }
            touch(p, n, 4096);
            free(p);
        } else if (strcmp(mode, "rw") == 0) {
            const uint64_t *q = (const uint64_t *)keep;
            uint64_t s = 0;
            for (size_t k = 0; k < n / 8; k++) s += q[k];
            sink += s;
            uint64_t t1 = now_ns();
            memset(keep, i & 0xff, n);
            w[i] = now_ns() - t1;
            t[i] = t1 - t0;
            continue;
        } else {
            fprintf(stderr, "memtouch: unknown mode '%s'\n", mode);
            return 2;
        }
        t[i] = now_ns() - t0;
    }
    qsort(t, (size_t)iters, sizeof *t, cmp_u64);
    qsort(w, (size_t)iters, sizeof *w, cmp_u64);
    double pages = (double)(n / 4096);
    printf("{\"mode\": \"%s\", \"mib\": %zu, \"iterations\": %d, \"median_ns\": %llu, \"min_ns\": %llu",
           mode, n >> 20, iters, (unsigned long long)t[iters / 2], (unsigned long long)t[0]);
    if (keep)
        printf(", \"read_ns_per_page\": %.2f, \"write_ns_per_page\": %.2f", t[iters / 2] / pages, w[iters / 2] / pages);
    printf("}\n");
    return (int)(sink & 0);
}
