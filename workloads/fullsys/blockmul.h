/* blockmul.h: what the full-system workloads share: the region-of-interest markers the osact
 * plugin recognises (plugins/osact.c), the matrices' contents, the multiply of a block of rows,
 * the distributed multiplies' split of rows over nodes, their checksum and clock. */
#ifndef COREPLANE_BLOCKMUL_H
#define COREPLANE_BLOCKMUL_H

#include <stddef.h>
#include <time.h>

/* No-ops to the CPU, never emitted by a compiler. */
#define ROI_BEGIN() __asm__ volatile("xchg %%bx, %%bx" ::: "memory")
#define ROI_END() __asm__ volatile("xchg %%cx, %%cx" ::: "memory")

/* A and B of an N×N multiply, the same on every node and in every run (checksums compare). */
static inline void fill_inputs(double *a, double *b, size_t cells)
{
    for (size_t i = 0; i < cells; i++) {
        a[i] = (double)(i % 7) - 3.0;
        b[i] = (double)(i % 5) - 2.0;
    }
}

/* C[first_row..last_row) += A[first_row..last_row) × B, row-major N×N; `a` and `c` point at row 0. */
static inline void multiply_rows(const double *a, const double *b, double *c, int n, int first_row, int last_row)
{
    for (int i = first_row; i < last_row; i++) {
        for (int k = 0; k < n; k++) {
            double aik = a[(size_t)i * n + k];
            for (int j = 0; j < n; j++) {
                c[(size_t)i * n + j] += aik * b[(size_t)k * n + j];
            }
        }
    }
}

/* The first of node `rank`'s rows when N rows are split over `nodes` nodes (rank = nodes: N). */
static inline int first_row(int n, int rank, int nodes)
{
    return (int)((long)n * rank / nodes);
}

static inline double sum(const double *x, size_t cells)
{
    double s = 0;
    for (size_t i = 0; i < cells; i++) {
        s += x[i];
    }
    return s;
}

/* The guest's monotonic clock: virtual time under -icount, one axis for all nodes with a common clock. */
static inline long long monotonic_ns(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return now.tv_sec * 1000000000LL + now.tv_nsec;
}

#endif
