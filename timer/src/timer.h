/* dnstimer: one JSON line per DNS query, timed with CLOCK_MONOTONIC.
 * main.c reads names and paces queries; a backend (getdns or libcurl) sends
 * them; connwatch.c notices the connections getdns opens. */
#ifndef DNSTIMER_H
#define DNSTIMER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum protocol { PROTO_DO53, PROTO_DOT, PROTO_DOH };

#define MAX_CONCURRENCY 65535
/* Names come one per line; a longer line is not read but refused (an invalid record). */
#define MAX_LINE 65536


struct options {
    enum protocol protocol;
    const char *protocol_name;
    const char *resolver;      /* label stored in every record */
    const char *server;        /* IP address of the resolver */
    int port;                  /* 0: the protocol's default; else 1-65535 */
    const char *tls_name;      /* DoT: name the certificate must match */
    const char *url;           /* DoH: https://host[:port]/path */
    const char *ca_file;
    long timeout_ms;           /* per query */
    long idle_timeout_ms;      /* how long an idle connection is kept for reuse */
    int concurrency;           /* queries in flight at most, 1-MAX_CONCURRENCY */
    double interval_ms;        /* pacing: at least this long between two sends */
    bool no_reuse;             /* every query on a connection of its own */
    bool resume;               /* offer the newest TLS session of an earlier connection on a new one */
    double duration_s;         /* > 0: stop sending after this long */
};

struct query {
    size_t index;
    char name[256];
    char type_name[12];
    uint16_t type;
    double start_wall;         /* seconds since the epoch, for the store; taken with start_us */
    int64_t start_us, end_us;  /* CLOCK_MONOTONIC */
    bool new_connection;
    int64_t tcp_setup_us, tls_setup_us;  /* -1: unknown or not applicable */
    int local_port;            /* client port of the connection it opened; -1: none or unknown */
    int resumed;               /* the TLS connection it opened was resumed: 1, 0; -1: none or unknown */
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
/* Notes the start of q on both clocks; a backend calls it just before handing q to its library. */
void query_started(struct query *q);
void query_done(struct query *q);

/* connwatch.c: the TCP connections getdns opens and the query that opened
 * each, seen through connect(), send(), SSL_do_handshake() and others
 * interposed in this executable (see there). */
struct connection {
    bool watched;              /* this fd's newest TCP connection is recorded here */
    bool claimed;              /* handed to its query, or its query is done */
    size_t owner;              /* 1 + index of the query that opened it; 0: opened from the event loop */
    int first_id;              /* DNS ID of the first message written on it; -1: none yet */
    int local_port;            /* -1: unknown */
    int64_t connect_us, established_us, tls_done_us;  /* 0: not yet */
    bool tls_begun;            /* its first TLS handshake step was taken (the session to offer is set) */
    int resumed;               /* its TLS handshake resumed a session: 1, 0; -1: not done */
};
extern bool connwatch_active;  /* watch connections (the getdns backend); otherwise only pass calls on */
extern bool connwatch_nagle;   /* leave Nagle's algorithm on (getdns' default) */
extern bool connwatch_resume;  /* offer the newest TLS session kept on a new connection (--resume) */
/* Brackets getdns_general() for the query with this index: connections opened inside are its. */
void connwatch_begin(size_t index);
void connwatch_end(void);
/* The connection the query with this index opened, once; NULL if none. answer_id is the
 * DNS ID of its answer (-1: no answer), which names a connection opened from the event loop. */
struct connection *connwatch_claim(size_t index, int answer_id);

#endif
