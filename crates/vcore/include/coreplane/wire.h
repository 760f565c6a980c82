/* coreplane/wire.h: the arbiter's wire for C programs that speak it directly (benches, tests:
 * what vcore.h does not offer, such as provision, revoke and status as an administrator): one
 * JSON request line over its Unix socket, one reply line back. Header-only, so a program built
 * for a guest needs nothing more than vcore.h's library. */
#ifndef COREPLANE_WIRE_H
#define COREPLANE_WIRE_H
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>
#include <unistd.h>

#include <coreplane/vcore.h>

/* A connection to the arbiter at path (NULL: $COREPLANE_ARBITER_SOCKET, else the default socket,
 * as cp_vcore_open), or -1 with errno set (ENAMETOOLONG: longer than a socket path). */
static inline int cp_wire_connect(const char *path) {
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    if (!path) path = getenv(CP_ARBITER_SOCKET_ENV);
    if (!path) path = CP_ARBITER_SOCKET_DEFAULT;
    if (strlen(path) >= sizeof addr.sun_path) return errno = ENAMETOOLONG, -1;
    strcpy(addr.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    if (connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
        int e = errno;
        close(fd);
        return errno = e, -1;
    }
    return fd;
}

/* Sends request (one line, with its '\n') and reads the one reply line into reply (at most
 * size - 1 bytes, NUL-terminated). 0, or -1 when the send failed, the arbiter closed first
 * (errno EPIPE), or the line did not fit (errno EMSGSIZE: reply holds its start, and the rest of
 * the line is read and dropped, so that the next call reads the next reply). The reply's "ok"
 * is the caller's to check. */
static inline int cp_wire_call(int fd, const char *request, char *reply, size_t size) {
    size_t len = strlen(request), n = 0;
    for (size_t sent = 0; sent < len;) {
        ssize_t k = send(fd, request + sent, len - sent, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return -1;
        sent += (size_t)k;
    }
    while (n + 1 < size) {
        ssize_t k = read(fd, reply + n, 1);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return reply[n] = 0, errno = k ? errno : EPIPE, -1;
        if (reply[n++] == '\n') return reply[n] = 0, 0;
    }
    reply[n] = 0;
    for (char c = 0; c != '\n';) {
        ssize_t k = read(fd, &c, 1);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return errno = k ? errno : EPIPE, -1;
    }
    return errno = EMSGSIZE, -1;
}
#endif
