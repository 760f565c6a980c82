/* A block grown by mremap(MREMAP_MAYMOVE) again and again, and one grown by realloc (glibc's
 * mremap of an mmapped chunk): the bytes written first must survive every move. Under
 * `--memory pool-demand` the second move failed with EFAULT and realloc's fallback aborted in
 * munmap_chunk (issue 15). Prints what it checked; exit 1 when a byte was lost. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

int main(void) {
    size_t size = 256 * 1024;
    char *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        return 2;
    }
    p[0] = 'A';
    p[5000] = 'B';
    int lost = 0;
    for (int i = 0; i < 7; i++) {   /* 256 KiB to 32 MiB */
        char *q = mremap(p, size, size * 2, MREMAP_MAYMOVE);
        if (q == MAP_FAILED) {
            printf("mremap to %zu KiB: %s\n", size * 2 / 1024, strerror(errno));
            return 1;
        }
        lost |= q[0] != 'A' || q[5000] != 'B' || (i > 0 && q[size - 1] != 'C');
        size *= 2;
        q[size - 1] = 'C';
        p = q;
    }
    printf("mremap: %s\n", lost ? "lost bytes" : "kept every byte");
    char *m = malloc(300000);
    memset(m, 7, 300000);
    for (int i = 1; i <= 7; i++) {
        m = realloc(m, (size_t)300000 << i);
        if (m == NULL || m[1000] != 7 || m[299999] != 7) {
            printf("realloc: lost bytes at step %d\n", i);
            return 1;
        }
    }
    free(m);
    puts("realloc: kept every byte");
    return lost;
}
