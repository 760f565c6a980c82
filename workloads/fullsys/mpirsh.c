/* mpirsh: how the OpenMPI baseline starts its ranks without ssh: mpirun's remote-shell agent
 * (plm_rsh_agent) on node 0 and its server on every other node, over the guests' virtual network.
 *   mpirsh serve ADDRESS   a node's server, listening on its ADDRESS only: accepts one command,
 *                          runs it with `sh -c` (standard output and error on the connection),
 *                          waits for it and for everything it started (a child subreaper: a
 *                          daemonised orted too), sends its status after its output (a trailer
 *                          of TRAILER_MAGIC and the status), exits with it.
 *   mpirsh HOST WORD...    the agent, as mpirun calls ssh: runs WORD... joined by spaces on HOST's
 *                          server, copies what it prints to standard output, exits with its status
 *                          as ssh does (so mpirun sees a remote daemon that failed to start at once).
 *                          HOST's server may not listen yet (its guest still starting): retried.
 * Both listen or connect on TCP port 7017, or on $MPIRSH_PORT (a test's free port on the host).
 * No authentication: the guests' network is a QEMU segment of their own, with no route out.
 * Statically linked. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { DEFAULT_PORT = 7017, MAX_COMMAND = 1 << 20 };
/* After the command's output: these 8 bytes, then its status as 4 bytes in network order. */
static const char TRAILER_MAGIC[8] = {'\0', 'M', 'P', 'I', 'R', 'S', 'H', '\0'};
enum { TRAILER = sizeof TRAILER_MAGIC + 4 };

static uint16_t port(void)
{
    const char *chosen = getenv("MPIRSH_PORT");
    return htons(chosen != NULL ? (uint16_t)atoi(chosen) : DEFAULT_PORT);
}

static void die(const char *what)
{
    fprintf(stderr, "mpirsh: %s: %s\n", what, errno ? strerror(errno) : "short transfer");
    exit(255);
}

static void transfer(int fd, void *data, size_t bytes, int sending)
{
    for (char *p = data; bytes > 0;) {
        ssize_t n = sending ? write(fd, p, bytes) : read(fd, p, bytes);
        if (n <= 0) {
            errno = n == 0 ? 0 : errno;
            die(sending ? "send" : "receive");
        }
        p += n;
        bytes -= (size_t)n;
    }
}

static struct sockaddr_in address_of(const char *host)
{
    struct sockaddr_in where = {.sin_family = AF_INET, .sin_port = port()};
    if (inet_pton(AF_INET, host, &where.sin_addr) != 1) {
        fprintf(stderr, "mpirsh: %s is not an IPv4 address\n", host);
        exit(255);
    }
    return where;
}

static int serve(const char *address)
{
    int listener = socket(AF_INET, SOCK_STREAM, 0), yes = 1;
    struct sockaddr_in here = address_of(address);
    setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    if (listener < 0 || bind(listener, (struct sockaddr *)&here, sizeof here) < 0 || listen(listener, 1) < 0) {
        die("listen");
    }
    int fd = accept(listener, NULL, NULL);
    uint32_t length;
    if (fd < 0) {
        die("accept");
    }
    close(listener);
    transfer(fd, &length, sizeof length, 0);
    length = ntohl(length);
    char *command = calloc(1, (size_t)length + 1);
    if (length > MAX_COMMAND || command == NULL) {
        fprintf(stderr, "mpirsh: a command of %u bytes\n", length);
        return 255;
    }
    transfer(fd, command, length, 0);
    /* Orphans of the command (a daemon it starts) become this process's children: waited for below. */
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    pid_t child = fork();
    if (child == 0) {
        int null = open("/dev/null", O_RDONLY);
        dup2(null, 0);
        dup2(fd, 1);
        dup2(fd, 2);
        execl("/bin/sh", "sh", "-c", command, (char *)NULL);
        _exit(127);
    }
    int status = 255, any_status;
    for (pid_t done; (done = wait(&any_status)) > 0 || errno == EINTR;) {
        if (done == child) {
            status = WIFEXITED(any_status) ? WEXITSTATUS(any_status) : 128 + WTERMSIG(any_status);
        }
    }
    /* Everything the command started has ended: its status goes last on the connection. */
    char trailer[TRAILER];
    uint32_t wire = htonl((uint32_t)status);
    memcpy(trailer, TRAILER_MAGIC, sizeof TRAILER_MAGIC);
    memcpy(trailer + sizeof TRAILER_MAGIC, &wire, sizeof wire);
    transfer(fd, trailer, sizeof trailer, 1);
    close(fd);
    return status;
}

/* HOST's server, once it listens: without a limit, as dmm waits for node 0 (the host's time-out
 * ends a run whose peer never starts). */
static int connect_to(const char *host)
{
    struct sockaddr_in server = address_of(host);
    for (;;) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd >= 0 && connect(fd, (struct sockaddr *)&server, sizeof server) == 0) {
            return fd;
        }
        close(fd);
        nanosleep(&(struct timespec){.tv_nsec = 100 * 1000 * 1000}, NULL);
    }
}

static int run_remote(const char *host, int words, char **word)
{
    size_t length = 0;
    for (int i = 0; i < words; i++) {
        length += strlen(word[i]) + 1;
    }
    char *command = calloc(1, length + 1), buffer[4096];
    if (command == NULL || length > MAX_COMMAND) {
        fprintf(stderr, "mpirsh: a command of %zu bytes\n", length);
        return 255;
    }
    for (int i = 0; i < words; i++) {
        strcat(strcat(command, word[i]), i + 1 < words ? " " : "");
    }
    int fd = connect_to(host);
    uint32_t wire = htonl((uint32_t)strlen(command));
    transfer(fd, &wire, sizeof wire, 1);
    transfer(fd, command, strlen(command), 1);
    shutdown(fd, SHUT_WR);
    /* The last TRAILER bytes received are held back: at the end they are the status, not output. */
    char held[TRAILER + sizeof buffer];
    size_t kept = 0;
    for (ssize_t n; (n = read(fd, buffer, sizeof buffer)) != 0;) {
        if (n < 0 && errno != EINTR) {
            die("receive");
        }
        if (n > 0) {
            memcpy(held + kept, buffer, (size_t)n);
            kept += (size_t)n;
            if (kept > TRAILER) {
                transfer(1, held, kept - TRAILER, 1);
                memmove(held, held + kept - TRAILER, TRAILER);
                kept = TRAILER;
            }
        }
    }
    uint32_t status;
    if (kept < TRAILER || memcmp(held, TRAILER_MAGIC, sizeof TRAILER_MAGIC) != 0) {
        transfer(1, held, kept, 1);
        fprintf(stderr, "mpirsh: %s's server ended without the command's status\n", host);
        return 255;
    }
    memcpy(&status, held + sizeof TRAILER_MAGIC, sizeof status);
    return (int)ntohl(status);
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "serve") == 0) {
        return serve(argv[2]);
    }
    if (argc < 3) {
        fprintf(stderr, "usage: mpirsh serve ADDRESS | mpirsh HOST WORD...\n");
        return 255;
    }
    return run_remote(argv[1], argc - 2, argv + 2);
}
