// rt_sigsuspend with a 4-byte sigset at the end of a page (next page unmapped): natively EINVAL.
#include <errno.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
int main(void) {
    char *p = mmap(0, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    munmap(p + 4096, 4096);
    long r = syscall(SYS_rt_sigsuspend, p + 4092, 4);
    printf("%ld %d\n", r, errno);
    return 0;
}
