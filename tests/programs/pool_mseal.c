/* Sealed pool memory (mseal, Linux 6.10): a munmap or a shrinking mremap of it fails with EPERM
 * as natively, and nothing is freed; unsealed memory beside it is unmapped as usual. The pool
 * serves munmap and a shrinking mremap itself (memsvc/seal.rs). `many` seals more ranges than
 * the runtime remembers exactly. Prints the same natively and under --memory pool. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#ifndef SYS_mseal
#define SYS_mseal 462
#endif

#define MIB (1UL << 20)

static char *mapped(size_t len) {
    char *p = mmap(0, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) { perror("mmap"); _exit(2); }
    memset(p, 7, len);
    return p;
}

static void say(const char *what, long r) {
    printf("%s: %ld %s\n", what, r, r < 0 ? strerror(errno) : "");
}

int main(int argc, char **argv) {
    int rounds = argc > 1 && !strcmp(argv[1], "many") ? 40 : 1;
    char *sealed[40], *open[40];
    for (int i = 0; i < rounds; i++) {
        sealed[i] = mapped(MIB);
        open[i] = mapped(MIB);
        errno = 0;
        if (syscall(SYS_mseal, sealed[i], MIB, 0) != 0) { say("mseal", -1); return errno == ENOSYS ? 3 : 1; }
    }
    int refused = 0, unmapped = 0, kept = 0;
    for (int i = 0; i < rounds; i++) {
        errno = 0;
        refused += munmap(sealed[i] + MIB / 2, MIB / 2) == -1 && errno == EPERM;
        errno = 0;
        refused += mremap(sealed[i], MIB, MIB / 4, 0) == MAP_FAILED && errno == EPERM;
        kept += sealed[i][MIB - 1] == 7 && sealed[i][0] == 7;
        unmapped += munmap(open[i], MIB) == 0;
    }
    printf("rounds %d: refused %d of %d, sealed bytes kept %d, unsealed unmapped %d\n",
           rounds, refused, 2 * rounds, kept, unmapped);
    /* Memory mapped again after all that is fresh and zero. */
    char *again = mmap(0, MIB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    printf("new mapping reads %d\n", again == MAP_FAILED ? -1 : again[12345]);
    return 0;
}
