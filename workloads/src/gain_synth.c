// gain_synth: paper 002 §4.1's synthetic benchmark — Monte Carlo π compute phases scaled by 1/γ,
// alternating with syscall phases that replay a profile's mix with real system calls.
//
//   gain_synth [-g GAMMA] [-w TRIALS] [-p PHASES] [-t THREADS] [-b BYTES] [-m MIXFILE] [-s NAME=N,...] [-l]
//
// Every thread runs PHASES times: TRIALS/GAMMA Monte Carlo trials, then each mix entry NAME COUNT
// times. Calls are made with syscall(2) so the kernel sees exactly the named call (libc would turn
// open into openat, stat into newfstatat). One JSON line on stdout reports what ran.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#define MAX_MIX 64
#define POOL 256  // fds or mappings one thread may hold between an open/mmap and its close/munmap

enum op {
    OP_GETPPID, OP_GETPID, OP_GETTID, OP_GETUID, OP_GETEUID, OP_GETGID, OP_GETEGID,
    OP_READ, OP_WRITE, OP_PREAD64, OP_PWRITE64, OP_READV, OP_WRITEV, OP_LSEEK,
    OP_OPEN, OP_OPENAT, OP_CLOSE, OP_DUP, OP_STAT, OP_LSTAT, OP_FSTAT, OP_NEWFSTATAT,
    OP_ACCESS, OP_FACCESSAT, OP_FCNTL, OP_IOCTL, OP_POLL, OP_UNAME, OP_MMAP, OP_MUNMAP,
    OP_MPROTECT, OP_MADVISE, OP_BRK, OP_SCHED_YIELD, OP_FUTEX, OP_NANOSLEEP,
    OP_CLOCK_GETTIME, OP_GETTIMEOFDAY, OP_GETRANDOM, OP_GETRUSAGE, OP_RT_SIGPROCMASK,
    OP_COUNT
};

static const char *const op_names[OP_COUNT] = {
    "getppid", "getpid", "gettid", "getuid", "geteuid", "getgid", "getegid",
    "read", "write", "pread64", "pwrite64", "readv", "writev", "lseek",
    "open", "openat", "close", "dup", "stat", "lstat", "fstat", "newfstatat",
    "access", "faccessat", "fcntl", "ioctl", "poll", "uname", "mmap", "munmap",
    "mprotect", "madvise", "brk", "sched_yield", "futex", "nanosleep",
    "clock_gettime", "gettimeofday", "getrandom", "getrusage", "rt_sigprocmask",
};

struct mix_entry { enum op op; long count; };

static struct mix_entry mix[MAX_MIX];
static int mix_len;
static double gamma_ = 1.0;
static long trials = 200000, phases = 100, nthreads = 1, io_bytes = 4096;

struct worker {
    pthread_t thread;
    int index;
    long trials_per_phase;
    double pi;
    int64_t compute_ns, syscall_ns;
    long issued[OP_COUNT];  // calls actually made, including the clean-up at the end of a phase
    long failed[OP_COUNT];
};

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void die(const char *what, const char *detail)
{
    fprintf(stderr, "gain_synth: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    exit(2);
}

static int lookup(const char *name)
{
    for (int i = 0; i < OP_COUNT; i++)
        if (strcmp(op_names[i], name) == 0)
            return i;
    return -1;
}

static void add_entry(const char *name, long count, const char *where)
{
    int op = lookup(name);
    char msg[256];
    if (op < 0) {
        snprintf(msg, sizeof msg, "%s: unsupported syscall '%s' (gain_synth -l lists the supported ones)", where, name);
        die(msg, NULL);
    }
    if (count < 0) {
        snprintf(msg, sizeof msg, "%s: count %ld for '%s' must be >= 0", where, count, name);
        die(msg, NULL);
    }
    if (mix_len == MAX_MIX)
        die(where, "too many mix entries");
    mix[mix_len++] = (struct mix_entry){op, count};
}

// A mix file: one "NAME COUNT" per line (calls per phase per thread); '#' starts a comment.
static void read_mix_file(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        die(path, strerror(errno));
    char line[512], name[64], where[600];
    int lineno = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        char *hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        char rest[8];
        long count;
        int n = sscanf(line, "%63s %ld %7s", name, &count, rest);
        if (n <= 0)
            continue;
        snprintf(where, sizeof where, "%s:%d", path, lineno);
        if (n != 2)
            die(where, "expected 'NAME COUNT'");
        add_entry(name, count, where);
    }
    fclose(f);
}

// Inline mix: NAME=COUNT,NAME=COUNT
static void parse_mix_arg(char *arg)
{
    for (char *tok = strtok(arg, ","); tok; tok = strtok(NULL, ",")) {
        char *eq = strchr(tok, '=');
        char *end;
        if (!eq)
            die("-s: expected NAME=COUNT, got", tok);
        *eq = '\0';
        long count = strtol(eq + 1, &end, 10);
        if (*end || end == eq + 1)
            die("-s: not a count", eq + 1);
        add_entry(tok, count, "-s");
    }
}

// The compute phase: the fraction of random points in the unit quarter circle (xorshift64*).
static long monte_carlo(long n, uint64_t *state)
{
    long inside = 0;
    uint64_t x = *state;
    for (long i = 0; i < n; i++) {
        x ^= x >> 12; x ^= x << 25; x ^= x >> 27;
        double a = (double)((x * 0x2545F4914F6CDD1DULL) >> 11) * 0x1.0p-53;
        x ^= x >> 12; x ^= x << 25; x ^= x >> 27;
        double b = (double)((x * 0x2545F4914F6CDD1DULL) >> 11) * 0x1.0p-53;
        inside += a * a + b * b <= 1.0;
    }
    *state = x;
    return inside;
}

struct pools {
    int fds[POOL], nfds;
    void *maps[POOL];
    int nmaps;
};

static long issue(struct worker *w, enum op op, int null_fd, int zero_fd, char *buf, void *page, struct pools *p)
{
    static const char *path = "/dev/null";
    struct iovec iov[2] = {{buf, (size_t)io_bytes / 2}, {buf + io_bytes / 2, (size_t)io_bytes - io_bytes / 2}};
    struct timespec ts = {0, 0};
    struct stat st;
    struct utsname un;
    struct rusage ru;
    sigset_t old;
    char small[64];  // room for a kernel struct termios or 16 random bytes, whatever -b is
    int word = 0;
    long r;
    switch (op) {
    case OP_GETPPID: r = syscall(SYS_getppid); break;
    case OP_GETPID: r = syscall(SYS_getpid); break;
    case OP_GETTID: r = syscall(SYS_gettid); break;
    case OP_GETUID: r = syscall(SYS_getuid); break;
    case OP_GETEUID: r = syscall(SYS_geteuid); break;
    case OP_GETGID: r = syscall(SYS_getgid); break;
    case OP_GETEGID: r = syscall(SYS_getegid); break;
    case OP_READ: r = syscall(SYS_read, zero_fd, buf, io_bytes); break;
    case OP_WRITE: r = syscall(SYS_write, null_fd, buf, io_bytes); break;
    case OP_PREAD64: r = syscall(SYS_pread64, zero_fd, buf, io_bytes, 0L); break;
    case OP_PWRITE64: r = syscall(SYS_pwrite64, null_fd, buf, io_bytes, 0L); break;
    case OP_READV: r = syscall(SYS_readv, zero_fd, iov, 2); break;
    case OP_WRITEV: r = syscall(SYS_writev, null_fd, iov, 2); break;
    case OP_LSEEK: r = syscall(SYS_lseek, null_fd, 0L, SEEK_SET); break;
    case OP_OPEN:
    case OP_OPENAT:
    case OP_DUP:
        if (p->nfds == POOL) {  // keep the fd table bounded: hand one back first (counted as a close)
            syscall(SYS_close, p->fds[--p->nfds]);
            w->issued[OP_CLOSE]++;
        }
        r = op == OP_OPEN ? syscall(SYS_open, path, O_RDONLY | O_CLOEXEC)
          : op == OP_OPENAT ? syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC)
          : syscall(SYS_dup, null_fd);
        if (r >= 0)
            p->fds[p->nfds++] = (int)r;
        break;
    case OP_CLOSE:  // closes what open/openat/dup made; with nothing open, a failing close(-1)
        r = syscall(SYS_close, p->nfds ? p->fds[--p->nfds] : -1);
        break;
    case OP_STAT: r = syscall(SYS_stat, path, &st); break;
    case OP_LSTAT: r = syscall(SYS_lstat, path, &st); break;
    case OP_FSTAT: r = syscall(SYS_fstat, null_fd, &st); break;
    case OP_NEWFSTATAT: r = syscall(SYS_newfstatat, AT_FDCWD, path, &st, 0); break;
    case OP_ACCESS: r = syscall(SYS_access, path, R_OK); break;
    case OP_FACCESSAT: r = syscall(SYS_faccessat, AT_FDCWD, path, R_OK, 0); break;
    case OP_FCNTL: r = syscall(SYS_fcntl, null_fd, F_GETFL); break;
    case OP_IOCTL: r = syscall(SYS_ioctl, null_fd, TCGETS, small); break;  // ENOTTY, as isatty() on a file
    case OP_POLL: {
        struct pollfd pfd = {null_fd, POLLOUT, 0};
        r = syscall(SYS_poll, &pfd, 1, 0);
        break;
    }
    case OP_UNAME: r = syscall(SYS_uname, &un); break;
    case OP_MMAP:
        if (p->nmaps == POOL) {
            syscall(SYS_munmap, p->maps[--p->nmaps], 4096);
            w->issued[OP_MUNMAP]++;
        }
        r = syscall(SYS_mmap, NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (r != -1)
            p->maps[p->nmaps++] = (void *)r;
        break;
    case OP_MUNMAP:  // unmaps what mmap made; with nothing mapped, an unmapped page (a no-op that succeeds)
        r = syscall(SYS_munmap, p->nmaps ? p->maps[--p->nmaps] : (char *)page + 4096, 4096);
        break;
    case OP_MPROTECT: r = syscall(SYS_mprotect, page, 4096, PROT_READ | PROT_WRITE); break;
    case OP_MADVISE: r = syscall(SYS_madvise, page, 4096, MADV_NORMAL); break;
    case OP_BRK: r = syscall(SYS_brk, 0L); break;
    case OP_SCHED_YIELD: r = syscall(SYS_sched_yield); break;
    case OP_FUTEX: r = syscall(SYS_futex, &word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0); break;
    case OP_NANOSLEEP: r = syscall(SYS_nanosleep, &ts, NULL); break;
    case OP_CLOCK_GETTIME: r = syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &ts); break;
    case OP_GETTIMEOFDAY: {
        struct timeval tv;
        r = syscall(SYS_gettimeofday, &tv, NULL);
        break;
    }
    case OP_GETRANDOM: r = syscall(SYS_getrandom, small, 16, 0); break;
    case OP_GETRUSAGE: r = syscall(SYS_getrusage, RUSAGE_SELF, &ru); break;
    case OP_RT_SIGPROCMASK: r = syscall(SYS_rt_sigprocmask, SIG_BLOCK, NULL, &old, sizeof(uint64_t)); break;
    default: die("internal: unknown op", NULL); return -1;
    }
    w->issued[op]++;
    if (r == -1)
        w->failed[op]++;
    return r;
}

static void *run_worker(void *arg)
{
    struct worker *w = arg;
    int null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC), zero_fd = open("/dev/zero", O_RDONLY | O_CLOEXEC);
    char *buf = malloc((size_t)io_bytes);
    // Two pages: the first for mprotect/madvise, the second left unmapped for a munmap with nothing to undo.
    char *page = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (null_fd < 0 || zero_fd < 0 || !buf || page == MAP_FAILED)
        die("setting up a worker", strerror(errno));
    munmap(page + 4096, 4096);
    memset(buf, 'x', (size_t)io_bytes);
    struct pools pools = {.nfds = 0, .nmaps = 0};
    uint64_t state = 0x9E3779B97F4A7C15ULL * (uint64_t)(w->index + 1);
    long inside = 0;
    for (long ph = 0; ph < phases; ph++) {
        int64_t t0 = now_ns();
        inside += monte_carlo(w->trials_per_phase, &state);
        int64_t t1 = now_ns();
        for (int e = 0; e < mix_len; e++)
            for (long c = 0; c < mix[e].count; c++)
                issue(w, mix[e].op, null_fd, zero_fd, buf, page, &pools);
        w->compute_ns += t1 - t0;
        w->syscall_ns += now_ns() - t1;
    }
    // Clean-up outside the timed phases (still counted in `issued`, as a tracer would see it).
    for (; pools.nfds; w->issued[OP_CLOSE]++)
        syscall(SYS_close, pools.fds[--pools.nfds]);
    for (; pools.nmaps; w->issued[OP_MUNMAP]++)
        syscall(SYS_munmap, pools.maps[--pools.nmaps], 4096);
    long total = w->trials_per_phase * phases;
    w->pi = total ? 4.0 * (double)inside / (double)total : 0.0;
    return NULL;
}

static long parse_long(const char *opt, const char *text, long min)
{
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || *end || end == text || v < min) {
        char msg[128];
        snprintf(msg, sizeof msg, "%s %s: expected an integer >= %ld", opt, text, min);
        die(msg, NULL);
    }
    return v;
}

int main(int argc, char **argv)
{
    int opt;
    char *end;
    while ((opt = getopt(argc, argv, "g:w:p:t:b:m:s:lh")) != -1) {
        switch (opt) {
        case 'g':
            gamma_ = strtod(optarg, &end);
            if (*end || end == optarg || !(gamma_ > 0))
                die("-g: the gain must be a positive number, got", optarg);
            break;
        case 'w': trials = parse_long("-w", optarg, 0); break;
        case 'p': phases = parse_long("-p", optarg, 1); break;
        case 't': nthreads = parse_long("-t", optarg, 1); break;
        case 'b': io_bytes = parse_long("-b", optarg, 2); break;
        case 'm': read_mix_file(optarg); break;
        case 's': parse_mix_arg(optarg); break;
        case 'l':
            for (int i = 0; i < OP_COUNT; i++)
                puts(op_names[i]);
            return 0;
        default:
            fprintf(stderr, "usage: gain_synth [-g GAMMA] [-w TRIALS] [-p PHASES] [-t THREADS] [-b BYTES] "
                            "[-m MIXFILE] [-s NAME=N,...] [-l]\n");
            return opt == 'h' ? 0 : 2;
        }
    }
    if (optind != argc)
        die("unexpected argument", argv[optind]);

    struct worker *workers = calloc((size_t)nthreads, sizeof *workers);
    if (!workers)
        die("calloc", strerror(errno));
    long per_phase = lround((double)trials / gamma_);  // the gain: less work in each compute phase
    int64_t start = now_ns();
    for (long i = 0; i < nthreads; i++) {
        workers[i].index = (int)i;
        workers[i].trials_per_phase = per_phase;
        int err = nthreads == 1 ? 0 : pthread_create(&workers[i].thread, NULL, run_worker, &workers[i]);
        if (err)
            die("pthread_create", strerror(err));
    }
    if (nthreads == 1)
        run_worker(&workers[0]);  // a sequential program stays single-threaded, as paper 002 assumes
    else
        for (long i = 0; i < nthreads; i++)
            pthread_join(workers[i].thread, NULL);
    int64_t wall = now_ns() - start;

    double pi = 0;
    int64_t compute = 0, sys = 0;
    long issued[OP_COUNT] = {0}, failed[OP_COUNT] = {0};
    for (long i = 0; i < nthreads; i++) {
        pi += workers[i].pi / (double)nthreads;
        compute += workers[i].compute_ns;
        sys += workers[i].syscall_ns;
        for (int op = 0; op < OP_COUNT; op++)
            issued[op] += workers[i].issued[op], failed[op] += workers[i].failed[op];
    }
    printf("{\"gamma\": %.6g, \"threads\": %ld, \"phases\": %ld, \"trials_per_phase\": %ld, \"pi\": %.6f, "
           "\"wall_ns\": %lld, \"compute_ns\": %lld, \"syscall_ns\": %lld, \"calls\": {",
           gamma_, nthreads, phases, per_phase, pi, (long long)wall, (long long)compute, (long long)sys);
    const char *sep = "";
    for (int op = 0; op < OP_COUNT; op++)
        if (issued[op]) {
            printf("%s\"%s\": %ld", sep, op_names[op], issued[op]);
            sep = ", ";
        }
    printf("}, \"errors\": {");
    sep = "";
    for (int op = 0; op < OP_COUNT; op++)
        if (failed[op]) {
            printf("%s\"%s\": %ld", sep, op_names[op], failed[op]);
            sep = ", ";
        }
    printf("}}\n");
    free(workers);
    return 0;
}
