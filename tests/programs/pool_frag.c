// pool_frag [scattered]: requests within a 64 MiB budget that a buddy allocator may have no
// aligned block for; Linux maps them all, and so must the pool (or the kernel in its place).
// Without an argument: 20 MiB mapped, then 40 MiB (found by the session-9 review: the mmap then
// looped for ever under the pool's lock; after that fix it was refused with ENOMEM).
// scattered: twice, 60 MiB mapped and all of it unmapped but 128 KiB at offsets 0 and 32 MiB,
// which leaves a used page in every 32 MiB-aligned block of the pool's allocator (its space is
// twice the budget); then 32 MiB mapped, and one kept piece grown to 40 MiB with mremap: both
// must be mapped (outside the pool), read as zero, and the grown piece keep its bytes.
// Prints what it did; exits 0 when everything was mapped and checked, 1 when a request was
// refused (ENOMEM or other), 2 when memory was wrong.
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#define MIB (1UL << 20)
#define KEEP (128UL << 10)

static char *map(size_t len, const char *what)
{
    char *p = mmap(0, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    printf("%s %s\n", what, p == MAP_FAILED ? strerror(errno) : "mapped");
    fflush(stdout);
    return p;
}

// Whether the `len` bytes at `p` all read `byte`.
static int all(const char *p, size_t len, char byte)
{
    for (size_t i = 0; i < len; i += 512)
        if (p[i] != byte)
            return 0;
    return 1;
}

// Maps 60 MiB and unmaps all of it but KEEP bytes at offsets 0 and 32 MiB; the first kept
// piece is returned, filled with `fill`.
static char *scatter(char fill, const char *what)
{
    char *p = map(60 * MIB, what);
    if (p == MAP_FAILED)
        return p;
    munmap(p + KEEP, 32 * MIB - KEEP);
    munmap(p + 32 * MIB + KEEP, 28 * MIB - KEEP);
    memset(p, fill, KEEP);
    return p;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        char *a = map(20 * MIB, "a");
        char *b = map(40 * MIB, "b");
        if (a == MAP_FAILED || b == MAP_FAILED)
            return 1;
        memset(b, 7, 40 * MIB);
        return all(a, 20 * MIB, 0) && all(b, 40 * MIB, 7) ? 0 : 2;
    }
    char *first = scatter(1, "first");
    char *second = scatter(2, "second");
    if (first == MAP_FAILED || second == MAP_FAILED)
        return 1;
    char *c = map(32 * MIB, "c");
    if (c == MAP_FAILED)
        return 1;
    if (!all(c, 32 * MIB, 0))
        return 2;
    memset(c, 3, 32 * MIB);
    char *grown = mremap(first, KEEP, 40 * MIB, MREMAP_MAYMOVE);
    printf("grown %s\n", grown == MAP_FAILED ? strerror(errno) : "mapped");
    if (grown == MAP_FAILED)
        return 1;
    if (!all(grown, KEEP, 1) || !all(grown + KEEP, 40 * MIB - KEEP, 0) || !all(second, KEEP, 2) || !all(c, 32 * MIB, 3))
        return 2;
    memset(grown, 4, 40 * MIB);
    munmap(c, 32 * MIB);
    munmap(grown, 40 * MIB);
    printf("scattered ok\n");
    return 0;
}
