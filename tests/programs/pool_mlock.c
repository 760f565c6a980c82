/* Memory locking as the memory pool must keep it (tests/test_memory_lock.py): prints what
 * mlockall, mlock2, munlock and munlockall did, in words that are the same natively and under
 * `--memory pool` (VmLck in ranges, never its value: the runtime's own mappings add to it).
 * Modes:
 *   current       mlockall(MCL_CURRENT): a 4 MiB mapping touched once is locked and populated,
 *                 nothing near the pool's reservation is locked; munmap drops its lock; munlockall.
 *   future        mlockall(MCL_FUTURE): a later mmap and brk are locked and populated; munmap and
 *                 munlockall end that.
 *   limit KIB     RLIMIT_MEMLOCK set to KIB, then mlockall(MCL_CURRENT | MCL_FUTURE).
 *   future_limit  mlockall(MCL_CURRENT | MCL_FUTURE) at the default limit, then a 16 MiB mmap and
 *                 sbrk, which an unprivileged process is refused (EAGAIN, ENOMEM).
 *   range         mlock of a range the program unmapped (ENOMEM, nothing locked), mlock2 and
 *                 munlock of a mapping, munmap of a locked one.
 *   remap future|mlock  a touched 1 MiB mapping locked (by MCL_FUTURE, or mlock), grown to 4 MiB
 *                 by mremap: all of it locked, and nothing once it is unmapped.
 *   remap_unlocked  mlockall(MCL_FUTURE) after a 1 MiB mapping was made, which mremap grows to
 *                 4 MiB: none of it locked (MCL_FUTURE is for new mappings; mremap keeps a
 *                 mapping's own lock, or its lack).
 *   remap_onfault  a 1 MiB mapping with one page touched, locked with MLOCK_ONFAULT and grown to
 *                 4 MiB: all of it locked, none of the rest populated.
 *   remap_limit   a 1 MiB mapping locked with mlock, grown to 32 MiB: EAGAIN past RLIMIT_MEMLOCK
 *                 (an unprivileged process's 8 MiB), the mapping left as it was.
 *   range_errors  mlock2 with unknown flags, and mlock under a zero RLIMIT_MEMLOCK, of pool pages
 *                 the program unmapped: the kernel's EINVAL and EPERM come before the ENOMEM of
 *                 unmapped memory.
 *   cell          run where the runtime locked the memory at the start (a cell made with
 *                 --mlock): a few MiB locked, and a later mmap locked until its munmap. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#define MIB (1L << 20)

static long vmlck_kb(void)
{
    char line[256];
    long kb = -1;
    FILE *f = fopen("/proc/self/status", "r");
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmLck:", 6))
            kb = atol(line + 6);
    if (f)
        fclose(f);
    return kb;
}

/* Whether every page of [p, p + len) is resident. */
static int resident(void *p, size_t len)
{
    size_t pages = len / 4096;
    unsigned char *vec = malloc(pages);
    int all = mincore(p, len, vec) == 0;
    for (size_t i = 0; all && i < pages; i++)
        all = vec[i] & 1;
    free(vec);
    return all;
}

static void *map(size_t len)
{
    return mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
}

static int err(int r)
{
    return r ? errno : 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    if (!strcmp(mode, "current")) {
        char *p = map(4 * MIB);
        p[0] = 1;
        int r = err(mlockall(MCL_CURRENT));
        long locked = vmlck_kb();
        printf("mlockall %d\nheld resident %d\nlocked holds it %d\nlocked small %d\n", r,
               resident(p, 4 * MIB), locked >= 4096, locked < 64 * 1024);
        munmap(p, 4 * MIB);
        printf("munmap unlocks %d\n", vmlck_kb() <= locked - 4096);
        p = map(4 * MIB);
        printf("later mmap locked %d\n", vmlck_kb() > locked - 4096);
        r = err(munlockall());
        printf("munlockall %d left %d\n", r, vmlck_kb() != 0);
    } else if (!strcmp(mode, "future")) {
        int r = err(mlockall(MCL_FUTURE));
        long before = vmlck_kb();
        printf("mlockall %d current left %d\n", r, before >= 1024);
        char *p = map(4 * MIB);
        long mapped = vmlck_kb();
        printf("mmap locked %d resident %d\n", mapped >= before + 4096, resident(p, 4 * MIB));
        char *brk0 = sbrk(0);
        char *grown = sbrk(MIB);
        long heap = vmlck_kb();
        printf("sbrk %d locked %d resident %d\n", grown == brk0, heap >= mapped + 1024, resident(brk0, MIB));
        sbrk(-MIB);
        printf("lowered unlocks %d\n", vmlck_kb() <= heap - 1024);
        munmap(p, 4 * MIB);
        printf("munmap unlocks %d\n", vmlck_kb() <= before + 1024);
        r = err(munlockall());
        p = map(4 * MIB);
        printf("munlockall %d then mmap locked %d\n", r, vmlck_kb() != 0);
    } else if (!strcmp(mode, "limit") && argc > 2) {
        struct rlimit lim = {atol(argv[2]) * 1024, atol(argv[2]) * 1024};
        if (setrlimit(RLIMIT_MEMLOCK, &lim))
            return perror("setrlimit"), 1;
        int r = err(mlockall(MCL_CURRENT | MCL_FUTURE));
        printf("mlockall %d (%s)\nlocked %d small %d\n", r, strerror(r), vmlck_kb() != 0, vmlck_kb() < 64 * 1024);
        char *p = map(4 * MIB);
        printf("mmap %d\n", p == MAP_FAILED ? errno : 0);
    } else if (!strcmp(mode, "future_limit")) {
        int r = err(mlockall(MCL_CURRENT | MCL_FUTURE));
        printf("mlockall %d\n", r);
        char *p = map(16 * MIB);
        printf("mmap 16 MiB %d\n", p == MAP_FAILED ? errno : 0);
        void *b = sbrk(16 * MIB);
        printf("sbrk 16 MiB %d\n", b == (void *)-1 ? errno : 0);
        printf("locked small %d\n", vmlck_kb() < 64 * 1024);
    } else if (!strcmp(mode, "range")) {
        char *p = map(4 * MIB);
        munmap(p, 4 * MIB);
        long before = vmlck_kb();
        int r = err(mlock(p, 4 * MIB));
        printf("mlock unmapped %d locked %d\n", r, vmlck_kb() != before);
        p = map(4 * MIB);
        r = err(mlock2(p, 4 * MIB, 0));
        long locked = vmlck_kb();
        printf("mlock2 %d locked %d resident %d\n", r, locked >= before + 4096, resident(p, 4 * MIB));
        r = err(munlock(p, 2 * MIB));
        printf("munlock %d unlocked %d\n", r, vmlck_kb() <= locked - 2048);
        munmap(p, 4 * MIB);
        printf("munmap unlocks %d\n", vmlck_kb() == before);
        munmap(p, 4 * MIB);
        r = err(munlock(p, 4 * MIB));
        printf("munlock unmapped %d\n", r);
    } else if (!strcmp(mode, "remap") && argc > 2) {
        int future = !strcmp(argv[2], "future");
        long before = vmlck_kb();
        int r = future ? err(mlockall(MCL_FUTURE)) : 0;
        char *p = map(MIB);
        memset(p, 7, MIB);
        if (!future)
            r = err(mlock(p, MIB));
        printf("locked %d by %s\n", r, argv[2]);
        char *q = mremap(p, MIB, 4 * MIB, MREMAP_MAYMOVE);
        printf("mremap %d kept %d locked %d\n", q == MAP_FAILED ? errno : 0, q[100] == 7,
               vmlck_kb() - before == 4096);
        munmap(q, 4 * MIB);
        printf("munmap unlocks %d\n", vmlck_kb() == before);
    } else if (!strcmp(mode, "remap_unlocked")) {
        char *p = map(MIB);
        memset(p, 7, MIB);
        long before = vmlck_kb();
        int r = err(mlockall(MCL_FUTURE));
        char *q = mremap(p, MIB, 4 * MIB, MREMAP_MAYMOVE);
        printf("mlockall %d mremap %d kept %d locked %d\n", r, q == MAP_FAILED ? errno : 0, q[100] == 7,
               vmlck_kb() != before);
    } else if (!strcmp(mode, "remap_onfault")) {
        char *p = map(MIB);
        p[0] = 7;
        long before = vmlck_kb();
        int r = err(mlock2(p, MIB, MLOCK_ONFAULT));
        char *q = mremap(p, MIB, 4 * MIB, MREMAP_MAYMOVE);
        size_t populated = 0;
        unsigned char vec[1024];
        mincore(q, 4 * MIB, vec);
        for (int i = 0; i < 1024; i++)
            populated += vec[i] & 1;
        /* a few pages: pool-demand's fault handler fills a batch around the touched one */
        printf("mlock2 %d mremap %d kept %d locked %d populated little %d\n", r, q == MAP_FAILED ? errno : 0,
               q[0] == 7, vmlck_kb() - before == 4096, populated < 64);
    } else if (!strcmp(mode, "remap_limit")) {
        char *p = map(MIB);
        memset(p, 7, MIB);
        long before = vmlck_kb();
        int r = err(mlock(p, MIB));
        char *q = mremap(p, MIB, 32 * MIB, MREMAP_MAYMOVE);
        int e = q == MAP_FAILED ? errno : 0;
        if (q == MAP_FAILED)
            q = p;
        printf("mlock %d mremap %d kept %d locked %ld MiB\n", r, e, q[100] == 7, (vmlck_kb() - before) / 1024);
    } else if (!strcmp(mode, "range_errors")) {
        char *p = map(4 * MIB);
        munmap(p, 4 * MIB);
        int r = err(mlock2(p, MIB, 5));
        printf("mlock2 unknown flags %d\n", r);
        struct rlimit lim = {0, 0};
        if (setrlimit(RLIMIT_MEMLOCK, &lim))
            return perror("setrlimit"), 1;
        r = err(mlock(p, MIB));
        printf("mlock at limit 0 %d\n", r);
    } else if (!strcmp(mode, "cell")) {
        long start = vmlck_kb();
        char *p = map(4 * MIB);
        printf("locked at start %d small %d\nmmap locked %d resident %d\n", start > 0, start < 64 * 1024,
               vmlck_kb() >= start + 4096, resident(p, 4 * MIB));
        munmap(p, 4 * MIB);
        printf("munmap unlocks %d\n", vmlck_kb() == start);
    } else {
        fprintf(stderr, "usage: pool_mlock current|future|limit KIB|future_limit|range|remap future|mlock|remap_unlocked|remap_onfault|remap_limit|range_errors|cell\n");
        return 2;
    }
    return 0;
}
