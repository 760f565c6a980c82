/* Threads hammer three syscall sites while the runtime rewrites them, one per way of writing:
 * a `mov eax, nr` inside one 16-byte block (one atomic store), one straddling two blocks
 * (two-phase write), and read's `xor eax, eax` (short jump into padding). Every call must give
 * the right answer. Usage: rewrite_race THREADS CALLS */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

long site_single(void);
long site_split(void);
long site_read(void);

__asm__(".text\n"
        ".p2align 4\n"
        "site_single:\n"
        "  mov $110, %eax\n" /* getppid */
        "  syscall\n"
        "  ret\n"
        ".p2align 4\n"
        "site_split:\n"
        "  .fill 13, 1, 0x90\n" /* the mov's 5 bytes cross the 16-byte boundary */
        "  mov $110, %eax\n"
        "  syscall\n"
        "  ret\n"
        ".p2align 4\n"
        "site_read:\n"
        "  mov $-1, %edi\n" /* read(-1, 0, 0): EBADF */
        "  xor %esi, %esi\n"
        "  xor %edx, %edx\n"
        "  xor %eax, %eax\n"
        "  syscall\n"
        "  cmp $-4096, %rax\n"
        "  ret\n"
        ".p2align 4\n");

static pthread_barrier_t start;
static long parent, calls;

static void *hammer(void *arg)
{
    long wrong = 0;
    (void)arg;
    pthread_barrier_wait(&start);
    for (long i = 0; i < calls; i++) {
        wrong += site_single() != parent;
        wrong += site_split() != parent;
        wrong += site_read() != -9;
    }
    return (void *)wrong;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 8;
    long wrong = 0;
    pthread_t t[256];

    calls = argc > 2 ? atol(argv[2]) : 100000;
    parent = getppid();
    if (n < 1 || n > 256)
        return 2;
    pthread_barrier_init(&start, NULL, n);
    for (int i = 0; i < n; i++)
        pthread_create(&t[i], NULL, hammer, NULL);
    for (int i = 0; i < n; i++) {
        void *w;
        pthread_join(t[i], &w);
        wrong += (long)w;
    }
    printf("threads=%d calls=%ld wrong=%ld\n", n, calls, wrong);
    return wrong != 0;
}
