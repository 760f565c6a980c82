/* max_tables.c: ROS Tables 1-2's rows that need more than one compute core, measured beside a
 * coreplane-arbiter started with --warn-us 0 (a loaned core is taken back with no warning, as in
 * ROS's preempt-and-get), on a machine of N compute cores: `coreplane arbiter tables --guest-cpus`
 * runs it in a QEMU/TCG guest (src/coreplane/arbiter/guest.py). Two child MCPs: B registers itself
 * (best effort, at most N vcores), A is provisioned all N. Each child, told to, asks for k vcores,
 * waits until it holds them (procinfo), and spins one thread pinned to each; or stops its
 * spinners and yields what it holds, out of its cpuset. This process (root, no MCP) times:
 *   get_one_cold / preempt_one:   B asks for 1 vcore; the vcore revoked with no warning;
 *   get_max_cold / preempt_max:   B asks for N; all N revoked with no warning (the kernel moves
 *                                 N spinning threads off their cores);
 *   preempt_and_get_max:          B holds N, spinning; A asks for its N provisioned cores, all
 *                                 on loan to B: preempted from B and granted to A, timed by A
 *                                 until it holds all N.
 * A grant is timed by the child from its request until procinfo shows the cores held.
 * Prints "ROW op cores n min_ns p50_ns p99_ns" per operation. Usage: max_tables [TRIALS]. */
#define _GNU_SOURCE
#include <coreplane/vcore.h>
#include <coreplane/wire.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void fail(const char *what) {
    fprintf(stderr, "max_tables: %s: %s\n", what, strerror(errno));
    exit(1);
}

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int connect_arbiter(void) {
    int fd = cp_wire_connect(NULL);
    if (fd < 0) fail("connect to the arbiter ($COREPLANE_ARBITER_SOCKET)");
    return fd;
}

/* One request line, its one reply line into reply; exits on an error reply. */
static void call(int fd, const char *request, char *reply, size_t size) {
    if (cp_wire_call(fd, request, reply, size) != 0) fail("arbiter reply");
    if (!strstr(reply, "\"ok\":true")) {
        fprintf(stderr, "max_tables: %s -> %s", request, reply);
        exit(1);
    }
}

/* ---- a child MCP ---- */

static atomic_int spinning;

static void *spin(void *arg) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET((int)(long)arg, &set);
    sched_setaffinity(0, sizeof set, &set);
    while (atomic_load(&spinning)) {
    }
    return NULL;
}

/* Reads one-byte commands from `in`, answers on `out`: 'a' attach (B registers itself first),
 * 'r' k: ask for k vcores, spin on them, answer the ns until held; 'y': stop, yield all. */
static void child(int in, int out, int registers, int cores) {
    int fd = connect_arbiter();
    char reply[4096], line[128];
    pthread_t spinners[CP_MAX_VCORES];
    int nspin = 0;
    for (;;) {
        unsigned char cmd[2];
        if (read(in, cmd, 1) != 1) exit(0);
        uint64_t answer = 0;
        if (cmd[0] == 'a') {
            if (registers) {
                snprintf(line, sizeof line, "{\"op\":\"register\",\"max\":%d}\n", cores);
                call(fd, line, reply, sizeof reply);
            }
            if (cp_vcore_open_wait(5000) != 0) {
                fprintf(stderr, "max_tables: attach: %s\n", cp_vcore_error());
                exit(1);
            }
        } else if (cmd[0] == 'r') {
            if (read(in, cmd + 1, 1) != 1) exit(1);
            const struct cp_procinfo *info = cp_vcore_procinfo();
            uint64_t t0 = now_ns();
            snprintf(line, sizeof line, "{\"op\":\"request\",\"n\":%d}\n", cmd[1]);
            call(fd, line, reply, sizeof reply);
            while (__atomic_load_n(&info->held, __ATOMIC_ACQUIRE) < cmd[1]) {
            }
            answer = now_ns() - t0;
            atomic_store(&spinning, 1);
            for (int v = 0; v < CP_MAX_VCORES; v++) {
                int cpu = cp_vcore_cpu(v);
                if (cpu >= 0 && pthread_create(&spinners[nspin], NULL, spin, (void *)(long)cpu) == 0) nspin++;
            }
        } else if (cmd[0] == 'y') {
            atomic_store(&spinning, 0);
            while (nspin > 0) pthread_join(spinners[--nspin], NULL);
            for (int v = 0; v < CP_MAX_VCORES; v++) {
                if (cp_vcore_cpu(v) < 0) continue;
                snprintf(line, sizeof line, "{\"op\":\"yield\",\"vcore\":%d,\"retain\":false}\n", v);
                call(fd, line, reply, sizeof reply);
            }
        }
        if (write(out, &answer, sizeof answer) != sizeof answer) exit(1);
    }
}

/* ---- this process: the admin and the clock ---- */

struct mcp {
    pid_t pid;
    int to, from;
};

static struct mcp start_child(int registers, int cores) {
    int down[2], up[2];
    if (pipe(down) || pipe(up)) fail("pipe");
    pid_t pid = fork();
    if (pid < 0) fail("fork");
    if (pid == 0) {
        close(down[1]);
        close(up[0]);
        child(down[0], up[1], registers, cores);
    }
    close(down[0]);
    close(up[1]);
    return (struct mcp){pid, down[1], up[0]};
}

static uint64_t tell(struct mcp *m, char cmd, int k) {
    unsigned char bytes[2] = {(unsigned char)cmd, (unsigned char)k};
    if (write(m->to, bytes, cmd == 'r' ? 2 : 1) < 1) fail("to child");
    uint64_t answer;
    if (read(m->from, &answer, sizeof answer) != sizeof answer) fail("child died");
    return answer;
}

static int compare(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void row(const char *op, int cores, uint64_t *t, int n) {
    qsort(t, n, sizeof *t, compare);
    int p99 = (int)(0.99 * n + 0.5) - 1;
    printf("ROW %s %d %d %llu %llu %llu\n", op, cores, n, (unsigned long long)t[0], (unsigned long long)t[n / 2],
           (unsigned long long)t[p99 < 0 ? 0 : p99]);
    fflush(stdout);
}

/* Revokes every vcore of `pid` (or `vcore`) with no warning; the ns until the arbiter replied
 * (it replies when all are given back). */
static uint64_t take_back(int fd, pid_t pid, int vcore) {
    char line[128], reply[4096];
    if (vcore >= 0)
        snprintf(line, sizeof line, "{\"op\":\"revoke\",\"pid\":%d,\"vcore\":%d,\"warn_us\":0,\"wait\":true}\n", pid, vcore);
    else
        snprintf(line, sizeof line, "{\"op\":\"revoke\",\"pid\":%d,\"warn_us\":0,\"wait\":true}\n", pid);
    uint64_t t0 = now_ns();
    call(fd, line, reply, sizeof reply);
    return now_ns() - t0;
}

int main(int argc, char **argv) {
    int trials = argc > 1 ? atoi(argv[1]) : 100;
    int admin = connect_arbiter();
    char reply[4096], line[128];
    call(admin, "{\"op\":\"status\"}\n", reply, sizeof reply);
    const char *list = strstr(reply, "\"compute_cores\":\"");
    if (!list || trials < 1) fail("status");
    cpu_set_t compute;
    CPU_ZERO(&compute);
    for (const char *p = list + 17; *p && *p != '"';) {  /* "1-3" or "1,2,3" */
        char *end;
        long lo = strtol(p, &end, 10), hi = lo;
        if (*end == '-') hi = strtol(end + 1, &end, 10);
        for (long c = lo; c <= hi; c++) CPU_SET(c, &compute);
        p = *end == ',' ? end + 1 : end;
    }
    int cores = CPU_COUNT(&compute);
    struct mcp b = start_child(1, cores), a = start_child(0, cores);
    snprintf(line, sizeof line, "{\"op\":\"provision\",\"pid\":%d,\"cores\":%d}\n", a.pid, cores);
    call(admin, line, reply, sizeof reply);
    tell(&b, 'a', 0);
    tell(&a, 'a', 0);
    uint64_t *get = calloc(trials, 8), *lose = calloc(trials, 8);
    for (int i = 0; i < trials; i++) {
        get[i] = tell(&b, 'r', 1);
        lose[i] = take_back(admin, b.pid, 0);
        tell(&b, 'y', 0);
    }
    row("get_one_cold", cores, get, trials);
    row("preempt_one", cores, lose, trials);
    for (int i = 0; i < trials; i++) {
        get[i] = tell(&b, 'r', cores);
        lose[i] = take_back(admin, b.pid, -1);
        tell(&b, 'y', 0);
    }
    row("get_max_cold", cores, get, trials);
    row("preempt_max", cores, lose, trials);
    for (int i = 0; i < trials; i++) {
        tell(&b, 'r', cores);
        get[i] = tell(&a, 'r', cores);
        tell(&a, 'y', 0);
        tell(&b, 'y', 0);
    }
    row("preempt_and_get_max", cores, get, trials);
    kill(a.pid, SIGKILL);
    kill(b.pid, SIGKILL);
    waitpid(a.pid, NULL, 0);
    waitpid(b.pid, NULL, 0);
    return 0;
}
