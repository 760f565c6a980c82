// site_mov_further_back: syscall sites whose number is set by a `mov eax, nr` that is not the
// instruction right before the `syscall`, and one whose bytes only look like it.
//   further N   N calls of getppid through `mov eax, 110; xor sil, 0x80; syscall` (the shape of
//               glibc's futex waits); prints "ok" if each returned the parent's pid
//   rex N       N mmaps of descriptor 9 through `mov eax, edi; mov r8d, 9; syscall`, whose last
//               six bytes read `b8 09 00 00 00 0f 05` behind a REX prefix (`41`): relocating
//               them as `mov eax, 9` would leave r8, the descriptor, unset; prints "ok" if
//               each mapping holds the file's first byte
//   rex_page N  the same with the REX prefix the last byte of a page: `b8 09 00 00 00 0f 05`
//               starts the next page, whose bytes alone are all the runtime reads
//   fault N     N calls of `mov eax, 110; mov esi, [rdi]; syscall`, then one with rdi on a
//               PROT_NONE page: prints "ok" if the SIGSEGV handler is shown a rip inside that
//               function, as natively (not a copy of the load in a stub)
#define _GNU_SOURCE
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <ucontext.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

// rdi = number (9), rsi = length: the arguments of mmap(0, len, PROT_READ, MAP_PRIVATE, 9, 0),
// the descriptor last, so that `41 b8 09 00 00 00` ends right before the `syscall`.
#define MMAP_FD9_SETUP \
        "  mov %rdi, %rax\n" \
        "  xor %edi, %edi\n" \
        "  mov $1, %edx\n" \
        "  mov $2, %r10d\n" \
        "  xor %r9d, %r9d\n" \
        "  mov $9, %r8d\n"

__asm__(".text\n"
        ".p2align 4\n"
        // Not at a page's start, where the runtime refuses a `mov eax` whose byte before is unseen.
        "  nop\n"
        "getppid_further:\n"
        "  mov $110, %eax\n"
        "  xor $0x80, %sil\n"
        "  syscall\n"
        "  ret\n"
        ".p2align 4\n"
        "mmap_fd9:\n"
        MMAP_FD9_SETUP
        "  syscall\n"
        "  ret\n"
        // The same, its 41 at a page's end: 20 bytes from the function's start to the b8.
        ".p2align 12\n"
        ".skip 4096 - 20, 0x90\n"
        "mmap_fd9_page:\n"
        MMAP_FD9_SETUP
        "mmap_fd9_page_syscall:\n"
        "  syscall\n"
        "  ret\n"
        ".p2align 4\n"
        "getppid_load:\n"
        "  mov $110, %eax\n"
        "  mov (%rdi), %esi\n"
        "  syscall\n"
        "  ret\n"
        "getppid_load_end:\n");

long getppid_further(void);
long mmap_fd9(long nr, long len);
long mmap_fd9_page(long nr, long len);
extern char mmap_fd9_page_syscall[];
long getppid_load(int *p);
extern char getppid_load_end[];

static sigjmp_buf back;
static volatile int rip_inside = -1;

static void on_segv(int sig, siginfo_t *si, void *ctx)
{
    unsigned long rip = ((ucontext_t *)ctx)->uc_mcontext.gregs[REG_RIP];
    rip_inside = rip >= (unsigned long)getppid_load && rip < (unsigned long)getppid_load_end;
    siglongjmp(back, 1);
}

int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    long n = atol(argv[2]);
    if (!strcmp(argv[1], "further")) {
        long parent = getppid();
        for (long i = 0; i < n; i++)
            if (getppid_further() != parent) {
                printf("call %ld: wrong parent\n", i);
                return 1;
            }
    } else if (!strcmp(argv[1], "rex") || !strcmp(argv[1], "rex_page")) {
        long (*map)(long, long) = argv[1][3] ? mmap_fd9_page : mmap_fd9;
        if (argv[1][3] && ((unsigned long)mmap_fd9_page_syscall & 4095) != 5)
            return 3; // the layout did not come out
        char path[] = "/tmp/site_mov_further_back.XXXXXX";
        int fd = mkstemp(path);
        if (fd < 0 || write(fd, "Z", 1) != 1 || dup2(fd, 9) != 9)
            return 2;
        unlink(path);
        // Something other than 9 in r8 beforehand, as a caller would leave it.
        for (long i = 0; i < n; i++) {
            __asm__ volatile("mov $-1, %%r8" ::: "r8");
            long p = map(9, 4096);
            if (p < 0 || *(char *)p != 'Z') {
                printf("call %ld: mmap gave %ld\n", i, p);
                return 1;
            }
            munmap((void *)p, 4096);
        }
    } else if (!strcmp(argv[1], "fault")) {
        struct sigaction sa = {.sa_sigaction = on_segv, .sa_flags = SA_SIGINFO};
        sigaction(SIGSEGV, &sa, 0);
        int readable = 1;
        for (long i = 0; i < n; i++)
            getppid_load(&readable);
        int *none = mmap(0, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (!sigsetjmp(back, 1))
            getppid_load(none);
        if (rip_inside != 1) {
            printf("SIGSEGV shown at a rip %s the function\n", rip_inside ? "never; no fault in" : "outside");
            return 1;
        }
    } else {
        return 2;
    }
    puts("ok");
    return 0;
}
