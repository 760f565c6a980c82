// slot_churn: delegated calls from threads that come and go.
//
//   slot_churn churn THREADS CALLS NS   starts THREADS threads one after another (each joined
//                                    before the next), each making CALLS getppid calls, and prints
//                                    "local_threads=K": the threads none of whose calls took NS
//                                    or more. Run with a forward cost F and NS = 2F, a delegated
//                                    call takes at least NS (its delegate spends F twice), a local
//                                    one about 1 us: a thread that could not delegate (the runtime
//                                    has 4096 request slots) counts.
//   slot_churn killed THREADS CALLS NS   the same, but each thread then ends killed by a seccomp
//                                    filter of its own (SECCOMP_RET_KILL_THREAD), which the
//                                    runtime does not see: its slot must be taken back all the same
//   slot_churn abandon ROUNDS        per round: a thread blocks in read(2) of an empty pipe and
//                                    exits from a SIGUSR1 handler (SA_RESTART) while it waits;
//                                    then one byte is written and the main thread reads it. A
//                                    read that outlived its thread (a delegate still making it)
//                                    would take the byte: the main thread's read then never ends.
//   slot_churn retry HOLDERS NS released|killed   HOLDERS threads (4096: every request slot) each
//                                    make a getppid call and wait; the main thread then makes 4
//                                    calls, and after the holders ended (through exit, or killed
//                                    by a filter of their own, unseen) 8192 more, and prints
//                                    "first=local|delegated then=local|delegated": whether the
//                                    shortest of the 4, and of the last 8, took less than NS.
// Prints "ok" (after local_threads=K, or first/then) and exits 0.
#define _GNU_SOURCE
#include <dirent.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static long calls, delegated_ns, local_threads, killed;

static long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000L + ts.tv_nsec;
}

// getppid CALLS times: whether the shortest of the last LAST took at least `ns` (delegated).
static int delegated(long count, long last, long ns)
{
    long shortest = -1;
    for (long i = 0; i < count; i++) {
        long t0 = now_ns();
        syscall(SYS_getppid);
        long took = now_ns() - t0;
        if (i >= count - last && (shortest < 0 || took < shortest))
            shortest = took;
    }
    return shortest >= ns;
}

static void die_unseen(void);

static void *churn_thread(void *arg)
{
    if (!delegated(calls, calls, delegated_ns))
        local_threads++; // threads run one at a time
    if (killed)
        die_unseen();
    return arg;
}

// Ends the calling thread, unseen by the runtime: getpgid is killed by a filter of the
// thread's own (SECCOMP_RET_KILL_THREAD), and the kernel ends the thread inside the call.
static void die_unseen(void)
{
    struct sock_filter code[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_getpgid, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_THREAD),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {.len = sizeof code / sizeof code[0], .filter = code};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
        return;
    syscall(SYS_getpgid, 0);
    local_threads += 1000000; // not reached
}

static pthread_mutex_t holders_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t holders_cond = PTHREAD_COND_INITIALIZER;
static long holders_ready, holders_released;

static void *holder(void *arg)
{
    syscall(SYS_getppid); // takes a request slot, kept until the thread ends
    pthread_mutex_lock(&holders_lock);
    holders_ready++;
    pthread_cond_broadcast(&holders_cond);
    while (!holders_released)
        pthread_cond_wait(&holders_cond, &holders_lock);
    pthread_mutex_unlock(&holders_lock);
    if (killed)
        die_unseen();
    return arg;
}

static int retry(long holders, long ns)
{
    pthread_t *ts = calloc((size_t)holders, sizeof *ts);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 64 * 1024);
    for (long i = 0; i < holders; i++)
        if (pthread_create(&ts[i], &attr, holder, NULL) != 0)
            return 2;
    pthread_mutex_lock(&holders_lock);
    while (holders_ready < holders)
        pthread_cond_wait(&holders_cond, &holders_lock);
    pthread_mutex_unlock(&holders_lock);
    int first = delegated(4, 4, ns);
    pthread_mutex_lock(&holders_lock);
    holders_released = 1;
    pthread_cond_broadcast(&holders_cond);
    pthread_mutex_unlock(&holders_lock);
    for (long i = 0; i < holders; i++)
        if (pthread_join(ts[i], NULL) != 0)
            return 2;
    int then = delegated(8192, 8, ns);
    printf("first=%s then=%s\n", first ? "delegated" : "local", then ? "delegated" : "local");
    free(ts);
    return 0;
}

static int pipe_fd[2];
static volatile pid_t reader_tid;

static void exit_thread(int sig)
{
    (void)sig;
    syscall(SYS_exit, 0); // the thread ends here, its read abandoned (the kernel clears its tid)
}

static void *reader(void *arg)
{
    char c;
    reader_tid = (pid_t)syscall(SYS_gettid);
    ssize_t n = read(pipe_fd[0], &c, 1);
    fprintf(stderr, "reader's read returned %zd\n", n); // not reached: the handler exits first
    exit(3);
    return arg;
}

// Whether some thread of the process is blocked in read(fd) (/proc/PID/task/*/syscall: the
// reader itself natively, a delegate under the runtime). Looked at from a forked child: the
// process's own listing of its threads leaves the runtime's out.
static int someone_reads(int fd)
{
    pid_t child = fork();
    if (child != 0) {
        int status = 0;
        waitpid(child, &status, 0);
        return WIFEXITED(status) && WEXITSTATUS(status) == 1;
    }
    char want[32], path[300], line[256];
    snprintf(want, sizeof want, "0 0x%x ", fd);
    snprintf(path, sizeof path, "/proc/%d/task", (int)getppid());
    DIR *d = opendir(path);
    int found = 0;
    for (struct dirent *e; d && !found && (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "/proc/%d/task/%s/syscall", (int)getppid(), e->d_name);
        FILE *f = fopen(path, "r");
        if (f && fgets(line, sizeof line, f))
            found = strncmp(line, want, strlen(want)) == 0;
        if (f)
            fclose(f);
    }
    _exit(found);
}

static int abandon(long rounds)
{
    struct sigaction sa = {.sa_handler = exit_thread, .sa_flags = SA_RESTART};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);
    for (long r = 0; r < rounds; r++) {
        if (pipe(pipe_fd) != 0)
            return 2;
        reader_tid = 0;
        pthread_t t;
        if (pthread_create(&t, NULL, reader, NULL) != 0)
            return 2;
        while (!reader_tid || !someone_reads(pipe_fd[0]))
            sched_yield();
        syscall(SYS_tgkill, getpid(), reader_tid, SIGUSR1);
        pthread_join(t, NULL);
        char c = 'x';
        if (write(pipe_fd[1], &c, 1) != 1 || read(pipe_fd[0], &c, 1) != 1 || c != 'x')
            return 4;
        close(pipe_fd[0]);
        close(pipe_fd[1]);
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 5 && (strcmp(argv[1], "churn") == 0 || strcmp(argv[1], "killed") == 0)) {
        killed = strcmp(argv[1], "killed") == 0;
        long threads = atol(argv[2]);
        calls = atol(argv[3]);
        delegated_ns = atol(argv[4]);
        for (long i = 0; i < threads; i++) {
            pthread_t t;
            if (pthread_create(&t, NULL, churn_thread, NULL) != 0 || pthread_join(t, NULL) != 0)
                return 2;
        }
        printf("local_threads=%ld\n", local_threads);
    } else if (argc == 5 && strcmp(argv[1], "retry") == 0) {
        killed = strcmp(argv[4], "killed") == 0;
        int rc = retry(atol(argv[2]), atol(argv[3]));
        if (rc)
            return rc;
    } else if (argc == 3 && strcmp(argv[1], "abandon") == 0) {
        int rc = abandon(atol(argv[2]));
        if (rc)
            return rc;
    } else {
        fprintf(stderr, "usage: slot_churn churn|killed THREADS CALLS NS | retry HOLDERS NS released|killed"
                        " | abandon ROUNDS\n");
        return 2;
    }
    puts("ok");
    return 0;
}
