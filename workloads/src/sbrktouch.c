/* sbrktouch: the program break's benchmark workload (XOS Fig. 3's sbrk).
 * sbrktouch SIZE_KIB ITERATIONS
 *   each iteration grows the break by SIZE_KIB (sbrk), writes one byte in every 4 KiB page of
 *   the new memory, and lowers the break again;
 * prints one JSON line: the median and minimum time of one iteration (ns). */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "workload.h"

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: sbrktouch SIZE_KIB ITERATIONS\n");
        return 2;
    }
    size_t size = strtoul(argv[1], NULL, 10) * 1024;
    int iters = atoi(argv[2]);
    if (size == 0 || iters <= 0) {
        fprintf(stderr, "sbrktouch: bad size or iteration count\n");
        return 2;
    }
    uint64_t *t = malloc(sizeof *t * (size_t)iters);
    if (!t) return 1;
    for (int i = 0; i < iters; i++) {
        uint64_t t0 = now_ns();
        volatile char *p = sbrk((intptr_t)size);
        if (p == (void *)-1) {
            perror("sbrktouch: sbrk");
            return 1;
        }
        for (size_t k = 0; k < size; k += 4096) p[k] = 1;
        if (sbrk(-(intptr_t)size) == (void *)-1) {
            perror("sbrktouch: sbrk lower");
            return 1;
        }
        t[i] = now_ns() - t0;
    }
    qsort(t, (size_t)iters, sizeof *t, cmp_u64);
    printf("{\"kib\": %zu, \"iterations\": %d, \"median_ns\": %llu, \"min_ns\": %llu}\n", size / 1024, iters,
           (unsigned long long)t[iters / 2], (unsigned long long)t[0]);
    return 0;
}
