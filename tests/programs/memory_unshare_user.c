/* Frees 64 MiB (under --memory pool the scrubber starts; under pool-demand the fault handler runs
 * from the start), then unshare(CLONE_NEWUSER), which the kernel allows only in a single-threaded
 * process: the runtime's threads must step aside as natively there are none. Then uses memory
 * again. Prints the unshare's result. */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

static unsigned long churn(void) {
    unsigned long nonzero = 0;
    for (int round = 0; round < 3; round++) {
        unsigned char *p = mmap(NULL, 64UL << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            return ~0UL;
        for (unsigned long i = 0; i < (64UL << 20); i += 4096)
            nonzero += p[i]++ != 0;
        munmap(p, 64UL << 20);
    }
    return nonzero;
}

int main(void) {
    unsigned long before = churn();
    int r = unshare(CLONE_NEWUSER);
    printf("unshare(CLONE_NEWUSER): %s\n", r == 0 ? "ok" : strerror(errno));
    unsigned long after = churn();
    printf("fresh memory non-zero pages: %lu, %lu\n", before, after);
    return r != 0 || before || after;
}
