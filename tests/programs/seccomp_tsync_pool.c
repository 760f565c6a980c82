// seccomp_tsync_pool: memory used, then a seccomp filter put on every thread of the process
// (SECCOMP_FILTER_FLAG_TSYNC), then memory used again. The filter kills the process on ioctl
// and pread64, calls this program never makes, but the memory service's threads do: the fault
// handler of --memory pool-demand fills pages with ioctl(UFFDIO_COPY), the scrubber reads the
// memory pressure with pread64. Natively it prints "ok 12" and exits 0; under the pool before,
// the synchronised filter landed on those threads too and killed the process (SIGSYS).
//   seccomp_tsync_pool alone     the main thread is the only one
//   seccomp_tsync_pool threads   a second thread waits in a pipe read meanwhile
#define _GNU_SOURCE
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#define BLOCK (64 << 20)

static int install(void)
{
    struct sock_filter code[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_ioctl, 1, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_pread64, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {sizeof code / sizeof code[0], code};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        return -1;
    return (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &prog);
}

// Blocks of fresh memory, each checked to read as zero, written, and freed; the count used.
static int use_memory(int rounds)
{
    int used = 0;
    for (int i = 0; i < rounds; i++) {
        unsigned char *p = malloc(BLOCK);
        if (p == NULL)
            return used;
        for (size_t at = 0; at < BLOCK; at += 4096)
            if (p[at] != 0)
                return used;
        memset(p, i + 1, BLOCK);
        free(p);
        used++;
    }
    return used;
}

static int waker[2];

static void *wait_in_read(void *arg)
{
    char c;
    return read(waker[0], &c, 1) == 1 ? arg : "read failed";
}

int main(int argc, char **argv)
{
    int threads = argc > 1 && strcmp(argv[1], "threads") == 0;
    pthread_t t;
    if (threads && (pipe(waker) != 0 || pthread_create(&t, NULL, wait_in_read, NULL) != 0))
        return 2;
    int used = use_memory(4);
    if (install() != 0) {
        perror("seccomp");
        return 3;
    }
    used += use_memory(8);
    if (threads) {
        void *r;
        if (write(waker[1], "x", 1) != 1 || pthread_join(t, &r) != 0 || r != NULL)
            return 4;
    }
    printf("ok %d\n", used);
    return used == 12 ? 0 : 1;
}
