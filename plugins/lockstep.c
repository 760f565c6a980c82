/* lockstep: a QEMU TCG plugin that gives the nodes of a full-system run one clock: every node's
 * QEMU (-icount, sleep=off) stops at each multiple of QUANTUM ns of its virtual time until all
 * nodes have reached it, as COTSon's mediator steps its nodes (fullsys run --common-clock).
 *
 * Under -icount a guest's virtual time advances with its instructions, and an idle guest's clock
 * leaps to its next timer; each QEMU keeps its own. Here a virtual-clock timer fires at every
 * boundary k x QUANTUM, busy or idle (a leap ends at the next timer, this one at the latest), and
 * its callback waits at a barrier shared by the run's QEMUs through a file they all map: a
 * generation counter that the last node to arrive increments, the others sleeping on it (futex).
 * A node whose QEMU exits (its guest powered off) leaves the barrier, so the others go on.
 * Virtual times of different nodes then differ by less than QUANTUM: a message sent at virtual
 * time t is received no earlier than t - QUANTUM, the nodes' regions of interest can be compared
 * on one time axis, and a node waiting for a peer waits as long as the peer computes.
 *
 * The timer is QEMU's own (timer_init_full, timer_mod_ns, qemu_clock_get_ns): the plugin API has
 * no timer, so the plugin calls the functions the qemu-system executable exports; a QEMU that does
 * not export them refuses to load the plugin. Its callback runs with QEMU's global lock held, so
 * the whole QEMU waits, devices included.
 * Arguments: barrier=FILE (created empty, at least one page, by the host), nodes=N, quantum=NS,
 * out=FILE (barriers passed and the time spent waiting, JSON, written when QEMU exits). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <qemu-plugin.h>

QEMU_PLUGIN_EXPORT int qemu_plugin_version = QEMU_PLUGIN_VERSION;

/* QEMU's own (include/qemu/timer.h); QEMUTimer stays opaque, its storage is ours. */
typedef struct QEMUTimer QEMUTimer;
typedef void QEMUTimerCB(void *opaque);
enum { QEMU_CLOCK_VIRTUAL = 1, SCALE_NS = 1 };
extern void timer_init_full(QEMUTimer *timer, void *timer_list_group, int clock, int scale, int attributes,
                            QEMUTimerCB *callback, void *opaque);
extern void timer_mod_ns(QEMUTimer *timer, int64_t expire_time);
extern int64_t qemu_clock_get_ns(int clock);

/* The shared barrier, one 64-bit word changed by compare-and-swap: the generation (high half, the
 * futex word), nodes that left (bits 16-31), nodes arrived at the current boundary (bits 0-15). */
typedef union {
    uint64_t word;
    struct {
        uint32_t counts; /* little-endian: the low half */
        uint32_t generation;
    };
} Barrier;

static Barrier *barrier;
static uint32_t nodes;
static int64_t quantum;
static const char *out_path;
/* sizeof(QEMUTimer) is 48 bytes in QEMU 7.2; the storage leaves room. */
static _Alignas(16) unsigned char timer_storage[256];
static uint64_t passed, wait_ns;

static uint64_t pack(uint32_t generation, uint32_t left, uint32_t arrived)
{
    return (uint64_t)generation << 32 | (uint64_t)left << 16 | arrived;
}

static void futex(uint32_t *word, int op, uint32_t value)
{
    struct timespec second = {1, 0}; /* a bounded sleep: the value is re-read either way */
    syscall(SYS_futex, word, op, value, op == FUTEX_WAIT ? &second : NULL, NULL, 0);
}

/* Counts this node in (arriving) or out for good (leaving); the last one the barrier waits for
 * opens it. Returns the generation to wait past, or -1 when there is nothing to wait for. */
static int64_t update(int leaving)
{
    uint64_t seen = __atomic_load_n(&barrier->word, __ATOMIC_ACQUIRE);
    for (;;) {
        uint32_t generation = seen >> 32, left = (seen >> 16) & 0xffff, arrived = seen & 0xffff;
        left += leaving;
        arrived += !leaving;
        int opens = arrived > 0 && arrived + left >= nodes;
        uint64_t next = opens ? pack(generation + 1, left, 0) : pack(generation, left, arrived);
        if (__atomic_compare_exchange_n(&barrier->word, &seen, next, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
            if (opens) {
                futex(&barrier->generation, FUTEX_WAKE, INT_MAX);
            }
            return opens || leaving ? -1 : (int64_t)generation;
        }
    }
}

static int64_t monotonic_ns(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return now.tv_sec * 1000000000LL + now.tv_nsec;
}

static void on_boundary(void *unused)
{
    (void)unused;
    int64_t started = monotonic_ns();
    int64_t generation = update(0);
    while (generation >= 0 && __atomic_load_n(&barrier->generation, __ATOMIC_ACQUIRE) == (uint32_t)generation) {
        futex(&barrier->generation, FUTEX_WAIT, (uint32_t)generation);
    }
    wait_ns += monotonic_ns() - started;
    passed++;
    /* The next multiple of the quantum: every node meets at the same virtual times, a node
     * restored from a snapshot (its clock set after the plugin started) included. */
    int64_t now = qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL);
    timer_mod_ns((QEMUTimer *)timer_storage, (now / quantum + 1) * quantum);
}

static void on_qemu_exit(qemu_plugin_id_t id, void *unused)
{
    (void)id;
    (void)unused;
    update(1);
    FILE *f = out_path ? fopen(out_path, "w") : NULL;
    if (f != NULL) {
        fprintf(f, "{\"nodes\": %u, \"quantum_ns\": %lld, \"barriers\": %llu, \"wait_ns\": %llu}\n", nodes,
                (long long)quantum, (unsigned long long)passed, (unsigned long long)wait_ns);
        fclose(f);
    }
}

static int fail(const char *what, const char *detail)
{
    fprintf(stderr, "lockstep: %s%s\n", what, detail);
    return -1;
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc, char **argv)
{
    const char *barrier_path = NULL;
    for (int i = 0; i < argc; i++) {
        char *value = strchr(argv[i], '='), *end = NULL;
        if (value == NULL) {
            return fail("argument is not NAME=VALUE: ", argv[i]);
        }
        value++;
        if (strncmp(argv[i], "barrier=", 8) == 0) {
            barrier_path = value;
        } else if (strncmp(argv[i], "out=", 4) == 0) {
            out_path = value;
        } else if (strncmp(argv[i], "nodes=", 6) == 0) {
            nodes = (uint32_t)strtoul(value, &end, 10);
        } else if (strncmp(argv[i], "quantum=", 8) == 0) {
            quantum = strtoll(value, &end, 10);
        } else {
            return fail("unknown argument ", argv[i]);
        }
        if (end != NULL && (*end != '\0' || end == value)) {
            return fail("not a number: ", argv[i]);
        }
    }
    if (!info->system_emulation || barrier_path == NULL || nodes < 1 || nodes > 0xffff || quantum < 1) {
        return fail("needs system emulation, barrier=FILE, nodes=1..65535 and quantum=NS", "");
    }
    int fd = open(barrier_path, O_RDWR);
    if (fd < 0) {
        return fail(barrier_path, strerror(errno));
    }
    barrier = mmap(NULL, sizeof *barrier, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (barrier == MAP_FAILED) {
        return fail("cannot map the barrier: ", strerror(errno));
    }
    QEMUTimer *timer = (QEMUTimer *)timer_storage;
    timer_init_full(timer, NULL, QEMU_CLOCK_VIRTUAL, SCALE_NS, 0, on_boundary, NULL);
    timer_mod_ns(timer, quantum);
    qemu_plugin_register_atexit_cb(id, on_qemu_exit, NULL);
    return 0;
}
