/* vfork(2) and clone(CLONE_VM|CLONE_VFORK) without a stack: the child runs on its parent's stack
 * until it execs or exits, as dash and CPython's subprocess use it. Each child writes deep into
 * the stack below the parent's stack pointer (where a trap frame of the parent's would lie),
 * makes calls from sites of its own more often than a site is rewritten at, and then execs or
 * exits; the parent checks what it kept in registers and in its frame, its FPU rounding mode,
 * and signals that reach it right after the call. Also from a thread with a signal stack, while
 * another thread makes calls, and with the bare clone; and a thread's FPU control, inherited
 * from its creator; and threads that vfork once and end, whose runtime memory must go with them.
 * Prints one line per case. */
#define _GNU_SOURCE
#include <fenv.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t alarms;

static void on_alarm(int sig) {
    (void)sig;
    alarms++;
}

/* Fills `kb` KiB of stack below the caller with a pattern: what a child's own calls do to the
 * memory below its parent's stack pointer. */
static __attribute__((noinline)) long scribble(int kb) {
    volatile char buf[1024];
    memset((char *)buf, 0x5a, sizeof buf);
    return kb > 1 ? scribble(kb - 1) + buf[kb % 1024] : buf[0];
}

/* A few calls from sites of this child's own, each made more than a site's rewrite needs. */
static void child_calls(void) {
    for (int i = 0; i < 20; i++) {
        long r;
        __asm__ volatile("syscall" : "=a"(r) : "a"((long)SYS_getppid) : "rcx", "r11", "memory");
        __asm__ volatile("syscall" : "=a"(r) : "a"((long)SYS_getpid) : "rcx", "r11", "memory");
    }
}

static int check_parent(const char *name, pid_t p, int want, volatile long *canary, long expect) {
    int st = 0;
    if (p < 0) {
        printf("%s: vfork failed\n", name);
        return 1;
    }
    if (waitpid(p, &st, 0) != p) {
        printf("%s: waitpid failed\n", name);
        return 1;
    }
    printf("%s: exit=%d canary=%s round=%s\n", name, WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st),
           *canary == expect ? "kept" : "LOST", fegetround() == FE_UPWARD ? "upward" : "CHANGED");
    return 0;
}

static void case_exit(const char *name) {
    volatile long canary = 0x1234abcd5678ef00L ^ (long)name;
    long expect = canary;
    pid_t p = vfork();
    if (p == 0) {
        child_calls();
        scribble(64);
        _exit(fegetround() == FE_UPWARD ? 3 : 4);
    }
    check_parent(name, p, 3, &canary, expect);
}

static void case_exec(const char *name) {
    volatile long canary = 0x0badcafe12345678L;
    long expect = canary;
    fflush(stdout);
    pid_t p = vfork();
    if (p == 0) {
        scribble(32);
        execl("/bin/sh", "sh", "-c", "exit 5", (char *)NULL);
        _exit(127);
    }
    check_parent(name, p, 5, &canary, expect);
}

static void case_clone(void) {
    volatile long canary = 0x7777777788888888L;
    long expect = canary;
    long p;
    /* Inline, as glibc's vfork keeps its return address off the stack: the child's calls
     * overwrite the stack below the parent's pointer. */
    register long stack __asm__("rsi") = 0;
    register long ptid __asm__("rdx") = 0;
    register long ctid __asm__("r10") = 0;
    register long tls __asm__("r8") = 0;
    __asm__ volatile("syscall" : "=a"(p) : "a"((long)SYS_clone), "D"((long)(CLONE_VM | CLONE_VFORK | SIGCHLD)),
                     "r"(stack), "r"(ptid), "r"(ctid), "r"(tls) : "rcx", "r11", "memory");
    if (p == 0) {
        scribble(16);
        syscall(SYS_exit, fegetround() == FE_UPWARD ? 6 : 7);
    }
    check_parent("clone", (pid_t)p, 6, &canary, expect);
}

static void case_signal(void) {
    volatile long canary = 0x1111222233334444L;
    long expect = canary;
    struct itimerval it = {{0, 1000}, {0, 1000}};
    alarms = 0;
    setitimer(ITIMER_REAL, &it, NULL);
    pid_t p = vfork();
    if (p == 0) {
        struct timespec ts = {0, 30 * 1000 * 1000};
        nanosleep(&ts, NULL);
        _exit(8);
    }
    /* Timer signals pend while the parent waits for the child; one arrives as vfork returns. */
    for (int i = 0; i < 1000 && alarms < 3; i++) {
        struct timespec ts = {0, 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    check_parent("signal", p, 8, &canary, expect);
    printf("signal: handled=%s\n", alarms >= 3 ? "yes" : "no");
}

static void *on_signal_stack(void *arg) {
    (void)arg;
    stack_t ss = {.ss_sp = malloc(256 * 1024), .ss_size = 256 * 1024, .ss_flags = 0};
    sigaltstack(&ss, NULL);
    fesetround(FE_UPWARD);
    case_exit("altstack-exit");
    case_exec("altstack-exec");
    return NULL;
}

static void *report_rounding(void *arg) {
    (void)arg;
    printf("thread: round=%s\n", fegetround() == FE_UPWARD ? "upward" : "CHANGED");
    return NULL;
}

static void *vfork_once(void *arg) {
    (void)arg;
    pid_t p = vfork();
    if (p == 0)
        _exit(0);
    waitpid(p, NULL, 0);
    return NULL;
}

static long vm_data_kb(void) {
    char line[256];
    long kb = -1;
    FILE *f = fopen("/proc/self/status", "r");
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmData: %ld", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return kb;
}

static volatile int stop;

static void *busy(void *arg) {
    (void)arg;
    while (!stop)
        getppid();
    return NULL;
}

int main(void) {
    struct sigaction sa = {.sa_handler = on_alarm};
    sigaction(SIGALRM, &sa, NULL);
    fesetround(FE_UPWARD);
    case_exit("exit");
    case_exec("exec");
    case_clone();
    case_signal();
    for (int i = 0; i < 50; i++) {
        volatile long canary = i;
        pid_t p = vfork();
        if (p == 0)
            _exit(i % 7);
        int st;
        waitpid(p, &st, 0);
        if (WEXITSTATUS(st) != i % 7 || canary != i) {
            printf("loop: wrong at %d\n", i);
            return 1;
        }
    }
    printf("loop: 50 vforks\n");
    pthread_t t;
    /* A new thread inherits its creator's FPU control as a vfork child does. */
    pthread_create(&t, NULL, report_rounding, NULL);
    pthread_join(t, NULL);
    pthread_create(&t, NULL, on_signal_stack, NULL);
    pthread_join(t, NULL);
    /* Threads that vfork once each, then end, one after another: what the runtime kept for a
     * thread's vforks goes with the thread. */
    long before = 0;
    for (int i = 0; i < 100; i++) {
        if (i == 10)
            before = vm_data_kb();
        pthread_create(&t, NULL, vfork_once, NULL);
        pthread_join(t, NULL);
    }
    printf("data growth over 90 vforking threads: %s\n", vm_data_kb() - before < 1024 ? "< 1 MB" : ">= 1 MB");
    pthread_t b;
    pthread_create(&b, NULL, busy, NULL);
    case_exit("threaded-exit");
    case_exec("threaded-exec");
    stop = 1;
    pthread_join(b, NULL);
    return 0;
}
