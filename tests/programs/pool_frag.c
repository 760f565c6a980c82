// pool_frag: 20 MiB mapped, then 40 MiB, in a 64 MiB pool: within the budget, but the pool's
// buddy allocator may have no block left for the second (found by the session-9 review: the
// mmap then looped for ever under the pool's lock, asking to grow a budget it did not pass).
// Prints each address (MAP_FAILED as -1); exits 0 when both were mapped, 1 when the second was
// refused with ENOMEM, 2 otherwise.
#include <errno.h>
#include <stdio.h>
#include <sys/mman.h>

int main(void)
{
    size_t mib = 1 << 20;
    char *a = mmap(0, 20 * mib, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    printf("a %s\n", a == MAP_FAILED ? "-1" : "mapped");
    fflush(stdout);
    char *b = mmap(0, 40 * mib, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    printf("b %s\n", b == MAP_FAILED ? "-1" : "mapped");
    if (a == MAP_FAILED)
        return 2;
    return b != MAP_FAILED ? 0 : errno == ENOMEM ? 1 : 2;
}
