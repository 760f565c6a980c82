/* nodes.h: what the distributed full-system workloads (dmm, dfmm) share to reach each other over
 * TCP: node 0 accepts the other nodes, which announce their rank first; the others connect to
 * node 0, retrying until it listens; whole sends and receives; a one-line death naming the program
 * (WORKLOAD, defined by the includer). */
#ifndef COREPLANE_NODES_H
#define COREPLANE_NODES_H

#ifndef WORKLOAD
#error "define WORKLOAD, the program's name for its error messages, before including nodes.h"
#endif

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { MAX_NODES = 64 };

static void die(const char *what)
{
    fprintf(stderr, WORKLOAD ": %s: %s\n", what,
            errno ? strerror(errno) : "peer closed the connection");
    exit(1);
}

static void send_all(int fd, const void *data, size_t bytes)
{
    for (const char *p = data; bytes > 0;) {
        ssize_t n = send(fd, p, bytes, 0);
        if (n <= 0) {
            die("send");
        }
        p += n;
        bytes -= (size_t)n;
    }
}

static void recv_all(int fd, void *data, size_t bytes)
{
    for (char *p = data; bytes > 0;) {
        ssize_t n = recv(fd, p, bytes, 0);
        if (n <= 0) {
            errno = n == 0 ? 0 : errno;
            die("recv");
        }
        p += n;
        bytes -= (size_t)n;
    }
}

/* Node 0: the other nodes, accepted on `port` in any order, indexed by the rank each sends first
 * (peer[rank] = -1 on entry). */
static void accept_nodes(int port, int nodes, int peer[])
{
    int listener = socket(AF_INET, SOCK_STREAM, 0), yes = 1;
    struct sockaddr_in any = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                              .sin_addr.s_addr = htonl(INADDR_ANY)};
    setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    if (listener < 0 || bind(listener, (struct sockaddr *)&any, sizeof any) < 0 || listen(listener, MAX_NODES) < 0) {
        die("listen");
    }
    for (int i = 1; i < nodes; i++) {
        int fd = accept(listener, NULL, NULL);
        int32_t rank;
        if (fd < 0) {
            die("accept");
        }
        recv_all(fd, &rank, sizeof rank);
        if (rank < 1 || rank >= nodes || peer[rank] >= 0) {
            fprintf(stderr, WORKLOAD ": a node announced rank %d\n", (int)rank);
            exit(1);
        }
        peer[rank] = fd;
    }
    close(listener);
}

/* Node 0's address is reachable once that node has booted and listens: until then, retry, without
 * a limit: under -icount,sleep=off an idle guest's clock leaps ahead, so any limit in guest time
 * could pass in a few host seconds while node 0 still boots; the host's time-out ends a run. */
static int connect_to_node0(const char *address, int port, int32_t rank)
{
    struct sockaddr_in node0 = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (inet_pton(AF_INET, address, &node0.sin_addr) != 1) {
        fprintf(stderr, WORKLOAD ": %s is not an IPv4 address\n", address);
        exit(2);
    }
    for (;;) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd >= 0 && connect(fd, (struct sockaddr *)&node0, sizeof node0) == 0) {
            send_all(fd, &rank, sizeof rank);
            return fd;
        }
        close(fd);
        nanosleep(&(struct timespec){.tv_nsec = 200 * 1000 * 1000}, NULL);
    }
}

#endif
