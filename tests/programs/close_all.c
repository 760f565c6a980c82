/* Closes every descriptor but 0-2, as erl_child_setup, daemons and glibc's closefrom do, then
 * uses memory the memory service serves (64 MiB mapped, touched and unmapped four times, by two
 * threads). The runtime's own descriptors (a userfaultfd under --memory pool-demand, sockets and
 * /proc files) must survive: before, pool-demand's fault handler died on a read of its closed
 * descriptor and took the process with it. argv[1]: close_range | unshare | loop. */
#define _GNU_SOURCE
#include <linux/close_range.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define SIZE (64UL << 20)

static void *churn(void *arg) {
    unsigned long sum = 0;
    for (int round = 0; round < 4; round++) {
        unsigned char *p = mmap(NULL, SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            return (void *)-1UL;
        for (unsigned long i = 0; i < SIZE; i += 4096)
            sum += p[i]++;           /* reads zero, as fresh memory must */
        munmap(p, SIZE);
    }
    *(unsigned long *)arg = sum;
    return NULL;
}

int main(int argc, char **argv) {
    const char *how = argc > 1 ? argv[1] : "close_range";
    if (strcmp(how, "close_range") == 0)
        syscall(SYS_close_range, 3, ~0U, 0);
    else if (strcmp(how, "unshare") == 0)
        syscall(SYS_close_range, 3, ~0U, CLOSE_RANGE_UNSHARE);
    else
        for (int fd = 3; fd < 4096; fd++)
            close(fd);
    unsigned long a = 1, b = 1;
    pthread_t t;
    pthread_create(&t, NULL, churn, &a);
    churn(&b);
    pthread_join(t, NULL);
    printf("%s: fresh memory read %lu and %lu non-zero bytes\n", how, a, b);
    return a || b;
}
