/* blockmul.h: what the full-system workloads share: the region-of-interest markers the osact
 * plugin recognises (plugins/osact.c), the matrices' contents and the multiply of a block of rows. */
#ifndef COREPLANE_BLOCKMUL_H
#define COREPLANE_BLOCKMUL_H

#include <stddef.h>

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

#endif
