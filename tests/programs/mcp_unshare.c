// mcp_unshare: unshare(CLONE_NEWUSER), which the kernel allows only in a single-threaded
// process, from a program run by `coreplane run --mcp --delegate ...` (whose runtime has a
// monitor thread, and delegates once a call was delegated: getppid first). Prints
// "unshare: 0" (or the error), then answers each line on stdin with its uid and parent's pid
// (delegated) until stdin ends, so that its MCP's core can be revoked meanwhile.
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(void)
{
    pid_t parent = getppid();
    int r = unshare(CLONE_NEWUSER);
    printf("unshare: %s\n", r == 0 ? "0" : strerror(errno));
    fflush(stdout);
    char line[64];
    while (fgets(line, sizeof line, stdin)) {
        printf("uid %d, parent %s\n", (int)getuid(), getppid() == parent ? "same" : "other");
        fflush(stdout);
    }
    return r != 0;
}
