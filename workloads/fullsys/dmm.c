/* dmm: the full-system guests' distributed workload, an N×N double matrix multiply over TCP in the
 * message-passing style of paper 001: node 0 holds A and B, sends each other node its block of
 * A's rows and all of B, multiplies its own block, gathers the blocks of C. Each node marks its
 * part (from the first byte of work to its last block sent or gathered) as the region of interest
 * for the osact plugin. Statically linked. Usage: dmm N RANK NODES NODE0_ADDRESS. Prints one
 * result line with the region's start and end on the guest's monotonic clock (virtual time under
 * -icount; one time axis for all nodes with fullsys run --common-clock); node 0's checksum is the
 * whole product's. */
#include "blockmul.h"
#define WORKLOAD "dmm"
#include "nodes.h"

enum { PORT = 7016 };

int main(int argc, char **argv)
{
    int n = argc == 5 ? atoi(argv[1]) : 0, rank = argc == 5 ? atoi(argv[2]) : -1;
    int nodes = argc == 5 ? atoi(argv[3]) : 0;
    if (n < 1 || nodes < 1 || nodes > MAX_NODES || rank < 0 || rank >= nodes) {
        fprintf(stderr, "usage: dmm N RANK NODES NODE0_ADDRESS (1 <= NODES <= %d, 0 <= RANK < NODES)\n", MAX_NODES);
        return 2;
    }
    size_t cells = (size_t)n * n, row = (size_t)n * sizeof(double);
    double *a = malloc(cells * sizeof *a), *b = malloc(cells * sizeof *b), *c = calloc(cells, sizeof *c);
    if (a == NULL || b == NULL || c == NULL) {
        fprintf(stderr, "dmm: out of memory for N=%d\n", n);
        return 1;
    }
    int lo = first_row(n, rank, nodes), hi = first_row(n, rank + 1, nodes);
    if (rank == 0) {
        int peer[MAX_NODES];
        memset(peer, -1, sizeof peer);
        fill_inputs(a, b, cells);
        accept_nodes(PORT, nodes, peer);
        long long begin = monotonic_ns();
        ROI_BEGIN();
        for (int r = 1; r < nodes; r++) {
            int r_lo = first_row(n, r, nodes), r_hi = first_row(n, r + 1, nodes);
            send_all(peer[r], a + (size_t)r_lo * n, (size_t)(r_hi - r_lo) * row);
            send_all(peer[r], b, cells * sizeof *b);
        }
        multiply_rows(a, b, c, n, lo, hi);
        for (int r = 1; r < nodes; r++) {
            int r_lo = first_row(n, r, nodes), r_hi = first_row(n, r + 1, nodes);
            recv_all(peer[r], c + (size_t)r_lo * n, (size_t)(r_hi - r_lo) * row);
        }
        ROI_END();
        long long end = monotonic_ns();
        printf("coreplane-dmm n=%d rank=0 nodes=%d rows=%d roi_ns=%lld-%lld checksum=%.1f\n", n, nodes, hi - lo,
               begin, end, sum(c, cells));
    } else {
        int fd = connect_to_node0(argv[4], PORT, rank);
        double *block = a + (size_t)lo * n;
        /* The first row's first byte opens the region: the wait for node 0 to boot is not work. */
        recv_all(fd, block, sizeof *block);
        long long begin = monotonic_ns();
        ROI_BEGIN();
        recv_all(fd, block + 1, (size_t)(hi - lo) * row - sizeof *block);
        recv_all(fd, b, cells * sizeof *b);
        multiply_rows(a, b, c, n, lo, hi);
        send_all(fd, c + (size_t)lo * n, (size_t)(hi - lo) * row);
        ROI_END();
        long long end = monotonic_ns();
        printf("coreplane-dmm n=%d rank=%d nodes=%d rows=%d roi_ns=%lld-%lld checksum=%.1f\n", n, rank, nodes,
               hi - lo, begin, end, sum(c + (size_t)lo * n, (size_t)(hi - lo) * n));
    }
    return 0;
}
