/* mpimm: the OpenMPI baseline of the full-system study (paper 001's conventional stack): dmm's
 * distributed multiply (workloads/fullsys/dmm.c: rank 0 holds A and B, sends every other rank its
 * block of A's rows and all of B, multiplies its own block, gathers C's blocks) through MPI
 * point-to-point calls of Debian's Open MPI instead of dmm's own TCP. The region of interest is
 * marked as dmm marks it: on rank 0 from its first send to its last block gathered, on the others
 * from the arrival of their first message (MPI_Probe) to their block sent. Linked against the
 * guest image's libmpi (SUITE+openmpi), one rank per node, started by mpirun. Usage: mpimm N FILE:
 * writes dmm's result line (coreplane-mpimm ...) to FILE, which each node's script prints on its
 * own console (a rank's standard output goes to mpirun on node 0). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "blockmul.h"

enum { TAG_A = 1, TAG_B = 2, TAG_C = 3 };

static void require(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "mpimm: %s\n", what);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, nodes;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nodes);
    int n = argc == 3 ? atoi(argv[1]) : 0;
    require(n >= nodes, "usage: mpimm N FILE (N at least the number of ranks)");
    size_t cells = (size_t)n * n;
    double *a = malloc(cells * sizeof *a), *b = malloc(cells * sizeof *b), *c = calloc(cells, sizeof *c);
    require(a != NULL && b != NULL && c != NULL, "out of memory");
    int lo = first_row(n, rank, nodes), hi = first_row(n, rank + 1, nodes);
    long long begin, end;
    double checksum;
    if (rank == 0) {
        fill_inputs(a, b, cells);
    }
    MPI_Barrier(MPI_COMM_WORLD);  /* every rank started: the start-up is not the region */
    if (rank == 0) {
        begin = monotonic_ns();
        ROI_BEGIN();
        for (int r = 1; r < nodes; r++) {
            int r_lo = first_row(n, r, nodes), r_hi = first_row(n, r + 1, nodes);
            MPI_Send(a + (size_t)r_lo * n, (r_hi - r_lo) * n, MPI_DOUBLE, r, TAG_A, MPI_COMM_WORLD);
            MPI_Send(b, (int)cells, MPI_DOUBLE, r, TAG_B, MPI_COMM_WORLD);
        }
        multiply_rows(a, b, c, n, lo, hi);
        for (int r = 1; r < nodes; r++) {
            int r_lo = first_row(n, r, nodes), r_hi = first_row(n, r + 1, nodes);
            MPI_Recv(c + (size_t)r_lo * n, (r_hi - r_lo) * n, MPI_DOUBLE, r, TAG_C, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
        ROI_END();
        end = monotonic_ns();
        checksum = sum(c, cells);
    } else {
        MPI_Probe(0, TAG_A, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        begin = monotonic_ns();
        ROI_BEGIN();
        MPI_Recv(a + (size_t)lo * n, (hi - lo) * n, MPI_DOUBLE, 0, TAG_A, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Recv(b, (int)cells, MPI_DOUBLE, 0, TAG_B, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        multiply_rows(a, b, c, n, lo, hi);
        MPI_Send(c + (size_t)lo * n, (hi - lo) * n, MPI_DOUBLE, 0, TAG_C, MPI_COMM_WORLD);
        ROI_END();
        end = monotonic_ns();
        checksum = sum(c + (size_t)lo * n, (size_t)(hi - lo) * n);
    }
    FILE *out = fopen(argv[2], "w");
    require(out != NULL, "cannot write the result file");
    fprintf(out, "coreplane-mpimm n=%d rank=%d nodes=%d rows=%d roi_ns=%lld-%lld checksum=%.1f\n", n, rank, nodes,
            hi - lo, begin, end, checksum);
    fclose(out);
    MPI_Finalize();
    return 0;
}
