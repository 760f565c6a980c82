/* pool_semantics: what anonymous memory must do whoever serves it (tests/test_memory_service.py).
 * pool_semantics zero|sparse|demand|untouched|spanning|policy|uaf|fork|fork_threads|mremap|shrink|exhaust|mprotect_free|exit_last|strict_exit|fixed_race|brk|brk_budget|hold;
 * prints "<mode> ok ..."
 * or dies. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/seccomp.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define MIB (1UL << 20)

/* The process's thread ids as another process lists them (/proc/PID/task read by a forked
   child): under coreplane the process's own listing leaves the runtime's threads out. */
static int list_threads(int *tids, int max) {
    int fds[2];
    if (pipe(fds) != 0) return 0;
    fflush(stdout);
    pid_t child = fork();
    if (child == 0) {
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/task", (int)getppid());
        DIR *d = opendir(path);
        for (struct dirent *e; d && (e = readdir(d));) {
            int tid = atoi(e->d_name);
            if (tid > 0 && write(fds[1], &tid, sizeof tid) != sizeof tid) _exit(1);
        }
        _exit(0);
    }
    close(fds[1]);
    int n = 0, tid;
    while (n < max && read(fds[0], &tid, sizeof tid) == sizeof tid) tids[n++] = tid;
    close(fds[0]);
    waitpid(child, NULL, 0);
    return n;
}

static char *map(size_t n) {
    char *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) { perror("mmap"); exit(1); }
    return p;
}

static void expect(const char *p, size_t n, char c, const char *what) {
    for (size_t i = 0; i < n; i++)
        if (p[i] != c) { printf("%s: byte %zu is %d, not %d\n", what, i, p[i], c); exit(1); }
}

static volatile int stop;

/* Maps, fills, checks and unmaps blocks of several sizes until told to stop. */
static void *churn(void *arg) {
    size_t n = (size_t)arg;
    while (!stop) {
        char *p = map(n);
        expect(p, n, 0, "churned memory");
        memset(p, 0x55, n);
        munmap(p, n);
    }
    return NULL;
}

/* Ends with exit(2) after the main thread did: the process's last thread. */
static void *last_thread(void *arg) {
    (void)arg;
    usleep(100000);
    printf("exit_last ok\n");
    syscall(SYS_exit, 7);
    return NULL;
}

#define RACES 2000
#define RACE_LEN (128 * 1024)
static char *race_blocks[RACES];
static char *volatile race_page;
static int race_go, race_armed, race_done;

/* Touches each race's page as soon as it is published, and says when it is done. */
static void *toucher(void *arg) {
    (void)arg;
    for (int i = 1; i <= RACES; i++) {
        while (__atomic_load_n(&race_go, __ATOMIC_ACQUIRE) != i)
            sched_yield();
        __atomic_store_n(&race_armed, i, __ATOMIC_RELEASE);
        *__atomic_load_n(&race_page, __ATOMIC_ACQUIRE) = 1;
        __atomic_store_n(&race_done, i, __ATOMIC_RELEASE);
    }
    return NULL;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IONBF, 0);
    const char *mode = argc > 1 ? argv[1] : "";
    if (!strcmp(mode, "zero")) {
        /* Freed memory comes back zeroed, whatever its size, again and again. */
        size_t sizes[] = {4096, 3 * 4096, 2 * MIB + 4096, 32 * MIB};
        for (int round = 0; round < 6; round++)
            for (int k = 0; k < 4; k++) {
                char *p = map(sizes[k]);
                expect(p, sizes[k], 0, "new memory");
                memset(p, 0xAA, sizes[k]);
                munmap(p, sizes[k]);
            }
        puts("zero ok");
    } else if (!strcmp(mode, "sparse")) {
        /* Freed memory the program touched here and there (dropped by the scrubber, not
           zeroed), mostly touched (zeroed), or written by the kernel (read(2) into it, a fault
           taken inside a syscall) reads as zero when it comes back; 8 x 48 MiB pass through a
           pool of 256 MiB, so blocks are reused. */
        for (int round = 0; round < 8; round++) {
            size_t n = 48 * MIB + 4096 * round;
            char *p = map(n);
            expect(p, n, 0, "new memory");
            for (size_t i = 0; i < n; i += 4096 * 7 * (round + 1)) p[i] = 'S';
            memset(p + n / 2, 'H', 3 * MIB);
            int fd = open("/proc/self/exe", O_RDONLY);
            if (fd < 0 || read(fd, p + MIB + 17, 200000) <= 0) { perror("read into new memory"); return 1; }
            close(fd);
            munmap(p, n);
        }
        puts("sparse ok");
    } else if (!strcmp(mode, "demand")) {
        /* Who filled the pages: one write every 256 KiB of a fresh 8 MiB block leaves those 32
           pages resident natively, and 32 batches of 16 (512) where pool-demand's handler filled
           them; the pool (the kernel, huge pages where it can) leaves from 32 to all 2048. */
        char *p = map(8 * MIB);
        for (size_t i = 0; i < 8 * MIB; i += 256 * 1024) p[i] = 1;
        unsigned char vec[2048];
        if (mincore(p, 8 * MIB, vec)) { perror("mincore"); return 1; }
        int resident = 0;
        for (int i = 0; i < 2048; i++) resident += vec[i] & 1;
        printf("demand ok 32 touched %d resident\n", resident);
    } else if (!strcmp(mode, "untouched")) {
        /* 64 MiB mapped and unmapped untouched 64 times goes back to the pool at once: no
           scrubber thread is started for it (this thread is the only one under pool, beside
           pool-demand's fault handler). Then the first page of a block untouched and its last
           written, and the other way round, read as zero when they come back. */
        for (int i = 0; i < 64; i++) munmap(map(64 * MIB), 64 * MIB);
        /* Counted as another process sees them (the program's own view is its own threads). */
        int all[64];
        int threads = list_threads(all, 64);
        for (int round = 0; round < 8; round++) {
            char *p = map(32 * MIB);
            expect(p, 32 * MIB, 0, "new memory");
            if (round % 2) memset(p, 0x5A, 4096);
            else memset(p + 32 * MIB - 3 * 4096, 0x5A, 3 * 4096);
            munmap(p, 32 * MIB);
        }
        printf("untouched ok %d threads\n", threads);
    } else if (!strcmp(mode, "spanning")) {
        /* A block with a mapping of the program's own over its middle (MAP_FIXED), freed: the
           pool puts a fresh mapping of its own there, so the blocks handed out over it later
           span two of the kernel's mappings, which the scrubber moves to zero them where the
           kernel allows it (6.17 on) and writes through /proc/thread-self/mem where it does
           not. Each comes back zeroed. */
        for (int round = 0; round < 6; round++) {
            char *p = map(8 * MIB);
            expect(p, 8 * MIB, 0, "new memory");
            memset(p, 'A', 8 * MIB);
            if (round == 0) {
                char *mid = mmap(p + 3 * MIB, MIB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
                if (mid != p + 3 * MIB) { perror("mmap MAP_FIXED"); return 1; }
                memset(mid, 'B', MIB);
            }
            munmap(p, 8 * MIB);
        }
        puts("spanning ok");
    } else if (!strcmp(mode, "policy")) {
        /* The scheduling policy of the process's other threads (the scrubber): 16 MiB written
           and freed start it, and the thread that starts it sets its policy before going on
           (the next 16 MiB may be zeroed by this thread itself, not waited for). Field 41 of
           /proc/self/task/TID/stat (0 SCHED_OTHER, 1 SCHED_FIFO). */
        char *p = map(16 * MIB);
        memset(p, 1, 16 * MIB);
        munmap(p, 16 * MIB);
        p = map(16 * MIB);
        expect(p, 16 * MIB, 0, "new memory");
        printf("policy ok");
        int tids[64], n = list_threads(tids, 64);
        for (int k = 0; k < n; k++) {
            char path[300], text[1024];
            snprintf(path, sizeof path, "/proc/self/task/%d/stat", tids[k]);
            FILE *f = tids[k] == (int)gettid() ? NULL : fopen(path, "r");
            if (!f) continue;
            size_t n = fread(text, 1, sizeof text - 1, f);
            fclose(f);
            text[n] = 0;
            char *field = strrchr(text, ')');
            for (int i = 2; field && i < 41; i++) field = strchr(field + 1, ' ');
            if (field) printf(" %d", atoi(field + 1));
        }
        printf("\n");
    } else if (!strcmp(mode, "uaf")) {
        char *p = map(MIB);
        p[100] = 1;
        munmap(p, MIB);
        printf("read %d\n", ((volatile char *)p)[100]);
        puts("survived");
    } else if (!strcmp(mode, "fork")) {
        char *p = map(8 * MIB);
        memset(p, 'P', 8 * MIB);
        pid_t pid = fork();
        if (pid == 0) {
            expect(p, 8 * MIB, 'P', "child's copy");
            memset(p, 'C', 8 * MIB);
            munmap(p, 8 * MIB);
            for (int i = 0; i < 4; i++) {  /* the child's own pool, scrubbed by its own scrubber */
                char *q = map(8 * MIB);
                expect(q, 8 * MIB, 0, "child's new memory");
                memset(q, 'Q', 8 * MIB);
                munmap(q, 8 * MIB);
            }
            _exit(0);
        }
        int status;
        waitpid(pid, &status, 0);
        expect(p, 8 * MIB, 'P', "parent's memory after the child wrote its copy");
        printf("fork ok %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
    } else if (!strcmp(mode, "fork_threads")) {
        /* Forks while two threads map and unmap: each child finds a consistent pool. */
        pthread_t t[2];
        pthread_create(&t[0], NULL, churn, (void *)(64 * 1024));
        pthread_create(&t[1], NULL, churn, (void *)(MIB + 4096));
        int bad = 0;
        for (int i = 0; i < 12; i++) {
            pid_t pid = fork();
            if (pid == 0) {
                for (int k = 0; k < 8; k++) {
                    char *q = map(MIB << (k % 3));
                    expect(q, MIB << (k % 3), 0, "child's memory");
                    memset(q, k, MIB << (k % 3));
                    munmap(q, MIB << (k % 3));
                }
                _exit(0);
            }
            int status;
            waitpid(pid, &status, 0);
            bad += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        }
        stop = 1;
        pthread_join(t[0], NULL);
        pthread_join(t[1], NULL);
        printf("fork_threads ok %d\n", bad);
    } else if (!strcmp(mode, "mremap")) {
        /* Growing moves the pages (contents kept, new part zero); the old place faults. */
        char *p = map(4 * MIB);
        memset(p, 'R', 4 * MIB);
        char *q = mremap(p, 4 * MIB, 16 * MIB, MREMAP_MAYMOVE);
        if (q == MAP_FAILED) { perror("mremap"); return 1; }
        expect(q, 4 * MIB, 'R', "moved contents");
        expect(q + 4 * MIB, 12 * MIB, 0, "grown part");
        errno = 0;
        void *r = mremap(q, 16 * MIB, 32 * MIB, 0);
        printf("mremap ok %s\n", r == MAP_FAILED ? strerror(errno) : (r == q ? "grown in place" : "moved?"));
        if (q != p) printf("old %d\n", ((volatile char *)p)[0]), puts("survived");
    } else if (!strcmp(mode, "shrink")) {
        char *p = map(16 * MIB);
        memset(p, 'S', 16 * MIB);
        char *q = mremap(p, 16 * MIB, 8 * MIB, 0);
        if (q != p) { perror("mremap shrink"); return 1; }
        expect(p, 8 * MIB, 'S', "kept part");
        puts("shrink ok");
        printf("beyond %d\n", ((volatile char *)p)[8 * MIB]);
        puts("survived");
    } else if (!strcmp(mode, "exhaust")) {
        /* 1 MiB blocks until the budget (or the machine) says no; then all back, and again. */
        static char *blocks[1 << 16];
        int n = 0, err = 0;
        for (; n < (1 << 16); n++) {
            blocks[n] = mmap(NULL, MIB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (blocks[n] == MAP_FAILED) { err = errno; break; }
            blocks[n][0] = 1;
        }
        for (int i = 0; i < n; i++) munmap(blocks[i], MIB);
        char *again = map(16 * MIB);
        expect(again, 16 * MIB, 0, "memory after exhaustion");
        printf("exhaust ok %d %s\n", n, err ? strerror(err) : "none");
    } else if (!strcmp(mode, "mprotect_free")) {
        char *p = map(2 * MIB);
        munmap(p, 2 * MIB);
        errno = 0;
        int r = mprotect(p, 4096, PROT_READ | PROT_WRITE);
        printf("mprotect_free ok %d %s\n", r, r ? strerror(errno) : "");
    } else if (!strcmp(mode, "exit_last")) {
        /* The pool's scrubber is a thread too: the process must still end with its last
           program thread, with that thread's code, as natively. */
        char *p = map(8 * MIB);  /* 4 MiB freed or more start the scrubber */
        munmap(p, 8 * MIB);
        pthread_t t;
        pthread_create(&t, NULL, last_thread, NULL);
        syscall(SYS_exit, 5);
    } else if (!strcmp(mode, "strict_exit")) {
        /* A single-threaded program in seccomp strict mode may only read, write and exit: its
           exit(2) must end the process although the pool's threads (scrubber, fault handler) live. */
        for (int i = 0; i < 8; i++) {
            char *p = map(MIB);
            memset(p, 1, MIB);
            munmap(p, MIB);
        }
        char *held = map(2 * MIB);  /* held, not touched yet: filled after strict mode began */
        printf("strict_exit ok\n");
        if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_STRICT) != 0) { perror("prctl"); return 1; }
        for (size_t i = 0; i < 2 * MIB; i += 4096) held[i] = 1;
        if (write(1, "touched\n", 8) != 8) syscall(SYS_exit, 1);
        syscall(SYS_exit, 7);
    } else if (!strcmp(mode, "brk")) {
        /* The program break grows over zeroed memory, shrinks, and grows again over zeroed
           memory; the memory above a lowered break is unmapped. */
        char *b0 = sbrk(0);
        for (int round = 0; round < 6; round++) {
            /* Small lowerings are zeroed at regrowth, large ones by the scrubber. */
            size_t n = (round % 3 == 2 ? 9 * MIB : round % 3 == 1 ? 4096 : 3 * MIB) + 100;
            char *p = sbrk(n);
            if (p != b0) { printf("brk: sbrk returned %p, the break was %p\n", (void *)p, (void *)b0); return 1; }
            expect(p, n, 0, "new heap");
            memset(p, 0x77, n);
            if (sbrk(-(intptr_t)n) != p + n || sbrk(0) != b0) { printf("brk: shrink\n"); return 1; }
        }
        printf("brk ok\n");
        b0[MIB] = 1;  /* above the break: SIGSEGV */
        printf("survived\n");
    } else if (!strcmp(mode, "brk_budget")) {
        /* After lowerings the scrubber takes (9 MiB) and regrowths over them (3 MiB), whose
           bytes must stay the program's, the heap grows in 1 MiB steps until the budget (or
           128 MiB) is reached: ENOMEM. */
        for (int round = 0; round < 20; round++) {
            size_t n = round % 2 ? 3 * MIB : 9 * MIB;
            char *p = sbrk(n);
            if (p == (void *)-1) { perror("brk_budget: sbrk"); return 1; }
            expect(p, n, 0, "new heap");
            memset(p, 0x33, n);
            for (int pass = 0; pass < 3; pass++) expect(p, n, 0x33, "heap in use");
            sbrk(-(intptr_t)n);
        }
        int steps = 0;
        errno = 0;
        while (steps < 128 && sbrk(MIB) != (void *)-1) steps++;
        printf("brk_budget ok %d %s\n", steps, steps < 128 ? strerror(errno) : "");
    } else if (!strcmp(mode, "hold")) {
        /* Holds 24 MiB mapped (32 mapped, 8 unmapped) and 3 MiB of heap until stdin ends. */
        char *p = map(32 * MIB);
        memset(p, 1, 32 * MIB);
        munmap(p + 24 * MIB, 8 * MIB);
        char *h = sbrk(3 * MIB);
        if (h == (void *)-1) { perror("sbrk"); return 1; }
        memset(h, 2, 3 * MIB);
        printf("hold %d\n", (int)getpid());
        char c;
        while (read(0, &c, 1) > 0)
            ;
        printf("hold ok\n");
    } else if (!strcmp(mode, "fixed_race")) {
        /* One thread touches pool pages it holds while another maps over them (MAP_FIXED): the
           touch's fault may reach pool-demand's handler after its page changed mapping. */
        pthread_t t;
        pthread_create(&t, NULL, toucher, NULL);
        for (int i = 1; i <= RACES; i++) {
            char *p = map(RACE_LEN);
            __atomic_store_n(&race_page, p + (size_t)(i % (RACE_LEN / 4096)) * 4096, __ATOMIC_RELEASE);
            __atomic_store_n(&race_go, i, __ATOMIC_RELEASE);
            while (__atomic_load_n(&race_armed, __ATOMIC_ACQUIRE) != i)
                sched_yield();  /* on one CPU: the toucher runs until its fault blocks it */
            /* Mostly at once (the toucher's fault waits for the handler on another CPU), else
               a little later (two CPUs: the fault may not have been taken yet). */
            for (volatile int spin = 0; spin < (i % 4 ? 0 : (i * 37) % 2000); spin++)
                ;
            if (mmap(p, RACE_LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != p) {
                perror("mmap MAP_FIXED"); return 1;
            }
            while (__atomic_load_n(&race_done, __ATOMIC_ACQUIRE) != i)
                sched_yield();
            /* Kept until the end: a freed block comes back no longer registered (what was
               mapped over it is replaced by a plain mapping), and each race needs a fresh one. */
            race_blocks[i - 1] = p;
        }
        pthread_join(t, NULL);
        for (int i = 0; i < RACES; i++) munmap(race_blocks[i], RACE_LEN);
        printf("fixed_race ok\n");
    } else {
        fprintf(stderr, "usage: pool_semantics zero|sparse|demand|untouched|spanning|policy|uaf|fork|fork_threads|mremap|shrink|exhaust|mprotect_free|exit_last|strict_exit|fixed_race|brk|brk_budget|hold\n");
        return 2;
    }
    return 0;
}
