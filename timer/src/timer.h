/* dnstimer: one JSON line per DNS query, timed with CLOCK_MONOTONIC.
 * main.c reads names and paces queries; a backend (getdns or libcurl) sends
 * them; connwatch.c notices the connections getdns opens. */
#ifndef DNSTIMER_H
#define DNSTIMER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum protocol { PROTO_DO53, PROTO_DOT, PROTO_DOH };

struct options {
    enum protocol protocol;
    const char *protocol_name;
    const char *resolver;      /* label stored in every record */
    const char *server;        /* IP address of the resolver */
    int port;                  /* 0: the protocol's default */
    const char *tls_name;      /* DoT: name the certificate must match */
    const char *url;           /* DoH: https://host[:port]/path */
    const char *ca_file;
    long timeout_ms;           /* per query */
    long idle_timeout_ms;      /* how long an idle connection is kept for reuse */
    int concurrency;           /* queries in flight at most */
    double interval_ms;        /* pacing: at least this long between two sends */
    bool no_reuse;             /* every query on a connection of its own */
    double duration_s;         /* > 0: stop sending after this long */
};

struct query {
    size_t index;
    char name[256];
    char type_name[12];
    uint16_t type;
    double start_wall;         /* seconds since the epoch, for the store */
    int64_t start_us, end_us;  /* CLOCK_MONOTONIC */
    bool new_connection;
    int64_t tcp_setup_us, tls_setup_us;  /* -1: unknown or not applicable */
    int rcode, answers;        /* -1: no response */
    const char *status;        /* ok | timeout | error | invalid */
    const char *transport;     /* what actually carried the query: udp, tcp, tls, h2 */
    char error[256];
    void *backend;             /* backend's per-query state */
};

struct backend {
    const char *name;
    /* Returns 0, or -1 with a one-line reason in err. */
    int (*init)(const struct options *opt, char *err, size_t errlen);
    /* Starts q; calls query_done(q) now or later from wait(). */
    void (*submit)(struct query *q);
    /* Runs the event loop once, blocking at most max_us (-1: until an event). */
    void (*wait)(int64_t max_us);
    void (*cleanup)(void);
};

extern const struct backend getdns_backend;
extern const struct backend curl_backend;

int64_t mono_us(void);
void query_done(struct query *q);

/* connwatch.c: connections opened by getdns, seen through connect() and
 * SSL_do_handshake() interposed in this executable. */
struct connection {
    int fd;
    int64_t connect_us, established_us, tls_done_us;  /* 0: not yet */
    bool claimed;
};
/* The first connection opened in [from_us, to_us] not yet claimed by a query. */
extern bool connwatch_nagle;  /* leave Nagle's algorithm on (getdns' default) */
struct connection *connwatch_claim(int64_t from_us, int64_t to_us);

#endif
