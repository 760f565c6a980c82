/* trapping_stub.h: a getppid call from anonymous executable memory (mov eax, 39; syscall; ret),
 * which the runtime never rewrites (it is not file text): every call traps. Shared by test
 * programs that need a call to trap wherever it is made. */
#include <string.h>
#include <sys/mman.h>

static long (*trapping_stub(void))(void) {
    static const unsigned char code[] = {0xb8, 39, 0, 0, 0, 0x0f, 0x05, 0xc3};
    void *p = mmap(0, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    memcpy(p, code, sizeof code);
    return (long (*)(void))p;
}
