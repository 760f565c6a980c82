// walltime: runs a command and times it from fork to wait4, the interval coreplane-exec's profiles
// call wall_ns, so native and delegated runs of `coreplane validate` are timed alike.
//
//   walltime [-c CPULIST] [-N NICE] [-o FILE] -- PROGRAM [ARGS...]
//
// -c pins the command to CPULIST (e.g. "1", the cell's compute core); -N sets the nice value of this
// session's autogroup (/proc/self/autogroup: with autogroups, plain nice only ranks processes of one
// session, so this is what shields a measured run from other sessions' work; needs a session of
// its own, e.g. setsid, and root to go below 0). Writes {"wall_ns", "user_ns", "sys_ns",
// "status"|"signal"} to FILE (default stderr) and exits with the command's status (128+N on signal N).
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "workload.h"

static void die(const char *what, const char *detail)
{
    fprintf(stderr, "walltime: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    exit(125);
}

static int64_t tv_ns(struct timeval tv)
{
    return (int64_t)tv.tv_sec * 1000000000 + (int64_t)tv.tv_usec * 1000;
}

int main(int argc, char **argv)
{
    const char *cpus = NULL, *out_path = NULL, *nice = NULL;
    int opt;
    while ((opt = getopt(argc, argv, "+c:N:o:h")) != -1) {
        switch (opt) {
        case 'c': cpus = optarg; break;
        case 'N': nice = optarg; break;
        case 'o': out_path = optarg; break;
        default:
            fprintf(stderr, "usage: walltime [-c CPULIST] [-N NICE] [-o FILE] -- PROGRAM [ARGS...]\n");
            return opt == 'h' ? 0 : 125;
        }
    }
    if (optind >= argc)
        die("no program given", NULL);
    if (cpus) {
        int list[1024];
        int n = parse_cpu_list(cpus, list, 1024);
        cpu_set_t set;
        CPU_ZERO(&set);
        for (int i = 0; i < n; i++)
            if (list[i] >= 0 && list[i] < CPU_SETSIZE)
                CPU_SET(list[i], &set);
        if (n == 0 || sched_setaffinity(0, sizeof set, &set) != 0)
            die(cpus, n ? strerror(errno) : "not a CPU list");
    }
    if (nice) {
        FILE *ag = fopen("/proc/self/autogroup", "w");
        if (!ag || fprintf(ag, "%s\n", nice) < 0 || fclose(ag) != 0)
            die("-N: cannot set the autogroup nice value", strerror(errno));
    }
    FILE *out = stderr;
    if (out_path && !(out = fopen(out_path, "w")))
        die(out_path, strerror(errno));

    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pid_t pid = fork();
    if (pid < 0)
        die("fork", strerror(errno));
    if (pid == 0) {
        execvp(argv[optind], &argv[optind]);
        fprintf(stderr, "walltime: %s: %s\n", argv[optind], strerror(errno));
        _exit(127);
    }
    int status;
    struct rusage ru;
    while (wait4(pid, &status, 0, &ru) < 0)
        if (errno != EINTR)
            die("wait4", strerror(errno));
    clock_gettime(CLOCK_MONOTONIC, &t1);
    int64_t wall = (int64_t)(t1.tv_sec - t0.tv_sec) * 1000000000 + (t1.tv_nsec - t0.tv_nsec);
    fprintf(out, "{\"wall_ns\": %lld, \"user_ns\": %lld, \"sys_ns\": %lld, ", (long long)wall,
            (long long)tv_ns(ru.ru_utime), (long long)tv_ns(ru.ru_stime));
    if (WIFSIGNALED(status))
        fprintf(out, "\"signal\": %d}\n", WTERMSIG(status));
    else
        fprintf(out, "\"status\": %d}\n", WEXITSTATUS(status));
    if (out != stderr)
        fclose(out);
    return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}
