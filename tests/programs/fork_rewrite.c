// Fork while other threads make their first calls at new syscall sites (issue 12, stress): 30 rounds
// of a fresh process whose 4 threads call libc wrappers in a loop while its main thread forks and
// execs /bin/true 20 times. Prints "done" and exits 0; under the runtime a child that inherits the
// fast path's rewrite lock taken spins forever (docs/conformance.md, "Under stress").
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <fcntl.h>
#include <sys/stat.h>
static void *spin(void *a) {
    (void)a;
    for (;;) {  /* libc wrappers: each a different site, each first call traps and is rewritten */
        struct stat st; getppid(); getuid(); stat("/", &st); close(open("/dev/null", O_RDONLY));
        sched_yield(); usleep(1);
    }
    return NULL;
}
int main(void) {
    for (int i = 0; i < 30; i++) {
        pthread_t t[4];
        pid_t kid = fork();  /* a fresh process per round: its sites are new again */
        if (kid == 0) {
            for (int k = 0; k < 4; k++) pthread_create(&t[k], NULL, spin, NULL);
            for (int k = 0; k < 20; k++) {
                pid_t c = fork();
                if (c == 0) { execl("/bin/true", "true", (char *)0); _exit(127); }
                waitpid(c, NULL, 0);
            }
            _exit(0);
        }
        waitpid(kid, NULL, 0);
    }
    puts("done");
    return 0;
}
