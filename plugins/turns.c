/* turns: a QEMU TCG plugin that ends each vCPU's turn after TURN instructions, so that the vCPUs
 * of an -icount guest share their one thread fairly (loaded by fullsys/guest.py for every guest
 * with several vCPUs under -icount).
 *
 * Why: QEMU 7.2 runs such a guest's vCPUs round robin in one thread and gives the vCPU whose turn
 * it is every instruction up to the next timer deadline. A vCPU that never halts nor executes
 * PAUSE uses all of it; the next vCPU's turn then comes at the deadline with a budget of zero, and
 * it never runs while the first one is busy. Linux's wait for a starting CPU is such a loop
 * (schedule() with nothing else runnable): the boot of a two-vCPU guest hangs at "x86: Booting SMP
 * configuration", and a busy vCPU starves the other's threads. (QEMU 8.0 splits the budget between
 * the vCPUs itself.) Ending a turn is what QEMU's own cpu_exit() does when its round-robin kick
 * timer fires; the plugin API has no call for it, so the plugin calls QEMU's cpu_exit() and
 * qemu_get_cpu(), which the qemu-system executable exports (it is linked for loadable modules). A
 * QEMU that does not export them refuses to load the plugin: an error, not a silent hang.
 *
 * The turn ends at an instruction count, so runs stay deterministic under -icount.
 * Arguments: turn=INSTRUCTIONS (default 100000, 0.1 ms of virtual time at shift=0). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <qemu-plugin.h>

QEMU_PLUGIN_EXPORT int qemu_plugin_version = QEMU_PLUGIN_VERSION;

/* QEMU's own functions (include/hw/core/cpu.h); CPUState stays opaque here. */
typedef struct CPUState CPUState;
extern CPUState *qemu_get_cpu(int index);
extern void cpu_exit(CPUState *cpu);

static uint64_t turn = 100000;
/* Instructions each vCPU has executed since its turn last ended; only its own thread touches it. */
static uint64_t *executed;

static void on_tb(unsigned int vcpu, void *instructions)
{
    executed[vcpu] += (uintptr_t)instructions;
    if (executed[vcpu] >= turn) {
        executed[vcpu] = 0;
        cpu_exit(qemu_get_cpu((int)vcpu)); /* the block runs to its end, the next one is not entered */
    }
}

static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    (void)id;
    qemu_plugin_register_vcpu_tb_exec_cb(tb, on_tb, QEMU_PLUGIN_CB_NO_REGS,
                                         (void *)(uintptr_t)qemu_plugin_tb_n_insns(tb));
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc, char **argv)
{
    for (int i = 0; i < argc; i++) {
        char *end = NULL;
        if (strncmp(argv[i], "turn=", 5) == 0) {
            turn = strtoull(argv[i] + 5, &end, 10);
        }
        if (end == NULL || *end != '\0' || turn == 0) {
            fprintf(stderr, "turns: %s: expected turn=INSTRUCTIONS (a positive integer)\n", argv[i]);
            return -1;
        }
    }
    if (!info->system_emulation) {
        fprintf(stderr, "turns: only for system emulation\n");
        return -1;
    }
    executed = calloc((size_t)info->system.max_vcpus, sizeof *executed);
    if (executed == NULL) {
        return -1;
    }
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
    return 0;
}
