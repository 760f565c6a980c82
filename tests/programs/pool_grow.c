// pool_grow brk|fork|giveback|twice: how far a pool grows with the supervisor's grants
// (coreplane run --memory pool --memory-budget B --memory-grow G). Every loop takes 1 MiB at a
// time, touching it, until refused or CAP MiB; it prints the MiB it reached.
//   brk       sbrk until refused: "brk N <error>".
//   fork      maps 96 MiB and keeps it, forks; the child maps until refused: "fork N"
//             (its parent's grants are not its own, and what it inherited counts in its budget).
//   giveback  maps until refused, unmaps it all, forks; the child maps until refused:
//             "giveback P C" (what the parent gave back returned to the run's allowance).
//   twice     a child maps until refused and exits, then the parent maps until refused:
//             "twice C P" (a process's grants return to the allowance when it ends).
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define MIB (1UL << 20)
#define CAP 250 // a child's figure is its exit status

static char *blocks[CAP];

// Maps 1 MiB blocks from blocks[from] until refused or `to`; the blocks held.
static int map_range(int from, int to)
{
    int n = from;
    for (; n < to; n++) {
        blocks[n] = mmap(0, MIB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (blocks[n] == MAP_FAILED)
            break;
        memset(blocks[n], 1, MIB);
    }
    return n;
}

static int map_until_refused(int from)
{
    return map_range(from, CAP);
}

static void unmap_all(int n)
{
    for (int i = 0; i < n; i++)
        munmap(blocks[i], MIB);
}

// Runs `child` in a forked child; its exit status (the MiB it reached), or -1.
static int in_child(int (*child)(void))
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0)
        _exit(child());
    int status;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
        return -1;
    return WEXITSTATUS(status);
}

static int from_nothing(void)
{
    return map_until_refused(0);
}

static int after_96(void)
{
    return map_until_refused(96) - 96;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    if (!strcmp(mode, "brk")) {
        int n = 0;
        for (; n < CAP; n++) {
            char *p = sbrk(MIB);
            if (p == (char *)-1)
                break;
            memset(p, 1, MIB);
        }
        printf("brk %d %s\n", n, n < CAP ? strerror(errno) : "none");
    } else if (!strcmp(mode, "fork")) {
        if (map_range(0, 96) < 96)
            return 1;
        printf("fork %d\n", in_child(after_96));
    } else if (!strcmp(mode, "giveback")) {
        int parent = map_until_refused(0);
        unmap_all(parent);
        printf("giveback %d %d\n", parent, in_child(from_nothing));
    } else if (!strcmp(mode, "twice")) {
        int child = in_child(from_nothing);
        printf("twice %d %d\n", child, map_until_refused(0));
    } else {
        fprintf(stderr, "usage: pool_grow brk|fork|giveback|twice\n");
        return 2;
    }
    return 0;
}
