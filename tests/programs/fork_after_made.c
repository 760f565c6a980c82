/* A SIGALRM handler with SA_RESTART forks while the thread reads a file a byte at a time. A
   read the kernel completed before the signal is not made again: the child, returning from the
   handler, gets that read's byte, and the file's offset (shared with the parent) stays where it
   was. The child knows the read was made at the fork from its own copy of the buffer (cleared
   before each read), tells whether its read moved the offset (exit status 1: read twice), and
   ends (status 2 where the read had not been made); the parent waits for it in the handler.
   Usage: fork_after_made N (forks). Prints whether some children's read had been made at the
   fork, and how many of those read again. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

static int fd;
static volatile char buf;
static volatile int forks, made, again, in_child, made_at_fork;
static volatile off_t off_at_fork;

static void on_alarm(int sig) {
    (void)sig;
    pid_t pid = fork();
    if (pid == 0) {
        in_child = 1, made_at_fork = buf != 0;
        off_at_fork = lseek(fd, 0, SEEK_CUR);
        return;
    }
    int status;
    waitpid(pid, &status, 0);
    forks++;
    made += WIFEXITED(status) && WEXITSTATUS(status) <= 1;
    again += WIFEXITED(status) && WEXITSTATUS(status) == 1;
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 20;
    char path[] = "/tmp/fork_after_madeXXXXXX", block[4096];
    fd = mkstemp(path);
    unlink(path);
    for (int i = 0; i < (int)sizeof block; i++)
        block[i] = 1 + i % 255;
    for (int i = 0; i < 256; i++)
        if (write(fd, block, sizeof block) != sizeof block)
            return 1;
    lseek(fd, 0, SEEK_SET);
    struct sigaction sa = {.sa_handler = on_alarm, .sa_flags = SA_RESTART};
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval it = {{0, 3000}, {0, 3000}};
    setitimer(ITIMER_REAL, &it, NULL);
    while (forks < rounds) {
        buf = 0;
        /* A fork between the last read's end and here: no call in progress. */
        if (in_child)
            _exit(made_at_fork ? 0 : 2);
        ssize_t n = read(fd, (char *)&buf, 1);
        if (in_child && !made_at_fork)
            _exit(2);
        if (in_child)
            _exit(lseek(fd, 0, SEEK_CUR) != off_at_fork || n != 1 || !buf);
        if (n != 1)
            lseek(fd, 0, SEEK_SET);
    }
    /* A fork after the last round (the timer still runs): the child must not report too. */
    if (in_child)
        _exit(made_at_fork ? 0 : 2);
    struct itimerval stop = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &stop, NULL);
    if (in_child)
        _exit(made_at_fork ? 0 : 2);
    printf("made=%s again=%d\n", made > 0 ? "some" : "none", again);
    return 0;
}
