/* arbiter_follow_guest.c: run inside a guest of 4 vCPUs (3 compute cores; see
 * tests/test_arbiter_cgroup2.py) beside a coreplane-arbiter with a 5 s warning, with
 * coreplane-exec, coreplane-rt and arbiter_follow in /bin. A launcher child makes itself an MCP
 * (provisioned 1 core, at most 3, delegating), takes one vcore and becomes `coreplane-exec
 * --delegate getppid -- arbiter_follow` with COREPLANE_RT_MCP=3, as `coreplane run --mcp --max 3`
 * does. Its runtime then asks for the 2 free cores: the MCP must hold all 3. A second MCP,
 * provisioned 2, takes 2 of them back: they must be yielded (not preempted at the 5 s deadline),
 * leaving 1; once that MCP dies, 3 again. Each step prints the CPUs the program's worker may use.
 * Prints one "CHECK ..." line per step; exit 0 when every step held. */
#define _GNU_SOURCE
#include <coreplane/wire.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void fail(const char *what) {
    printf("CHECK FAILED %s (%s)\n", what, strerror(errno));
    fflush(stdout);
    exit(1);
}

static int connect_arbiter(void) {
    int fd = cp_wire_connect("/run/arbiter.sock");
    if (fd < 0) fail("connect");
    return fd;
}

static void call(int fd, const char *request, char *reply, size_t size) {
    if (cp_wire_call(fd, request, reply, size) != 0) fail("arbiter reply");
}

static FILE *to_program, *from_program;

/* Asks the program for its state: its JSON line into line. */
static void ask(char *line, size_t size) {
    fputs("?\n", to_program);
    fflush(to_program);
    if (!fgets(line, (int)size, from_program)) fail("the program ended");
}

static void field(const char *line, const char *name, char *out, size_t size) {
    char key[64];
    snprintf(key, sizeof key, "\"%s\":", name);
    const char *p = line ? strstr(line, key) : NULL;
    out[0] = 0;
    if (!p) return;
    p += strlen(key);
    while (*p == ' ') p++;
    if (*p == '"') p++;
    size_t n = strcspn(p, "\",}");
    if (n >= size) n = size - 1;
    memcpy(out, p, n);
    out[n] = 0;
}

static int admin;
static pid_t launcher;

/* The vcores the launcher's MCP holds now (the status lists each MCP's fields in order, "held"
 * before "pid"). */
static int held(void) {
    char reply[8192], key[32];
    call(admin, "{\"op\":\"status\"}\n", reply, sizeof reply);
    snprintf(key, sizeof key, "\"pid\":%d,", launcher);
    char *at = strstr(reply, key);
    if (!at) return -1;
    *at = 0;
    char *object = strrchr(reply, '{'), *h = object ? strstr(object, "\"held\":") : NULL;
    return h ? atoi(h + 7) : -1;
}

/* Waits up to 20 s for the launcher's MCP to hold `want` vcores; prints the step with the
 * program's worker's allowed CPUs. */
static void expect_held(const char *step, int want) {
    char line[512], allowed[64] = "";
    int now = -1;
    for (int i = 0; i < 400 && (now = held()) != want; i++) usleep(50000);
    ask(line, sizeof line);
    field(line, "allowed", allowed, sizeof allowed);
    printf("CHECK %s: held %d, worker allowed %s\n", step, now, allowed);
    fflush(stdout);
    if (now != want) exit(1);
}

int main(void) {
    int down[2], up[2];
    char reply[8192], line[256];
    if (pipe(down) || pipe(up)) fail("pipe");
    launcher = fork();
    if (launcher < 0) fail("fork");
    if (launcher == 0) {
        int fd = connect_arbiter();
        snprintf(line, sizeof line, "{\"op\":\"provision\",\"pid\":%d,\"cores\":1,\"max\":3,\"delegates\":true}\n", getpid());
        call(fd, line, reply, sizeof reply);
        call(fd, "{\"op\":\"request\",\"n\":1}\n", reply, sizeof reply);
        close(fd);
        setenv("COREPLANE_RT_MCP", "3", 1);
        dup2(down[0], 0);
        dup2(up[1], 1);
        /* The program's stdin must end when this process closes its side. */
        close(down[0]);
        close(down[1]);
        close(up[0]);
        close(up[1]);
        execl("/bin/coreplane-exec", "coreplane-exec", "--delegate", "getppid", "--", "/bin/arbiter_follow", (char *)NULL);
        fail("exec coreplane-exec");
    }
    close(down[0]);
    close(up[1]);
    to_program = fdopen(down[1], "w");
    from_program = fdopen(up[0], "r");
    admin = connect_arbiter();

    expect_held("grown", 3);

    int go[2];
    if (pipe(go)) fail("pipe");
    pid_t owner = fork();
    if (owner == 0) {
        char byte;
        int fd = connect_arbiter();
        if (read(go[0], &byte, 1) != 1) _exit(1);
        call(fd, "{\"op\":\"request\",\"n\":2}\n", reply, sizeof reply);
        pause();
        _exit(0);
    }
    snprintf(line, sizeof line, "{\"op\":\"provision\",\"pid\":%d,\"cores\":2}\n", owner);
    call(admin, line, reply, sizeof reply);
    if (write(go[1], "g", 1) != 1) fail("go");
    char given[16];
    for (int i = 0; i < 400; i++) {
        call(admin, "{\"op\":\"status\"}\n", reply, sizeof reply);
        field(strstr(reply, "\"counters\""), "yielded_in_time", given, sizeof given);
        if (atoi(given) == 2) break;
        usleep(50000);
    }
    char *counters = strstr(reply, "\"counters\"");
    char yielded[16], preempted[16];
    field(counters, "yielded_in_time", yielded, sizeof yielded);
    field(counters, "preempted", preempted, sizeof preempted);
    printf("CHECK handed over: yielded %s, preempted %s\n", yielded, preempted);
    expect_held("shrunk", 1);

    kill(owner, SIGKILL);
    waitpid(owner, NULL, 0);
    expect_held("regrown", 3);
    ask(line, sizeof line);
    char wrong[16], calls[32];
    field(line, "wrong", wrong, sizeof wrong);
    field(line, "calls", calls, sizeof calls);
    printf("CHECK calls %s wrong %s\n", calls, wrong);
    fclose(to_program);
    int status;
    waitpid(launcher, &status, 0);
    printf("CHECK program exit %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    printf("CHECK OK\n");
    return 0;
}
