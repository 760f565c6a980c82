/* Code at one address that is anonymous, then file-backed, then anonymous again: the runtime
   rewrites syscall sites only in file-backed text, and remembers which ranges are, so it must
   forget when the program remaps. Prints the first byte of the site's setup instruction after
   three calls in each phase (b8: untouched `mov eax, 39`; e9: relocated to the fast path). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define OFF 64
static const unsigned char CODE[] = {0xb8, 39, 0, 0, 0, 0x0f, 0x05, 0xc3}; /* mov eax, 39; syscall; ret */

static unsigned char *page;

static int phase(void) {
    long (*fn)(void) = (long (*)(void))(page + OFF);
    for (int i = 0; i < 3; i++)
        if (fn() != getpid()) return -1;
    return page[OFF];
}

static void anonymous(int fixed) {
    page = mmap(fixed ? page : NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC,
                MAP_PRIVATE | MAP_ANONYMOUS | (fixed ? MAP_FIXED : 0), -1, 0);
    memset(page, 0x90, 4096);
    memcpy(page + OFF, CODE, sizeof CODE);
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    anonymous(0);
    int a = phase();
    /* The same code, now from a file mapped read-execute at the same address. */
    FILE *f = fopen(argv[1], "w+");
    unsigned char buf[4096];
    memset(buf, 0x90, sizeof buf);
    memcpy(buf + OFF, CODE, sizeof CODE);
    fwrite(buf, 1, sizeof buf, f);
    fflush(f);
    munmap(page, 4096);
    if (mmap(page, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_FIXED, fileno(f), 0) != page) return 3;
    int b = phase();
    munmap(page, 4096);
    anonymous(1);
    int c = phase();
    printf("%02x %02x %02x\n", a, b, c);
    return 0;
}
