// ipc_pairs: the NetworkedOS paper's IPC micro-benchmark (Sec. III, Fig. 3): pairs of processes
// exchanging messages of a fixed size over pipes or UNIX sockets; process 2i talks to 2i+1.
// Each pair does ping-pong round trips (sender writes SIZE bytes, receiver reads them and writes
// them back). Processes are pinned with sched_setaffinity as --cpus says (one CPU per process,
// cycled), so the same program measures same-core and cross-core placements.
// Prints one JSON object: wall time and the per-round-trip median over pairs.
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000L + ts.tv_nsec;
}

static void die(const char *what) {
    fprintf(stderr, "ipc_pairs: %s: %s\n", what, strerror(errno));
    exit(2);
}

static void full_write(int fd, const char *buf, size_t n) {
    while (n) {
        ssize_t k = write(fd, buf, n);
        if (k < 0) {
            if (errno == EINTR) continue;
            die("write");
        }
        buf += k;
        n -= (size_t)k;
    }
}

static void full_read(int fd, char *buf, size_t n) {
    while (n) {
        ssize_t k = read(fd, buf, n);
        if (k < 0) {
            if (errno == EINTR) continue;
            die("read");
        }
        if (k == 0) {
            fprintf(stderr, "ipc_pairs: peer closed early\n");
            exit(2);
        }
        buf += k;
        n -= (size_t)k;
    }
}

static void pin(int cpu) {
    if (cpu < 0) return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0) die("sched_setaffinity");
}

static int cmp_long(const void *a, const void *b) {
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    int pairs = 1, round_trips = 2000, use_socket = 0;
    size_t size = 1024;
    int cpus[256], ncpus = 0;
    static struct option opts[] = {
        {"pairs", required_argument, 0, 'p'}, {"size", required_argument, 0, 's'},
        {"round-trips", required_argument, 0, 'n'}, {"transport", required_argument, 0, 't'},
        {"cpus", required_argument, 0, 'c'}, {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "", opts, 0)) != -1) {
        switch (c) {
        case 'p': pairs = atoi(optarg); break;
        case 's': size = (size_t)atol(optarg); break;
        case 'n': round_trips = atoi(optarg); break;
        case 't':
            if (strcmp(optarg, "pipe") && strcmp(optarg, "socket")) {
                fprintf(stderr, "ipc_pairs: --transport %s: expected pipe or socket\n", optarg);
                return 2;
            }
            use_socket = !strcmp(optarg, "socket");
            break;
        case 'c':
            for (char *tok = strtok(optarg, ","); tok && ncpus < 256; tok = strtok(0, ","))
                cpus[ncpus++] = atoi(tok);
            break;
        default:
            fprintf(stderr, "usage: ipc_pairs [--pairs P] [--size BYTES] [--round-trips N] "
                            "[--transport pipe|socket] [--cpus A,B,...]\n");
            return 2;
        }
    }
    if (pairs < 1 || pairs > 128 || size < 1 || round_trips < 1) {
        fprintf(stderr, "ipc_pairs: need 1 <= pairs <= 128, size >= 1, round-trips >= 1\n");
        return 2;
    }
    // per-pair elapsed time, written by each sender into shared memory
    long *elapsed = mmap(0, sizeof(long) * (size_t)pairs, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (elapsed == MAP_FAILED) die("mmap");
    int start[2];
    if (pipe(start) != 0) die("pipe");
    for (int p = 0; p < pairs; p++) {
        int ab[2], ba[2];  // a->b and b->a channels (a socketpair is bidirectional: ab == ba)
        if (use_socket) {
            if (socketpair(AF_UNIX, SOCK_STREAM, 0, ab) != 0) die("socketpair");
            ba[0] = ab[1];
            ba[1] = ab[0];
        } else if (pipe(ab) != 0 || pipe(ba) != 0) {
            die("pipe");
        }
        for (int side = 0; side < 2; side++) {
            pid_t pid = fork();
            if (pid < 0) die("fork");
            if (pid) continue;
            pin(ncpus ? cpus[(2 * p + side) % ncpus] : -1);
            close(start[1]);
            char go;
            if (read(start[0], &go, 1) < 0) die("read start");
            char *buf = malloc(size);
            memset(buf, side, size);
            int out = side == 0 ? ab[1] : ba[1];
            int in = side == 0 ? ba[0] : ab[0];
            // keep only our own ends, so a peer that dies gives EOF instead of a hang
            int ends[4] = {ab[0], ab[1], ba[0], ba[1]};
            for (int e = 0; e < 4; e++)
                if (ends[e] != in && ends[e] != out) close(ends[e]);
            long t0 = now_ns();
            for (int i = 0; i < round_trips; i++) {
                if (side == 0) {
                    full_write(out, buf, size);
                    full_read(in, buf, size);
                } else {
                    full_read(in, buf, size);
                    full_write(out, buf, size);
                }
            }
            if (side == 0) elapsed[p] = now_ns() - t0;
            _exit(0);
        }
        close(ab[0]);
        close(ab[1]);
        if (!use_socket) {
            close(ba[0]);
            close(ba[1]);
        }
    }
    close(start[0]);
    long t0 = now_ns();
    close(start[1]);  // releases every child at once
    int failed = 0, status;
    while (wait(&status) > 0)
        failed |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
    long wall = now_ns() - t0;
    if (failed) {
        fprintf(stderr, "ipc_pairs: a child failed\n");
        return 2;
    }
    qsort(elapsed, (size_t)pairs, sizeof(long), cmp_long);
    printf("{\"transport\": \"%s\", \"pairs\": %d, \"size\": %zu, \"round_trips\": %d, \"cpus\": [",
           use_socket ? "socket" : "pipe", pairs, size, round_trips);
    for (int i = 0; i < ncpus; i++) printf("%s%d", i ? ", " : "", cpus[i]);
    printf("], \"wall_ns\": %ld, \"round_trip_ns_median\": %.1f, \"round_trip_ns_max\": %.1f}\n", wall,
           (double)elapsed[pairs / 2] / round_trips, (double)elapsed[pairs - 1] / round_trips);
    return 0;
}
