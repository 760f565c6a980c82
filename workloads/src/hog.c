/* hog: the while(1) background task of ROS §5.2.3: threads that only burn CPU until stopped.
 * Usage: hog [-t threads] [-d seconds] [-c cpu,list] */
#include "workload.h"
#include <stdint.h>
#include <unistd.h>

static int ncpus_pin, pin_cpus[1024];
static uint64_t *spins;

static void *burn(void *arg) {
    long id = (long)arg;
    if (ncpus_pin) pin_self("hog", pin_cpus[id % ncpus_pin]);
    uint64_t n = 0;
    while (!workload_stop) n++;
    spins[id] = n;
    return NULL;
}

int main(int argc, char **argv) {
    int opt, threads = 1;
    double seconds = 0;
    while ((opt = getopt(argc, argv, "t:d:c:")) != -1) {
        switch (opt) {
        case 't': threads = atoi(optarg); break;
        case 'd': seconds = atof(optarg); break;
        case 'c': ncpus_pin = parse_cpu_list(optarg, pin_cpus, 1024); break;
        default:
            fprintf(stderr, "usage: hog [-t threads] [-d seconds] [-c cpus]\n");
            return 2;
        }
    }
    if (threads < 1) {
        fprintf(stderr, "hog: -t must be >= 1\n");
        return 2;
    }
    spins = calloc(threads, sizeof *spins);
    stop_on_signal_or_after(seconds);
    pthread_t *tids = calloc(threads, sizeof *tids);
    double t0 = now_ns();
    for (long i = 0; i < threads; i++) pthread_create(&tids[i], NULL, burn, (void *)i);
    for (int i = 0; i < threads; i++) pthread_join(tids[i], NULL);
    uint64_t all = 0;
    for (int i = 0; i < threads; i++) all += spins[i];
    printf("{\"workload\": \"hog\", \"threads\": %d, \"seconds\": %.3f, \"loops\": %llu}\n", threads,
           (now_ns() - t0) / 1e9, (unsigned long long)all);
    return 0;
}
