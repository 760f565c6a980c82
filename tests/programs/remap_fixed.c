/* mremap with MREMAP_FIXED on memory the pool serves, as stress-ng --pagemove uses it: the pages
 * of a 1 MiB mapping rotated by one through a page the program unmapped (so the target is memory
 * it gave back), a page moved out to a mapping of the kernel's (the page it left faults) and one
 * moved in over a page the program holds; then the mapping is given back and a new one reads as
 * zero. Prints what it found. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define PAGE 4096
#define PAGES 256

static int faults(volatile char *p) {
    pid_t child = fork();
    if (child == 0) {
        (void)*p;
        _exit(0);
    }
    int status;
    waitpid(child, &status, 0);
    return WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV;
}

int main(void) {
    char *buf = mmap(NULL, (PAGES + 1) * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    char *spare = buf + PAGES * PAGE;
    munmap(spare, PAGE);
    for (int i = 0; i < PAGES; i++)
        memset(buf + i * PAGE, i, PAGE);
    int failed = 0;
    for (char *p = buf; p < buf + (PAGES - 1) * PAGE; p += PAGE) {
        failed |= mremap(p, PAGE, PAGE, MREMAP_FIXED | MREMAP_MAYMOVE, spare) == MAP_FAILED;
        failed |= mremap(p + PAGE, PAGE, PAGE, MREMAP_FIXED | MREMAP_MAYMOVE, p) == MAP_FAILED;
        failed |= mremap(spare, PAGE, PAGE, MREMAP_FIXED | MREMAP_MAYMOVE, p + PAGE) == MAP_FAILED;
    }
    int rotated = !failed;
    for (int i = 0; i < PAGES && rotated; i++)
        rotated = buf[i * PAGE] == (char)((i + 1) % PAGES) && buf[i * PAGE + PAGE - 1] == (char)((i + 1) % PAGES);
    printf("rotated %d pages: %s\n", PAGES, rotated ? "every byte in place" : "wrong");

    char *out = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    char *moved = mremap(buf + 7 * PAGE, PAGE, PAGE, MREMAP_FIXED | MREMAP_MAYMOVE, out);
    printf("moved out: %s, the page it left %s\n", moved == out && out[0] == 8 ? "kept" : "lost",
           faults(buf + 7 * PAGE) ? "faults" : "reads");
    moved = mremap(out, PAGE, PAGE, MREMAP_FIXED | MREMAP_MAYMOVE, buf + 9 * PAGE);
    printf("moved in over a held page: %s\n", moved == buf + 9 * PAGE && buf[9 * PAGE] == 8 ? "kept" : "lost");

    munmap(buf, PAGES * PAGE);
    char *again = mmap(NULL, PAGES * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    int zero = 1;
    for (int i = 0; i < PAGES * PAGE; i++)
        zero &= again[i] == 0;
    printf("mapped again: %s\n", zero ? "zero" : "not zero");
    return 0;
}
