// shared_text: code in shared mappings, which the runtime must not patch: a patch there is
// written into the file or segment itself, for every process that maps it.
//   shared_text file CALLS   the code is in a memfd mapped read-execute MAP_SHARED
//   shared_text shm CALLS    the code is in a SysV segment attached over a private text
//                            mapping with SHM_REMAP | SHM_EXEC, after that text's site ran
// Calls the function (mov eax, SYS_getppid; syscall; ret) CALLS times, then prints
// "calls=N unchanged" when the file or segment still holds the bytes written, else "changed".
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/syscall.h>
#include <unistd.h>
int main(int argc, char **argv)
{
    long calls = atol(argv[2]);
    unsigned char code[4096];
    memset(code, 0xcc, sizeof code);
    const unsigned char fn[] = {0xb8, SYS_getppid, 0, 0, 0, 0x0f, 0x05, 0xc3};
    memcpy(code + 64, fn, sizeof fn);
    int fd = memfd_create("shared_text", MFD_CLOEXEC);
    if (fd < 0 || write(fd, code, sizeof code) != sizeof code)
        return 2;
    unsigned char *text, *check;
    if (strcmp(argv[1], "file") == 0) {
        text = mmap(NULL, sizeof code, PROT_READ | PROT_EXEC, MAP_SHARED, fd, 0);
        check = mmap(NULL, sizeof code, PROT_READ, MAP_SHARED, fd, 0);
    } else {
        text = mmap(NULL, sizeof code, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
        if (text == MAP_FAILED || ((long (*)(void))(text + 64))() != getppid())
            return 3;
        int id = shmget(IPC_PRIVATE, sizeof code, IPC_CREAT | 0600);
        if (id < 0)
            return 4;
        check = shmat(id, NULL, 0);
        shmctl(id, IPC_RMID, NULL); // gone once detached (at the latest when the process ends)
        if (check == (void *)-1 || shmat(id, text, SHM_REMAP | SHM_EXEC) != text)
            return 5;
        memcpy(check, code, sizeof code);
    }
    if (text == MAP_FAILED || check == MAP_FAILED)
        return 3;
    long (*fn_there)(void) = (long (*)(void))(text + 64);
    for (long i = 0; i < calls; i++)
        if (fn_there() != getppid())
            return 6;
    printf("calls=%ld %s\n", calls, memcmp(check, code, sizeof code) == 0 ? "unchanged" : "changed");
    return 0;
}
