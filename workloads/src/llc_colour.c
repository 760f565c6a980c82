/* llc_colour: can this machine partition its last-level cache by page colouring inside 2 MiB
 * huge pages? Chases random pointers through a working set made of every 4 KiB page of
 * huge pages ("all colours") and through the same amount made of one 4 KiB page in C
 * ("1/C of the colours"). If the cache set index follows the page's address bits 12 and up,
 * the second set has 1/C of the cache and misses once it exceeds LLC/C.
 * Usage: llc_colour [-c C (default 8)] [-w MiB,MiB,... (default 2,4,8,16)] [-a MiB (all-colours only, default 64)] */
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

int main(int argc, char **argv) {
    int opt, colours = 8, nsizes = 0;
    double sizes[16], all_only_mib = 64;
    char *list = "2,4,8,16";
    while ((opt = getopt(argc, argv, "c:w:a:")) != -1) {
        switch (opt) {
        case 'c': colours = atoi(optarg); break;
        case 'w': list = optarg; break;
        case 'a': all_only_mib = atof(optarg); break;
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
    if (colours < 2 || nsizes == 0 || colours > (int)(HUGE / PAGE)) {
        fprintf(stderr, "llc_colour: need -c between 2 and 512 and at least one size\n");
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
        double all = chase_ns(build_chase(arena, pages, 1), pages * 64);
        double few = chase_ns(build_chase(arena, pages, colours), pages * 64);
        printf("%s{\"working_set_mib\": %g, \"all_colours_ns\": %.2f, \"few_colours_ns\": %.2f}",
               i ? ", " : "", sizes[i], all, few);
        fflush(stdout);
    }
    size_t pages = (size_t)(all_only_mib * 1024 * 1024) / PAGE;
    printf("], \"beyond_llc\": {\"working_set_mib\": %g, \"all_colours_ns\": %.2f}}\n", all_only_mib,
           chase_ns(build_chase(arena, pages, 1), pages * 64));
    return 0;
}
