/* matmul: the full-system guest's single-node workload, an N×N double matrix multiply whose
 * multiply is the region of interest it marks for the osact plugin (plugins/osact.c); statically
 * linked so it runs in any Debian image. Usage: matmul N [THREADS]. Prints one result line. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "blockmul.h"

typedef struct {
    const double *a, *b;
    double *c;
    int n, first_row, last_row;
} Rows;

static void *multiply_thread(void *arg)
{
    const Rows *r = arg;
    multiply_rows(r->a, r->b, r->c, r->n, r->first_row, r->last_row);
    return NULL;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 0;
    int threads = argc > 2 ? atoi(argv[2]) : 1;
    if (n < 1 || threads < 1 || threads > 64) {
        fprintf(stderr, "usage: matmul N [THREADS 1-64]\n");
        return 2;
    }
    size_t cells = (size_t)n * n;
    double *a = malloc(cells * sizeof *a), *b = malloc(cells * sizeof *b), *c = calloc(cells, sizeof *c);
    if (a == NULL || b == NULL || c == NULL) {
        fprintf(stderr, "matmul: out of memory for N=%d\n", n);
        return 1;
    }
    fill_inputs(a, b, cells);
    pthread_t tid[64];
    Rows rows[64];
    ROI_BEGIN();
    for (int t = 0; t < threads; t++) {
        rows[t] = (Rows){a, b, c, n, n * t / threads, n * (t + 1) / threads};
        pthread_create(&tid[t], NULL, multiply_thread, &rows[t]);
    }
    for (int t = 0; t < threads; t++) {
        pthread_join(tid[t], NULL);
    }
    ROI_END();
    double checksum = 0;
    for (size_t i = 0; i < cells; i++) {
        checksum += c[i];
    }
    printf("coreplane-matmul n=%d threads=%d checksum=%.1f\n", n, threads, checksum);
    return 0;
}
