// The main thread ends with SYS_exit (the process lives on in its other thread), then that
// thread calls execve: natively the exec succeeds and prints its line (issue 12 conformance).
#include <pthread.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>
static void *t(void *a) { (void)a; usleep(100000); char *argv[] = {"echo", "exec after the leader exited", NULL}; execv("/bin/echo", argv); perror("execv"); _exit(1); }
int main(void) { pthread_t th; pthread_create(&th, NULL, t, NULL); syscall(SYS_exit, 0); }
