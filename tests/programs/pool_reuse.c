// pool_reuse THREADS MIB ROUNDS: each thread maps MIB MiB, checks that every byte reads zero,
// fills it all with a byte of its own, unmaps it, ROUNDS times. In a pool of a few blocks the
// pages come back through the scrubber, or through a program thread that zeroed them itself
// rather than wait for it (memsvc::scrub::help): a page handed out again unzeroed is caught.
// Prints "pool_reuse ok"; exits 1 at the first byte that is not zero, 2 when a map fails.
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static size_t len;
static int rounds;

static void *loop(void *arg)
{
    int fill = 1 + (int)(intptr_t)arg;
    for (int r = 0; r < rounds; r++) {
        uint64_t *p = mmap(0, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            return (void *)2;
        for (size_t i = 0; i < len / 8; i++)
            if (p[i] != 0) {
                fprintf(stderr, "round %d: byte %zu reads %#llx\n", r, i * 8, (unsigned long long)p[i]);
                return (void *)1;
            }
        memset(p, fill + r, len);
        munmap(p, len);
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 4)
        return 2;
    int threads = atoi(argv[1]);
    len = (size_t)atol(argv[2]) << 20;
    rounds = atoi(argv[3]);
    pthread_t t[16];
    for (int i = 0; i < threads && i < 16; i++)
        pthread_create(&t[i], 0, loop, (void *)(intptr_t)i);
    intptr_t worst = 0;
    for (int i = 0; i < threads && i < 16; i++) {
        void *r;
        pthread_join(t[i], &r);
        if ((intptr_t)r > worst)
            worst = (intptr_t)r;
    }
    if (worst == 0)
        printf("pool_reuse ok\n");
    return (int)worst;
}
