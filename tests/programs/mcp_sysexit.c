// mcp_sysexit: a program whose only thread ends with exit(2), not exit_group(2) (raw SYS_exit,
// as a runtime's last thread may), having delegated nothing yet. Under `coreplane run --mcp` the
// runtime's monitor thread, which takes no signal, kept the process alive: it must end with 3.
#include <sys/syscall.h>
#include <unistd.h>

int main(void)
{
    (void)!write(1, "bye\n", 4);
    syscall(SYS_exit, 3);
    return 1;
}
