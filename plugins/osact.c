/* osact: a QEMU TCG plugin counting, per vCPU, instructions and memory accesses split into kernel
 * and user by the most significant bit of the address (paper 001, §III-C) inside the region of
 * interest the workload marks, and writing them as one JSON document when QEMU exits.
 *
 * Region of interest: the guest executes `xchg %bx,%bx` (66 87 db) to open it and `xchg %cx,%cx`
 * (66 87 c9) to close it; compilers never emit either, and both are no-ops on the CPU.
 * Instructions are split by the MSB of their own address (x86-64 kernel text lies in the upper
 * half); memory accesses by the MSB of the address they touch, which is the paper's rule.
 * Kernel code in the region is also counted per translation block (start address, length, times
 * executed, memory accesses made): the host names the functions afterwards from the guest's own
 * /proc/kallsyms, so no symbols are needed at run time and KASLR does not matter.
 * With cache=on, every vCPU also runs a cache model (cachemodel.h: L1 instruction, L1 data, a
 * unified L2, all private to the vCPU) inside the region, caches cold at its start: each
 * translation block's execution fetches the lines its bytes span (by host address: the API gives
 * no guest physical address of an instruction), each load or store the line of its guest physical
 * address (I/O accesses bypass the caches); hits and misses are counted by the side of the code
 * that made them. The timing model on top is the host's (fullsys/timing.py).
 * Arguments: out=PATH (required), mem=on|off (count memory accesses; default on), cache=on|off
 * (default off; on implies mem=on), l1i=, l1d=, l2=SIZE:ASSOC:LINE (defaults 32K:8:64,
 * 32K:8:64, 1M:16:64). */
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <qemu-plugin.h>

#include "cachemodel.h"

QEMU_PLUGIN_EXPORT int qemu_plugin_version = QEMU_PLUGIN_VERSION;

enum { USER = 0, KERNEL = 1 };
enum { ROI_BEFORE = 0, ROI_INSIDE = 1, ROI_AFTER = 2 };

/* The cache model's events in the region, by the side of the code that made them. */
enum { L1I_ACCESSES, L1I_MISSES, L2I_MISSES, L1D_ACCESSES, L1D_MISSES, L2D_MISSES, N_CACHE_EVENTS };
static const char *const CACHE_EVENTS[N_CACHE_EVENTS] = {"l1i_accesses", "l1i_misses", "l2i_misses",
                                                         "l1d_accesses", "l1d_misses", "l2d_misses"};

/* Aligned to cache lines: vCPU threads never share a line they write. */
typedef struct {
    uint64_t insns[2];   /* in the region of interest, by the instruction address's MSB */
    uint64_t loads[2];   /* by the accessed address's MSB */
    uint64_t stores[2];
    uint64_t run_insns;  /* the whole run, boot included: the simulation speed */
    uint64_t cache_events[N_CACHE_EVENTS][2];
    Cache l1i, l1d, l2;
} __attribute__((aligned(64))) VcpuCounts;

static VcpuCounts *counts;
static int n_vcpus;
static bool count_memory = true;
static bool model_caches = false;
static CacheGeometry geometry_l1i = {32 << 10, 8, 64}, geometry_l1d = {32 << 10, 8, 64}, geometry_l2 = {1 << 20, 16, 64};
static char *out_path;
static volatile int roi_state = ROI_BEFORE;
static int roi_opened_by = -1;
static uint64_t start_ns, roi_begin_ns, roi_end_ns, roi_begin_cpu_ns, roi_end_cpu_ns;

/* One translation block, found again by (address, host address, length) when QEMU translates the
 * same code anew; for kernel code also its work in the region. */
typedef struct Block {
    uint64_t vaddr;
    uint64_t haddr;   /* of its first byte in the host's copy of guest memory: the cache model's fetch address */
    uint32_t n_insns;
    uint32_t bytes;
    int side;
    uint64_t execs;   /* in the region of interest (kernel blocks) */
    uint64_t memory;  /* loads and stores its instructions made in the region (kernel blocks) */
    struct Block *next;
} Block;

enum { BLOCK_BUCKETS = 1 << 16 };
static Block *blocks[BLOCK_BUCKETS];
static pthread_mutex_t blocks_lock = PTHREAD_MUTEX_INITIALIZER;

static const uint8_t ROI_BEGIN[3] = {0x66, 0x87, 0xdb};
static const uint8_t ROI_END[3] = {0x66, 0x87, 0xc9};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* QEMU's own CPU time: on a shared machine the simulation speed per CPU second is the comparable
 * figure, the wall-clock one depends on what else runs. */
static uint64_t cpu_ns(void)
{
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    return ((uint64_t)usage.ru_utime.tv_sec + (uint64_t)usage.ru_stime.tv_sec) * 1000000000u +
           ((uint64_t)usage.ru_utime.tv_usec + (uint64_t)usage.ru_stime.tv_usec) * 1000u;
}

static int side(uint64_t address)
{
    return (int)(address >> 63);
}

static Block *block_of(uint64_t vaddr, uint64_t haddr, size_t n_insns, size_t bytes)
{
    size_t bucket = (size_t)((vaddr ^ (vaddr >> 16) ^ haddr ^ (haddr >> 20) ^ n_insns) & (BLOCK_BUCKETS - 1));
    pthread_mutex_lock(&blocks_lock);
    Block *block = blocks[bucket];
    while (block != NULL && !(block->vaddr == vaddr && block->haddr == haddr && block->n_insns == n_insns)) {
        block = block->next;
    }
    if (block == NULL && (block = calloc(1, sizeof *block)) != NULL) {
        *block = (Block){.vaddr = vaddr, .haddr = haddr, .n_insns = (uint32_t)n_insns, .bytes = (uint32_t)bytes,
                         .side = side(vaddr), .next = blocks[bucket]};
        blocks[bucket] = block;
    }
    pthread_mutex_unlock(&blocks_lock);
    return block;
}

/* An L1 access that misses goes on to the L2; the events count where it was served. */
static void cached_access(VcpuCounts *c, Cache *l1, uint64_t address, int event, int code_side)
{
    c->cache_events[event][code_side]++;
    if (!cachemodel_access(l1, address)) {
        c->cache_events[event + 1][code_side]++;
        if (!cachemodel_access(&c->l2, address)) {
            c->cache_events[event + 2][code_side]++;
        }
    }
}

/* A translation block lies in one page, so all its instructions are on one side. */
static void on_tb(unsigned int vcpu, void *data)
{
    Block *block = data;
    VcpuCounts *c = &counts[vcpu];
    c->run_insns += block->n_insns;
    if (roi_state != ROI_INSIDE) {
        return;
    }
    c->insns[block->side] += block->n_insns;
    if (block->side == KERNEL) {
        __atomic_fetch_add(&block->execs, 1, __ATOMIC_RELAXED);
    }
    if (model_caches) {
        uint64_t line = c->l1i.geometry.line;
        for (uint64_t a = block->haddr & ~(line - 1); a < block->haddr + block->bytes; a += line) {
            cached_access(c, &c->l1i, a, L1I_ACCESSES, block->side);
        }
    }
}

/* `data` is the block of the instruction making the access. */
static void on_memory(unsigned int vcpu, qemu_plugin_meminfo_t info, uint64_t address, void *data)
{
    if (roi_state != ROI_INSIDE) {
        return;
    }
    Block *block = data;
    VcpuCounts *c = &counts[vcpu];
    if (block->side == KERNEL) {
        __atomic_fetch_add(&block->memory, 1, __ATOMIC_RELAXED);
    }
    if (qemu_plugin_mem_is_store(info)) {
        c->stores[side(address)]++;
    } else {
        c->loads[side(address)]++;
    }
    if (model_caches) {
        struct qemu_plugin_hwaddr *hw = qemu_plugin_get_hwaddr(info, address);
        if (hw != NULL && !qemu_plugin_hwaddr_is_io(hw)) {
            cached_access(c, &c->l1d, qemu_plugin_hwaddr_phys_addr(hw), L1D_ACCESSES, block->side);
        }
    }
}

static void on_roi_begin(unsigned int vcpu, void *unused)
{
    (void)unused;
    if (roi_state == ROI_BEFORE) {
        roi_begin_ns = now_ns();
        roi_begin_cpu_ns = cpu_ns();
        roi_opened_by = (int)vcpu;
        roi_state = ROI_INSIDE;
    }
}

static void on_roi_end(unsigned int vcpu, void *unused)
{
    (void)vcpu; (void)unused;
    if (roi_state == ROI_INSIDE) {
        roi_end_ns = now_ns();
        roi_end_cpu_ns = cpu_ns();
        roi_state = ROI_AFTER;
    }
}

static bool is_marker(struct qemu_plugin_insn *insn, const uint8_t marker[3])
{
    return qemu_plugin_insn_size(insn) == 3 && memcmp(qemu_plugin_insn_data(insn), marker, 3) == 0;
}

static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    (void)id;
    size_t n = qemu_plugin_tb_n_insns(tb);
    if (n == 0) {
        return;
    }
    struct qemu_plugin_insn *first = qemu_plugin_tb_get_insn(tb, 0), *last = qemu_plugin_tb_get_insn(tb, n - 1);
    uint64_t vaddr = qemu_plugin_insn_vaddr(first);
    uint64_t haddr = (uint64_t)(uintptr_t)qemu_plugin_insn_haddr(first);
    size_t bytes = qemu_plugin_insn_vaddr(last) + qemu_plugin_insn_size(last) - vaddr;
    Block *block = block_of(vaddr, haddr != 0 ? haddr : vaddr, n, bytes);
    if (block == NULL) {
        qemu_plugin_outs("osact: out of memory\n");
        abort();
    }
    qemu_plugin_register_vcpu_tb_exec_cb(tb, on_tb, QEMU_PLUGIN_CB_NO_REGS, block);
    for (size_t i = 0; i < n; i++) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        if (is_marker(insn, ROI_BEGIN)) {
            qemu_plugin_register_vcpu_insn_exec_cb(insn, on_roi_begin, QEMU_PLUGIN_CB_NO_REGS, NULL);
        } else if (is_marker(insn, ROI_END)) {
            qemu_plugin_register_vcpu_insn_exec_cb(insn, on_roi_end, QEMU_PLUGIN_CB_NO_REGS, NULL);
        }
        if (count_memory) {
            qemu_plugin_register_vcpu_mem_cb(insn, on_memory, QEMU_PLUGIN_CB_NO_REGS, QEMU_PLUGIN_MEM_RW, block);
        }
    }
}

static void write_pair(FILE *f, const char *name, const uint64_t pair[2], const char *after)
{
    fprintf(f, "\"%s\": {\"kernel\": %" PRIu64 ", \"user\": %" PRIu64 "}%s", name, pair[KERNEL], pair[USER], after);
}

static void write_counts(qemu_plugin_id_t id, void *unused)
{
    (void)id; (void)unused;
    uint64_t end = now_ns();
    FILE *f = fopen(out_path, "w");
    if (f == NULL) {
        qemu_plugin_outs("osact: cannot write the output file\n");
        return;
    }
    fprintf(f, "{\"plugin\": \"osact\", \"format\": 3, \"memory_counted\": %s,\n", count_memory ? "true" : "false");
    bool closed = roi_state == ROI_AFTER;
    fprintf(f, " \"roi\": {\"opened\": %s, \"closed\": %s, \"opened_by_vcpu\": %d, \"wall_ns\": %" PRIu64
            ", \"cpu_ns\": %" PRIu64 "},\n", roi_state != ROI_BEFORE ? "true" : "false", closed ? "true" : "false",
            roi_opened_by, closed ? roi_end_ns - roi_begin_ns : 0, closed ? roi_end_cpu_ns - roi_begin_cpu_ns : 0);
    fprintf(f, " \"run_wall_ns\": %" PRIu64 ", \"run_cpu_ns\": %" PRIu64 ",\n \"vcpus\": [\n", end - start_ns,
            cpu_ns());
    for (int v = 0; v < n_vcpus; v++) {
        fprintf(f, "  {\"vcpu\": %d, \"run_insns\": %" PRIu64 ", ", v, counts[v].run_insns);
        write_pair(f, "insns", counts[v].insns, ", ");
        write_pair(f, "loads", counts[v].loads, ", ");
        write_pair(f, "stores", counts[v].stores, "");
        if (model_caches) {
            fprintf(f, ", \"cache\": {");
            for (int e = 0; e < N_CACHE_EVENTS; e++) {
                write_pair(f, CACHE_EVENTS[e], counts[v].cache_events[e], e + 1 < N_CACHE_EVENTS ? ", " : "}");
            }
        }
        fprintf(f, "}%s\n", v + 1 < n_vcpus ? "," : "");
    }
    fprintf(f, " ],\n");
    if (model_caches) {
        const CacheGeometry *g[3] = {&geometry_l1i, &geometry_l1d, &geometry_l2};
        const char *names[3] = {"l1i", "l1d", "l2"};
        fprintf(f, " \"caches\": {");
        for (int i = 0; i < 3; i++) {
            fprintf(f, "\"%s\": {\"size\": %" PRIu64 ", \"assoc\": %u, \"line\": %u}%s", names[i], g[i]->size,
                    g[i]->assoc, g[i]->line, i < 2 ? ", " : "},\n");
        }
    }
    fprintf(f, " \"kernel_blocks\": [");
    const char *separator = "\n  ";
    for (size_t bucket = 0; bucket < BLOCK_BUCKETS; bucket++) {
        for (const Block *b = blocks[bucket]; b != NULL; b = b->next) {
            if (b->side == KERNEL && b->execs > 0) {
                fprintf(f, "%s[%" PRIu64 ", %" PRIu32 ", %" PRIu64 ", %" PRIu64 "]", separator, b->vaddr, b->n_insns,
                        b->execs, b->memory);
                separator = ",\n  ";
            }
        }
    }
    fprintf(f, "\n ]}\n");
    fclose(f);
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc, char **argv)
{
    for (int i = 0; i < argc; i++) {
        char *value = strchr(argv[i], '=');
        if (value == NULL) {
            fprintf(stderr, "osact: argument %s is not NAME=VALUE\n", argv[i]);
            return -1;
        }
        *value++ = '\0';
        if (strcmp(argv[i], "out") == 0) {
            out_path = strdup(value);
        } else if (strcmp(argv[i], "mem") == 0) {
            if (!qemu_plugin_bool_parse(argv[i], value, &count_memory)) {
                fprintf(stderr, "osact: mem=%s is not on or off\n", value);
                return -1;
            }
        } else if (strcmp(argv[i], "cache") == 0) {
            if (!qemu_plugin_bool_parse(argv[i], value, &model_caches)) {
                fprintf(stderr, "osact: cache=%s is not on or off\n", value);
                return -1;
            }
        } else if (strcmp(argv[i], "l1i") == 0 || strcmp(argv[i], "l1d") == 0 || strcmp(argv[i], "l2") == 0) {
            CacheGeometry *g = argv[i][1] == '2' ? &geometry_l2 : argv[i][2] == 'i' ? &geometry_l1i : &geometry_l1d;
            char why[160];
            if (!cachemodel_parse(value, g, why, sizeof why)) {
                fprintf(stderr, "osact: %s=%s\n", argv[i], why);
                return -1;
            }
        } else {
            fprintf(stderr, "osact: unknown argument %s\n", argv[i]);
            return -1;
        }
    }
    count_memory = count_memory || model_caches;
    if (out_path == NULL) {
        fprintf(stderr, "osact: out=PATH is required\n");
        return -1;
    }
    if (!info->system_emulation) {
        fprintf(stderr, "osact: needs full-system emulation (the kernel's side of the split)\n");
        return -1;
    }
    n_vcpus = info->system.max_vcpus;
    counts = calloc((size_t)n_vcpus, sizeof *counts);
    if (counts == NULL) {
        return -1;
    }
    for (int v = 0; v < n_vcpus && model_caches; v++) {
        if (!cachemodel_init(&counts[v].l1i, geometry_l1i) || !cachemodel_init(&counts[v].l1d, geometry_l1d) ||
            !cachemodel_init(&counts[v].l2, geometry_l2)) {
            fprintf(stderr, "osact: out of memory for the caches\n");
            return -1;
        }
    }
    start_ns = now_ns();
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
    qemu_plugin_register_atexit_cb(id, write_counts, NULL);
    return 0;
}
