/* A timer's SIGALRM interrupts a read of an empty pipe, and its handler makes a process, over and
   over; the read, in the parent and in a forked child, must end as the kernel ends it. A forked
   child returns from the handler into its own copy of the interrupted read: with SA_RESTART the
   read restarts, in the child, and gets one of the two bytes the parent's handler writes (the
   parent's read the other); without it both reads fail with EINTR (the bytes stay). A child that
   runs something else (exec right away after fork or vfork, system(), a clone sharing memory
   that exits) is waited for in the handler, which then writes a byte the restarted read gets.
   Each child is waited for 5 s at most, then killed and counted as hung (and no more rounds are
   made). A forked child asks for its parent's pid after its read (a call of its own the runtime
   may delegate). A round of fork_eintr whose signal came before the read began is made again.
   Usage: fork_in_handler fork_restart|fork_eintr|fork_exec|vfork_exec|system|clone_vm N.
   Prints one line of counts. */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int fds[2];
static const char *what;
static volatile int in_call, early, handled_ok;
static volatile pid_t child;
static pid_t parent;
static char clone_stack[64 * 1024];

static int clone_child(void *arg) {
    (void)arg;
    _exit(7);
}

/* Waits up to 5 s for `pid`: its exit status, or -1 (killed) when it did not end. */
static int wait_child(pid_t pid) {
    struct timespec ms = {0, 1000000}, start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    do {
        int status;
        if (waitpid(pid, &status, WNOHANG | __WALL) == pid)
            return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        nanosleep(&ms, NULL);
        clock_gettime(CLOCK_MONOTONIC, &now);
    } while ((now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000 < 5000);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, __WALL);
    return -1;
}

/* A child that runs something else and ends, waited for here: whether it ended as it should. */
static int other_child_ok(void) {
    char *argv[] = {"/bin/true", NULL};
    pid_t pid;
    if (!strcmp(what, "system"))
        return system("exit 3") == 3 << 8;
    if (!strcmp(what, "fork_exec"))
        pid = fork();
    else if (!strcmp(what, "vfork_exec"))
        pid = vfork();
    else
        return wait_child(clone(clone_child, clone_stack + sizeof clone_stack, CLONE_VM | SIGCHLD, NULL)) == 7;
    if (pid == 0) {
        execv(argv[0], argv);
        _exit(9);
    }
    return pid > 0 && wait_child(pid) == 0;
}

static void handler(int sig) {
    (void)sig;
    int saved = errno;
    early = !in_call;
    if (!strncmp(what, "fork_", 5) && strcmp(what, "fork_exec")) {
        pid_t pid = fork();
        if (pid != 0) {
            child = pid;
            if (write(fds[1], "xy", 2) != 2)
                _exit(3);
        }
    } else {
        handled_ok = other_child_ok();
        if (write(fds[1], "x", 1) != 1)
            _exit(3);
    }
    errno = saved;
}

/* The byte a handler wrote, if the call left it in the pipe: taken out for the next round. */
static void drain(void) {
    char b;
    struct pollfd p = {fds[0], POLLIN, 0};
    while (poll(&p, 1, 0) == 1 && read(fds[0], &b, 1) == 1) {}
}

/* A read's outcome: 0 a byte, 1 EINTR, 2 anything else (an exit status in a forked child). */
static int outcome(long r) {
    return r == 1 ? 0 : r < 0 && errno == EINTR ? 1 : 2;
}

int main(int argc, char **argv) {
    if (argc < 3 || pipe(fds) < 0)
        return 2;
    what = argv[1];
    parent = getpid();
    int n = atoi(argv[2]), forks = !strncmp(what, "fork_", 5) && strcmp(what, "fork_exec");
    int restart = strcmp(what, "fork_eintr") != 0;
    int counts[2][3] = {{0}}, child_ok = 0, hung = 0, i = 0, tries = 0;
    struct sigaction sa = {.sa_handler = handler, .sa_flags = restart ? SA_RESTART : 0};
    sigaction(SIGALRM, &sa, NULL);
    for (; i < n && tries < 2 * n && !hung; tries++) {
        char b;
        struct itimerval it = {{0, 0}, {0, 3000}};
        child = 0;
        setitimer(ITIMER_REAL, &it, NULL);
        in_call = 1;
        long r = read(fds[0], &b, 1);
        in_call = 0;
        if (child == 0 && forks)
            _exit(getppid() != parent ? 3 : outcome(r) + 10 * early); /* the forked child */
        int status = forks ? wait_child(child) : 0;
        hung += status < 0;
        if (early) {
            early = 0;
            drain();
            continue;
        }
        i++;
        counts[0][outcome(r)]++;
        if (forks && status >= 0)
            counts[1][status < 3 ? status : 2]++;
        child_ok += !forks && handled_ok;
        drain();
    }
    fprintf(stderr, "rounds made again (signal before the call): %d\n", tries - i);
    if (forks)
        printf("%s: parent byte=%d eintr=%d other=%d, child byte=%d eintr=%d other=%d, hung=%d\n", what,
               counts[0][0], counts[0][1], counts[0][2], counts[1][0], counts[1][1], counts[1][2], hung);
    else
        printf("%s: byte=%d eintr=%d other=%d child-ok=%d\n", what, counts[0][0], counts[0][1], counts[0][2],
               child_ok);
    return 0;
}
