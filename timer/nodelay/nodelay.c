/* nodelay.so: preloaded into the lab's unbound when the lab resumes TLS
 * sessions (harness/lab/unbound.py, nodelay_env(); docs/lab.md, "Resumption").
 *
 * unbound 1.17 sets TCP_NODELAY on DoH connections (http-nodelay) and has no
 * such option for DoT. With TLS 1.3 session tickets, the server writes its
 * tickets right after the client's Finished, then the first answer: Nagle
 * holds that answer behind the unacknowledged ticket segment until the
 * client's delayed ACK, about 40 ms later, on every new DoT connection.
 *
 * This wraps accept4() and accept(): a TCP connection accepted on a local
 * port listed in DNSSTUDY_NODELAY_PORTS (comma-separated) gets TCP_NODELAY,
 * as browsers and libcurl set on their side. Nothing else is changed. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define MAX_PORTS 16

static int ports[MAX_PORTS];
static int nports = -1;  /* -1: DNSSTUDY_NODELAY_PORTS not read yet */

/* The ports of DNSSTUDY_NODELAY_PORTS, read once (unbound never changes its environment). */
static void read_ports(void)
{
    nports = 0;
    const char *text = getenv("DNSSTUDY_NODELAY_PORTS");
    while (text && *text && nports < MAX_PORTS) {
        char *end;
        long port = strtol(text, &end, 10);
        if (end == text)
            break;
        if (port > 0 && port < 65536)
            ports[nports++] = (int)port;
        text = *end == ',' ? end + 1 : end;
    }
}

static bool chosen(int port)
{
    if (nports < 0)
        read_ports();
    for (int i = 0; i < nports; i++)
        if (ports[i] == port)
            return true;
    return false;
}

/* TCP_NODELAY on an accepted IPv4 or IPv6 connection whose local port is chosen. */
static void nodelay(int fd)
{
    struct sockaddr_storage local;
    socklen_t len = sizeof local;
    if (fd < 0 || getsockname(fd, (struct sockaddr *)&local, &len) != 0)
        return;
    int port;
    if (local.ss_family == AF_INET)
        port = ntohs(((struct sockaddr_in *)&local)->sin_port);
    else if (local.ss_family == AF_INET6)
        port = ntohs(((struct sockaddr_in6 *)&local)->sin6_port);
    else
        return;
    int on = 1;
    if (chosen(port))
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
}

int accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags)
{
    static int (*real_accept4)(int, struct sockaddr *, socklen_t *, int);
    if (!real_accept4)
        *(void **)&real_accept4 = dlsym(RTLD_NEXT, "accept4");
    int conn = real_accept4(fd, addr, len, flags);
    int err = errno;
    nodelay(conn);
    errno = err;
    return conn;
}

int accept(int fd, struct sockaddr *addr, socklen_t *len)
{
    return accept4(fd, addr, len, 0);
}
