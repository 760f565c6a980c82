// null_call: times one cheap syscall, call by call — the micro-benchmark behind coreplane's
// forward cost f_c (paper 002 §5.3, Table 3) and the runtime's interposition cost.
//
//   null_call [-n TRIALS] [-c getppid|getpid|getuid|uname|fstat|nanosleep|read|madvise] [-s BYTES]
//             [-w WARMUP] [-g GAP_NS] [-k]
//
// Each trial is one raw `syscall` instruction (no libc wrapper, as in the paper's tool) between two
// CLOCK_MONOTONIC reads; clock_gettime goes through the vDSO, so it is never intercepted or
// delegated. Run it natively, under `coreplane run --delegate none` and under
// `coreplane run --delegate NAME`: the differences of the per-call times are the interposition
// cost and the delegated round trip 2·f_c. Prints one JSON line: {"call", "trials",
// "thread_cpu_ns" (CPU time of the calling thread over the trials: a caller that sleeps while
// its call is away uses less CPU than the calls take), "ns": [...]}. -g spins GAP_NS on the CPU
// before every trial: a gap longer than a delegate polls for an idle queue times a cold call
// (the delegate asleep), a short one a warm call. -c madvise times a TLB flush: a page is written
// (untimed) and then dropped with madvise(MADV_DONTNEED). -k makes one getppid call, untimed,
// before every trial: under `--delegate getppid` a delegate then polls on its control core, in
// this address space, while the trial runs, and a flush must interrupt it (a TLB shootdown).
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

static inline int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

// One raw `syscall` whose number is an immediate right before it (`mov eax, NR; syscall`), the
// form of most call sites in libc and Go binaries, and the one the runtime's relocating rewrite
// takes: a site whose number comes from a register stays on the trap path (≈ 1.7 µs a call),
// which is what this benchmark measured from session 4 until the held-out suite showed it.
// Each site starts a 16-byte block, so its rewrite is always one atomic store.
#define FIXED_SYSCALL2(NR, a, b)                                                              \
    ({                                                                                       \
        long ret_;                                                                           \
        __asm__ volatile(".p2align 4\n\tmovl %1, %%eax\n\tsyscall"                            \
                         : "=a"(ret_) : "i"(NR), "D"(a), "S"(b) : "rcx", "r11", "memory");   \
        ret_;                                                                                \
    })

// read(fd, buf, n) at a site of its own; then every cache line of what it read is touched, inside
// the trial: a delegated read writes the buffer on the control core, and the compute core pays
// to fetch it (the data a delegated call moves between cores).
static __attribute__((noinline)) long read_and_touch(long fd, unsigned char *buf, long n)
{
    long r;
    __asm__ volatile(".p2align 4\n\tmovl %1, %%eax\n\tsyscall"
                     : "=a"(r) : "i"(SYS_read), "D"(fd), "S"(buf), "d"(n) : "rcx", "r11", "memory");
    unsigned sum = 0;
    for (long k = 0; k < r; k += 64)
        sum += buf[k];
    __asm__ volatile("" : : "r"(sum));
    return r;
}

// madvise(page, 4096, MADV_DONTNEED) at a site of its own: the page's mapping goes, so every CPU
// that has this address space loaded must flush it from its TLB.
static __attribute__((noinline)) long drop_page(void *page)
{
    long r;
    __asm__ volatile(".p2align 4\n\tmovl %1, %%eax\n\tsyscall"
                     : "=a"(r) : "i"(SYS_madvise), "D"(page), "S"(4096L), "d"((long)MADV_DONTNEED)
                     : "rcx", "r11", "memory");
    return r;
}

// The one call site per number of warm-up and trials alike. The runtime rewrites a site at its
// first call (a trap, 14–54 µs): a warm-up through another site would leave that one-off cost
// in the first trial, where it raised the mean round trip by ≈ 50 ns over 286 trials.
static __attribute__((noinline)) long the_call(long nr, long a, long b)
{
    switch (nr) {
    case SYS_getppid: return FIXED_SYSCALL2(SYS_getppid, a, b);
    case SYS_getpid: return FIXED_SYSCALL2(SYS_getpid, a, b);
    case SYS_getuid: return FIXED_SYSCALL2(SYS_getuid, a, b);
    case SYS_uname: return FIXED_SYSCALL2(SYS_uname, a, b);
    case SYS_nanosleep: return FIXED_SYSCALL2(SYS_nanosleep, a, b);
    default: return FIXED_SYSCALL2(SYS_fstat, a, b);
    }
}

// One trial, timed from just before its call to just after (what precedes it is not timed).
static int64_t one_trial(long nr, long a, long b, unsigned char *data, long size, volatile unsigned char *page,
                         int keep_delegate_busy)
{
    if (keep_delegate_busy)
        the_call(SYS_getppid, 0, 0);
    if (page)
        page[0] = 1;
    int64_t t0 = now_ns();
    if (page)
        drop_page((void *)page);
    else if (data)
        read_and_touch(a, data, size);
    else
        the_call(nr, a, b);
    return now_ns() - t0;
}

int main(int argc, char **argv)
{
    long trials = 2000, warmup = 100, gap = 0, size = 65536;
    const char *call = "getppid";
    int opt, keep_delegate_busy = 0;
    while ((opt = getopt(argc, argv, "n:c:w:g:s:kh")) != -1) {
        switch (opt) {
        case 'n': trials = strtol(optarg, NULL, 10); break;
        case 'w': warmup = strtol(optarg, NULL, 10); break;
        case 'c': call = optarg; break;
        case 'g': gap = strtol(optarg, NULL, 10); break;
        case 's': size = strtol(optarg, NULL, 10); break;
        case 'k': keep_delegate_busy = 1; break;
        default:
            fprintf(stderr, "usage: null_call [-n TRIALS] [-c getppid|getpid|getuid|uname|fstat|nanosleep|read|madvise] [-s BYTES] [-w WARMUP] [-g GAP_NS] [-k]\n");
            return opt == 'h' ? 0 : 2;
        }
    }
    static struct utsname un;
    static struct stat st;
    // A call that blocks: how long a caller polls for a delegated call before it sleeps.
    static const struct timespec one_ms = {0, 1000000};
    long nr, a = 0, b = 0;
    if (strcmp(call, "getppid") == 0) nr = SYS_getppid;
    else if (strcmp(call, "getpid") == 0) nr = SYS_getpid;
    else if (strcmp(call, "getuid") == 0) nr = SYS_getuid;
    else if (strcmp(call, "uname") == 0) nr = SYS_uname, a = (long)&un;
    else if (strcmp(call, "fstat") == 0) nr = SYS_fstat, a = 1, b = (long)&st;
    else if (strcmp(call, "nanosleep") == 0) nr = SYS_nanosleep, a = (long)&one_ms;
    else if (strcmp(call, "read") == 0) nr = SYS_read, a = open("/dev/zero", O_RDONLY);
    else if (strcmp(call, "madvise") == 0) nr = SYS_madvise;
    else {
        fprintf(stderr, "null_call: -c %s: expected getppid, getpid, getuid, uname, fstat, nanosleep, read or madvise\n", call);
        return 2;
    }
    if (trials < 1 || warmup < 0 || gap < 0 || size < 1 || a < 0) {
        fprintf(stderr, "null_call: -n and -s must be >= 1, -w and -g >= 0 (or /dev/zero did not open)\n");
        return 2;
    }
    unsigned char *data = nr == SYS_read ? aligned_alloc(64, (size_t)(size + 63) / 64 * 64) : NULL;
    volatile unsigned char *page = nr == SYS_madvise
        ? mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) : NULL;
    if (page == MAP_FAILED) {
        perror("null_call: mmap");
        return 2;
    }
    int64_t *ns = malloc((size_t)trials * sizeof *ns);
    if (!ns) {
        perror("null_call: malloc");
        return 2;
    }
    // Warm-up calls: the first delegated call starts the delegate, the first trap rewrites the site.
    for (long i = 0; i < warmup; i++)
        one_trial(nr, a, b, data, size, page, keep_delegate_busy);
    int64_t cpu0 = thread_cpu_ns();
    for (long i = 0; i < trials; i++) {
        for (int64_t until = now_ns() + gap; gap && now_ns() < until;)
            ;
        ns[i] = one_trial(nr, a, b, data, size, page, keep_delegate_busy);
    }
    int64_t cpu = thread_cpu_ns() - cpu0 - gap * trials;  // the gaps are not the calls' CPU time
    printf("{\"call\": \"%s\", \"trials\": %ld, \"thread_cpu_ns\": %lld, \"ns\": [", call, trials,
           (long long)cpu);
    for (long i = 0; i < trials; i++)
        printf("%s%lld", i ? ", " : "", (long long)ns[i]);
    printf("]}\n");
    free(ns);
    free(data);
    return 0;
}
