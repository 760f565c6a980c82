/* The general registers, the stack pointer, the red zone and the flags across a trap on a thread
 * under the program's own filter (which allows write and exit alone), where the runtime returns
 * to the program by hand (iretq from the frame, no rt_sigreturn): every register the syscall
 * instruction keeps (all but rax, the result, and rcx and r11, which it overwrites natively)
 * is set to a known value, DF, CF, ID and NT are set (the kernel keeps ID and NT from before the trap, and
 * the handler runs with NT, with which iretq faults), the 120 bytes below the stack pointer under its first word (which pushfq takes after the call) are filled, a
 * write is made with a `syscall` of this program's own, and each is checked after it. Prints
 * what differs, and "registers kept"; exits 77 where filters are refused. */
#define _GNU_SOURCE
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "write_only_filter.h"

static const char msg[] = "write under the filter\n";
/* rbx rbp rdi rsi rdx r8 r9 r10 r12 r13 r14 r15, then rax, rsp moved, flags, red zone checksum
 * differences. */
static uint64_t after[20], sp_before;
static const char *names[] = {"rbx", "rbp", "rdi", "rsi", "rdx", "r8", "r9", "r10", "r12", "r13", "r14", "r15"};

int main(void) {
    if (allow_only_write_and_exit(SECCOMP_RET_KILL_PROCESS) != 0)
        return 77;
    uint64_t *o = after;
    __asm__ volatile(
        /* Room of our own, with its lowest 128 bytes as the red zone below rsp during the call. */
        "push %%rbp\n push %%rbx\n push %%r12\n push %%r13\n push %%r14\n push %%r15\n"
        "push %[o]\n"
        "sub $256, %%rsp\n"
        "mov %%rsp, %%rax\n mov %%rax, %[spb]\n"
        "mov $15, %%ecx\n"
        "movabs $0x9e3779b97f4a7c15, %%rdx\n"
        "1: lea -128(%%rsp,%%rcx,8), %%r11\n mov %%rcx, %%rax\n imul %%rdx, %%rax\n"
        "mov %%rax, -8(%%r11)\n dec %%ecx\n jnz 1b\n"
        "movabs $0x1111111111111111, %%rbx\n movabs $0x2222222222222222, %%rbp\n"
        "mov $1, %%edi\n lea %[msg], %%rsi\n mov %[len], %%edx\n"
        "movabs $0x8888888888888888, %%r8\n movabs $0x9999999999999999, %%r9\n movabs $0xaaaaaaaaaaaaaaaa, %%r10\n"
        "movabs $0xcccccccccccccccc, %%r12\n movabs $0xdddddddddddddddd, %%r13\n"
        "movabs $0xeeeeeeeeeeeeeeee, %%r14\n movabs $0x7777777777777777, %%r15\n"
        "mov $1, %%eax\n"
        "pushfq\n orq $0x204000, (%%rsp)\n popfq\n"
        "std\n stc\n"
        "syscall\n"
        "pushfq\n pop %%rcx\n cld\n"
        "pushfq\n andq $~0x204000, (%%rsp)\n popfq\n"
        /* rsp is back where it was: the saved o is at rsp + 256. */
        "mov 256(%%rsp), %%r11\n"
        "mov %%rbx, 0(%%r11)\n mov %%rbp, 8(%%r11)\n mov %%rdi, 16(%%r11)\n mov %%rsi, 24(%%r11)\n"
        "mov %%rdx, 32(%%r11)\n mov %%r8, 40(%%r11)\n mov %%r9, 48(%%r11)\n mov %%r10, 56(%%r11)\n"
        "mov %%r12, 64(%%r11)\n mov %%r13, 72(%%r11)\n mov %%r14, 80(%%r11)\n mov %%r15, 88(%%r11)\n"
        "mov %%rax, 96(%%r11)\n mov %%rsp, 104(%%r11)\n mov %%rcx, 112(%%r11)\n"
        /* The red zone: how many of its 16 words changed. */
        "xor %%edx, %%edx\n mov $15, %%ecx\n"
        "movabs $0x9e3779b97f4a7c15, %%r8\n"
        "2: lea -128(%%rsp,%%rcx,8), %%rdi\n mov %%rcx, %%rax\n imul %%r8, %%rax\n"
        "cmp %%rax, -8(%%rdi)\n je 3f\n inc %%rdx\n 3: dec %%ecx\n jnz 2b\n"
        "mov %%rdx, 120(%%r11)\n"
        "add $256, %%rsp\n"
        "pop %[o]\n pop %%r15\n pop %%r14\n pop %%r13\n pop %%r12\n pop %%rbx\n pop %%rbp\n"
        : [o] "+r"(o), [spb] "=m"(sp_before)
        : [msg] "m"(msg), [len] "i"(sizeof msg - 1)
        : "rax", "rcx", "rdx", "rsi", "rdi", "r8", "r9", "r10", "r11", "memory", "cc");
    const uint64_t want[12] = {0x1111111111111111, 0x2222222222222222, 1, (uint64_t)msg, sizeof msg - 1,
                               0x8888888888888888, 0x9999999999999999, 0xaaaaaaaaaaaaaaaa, 0xcccccccccccccccc,
                               0xdddddddddddddddd, 0xeeeeeeeeeeeeeeee, 0x7777777777777777};
    char line[128];
    int bad = 0, n;
#define SAY(...) (n = snprintf(line, sizeof line, __VA_ARGS__), (void)!write(1, line, n))
    for (int i = 0; i < 12; i++)
        if (after[i] != want[i])
            bad++, SAY("%s %#llx\n", names[i], (unsigned long long)after[i]);
    if (after[12] != sizeof msg - 1)
        bad++, SAY("rax %lld\n", (long long)after[12]);
    if (after[13] != sp_before)
        bad++, SAY("rsp moved by %lld\n", (long long)(after[13] - sp_before));
    if (!(after[14] & 0x400) || !(after[14] & 1) || !(after[14] & 0x200000) || !(after[14] & 0x4000))
        bad++, SAY("flags %#llx: DF, CF, ID or NT lost\n", (unsigned long long)after[14]);
    if (after[15])
        bad++, SAY("%llu words of the red zone changed\n", (unsigned long long)after[15]);
    if (!bad)
        SAY("registers kept, DF, CF, ID and NT set, red zone intact\n");
    syscall(__NR_exit_group, bad ? 1 : 0);
}
