/* i386 system calls made with `int $0x80` from 64-bit code (old hand-written assembly does):
 * getpid (i386 20, x86-64's writev), uname (i386 122, x86-64's setfsuid) into memory below
 * 4 GiB, write (i386 4). Under coreplane they ran as the x86-64 calls of those numbers. Prints
 * what they returned; exits 77 where the kernel has no i386 emulation. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static long int80(long nr, long b, long c, long d) {
    long r;
    __asm__ volatile("int $0x80" : "=a"(r) : "a"(nr), "b"(b), "c"(c), "d"(d) : "memory");
    return r;
}

static void no_emulation(int sig) {
    (void)sig;
    _exit(77);
}

int main(void) {
    signal(SIGSEGV, no_emulation);
    long pid = int80(20, 0, 0, 0);
    char *low = mmap((void *)0x10000000, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    long uname = int80(122, (long)low, 0, 0);
    strcpy(low + 1024, "int80 write\n");
    fflush(stdout);
    long wrote = int80(4, 1, (long)(low + 1024), 12);
    printf("getpid same %d, uname %ld %.5s, write %ld\n", pid == getpid(), uname, low, wrote);
    return 0;
}
