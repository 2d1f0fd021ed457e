/* Which query opened each connection getdns makes, and how long its TCP and
 * TLS setup took.
 *
 * getdns reports neither, so this executable defines connect(), sendto(),
 * send(), recv(), recvfrom(), SSL_do_handshake(), SSL_write() and SSL_read()
 * itself (it is linked with --export-dynamic): libgetdns' calls bind to these,
 * which note what they see and call the real functions. They watch only TCP
 * sockets connected to an IPv4 or IPv6 address (getdns sends UDP with sendto()
 * on unconnected sockets: there is no connection to credit), and only while
 * the getdns backend runs (connwatch_active); for libcurl they only pass on.
 *
 * The query that opened a connection is known, not guessed from times:
 *   - getdns opens a connection inside getdns_general() when the query finds
 *     none open to its upstream. The backend brackets that call with
 *     connwatch_begin()/connwatch_end(), so connect() names the query.
 *   - getdns also opens connections from its event loop: a truncated UDP
 *     answer retried over TCP, a write that failed, a query held back while
 *     file descriptors ran out. The query that made getdns open it is the
 *     first one written on it (getdns queues it before any other), so the DNS
 *     ID of the first message written is noted; the query whose answer has
 *     that ID and was read from that connection opened it.
 * connwatch_claim() hands a query the connection it opened, at most once.
 *
 * TCP counts as established at the first handshake step taken on an
 * ESTABLISHED socket, TLS as done when SSL_do_handshake() first returns 1.
 *
 * getdns leaves Nagle's algorithm on: its first DoT query then waits behind
 * the unacknowledged TLS Finished for the server's delayed ACK (about 40 ms
 * on Linux). Browsers and libcurl set TCP_NODELAY, so by default so do we;
 * --nagle keeps getdns' own behaviour (what Stubby does).
 *
 * TLS sessions: getdns keeps one session per upstream of a context and offers
 * it when it reconnects, as Stubby does. Whether a connection resumes must be
 * the timer's choice, not a side effect of idle timeouts, so the first
 * handshake step of each connection sets the session it offers: none, or with
 * --resume the newest resumable session any earlier connection received
 * (also across the contexts of --no-reuse). TLS 1.3 tickets arrive after the
 * handshake, so sessions are kept as SSL_read() sees them. SSL_session_reused()
 * at the end of the handshake says whether the server took it.
 *
 * getdns trusts a resumed session only if the same context authenticated that
 * upstream before (it remembers the outcome per upstream), so with --no-reuse,
 * a context per query, it would refuse every session offered. With --resume it
 * is told that no session was resumed: it then checks the certificate and
 * verification result the session carries from the full handshake that
 * authenticated it, as TLS clients do on resumption.
 *
 * libcurl 7.88 frees the TLS object of a connection it will not reuse without
 * SSL_shutdown(); OpenSSL then takes the close for a truncation and marks the
 * session unresumable, so with --resume no DoH connection would ever resume.
 * A TLS 1.3 ticket stays valid however the connection that received it ends,
 * so with --resume SSL_free() first records a finished connection's close as
 * clean. (SSL_free() passes on untouched otherwise.) */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "timer.h"

bool connwatch_active;  /* set by the getdns backend */
bool connwatch_nagle;   /* leave Nagle's algorithm on (getdns' default) */
bool connwatch_resume;  /* offer the kept session on new connections */

static SSL_SESSION *kept;  /* the newest resumable session seen (--resume) */

/* One record per file descriptor: the newest connection made on it. A record
 * outlives its socket until the fd is connected again or its query is done. */
static struct connection *conns;
static size_t capacity;
static size_t current;  /* 1 + index of the query inside getdns_general(); 0: none */
static int reading_fd = -1;  /* the socket getdns last read from: an answer's callback runs right after */
static int in_ssl;  /* inside OpenSSL: its own socket I/O is not a DNS message */

static void *real(const char *name)
{
    void *f = dlsym(RTLD_NEXT, name);
    if (!f) {
        fprintf(stderr, "dnstimer: cannot find the real %s()\n", name);
        _exit(2);
    }
    return f;
}
/* real_NAME: the definition this one hides, looked up on first use. */
#define REAL(name) \
    static __typeof__(name) *real_##name; \
    if (!real_##name) \
        real_##name = (__typeof__(name) *)real(#name)

void connwatch_begin(size_t index) { current = index + 1; }
void connwatch_end(void) { current = 0; }

static struct connection *watched(int fd)
{
    if (!connwatch_active || fd < 0 || (size_t)fd >= capacity || !conns[fd].watched)
        return NULL;
    return &conns[fd];
}

static int socket_type(int fd)
{
    int type = 0;
    socklen_t len = sizeof type;
    return getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0 ? type : -1;
}

static bool inet(const struct sockaddr *addr)
{
    return addr && (addr->sa_family == AF_INET || addr->sa_family == AF_INET6);
}

static int local_port(int fd)
{
    struct sockaddr_storage local;
    socklen_t len = sizeof local;
    if (getsockname(fd, (struct sockaddr *)&local, &len) != 0)
        return -1;
    int port = local.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&local)->sin6_port)
                                           : ntohs(((struct sockaddr_in *)&local)->sin_port);
    return port ? port : -1;
}

/* A new connection on fd: noted (unless out of memory: then simply not credited). */
static struct connection *opened(int fd)
{
    if (fd < 0)
        return NULL;
    if ((size_t)fd >= capacity) {
        size_t grown = capacity ? capacity : 64;
        while (grown <= (size_t)fd)
            grown *= 2;
        struct connection *more = realloc(conns, grown * sizeof *more);
        if (!more)
            return NULL;
        memset(more + capacity, 0, (grown - capacity) * sizeof *more);
        conns = more;
        capacity = grown;
    }
    struct connection *c = &conns[fd];
    *c = (struct connection){.watched = true, .owner = current, .first_id = -1, .local_port = -1,
                             .connect_us = mono_us(), .resumed = -1};
    int on = 1;
    if (!connwatch_nagle)
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
    return c;
}

/* After the real call: a connection that failed at once never existed. */
static void started(struct connection *c, int fd, int ret, int err)
{
    if (!c)
        return;
    if (ret < 0 && err != EINPROGRESS && err != EAGAIN && err != EWOULDBLOCK)
        c->watched = false;
    else
        c->local_port = local_port(fd);
}

/* A DNS message over TCP: 2-octet length, then the message, whose ID comes first. */
static void written(int fd, const void *buf, size_t len)
{
    struct connection *c = watched(fd);
    if (c && c->first_id < 0 && len >= 4 && !in_ssl) {
        const unsigned char *p = buf;
        c->first_id = p[2] << 8 | p[3];
    }
}

int connect(int fd, const struct sockaddr *addr, socklen_t len)
{
    REAL(connect);
    struct connection *c = NULL;
    if (connwatch_active && inet(addr) && socket_type(fd) == SOCK_STREAM)
        c = opened(fd);
    int ret = real_connect(fd, addr, len);
    int err = errno;
    started(c, fd, ret, err);
    errno = err;
    return ret;
}

ssize_t sendto(int fd, const void *buf, size_t n, int flags, const struct sockaddr *addr, socklen_t len)
{
    REAL(sendto);
    struct connection *c = NULL;
    if (connwatch_active && (flags & MSG_FASTOPEN) && inet(addr) && socket_type(fd) == SOCK_STREAM) {
        /* TCP Fast Open without TCP_FASTOPEN_CONNECT: this sendto() connects, unless already connected. */
        struct tcp_info info;
        socklen_t ilen = sizeof info;
        if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &ilen) == 0 && info.tcpi_state == TCP_CLOSE)
            c = opened(fd);
    }
    written(fd, buf, n);
    ssize_t ret = real_sendto(fd, buf, n, flags, addr, len);
    int err = errno;
    started(c, fd, ret < 0 ? -1 : 0, err);
    errno = err;
    return ret;
}

ssize_t send(int fd, const void *buf, size_t n, int flags)
{
    REAL(send);
    written(fd, buf, n);
    return real_send(fd, buf, n, flags);
}

ssize_t recv(int fd, void *buf, size_t n, int flags)
{
    REAL(recv);
    if (connwatch_active)
        reading_fd = fd;
    return real_recv(fd, buf, n, flags);
}

ssize_t recvfrom(int fd, void *buf, size_t n, int flags, struct sockaddr *addr, socklen_t *len)
{
    REAL(recvfrom);
    if (connwatch_active)
        reading_fd = fd;
    return real_recvfrom(fd, buf, n, flags, addr, len);
}

static void note_established(struct connection *c, int fd)
{
    struct tcp_info info;
    socklen_t len = sizeof info;
    if (!c->established_us && getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) == 0 &&
        info.tcpi_state == TCP_ESTABLISHED)
        c->established_us = mono_us();
}

/* Before a connection's first handshake step: the session it offers (see the top). */
static void offer_session(SSL *ssl)
{
    if (!connwatch_resume)
        SSL_set_session(ssl, NULL);  /* not even the one getdns kept for this upstream */
    else if (kept)
        SSL_set_session(ssl, kept);
}

/* --resume: keep ssl's session if it is newer and resumable (it carries a ticket). */
static void keep_session(SSL *ssl)
{
    SSL_SESSION *s = SSL_get0_session(ssl);
    if (!s || s == kept || !SSL_SESSION_is_resumable(s))
        return;
    SSL_SESSION_up_ref(s);
    SSL_SESSION_free(kept);
    kept = s;
}

int SSL_do_handshake(SSL *ssl)
{
    REAL(SSL_do_handshake);
    int fd = SSL_get_fd(ssl);
    struct connection *c = watched(fd);
    if (c)
        note_established(c, fd);
    if (c && !c->tls_begun) {
        c->tls_begun = true;
        offer_session(ssl);
    }
    in_ssl++;
    int ret = real_SSL_do_handshake(ssl);
    in_ssl--;
    if (c && ret == 1 && !c->tls_done_us) {
        REAL(SSL_session_reused);
        c->tls_done_us = mono_us();
        c->resumed = real_SSL_session_reused(ssl);
    }
    return ret;
}

void SSL_free(SSL *ssl)
{
    REAL(SSL_free);
    if (ssl && connwatch_resume && SSL_is_init_finished(ssl))
        SSL_set_shutdown(ssl, SSL_get_shutdown(ssl) | SSL_SENT_SHUTDOWN);  /* keeps its session (see the top) */
    real_SSL_free(ssl);
}

int SSL_session_reused(const SSL *ssl)
{
    REAL(SSL_session_reused);
    if (connwatch_active && connwatch_resume)
        return 0;  /* to getdns: check the session's certificate (see the top) */
    return real_SSL_session_reused(ssl);
}

int SSL_write(SSL *ssl, const void *buf, int num)
{
    REAL(SSL_write);
    if (connwatch_active && num > 0)
        written(SSL_get_fd(ssl), buf, (size_t)num);
    in_ssl++;
    int ret = real_SSL_write(ssl, buf, num);
    in_ssl--;
    return ret;
}

int SSL_read(SSL *ssl, void *buf, int num)
{
    REAL(SSL_read);
    if (connwatch_active)
        reading_fd = SSL_get_fd(ssl);
    in_ssl++;
    int ret = real_SSL_read(ssl, buf, num);
    in_ssl--;
    if (connwatch_resume && watched(SSL_get_fd(ssl)))
        keep_session(ssl);  /* a ticket is read here, before or with the answer */
    return ret;
}

struct connection *connwatch_claim(size_t index, int answer_id)
{
    size_t owner = index + 1;
    struct connection *carried = NULL, *latest = NULL;
    /* The connection the answer was just read from, if this query opened it. */
    struct connection *c = answer_id >= 0 ? watched(reading_fd) : NULL;
    if (c && !c->claimed && socket_type(reading_fd) == SOCK_STREAM &&
        (c->owner == owner || (!c->owner && c->first_id == answer_id)))
        carried = c;
    /* Else the newest this query opened (it timed out or failed, say). Either
     * way the query is done: every other connection it opened is let go. */
    for (size_t fd = 0; fd < capacity; fd++) {
        c = &conns[fd];
        if (!c->watched || c->claimed || c->owner != owner)
            continue;
        if (!latest || c->connect_us > latest->connect_us)
            latest = c;
        c->claimed = true;
    }
    c = carried ? carried : latest;
    if (c)
        c->claimed = true;
    return c;
}
