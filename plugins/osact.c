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
 * Arguments: out=PATH (required), mem=on|off (count memory accesses; default on). */
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <qemu-plugin.h>

QEMU_PLUGIN_EXPORT int qemu_plugin_version = QEMU_PLUGIN_VERSION;

enum { USER = 0, KERNEL = 1 };
enum { ROI_BEFORE = 0, ROI_INSIDE = 1, ROI_AFTER = 2 };

/* One cache line per vCPU: vCPU threads never share a line they write. */
typedef struct {
    uint64_t insns[2];   /* in the region of interest, by the instruction address's MSB */
    uint64_t loads[2];   /* by the accessed address's MSB */
    uint64_t stores[2];
    uint64_t run_insns;  /* the whole run, boot included: the simulation speed */
    uint64_t pad;
} __attribute__((aligned(64))) VcpuCounts;

static VcpuCounts *counts;
static int n_vcpus;
static bool count_memory = true;
static char *out_path;
static volatile int roi_state = ROI_BEFORE;
static int roi_opened_by = -1;
static uint64_t start_ns, roi_begin_ns, roi_end_ns, roi_begin_cpu_ns, roi_end_cpu_ns;

/* One kernel translation block's work in the region, found again by (address, length) when QEMU
 * translates the same code anew. */
typedef struct KernelBlock {
    uint64_t vaddr;
    uint64_t n_insns;
    uint64_t execs;   /* in the region of interest */
    uint64_t memory;  /* loads and stores its instructions made in the region */
    struct KernelBlock *next;
} KernelBlock;

enum { BLOCK_BUCKETS = 1 << 16 };
static KernelBlock *blocks[BLOCK_BUCKETS];
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

/* A translation block lies in one page, so all its instructions are on one side: the count and
 * the side travel packed in the callback's user data. */
static void on_tb(unsigned int vcpu, void *packed)
{
    uintptr_t n = (uintptr_t)packed >> 1;
    counts[vcpu].run_insns += n;
    if (roi_state == ROI_INSIDE) {
        counts[vcpu].insns[(uintptr_t)packed & 1] += n;
    }
}

static KernelBlock *kernel_block(uint64_t vaddr, size_t n_insns)
{
    size_t bucket = (size_t)((vaddr ^ (vaddr >> 16) ^ n_insns) & (BLOCK_BUCKETS - 1));
    pthread_mutex_lock(&blocks_lock);
    KernelBlock *block = blocks[bucket];
    while (block != NULL && !(block->vaddr == vaddr && block->n_insns == n_insns)) {
        block = block->next;
    }
    if (block == NULL && (block = calloc(1, sizeof *block)) != NULL) {
        *block = (KernelBlock){.vaddr = vaddr, .n_insns = n_insns, .next = blocks[bucket]};
        blocks[bucket] = block;
    }
    pthread_mutex_unlock(&blocks_lock);
    return block;
}

static void on_kernel_tb(unsigned int vcpu, void *data)
{
    KernelBlock *block = data;
    counts[vcpu].run_insns += block->n_insns;
    if (roi_state == ROI_INSIDE) {
        counts[vcpu].insns[KERNEL] += block->n_insns;
        __atomic_fetch_add(&block->execs, 1, __ATOMIC_RELAXED);
    }
}

/* `data` is the kernel block of the instruction making the access, NULL in user code. */
static void on_memory(unsigned int vcpu, qemu_plugin_meminfo_t info, uint64_t address, void *data)
{
    if (roi_state != ROI_INSIDE) {
        return;
    }
    if (data != NULL) {
        __atomic_fetch_add(&((KernelBlock *)data)->memory, 1, __ATOMIC_RELAXED);
    }
    if (qemu_plugin_mem_is_store(info)) {
        counts[vcpu].stores[side(address)]++;
    } else {
        counts[vcpu].loads[side(address)]++;
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
    uint64_t first = qemu_plugin_insn_vaddr(qemu_plugin_tb_get_insn(tb, 0));
    KernelBlock *block = side(first) == KERNEL ? kernel_block(first, n) : NULL;
    if (block != NULL) {
        qemu_plugin_register_vcpu_tb_exec_cb(tb, on_kernel_tb, QEMU_PLUGIN_CB_NO_REGS, block);
    } else {
        uintptr_t packed = ((uintptr_t)n << 1) | (uintptr_t)side(first);
        qemu_plugin_register_vcpu_tb_exec_cb(tb, on_tb, QEMU_PLUGIN_CB_NO_REGS, (void *)packed);
    }
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
    fprintf(f, "{\"plugin\": \"osact\", \"format\": 2, \"memory_counted\": %s,\n", count_memory ? "true" : "false");
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
        fprintf(f, "}%s\n", v + 1 < n_vcpus ? "," : "");
    }
    fprintf(f, " ],\n \"kernel_blocks\": [");
    const char *separator = "\n  ";
    for (size_t bucket = 0; bucket < BLOCK_BUCKETS; bucket++) {
        for (const KernelBlock *b = blocks[bucket]; b != NULL; b = b->next) {
            if (b->execs > 0) {
                fprintf(f, "%s[%" PRIu64 ", %" PRIu64 ", %" PRIu64 ", %" PRIu64 "]", separator, b->vaddr, b->n_insns,
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
        } else {
            fprintf(stderr, "osact: unknown argument %s\n", argv[i]);
            return -1;
        }
    }
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
    start_ns = now_ns();
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
    qemu_plugin_register_atexit_cb(id, write_counts, NULL);
    return 0;
}
