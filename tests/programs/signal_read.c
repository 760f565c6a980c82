/* A signal arrives while read() blocks on an empty pipe: EINTR without SA_RESTART, the read
 * goes on (and gets the data written later) with SA_RESTART. Prints what happened. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

static volatile sig_atomic_t handled;
static int fds[2];

static void on_alarm(int sig) { (void)sig; handled++; }

static void *late_writer(void *arg) {
    (void)arg;
    usleep(400 * 1000);
    if (write(fds[1], "data", 4) != 4) perror("write");
    return NULL;
}

static void trial(int restart) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sa.sa_flags = restart ? SA_RESTART : 0;
    sigaction(SIGALRM, &sa, NULL);
    if (pipe(fds)) { perror("pipe"); return; }
    pthread_t w;
    pthread_create(&w, NULL, late_writer, NULL);
    struct itimerval it = {{0, 0}, {0, 100 * 1000}};
    handled = 0;
    setitimer(ITIMER_REAL, &it, NULL);
    char buf[8] = {0};
    ssize_t n = read(fds[0], buf, sizeof buf - 1);
    int err = errno;
    pthread_join(w, NULL);
    printf("%s: handled=%d read=%zd %s\n", restart ? "SA_RESTART" : "no SA_RESTART", (int)handled, n,
           n < 0 ? (err == EINTR ? "EINTR" : strerror(err)) : buf);
    close(fds[0]);
    close(fds[1]);
}

int main(void) {
    trial(0);
    trial(1);
    return 0;
}
