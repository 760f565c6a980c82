// The main thread ends with exit(2) (code 5) while a second thread makes a call and then ends
// with exit(2) too (code 7): natively the process then ends, with the last thread's code, 7
// (issue 12: under --delegate all the delegate threads kept such a process alive forever).
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>
static void *last(void *arg)
{
    (void)arg;
    usleep(100000);
    (void)write(1, "last thread\n", 12);
    syscall(SYS_exit, 7);
    return NULL;
}
int main(void)
{
    pthread_t t;
    pthread_create(&t, NULL, last, NULL);
    syscall(SYS_exit, 5);
}
