/* Signals that come while the runtime returns from a trap on a thread under the program's own
 * filter: SIGALRM every 50 µs (setitimer) while the program writes 4000 numbered lines, each
 * with a write(2) that traps under coreplane (a filtered thread's sites are never rewritten).
 * The filter allows write, exit, and rt_sigreturn only with a token in rdi, which this
 * program's own restorer sets (its handler is installed with rt_sigaction and SA_RESTORER):
 * the program's own handler returns as natively, and an rt_sigreturn the runtime would make for
 * a trap is killed. The output must be the same as natively (every line once, in order), and
 * the handler must have run. Exits 77 where filters are refused. */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <unistd.h>

#define TOKEN 0x5ec0de
#define ALLOW(n) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, n, 0, 1), BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)

static volatile unsigned long handled;
static void on_alarm(int sig) { (void)sig; handled++; }

/* The program's restorer: rt_sigreturn with the token in rdi. */
void restore_with_token(void);
__asm__(".text\n restore_with_token:\n mov $" "0x5ec0de" ", %edi\n mov $15, %eax\n syscall\n ud2\n");

struct ksigaction { void (*handler)(int); unsigned long flags; void (*restorer)(void); unsigned long mask; };

int main(void) {
    struct ksigaction act = {on_alarm, 0x04000000 /* SA_RESTORER */ | SA_RESTART, restore_with_token, 0};
    if (syscall(__NR_rt_sigaction, SIGALRM, &act, NULL, 8) != 0)
        return 1;
    struct sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        ALLOW(__NR_write), ALLOW(__NR_exit), ALLOW(__NR_exit_group),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_rt_sigreturn, 0, 3),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, TOKEN, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
    };
    struct sock_fprog prog = {.len = sizeof filter / sizeof filter[0], .filter = filter};
    struct itimerval every = {{0, 50}, {0, 50}};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || setitimer(ITIMER_REAL, &every, NULL) != 0)
        return 1;
    if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
        return 77;
    char line[64];
    for (int i = 0; i < 4000; i++) {
        int n = snprintf(line, sizeof line, "line %d of the sandboxed writer\n", i);
        for (int done = 0; done < n;) {
            long r = write(1, line + done, n - done);
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0)
                syscall(__NR_exit_group, 3);
            done += r;
        }
    }
    int n = snprintf(line, sizeof line, "handler ran: %s\n", handled ? "yes" : "no");
    (void)!write(1, line, n);
    syscall(__NR_exit_group, 0);
}
