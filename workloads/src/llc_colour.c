/* llc_colour: can this machine partition its last-level cache by page colouring inside 2 MiB
 * huge pages? Chases random pointers through a working set made of every 4 KiB page of
 * huge pages ("all colours") and through the same amount made of one 4 KiB page in C
 * ("1/C of the colours"). If the cache set index follows the page's address bits 12 and up,
 * the second set has 1/C of the cache and misses once it exceeds LLC/C.
 * The two are measured in alternation, -r rounds each, and the median is reported: the LLC of
 * a VM is shared with other tenants, so any single lap can be disturbed.
 * Usage: llc_colour [-c C (default 8)] [-w MiB,MiB,... (default 2,4,8,16)] [-a MiB (all-colours only,
 *                   default 64)] [-r rounds (default 5)] */
#include "workload.h"
#include <errno.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#define PAGE 4096UL
#define HUGE (2UL << 20)

static uint64_t rng = 88172645463325252ULL;
static uint64_t next_rand(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* Links every line of the chosen pages into one random cycle; returns the first line. */
static void **build_chase(unsigned char *arena, size_t pages, size_t page_step) {
    size_t lines = pages * (PAGE / 64);
    size_t *order = malloc(lines * sizeof *order);
    for (size_t i = 0; i < lines; i++) order[i] = i;
    for (size_t i = lines - 1; i > 0; i--) {
        size_t j = next_rand() % (i + 1), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
#define LINE(k) ((void **)(arena + (order[k] / 64) * page_step * PAGE + (order[k] % 64) * 64))
    for (size_t i = 0; i < lines; i++) *LINE(i) = LINE((i + 1) % lines);
    void **first = LINE(0);
#undef LINE
    free(order);
    return first;
}

/* Nanoseconds per dependent load over the cycle starting at `p` (after one warm-up lap). */
static double chase_ns(void **p, size_t lines) {
    size_t loads = lines * 4 > 4000000 ? lines * 4 : 4000000;
    for (size_t i = 0; i < lines; i++) p = (void **)*p;
    double t0 = now_ns();
    for (size_t i = 0; i < loads; i++) p = (void **)*p;
    double dt = now_ns() - t0;
    __asm__ volatile("" : : "r"(p));
    return dt / loads;
}

static int cmp_double(const void *a, const void *b) {
    double d = *(const double *)a - *(const double *)b;
    return (d > 0) - (d < 0);
}

static double median(double *v, int n) {
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv) {
    int opt, colours = 8, nsizes = 0, rounds = 5;
    double sizes[16], all_only_mib = 64;
    char *list = "2,4,8,16";
    while ((opt = getopt(argc, argv, "c:w:a:r:")) != -1) {
        switch (opt) {
        case 'c': colours = atoi(optarg); break;
        case 'w': list = optarg; break;
        case 'a': all_only_mib = atof(optarg); break;
        case 'r': rounds = atoi(optarg); break;
        default:
            fprintf(stderr, "usage: llc_colour [-c colours] [-w MiB,MiB,...] [-a MiB]\n");
            return 2;
        }
    }
    char *copy = strdup(list), *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok && nsizes < 16; tok = strtok_r(NULL, ",", &save))
        sizes[nsizes++] = atof(tok);
    double biggest = all_only_mib;
    for (int i = 0; i < nsizes; i++)
        if (sizes[i] * colours > biggest) biggest = sizes[i] * colours;
    if (colours < 2 || nsizes == 0 || colours > (int)(HUGE / PAGE) || rounds < 1 || rounds > 101) {
        fprintf(stderr, "llc_colour: need -c between 2 and 512, -r between 1 and 101 and at least one size\n");
        return 2;
    }
    size_t arena_bytes = ((size_t)(biggest * 1024 * 1024) + HUGE - 1) / HUGE * HUGE;
    unsigned char *arena = mmap(NULL, arena_bytes, PROT_READ | PROT_WRITE,
                                MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | MAP_POPULATE, -1, 0);
    if (arena == MAP_FAILED) {
        fprintf(stderr, "llc_colour: cannot map %zu MiB of 2 MiB huge pages: %s (reserve %zu pages first, "
                "e.g. coreplane cell create --hugepages %zu)\n", arena_bytes >> 20, strerror(errno),
                arena_bytes / HUGE, arena_bytes / HUGE);
        return 2;
    }
    printf("{\"workload\": \"llc_colour\", \"colours\": %d, \"arena_mib\": %zu, \"points\": [", colours,
           arena_bytes >> 20);
    for (int i = 0; i < nsizes; i++) {
        size_t pages = (size_t)(sizes[i] * 1024 * 1024) / PAGE;
        void **all_chain = build_chase(arena, pages, 1), **few_chain;
        double all_ns[101], few_ns[101];
        for (int r = 0; r < rounds; r++) {
            all_ns[r] = chase_ns(all_chain, pages * 64);
            /* Both chains share the arena's first pages: rebuild each before its lap. */
            few_chain = build_chase(arena, pages, colours);
            few_ns[r] = chase_ns(few_chain, pages * 64);
            all_chain = build_chase(arena, pages, 1);
        }
        double all = median(all_ns, rounds), few = median(few_ns, rounds);
        printf("%s{\"working_set_mib\": %g, \"all_colours_ns\": %.2f, \"few_colours_ns\": %.2f}",
               i ? ", " : "", sizes[i], all, few);
        fflush(stdout);
    }
    size_t pages = (size_t)(all_only_mib * 1024 * 1024) / PAGE;
    printf("], \"beyond_llc\": {\"working_set_mib\": %g, \"all_colours_ns\": %.2f}}\n", all_only_mib,
           chase_ns(build_chase(arena, pages, 1), pages * 64));
    return 0;
}
