// go_syscall_site: a syscall site shaped like the end of Go's Syscall6 (the number already in
// rax, then `mov rdx, rdi; mov rsi, rcx; mov rdi, rbx; syscall`), called on a stack of
// STACK bytes above a guard page, as a goroutine's is small, by a thread with a signal stack
// of its own, as Go gives every thread. Under coreplane the site is rewritten; a call the fast
// path does not make in assembly must not run on that small stack. `plain` calls through
// ordinary sites instead (`mov eax, NR; syscall`, as glibc's and Go's own runtime functions
// such as runtime.write1 are), which the fast path enters at its ordinary entry.
//
//   go_syscall_site CALLS [STACK] [go|plain]   prints "calls=N ppid_ok=1" on success
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

// rax = number, rbx/rcx/rdi = arguments 1-3, as Go's register ABI leaves them.
__asm__(".text\n"
        ".globl go_site\n"
        ".p2align 4\n"
        "go_site:\n"
        "  mov %rdi, %rdx\n"
        "  mov %rcx, %rsi\n"
        "  mov %rbx, %rdi\n"
        "  syscall\n"
        "  ret\n");

// The ordinary form: the number an immediate right before the instruction, a site each.
__asm__(".text\n"
        ".p2align 4\n"
        "plain_getppid:\n"
        "  mov $110, %eax\n"
        "  syscall\n"
        "  ret\n"
        ".p2align 4\n"
        "plain_write:\n"
        "  mov $1, %eax\n"
        "  syscall\n"
        "  ret\n");

extern char plain_getppid[], plain_write[];
static int plain;

static long site(long nr, long a1, long a2, long a3)
{
    if (plain) {
        long ret;
        __asm__ volatile("sub $128, %%rsp\n\tcall *%1\n\tadd $128, %%rsp"
                         : "=a"(ret)
                         : "r"(nr == SYS_getppid ? plain_getppid : plain_write),
                           "D"(a1), "S"(a2), "d"(a3)
                         : "rcx", "r11", "memory", "cc");
        return ret;
    }
    long ret;
    // The call skips the caller's red zone, as Go's code has none to keep.
    __asm__ volatile("sub $128, %%rsp\n\tcall go_site\n\tadd $128, %%rsp"
                     : "=a"(ret), "+c"(a2), "+D"(a3)
                     : "a"(nr), "b"(a1)
                     : "rdx", "rsi", "r11", "memory", "cc");
    return ret;
}

static long calls;
static long parent;
static int ppid_ok;

// Calls nothing but the site: a library call (a lazy PLT binding) would need more stack.
static void body(void)
{
    ppid_ok = 1;
    for (long i = 0; i < calls; i++) {
        if (site(SYS_getppid, 0, 0, 0) != parent)
            ppid_ok = 0;
        site(SYS_write, -1, 0, 0);   // EBADF: one more number through the site
    }
}

int main(int argc, char **argv)
{
    calls = argc > 1 ? atol(argv[1]) : 100;
    parent = getppid();
    long stack = argc > 2 ? atol(argv[2]) : 1024;
    plain = argc > 3 && argv[3][0] == 'p';
    long page = sysconf(_SC_PAGESIZE);
    char *base = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED || mprotect(base, page, PROT_NONE) != 0)
        return 2;
    stack_t ss = {.ss_sp = malloc(64 * 1024), .ss_size = 64 * 1024};
    if (!ss.ss_sp || sigaltstack(&ss, NULL) != 0)
        return 2;
    char *top = base + page + stack;   // `stack` bytes above the guard page
    // Runs `body` on the small stack: rsp moves there and back around the call.
    __asm__ volatile("mov %%rsp, %%r12\n\tmov %0, %%rsp\n\tcall *%1\n\tmov %%r12, %%rsp"
                     : : "r"(top), "r"(body) : "r12", "rax", "rcx", "rdx", "rsi", "rdi", "r8", "r9", "r10", "r11",
                       "memory", "cc");
    printf("calls=%ld ppid_ok=%d\n", calls, ppid_ok);
    return 0;
}
