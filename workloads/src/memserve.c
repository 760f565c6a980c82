/* memserve: a request server whose requests allocate memory, and its load generator (XOS Fig. 6).
 * memserve server SOCKET KIB
 *   listens on the Unix stream socket SOCKET; each request (8 bytes) is answered by allocating
 *   a KIB KiB buffer with malloc (glibc's mmap threshold fixed at 128 KiB, so every buffer is a
 *   fresh mmap as in a server whose per-request buffers are large), writing every byte of it
 *   from the request, summing it, freeing it, and replying with the sum (8 bytes).
 * memserve client SOCKET RATE SECONDS KIB
 *   connects, sends requests at RATE per second for SECONDS on a fixed schedule (open loop: a
 *   late reply delays the next send, and the latency counts from the scheduled time, so a
 *   stall is charged to every request it delays), checks every reply, and prints one JSON line
 *   with every request's latency in microseconds. */
#include "workload.h"
#include <malloc.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static void fail(const char *what) {
    perror(what);
    exit(1);
}

static struct sockaddr_un address(const char *path) {
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof a.sun_path) {
        fprintf(stderr, "memserve: socket path too long: %s\n", path);
        exit(2);
    }
    strcpy(a.sun_path, path);
    return a;
}

static int full(ssize_t (*io)(int, void *, size_t), int fd, void *buf, size_t n) {
    for (size_t done = 0; done < n;) {
        ssize_t r = io(fd, (char *)buf + done, n - done);
        if (r <= 0) return -1;
        done += (size_t)r;
    }
    return 0;
}

static ssize_t send_some(int fd, void *buf, size_t n) { return write(fd, buf, n); }

/* What the server answers to request `id` with a buffer of `bytes`: the client checks it. */
static uint64_t answer(uint64_t id, size_t bytes) {
    uint64_t sum = 0;
    for (size_t i = 0; i < bytes / 8; i++) sum += id ^ i;
    return sum;
}

static int serve(const char *path, size_t bytes) {
    mallopt(M_MMAP_THRESHOLD, 128 * 1024);
    struct sockaddr_un a = address(path);
    int ls = socket(AF_UNIX, SOCK_STREAM, 0);
    unlink(path);
    if (ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof a) || listen(ls, 1)) fail("memserve: listen");
    printf("ready\n");
    fflush(stdout);
    int fd = accept(ls, NULL, NULL);
    if (fd < 0) fail("memserve: accept");
    uint64_t id;
    while (full(read, fd, &id, sizeof id) == 0) {
        volatile uint64_t *buf = malloc(bytes); /* volatile: the compiler may not drop the buffer */
        if (!buf) fail("memserve: malloc");
        for (size_t i = 0; i < bytes / 8; i++) buf[i] = id ^ i;
        uint64_t sum = 0;
        for (size_t i = 0; i < bytes / 8; i++) sum += buf[i];
        free((void *)buf);
        if (full(send_some, fd, &sum, sizeof sum)) fail("memserve: reply");
    }
    unlink(path);
    return 0;
}

static int drive(const char *path, double rate, double seconds, size_t bytes) {
    struct sockaddr_un a = address(path);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a)) fail("memserve: connect");
    long n = (long)(rate * seconds);
    double *lat = malloc((size_t)n * sizeof *lat), period = 1e9 / rate, start = now_ns();
    for (long i = 0; i < n; i++) {
        double due = start + i * period;
        for (double t = now_ns(); t < due; t = now_ns()) {
            struct timespec gap = {0, (long)(due - t)};
            nanosleep(&gap, NULL);
        }
        uint64_t id = (uint64_t)i, sum;
        if (full(send_some, fd, &id, sizeof id) || full(read, fd, &sum, sizeof sum)) fail("memserve: request");
        lat[i] = (now_ns() - due) / 1e3;
        if (sum != answer(id, bytes)) {
            fprintf(stderr, "memserve: request %ld: wrong answer %llu\n", i, (unsigned long long)sum);
            return 1;
        }
    }
    printf("{\"requests\": %ld, \"rate\": %.0f, \"latency_us\": [", n, rate);
    for (long i = 0; i < n; i++) printf("%s%.1f", i ? ", " : "", lat[i]);
    printf("]}\n");
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 4 && !strcmp(argv[1], "server") && atol(argv[3]) > 0)
        return serve(argv[2], (size_t)atol(argv[3]) << 10);
    if (argc == 6 && !strcmp(argv[1], "client") && atof(argv[3]) > 0 && atof(argv[4]) > 0 && atol(argv[5]) > 0)
        return drive(argv[2], atof(argv[3]), atof(argv[4]), (size_t)atol(argv[5]) << 10);
    fprintf(stderr, "usage: memserve server SOCKET KIB | memserve client SOCKET RATE SECONDS KIB\n");
    return 2;
}
