/* arbiter_cgroup2_check.c: run inside a guest whose cpuset controller lives in cgroup v2 (see
 * tests/test_arbiter_cgroup2.py), beside a running coreplane-arbiter. A child attaches through
 * libcoreplane-vcore (a C client), is provisioned a core, takes it as a vcore and spins pinned to
 * it without ever yielding; the check reads its group, revokes the vcore with a 20 ms warning and
 * sees the child moved off its core, its CPU gone from the group, and everything reclaimed when
 * the child dies. Mode "hold" stops after the grant (the arbiter is then killed by the caller).
 * Mode "gang" (beside an arbiter run with --gang-stop): the child is a best-effort MCP holding the
 * core; this process, provisioned it and exempt from the gang stop, takes it back, and the child,
 * preempted at the deadline with no core left, is frozen (cgroup.freeze) until this process
 * yields the core, when it is granted it and thawed.
 * Prints one "CHECK ..." line per step; exit 0 when every step held. */
#define _GNU_SOURCE
#include <coreplane/vcore.h>
#include <coreplane/wire.h>
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *BASE = "/sys/fs/cgroup/coreplane-arbiter";

static void fail(const char *what) {
    printf("CHECK FAILED %s (%s)\n", what, strerror(errno));
    exit(1);
}

/* One request line to the arbiter, its one reply line into reply. */
static void call(int fd, const char *request, char *reply, size_t size) {
    if (cp_wire_call(fd, request, reply, size) != 0) fail("arbiter reply");
}

static void read_file(const char *path, char *out, size_t size) {
    FILE *f = fopen(path, "r");
    if (!f) fail(path);
    size_t n = fread(out, 1, size - 1, f);
    out[n] = 0;
    out[strcspn(out, "\n")] = 0;
    fclose(f);
}

static int cpu_listed(const char *list, int cpu) {
    for (const char *p = list; *p;) {
        int a = (int)strtol(p, (char **)&p, 10), b = a;
        if (*p == '-') b = (int)strtol(p + 1, (char **)&p, 10);
        if (cpu >= a && cpu <= b) return 1;
        if (*p == ',') p++;
        else break;
    }
    return 0;
}

/* The child MCP: attach (waiting for the provision), take a vcore, spin on it, report the move. */
static void spinner(int report) {
    if (cp_vcore_open() != 0) { printf("CHECK FAILED attach: %s\n", cp_vcore_error()); _exit(2); }
    /* (under the gang stop the arbiter grants an idle core with the provision itself) */
    if (cp_vcore_cpu(0) < 0 && cp_vcore_request(1) != 1) { printf("CHECK FAILED request: %s\n", cp_vcore_error()); _exit(2); }
    int cpu = cp_vcore_cpu(0);
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0) _exit(3);
    if (write(report, &cpu, sizeof cpu) != sizeof cpu) _exit(4);
    while (sched_getcpu() == cpu) {
    }
    int now = sched_getcpu();
    if (write(report, &now, sizeof now) != sizeof now) _exit(4);
    pause();
    _exit(0);
}

/* Waits up to 2 s for the child's group to report `frozen` (1 or 0) in cgroup.events. */
static int wait_frozen(pid_t child, int frozen) {
    char path[256], text[512], want[16];
    snprintf(path, sizeof path, "%s/mcp-%d/cgroup.events", BASE, child);
    snprintf(want, sizeof want, "frozen %d", frozen);
    for (int i = 0; i < 2000; i++) {
        FILE *f = fopen(path, "r");
        if (!f) fail(path);
        size_t n = fread(text, 1, sizeof text - 1, f);
        text[n] = 0;
        fclose(f);
        if (strstr(text, want)) return 1;
        usleep(1000);
    }
    return 0;
}

/* Mode "gang": the child holds the core as a best-effort MCP; this process takes it back. */
static int gang(int fd, pid_t child, int cpu) {
    char request[256], reply[65536];
    snprintf(request, sizeof request, "{\"op\":\"provision\",\"pid\":%d,\"cores\":1,\"gang_stop\":false}\n", getpid());
    call(fd, request, reply, sizeof reply);
    if (!strstr(reply, "\"ok\":true")) { printf("CHECK FAILED gang provision: %s", reply); return 1; }
    call(fd, "{\"op\":\"request\",\"n\":1}\n", reply, sizeof reply);
    if (!strstr(reply, "\"pending\":1")) { printf("CHECK FAILED gang request: %s", reply); return 1; }
    if (!wait_frozen(child, 1)) { printf("CHECK FAILED the child holding no core was not frozen\n"); return 1; }
    printf("CHECK gang: the child, preempted from CPU %d, is frozen\n", cpu);
    call(fd, "{\"op\":\"yield\",\"vcore\":0}\n", reply, sizeof reply);
    if (!strstr(reply, "\"ok\":true")) { printf("CHECK FAILED gang yield: %s", reply); return 1; }
    if (!wait_frozen(child, 0)) { printf("CHECK FAILED the child granted the core again was not thawed\n"); return 1; }
    printf("CHECK gang: the child, granted the core again, is thawed\n");
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    printf("CHECK OK\n");
    return 0;
}

int main(int argc, char **argv) {
    int hold = argc > 1 && strcmp(argv[1], "hold") == 0;
    int gang_mode = argc > 1 && strcmp(argv[1], "gang") == 0;
    int pipefd[2];
    if (pipe(pipefd) != 0) fail("pipe");
    pid_t child = fork();
    if (child == 0) spinner(pipefd[1]);
    alarm(30);

    int fd = cp_wire_connect(NULL);
    if (fd < 0) fail("connect");
    char request[256], reply[65536], path[256], text[256];
    snprintf(request, sizeof request, "{\"op\":\"provision\",\"pid\":%d,\"cores\":%d}\n", child, gang_mode ? 0 : 1);
    call(fd, request, reply, sizeof reply);
    if (!strstr(reply, "\"ok\":true")) { printf("CHECK FAILED provision: %s", reply); return 1; }

    int cpu, now;
    if (read(pipefd[0], &cpu, sizeof cpu) != sizeof cpu) fail("the child's grant");
    snprintf(path, sizeof path, "/proc/%d/cgroup", child);
    read_file(path, text, sizeof text);
    printf("CHECK child %d in %s, vcore 0 on CPU %d\n", child, text, cpu);
    char want[128];
    snprintf(want, sizeof want, "0::/coreplane-arbiter/mcp-%d", child);
    if (strcmp(text, want) != 0) { printf("CHECK FAILED the child is not in its group\n"); return 1; }
    snprintf(path, sizeof path, "%s/mcp-%d/cpuset.cpus", BASE, child);
    read_file(path, text, sizeof text);
    printf("CHECK group cpuset.cpus %s\n", text);
    if (!cpu_listed(text, cpu)) { printf("CHECK FAILED the vcore's CPU is not in the group\n"); return 1; }
    if (gang_mode) return gang(fd, child, cpu);
    if (hold) {
        printf("CHECK HOLDING %d\n", child);
        fflush(stdout);
        pause();
    }

    snprintf(request, sizeof request, "{\"op\":\"revoke\",\"pid\":%d,\"vcore\":0,\"warn_us\":20000,\"wait\":true}\n", child);
    call(fd, request, reply, sizeof reply);
    if (!strstr(reply, "\"outcome\":\"preempted\"")) { printf("CHECK FAILED revoke: %s", reply); return 1; }
    if (read(pipefd[0], &now, sizeof now) != sizeof now) fail("the child's move");
    read_file(path, text, sizeof text);
    printf("CHECK preempted at the deadline: the child now on CPU %d, group cpuset.cpus %s\n", now, text);
    if (now == cpu || cpu_listed(text, cpu)) { printf("CHECK FAILED the child kept its core\n"); return 1; }

    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    for (int i = 0;; i++) {
        call(fd, "{\"op\":\"status\"}\n", reply, sizeof reply);
        if (strstr(reply, "\"mcps\":[]")) break;
        if (i == 1000) { printf("CHECK FAILED the dead child's MCP was not reclaimed\n"); return 1; }
        usleep(1000);
    }
    snprintf(path, sizeof path, "%s/mcp-%d", BASE, child);
    if (access(path, F_OK) == 0) { printf("CHECK FAILED %s is left\n", path); return 1; }
    printf("CHECK OK\n");
    return 0;
}
