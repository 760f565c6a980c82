/* A program whose signal handlers use memory while its main loop frees and maps 64 MiB blocks,
 * so that under --memory pool the main thread often zeroes freed memory itself, with the pool's
 * lock released, when a handler interrupts it (issue 15, review finding: the handler's mmap
 * could wait for ever, a fork in the handler scrubbed a step twice, a siglongjmp left it
 * claimed). argv[1]: mmap | fork | longjmp. Prints what it did; exit 0 when every byte of fresh
 * memory read zero. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#define BLOCK (64UL << 20)
#define SMALL (256UL << 10)
#define ROUNDS 30

static volatile sig_atomic_t handled, dirty;
static const char *mode;
static sigjmp_buf back;
static unsigned char *volatile current;  /* the block being touched: unmapped again after a jump */

static void on_alarm(int sig) {
    (void)sig;
    handled++;
    if (strcmp(mode, "mmap") == 0) {
        unsigned char *p = mmap(NULL, SMALL, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            _exit(3);
        for (unsigned long i = 0; i < SMALL; i += 4096)
            dirty |= p[i]++;
        munmap(p, SMALL);
    } else if (strcmp(mode, "fork") == 0) {
        pid_t pid = fork();
        if (pid == 0)
            _exit(0);
        if (pid > 0)
            waitpid(pid, NULL, 0);
    } else if (handled % 8 == 0 && handled <= 40) {
        siglongjmp(back, 1);
    }
}

int main(int argc, char **argv) {
    mode = argc > 1 ? argv[1] : "mmap";
    struct sigaction sa = {.sa_handler = on_alarm};
    sigaction(SIGALRM, &sa, NULL);
    /* A fork copies the page tables of the block being touched: give it room. */
    long us = strcmp(mode, "fork") == 0 ? 5000 : 1000;
    struct itimerval every = {{0, us}, {0, us}};
    setitimer(ITIMER_REAL, &every, NULL);
    int jumps = 0;
    for (volatile int round = 0; round < ROUNDS; round++) {
        if (sigsetjmp(back, 1)) {
            jumps++;
            if (current != NULL)
                munmap(current, BLOCK);
        }
        current = NULL;
        unsigned char *p = mmap(NULL, BLOCK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) {
            perror("mmap");
            return 2;
        }
        current = p;
        for (unsigned long i = 0; i < BLOCK; i += 4096)
            dirty |= p[i]++;
        current = NULL;
        munmap(p, BLOCK);
    }
    struct itimerval off = {0};
    setitimer(ITIMER_REAL, &off, NULL);
    printf("%s: %d rounds, handlers ran: %s, fresh memory %s\n", mode, ROUNDS, handled > 0 ? "yes" : "no",
           dirty ? "NOT ZERO" : "zero");
    (void)jumps;
    return dirty != 0;
}
