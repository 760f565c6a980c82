/* mlock_threads N [lock]: starts N threads that each call getppid 5 times, after an
 * mlockall(MCL_CURRENT) when given "lock". Prints "ok". Under a profile the runtime keeps the
 * profile's mapping small before an mlockall: threads started after it beyond its spare blocks
 * go unprofiled, and the profile must say how many. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static void *work(void *arg)
{
    for (int i = 0; i < 5; i++)
        getppid();
    return arg;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 16;
    /* Its result does not matter (no CAP_IPC_LOCK and a small limit in a container): the
     * runtime acts before the call. */
    if (argc > 2 && !strcmp(argv[2], "lock"))
        mlockall(MCL_CURRENT);
    pthread_t t[256];
    for (int i = 0; i < n && i < 256; i++)
        pthread_create(&t[i], NULL, work, NULL);
    for (int i = 0; i < n && i < 256; i++)
        pthread_join(t[i], NULL);
    puts("ok");
    return 0;
}
