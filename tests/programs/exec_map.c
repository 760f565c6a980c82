// exec_map: code mapped from a file without MAP_FIXED, as a JIT or a loader may map text (and
// glibc's dlopen maps a library whose first segment is executable: one mapping at an address
// the kernel picks, its data then placed over the end with MAP_FIXED). The program writes a
// small function (mov eax, SYS_getppid; syscall; ret) into a file, maps it read-execute, and
// calls it CALLS times; each call must return getppid(). Under coreplane the site is rewritten
// for the fast path at its first call if the runtime knows it lies in file text.
//
//   exec_map CALLS   prints "calls=N" and exits 0
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    long calls = argc > 1 ? atol(argv[1]) : 100;
    unsigned char code[128];
    memset(code, 0xcc, sizeof code); // int3 before and after, room for the runtime's patch
    const unsigned char fn[] = {0xb8, SYS_getppid, 0, 0, 0, 0x0f, 0x05, 0xc3};
    memcpy(code + 64, fn, sizeof fn);
    // A memfd, not a file in /tmp: a /tmp mounted noexec refuses PROT_EXEC mappings of its files.
    int fd = memfd_create("exec_map", MFD_CLOEXEC);
    if (fd < 0 || write(fd, code, sizeof code) != sizeof code)
        return 2;
    void *text = mmap(NULL, sizeof code, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
    close(fd);
    if (text == MAP_FAILED)
        return 3;
    long (*getppid_there)(void) = (long (*)(void))((char *)text + 64);
    long parent = getppid();
    for (long i = 0; i < calls; i++)
        if (getppid_there() != parent)
            return 4;
    printf("calls=%ld\n", calls);
    return 0;
}
