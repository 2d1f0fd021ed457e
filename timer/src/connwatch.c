/* Which queries opened a connection, and how long its TCP and TLS setup took.
 *
 * getdns reports neither, so this executable defines connect() and
 * SSL_do_handshake() itself (it is linked with --export-dynamic): libgetdns'
 * calls bind to these, which note the time and call the real functions. TCP
 * counts as established at the first handshake step taken on an ESTABLISHED
 * socket, TLS as done when SSL_do_handshake() first returns 1.
 *
 * getdns leaves Nagle's algorithm on: its first DoT query then waits behind
 * the unacknowledged TLS Finished for the server's delayed ACK (about 40 ms
 * on Linux). Browsers and libcurl set TCP_NODELAY, so by default so do we;
 * --nagle keeps getdns' own behaviour (what Stubby does). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/ssl.h>
#include <sys/socket.h>

#include "timer.h"

#define MAX_CONNECTIONS 4096

static struct connection connections[MAX_CONNECTIONS];
static size_t opened;
bool connwatch_nagle;  /* total ever opened; the ring keeps the newest */

static struct connection *by_fd(int fd)
{
    for (size_t i = opened; i > 0 && opened - i < MAX_CONNECTIONS; i--) {
        struct connection *c = &connections[(i - 1) % MAX_CONNECTIONS];
        if (c->fd == fd)
            return c;
    }
    return NULL;
}

int connect(int fd, const struct sockaddr *addr, socklen_t len)
{
    static int (*real)(int, const struct sockaddr *, socklen_t);
    if (!real)
        real = (int (*)(int, const struct sockaddr *, socklen_t))dlsym(RTLD_NEXT, "connect");
    int type = 0;
    socklen_t tlen = sizeof type;
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tlen) == 0 && type == SOCK_STREAM) {
        struct connection *c = &connections[opened++ % MAX_CONNECTIONS];
        *c = (struct connection){.fd = fd, .connect_us = mono_us()};
        int on = 1;
        if (!connwatch_nagle)
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
    }
    return real(fd, addr, len);
}

static void note_established(struct connection *c, int fd)
{
    struct tcp_info info;
    socklen_t len = sizeof info;
    if (!c->established_us && getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) == 0 &&
        info.tcpi_state == TCP_ESTABLISHED)
        c->established_us = mono_us();
}

int SSL_do_handshake(SSL *ssl)
{
    static int (*real)(SSL *);
    if (!real)
        real = (int (*)(SSL *))dlsym(RTLD_NEXT, "SSL_do_handshake");
    int fd = SSL_get_fd(ssl);
    struct connection *c = by_fd(fd);
    if (c)
        note_established(c, fd);
    int ret = real(ssl);
    if (c && ret == 1 && !c->tls_done_us)
        c->tls_done_us = mono_us();
    return ret;
}

struct connection *connwatch_claim(int64_t from_us, int64_t to_us)
{
    size_t first = opened > MAX_CONNECTIONS ? opened - MAX_CONNECTIONS : 0;
    for (size_t i = first; i < opened; i++) {
        struct connection *c = &connections[i % MAX_CONNECTIONS];
        if (!c->claimed && c->connect_us >= from_us && c->connect_us <= to_us) {
            c->claimed = true;
            return c;
        }
    }
    return NULL;
}
