// clock_loop: the cost of a vDSO call — N clock_gettime(CLOCK_MONOTONIC) calls through glibc,
// timed as a whole; prints one JSON line {"calls", "ns_per_call"}. Natively the vDSO answers
// without entering the kernel; under `coreplane run --vdso intercept` each call goes through
// the runtime (profiled, and delegated when the policy names clock_gettime).
//
//   clock_loop [-n CALLS]
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    long calls = 1000000;
    int opt;
    while ((opt = getopt(argc, argv, "n:h")) != -1) {
        if (opt != 'n') {
            fprintf(stderr, "usage: clock_loop [-n CALLS]\n");
            return opt == 'h' ? 0 : 2;
        }
        calls = strtol(optarg, NULL, 10);
    }
    if (calls < 1) {
        fprintf(stderr, "clock_loop: -n must be >= 1\n");
        return 2;
    }
    struct timespec t0, t, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long i = 0; i < calls; i++)
        clock_gettime(CLOCK_MONOTONIC, &t);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ns = (t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec);
    printf("{\"calls\": %ld, \"ns_per_call\": %.2f}\n", calls, ns / calls);
    return 0;
}
