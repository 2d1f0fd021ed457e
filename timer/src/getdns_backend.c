/* Do53 (UDP, TCP on truncation) and DoT through getdns, asynchronously, so
 * that getdns keeps a DoT connection open for reuse until it has been idle
 * for idle_timeout_ms (getdns honours the idle timeout only for async calls). */
#include <arpa/inet.h>
#include <getdns/getdns.h>
#include <getdns/getdns_extra.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "timer.h"

static getdns_context *context;  /* shared by all queries, unless --no-reuse */
/* --no-reuse: a context (so a connection) per query. getdns cannot destroy a
 * context from inside its callback, so the callback moves the query's context
 * onto the spent list (no allocation there: the node came with the context),
 * and wait_once() destroys every spent one after the event loop returns. */
struct own_context {
    getdns_context *ctx;
    struct own_context *next;
};
static struct own_context *spent;
static getdns_eventloop *loop;  /* the shared context's: every query's events run on it */

/* What --no-reuse contexts get as their event loop: the shared one, by
 * forwarding. getdns_context_destroy() cleans up its context's event loop,
 * which would free every event the shared loop holds (so every other query in
 * flight would never finish); this one's cleanup leaves the shared loop alone. */
static getdns_return_t shared_schedule(getdns_eventloop *l, int fd, uint64_t timeout, getdns_eventloop_event *ev)
{
    (void)l;
    return loop->vmt->schedule(loop, fd, timeout, ev);
}
static getdns_return_t shared_clear(getdns_eventloop *l, getdns_eventloop_event *ev)
{
    (void)l;
    return loop->vmt->clear(loop, ev);
}
static void shared_run(getdns_eventloop *l)
{
    (void)l;
    loop->vmt->run(loop);
}
static void shared_run_once(getdns_eventloop *l, int blocking)
{
    (void)l;
    loop->vmt->run_once(loop, blocking);
}
static void shared_keep(getdns_eventloop *l) { (void)l; }
static getdns_eventloop_vmt shared_vmt = {shared_keep, shared_schedule, shared_clear, shared_run, shared_run_once};
static getdns_eventloop shared_loop = {&shared_vmt};
static getdns_dict *extensions;
static const struct options *options;

#define CHECK(call, what)                                                              \
    do {                                                                               \
        getdns_return_t r_ = (call);                                                   \
        if (r_ != GETDNS_RETURN_GOOD) {                                                \
            snprintf(err, errlen, "getdns: %s: %s", what, getdns_get_errorstr_by_id(r_)); \
            return -1;                                                                 \
        }                                                                              \
    } while (0)

static int upstream_dict(getdns_dict *u, char *err, size_t errlen)
{
    unsigned char addr[16];
    getdns_bindata type, data, auth;
    if (inet_pton(AF_INET, options->server, addr) == 1) {
        type = (getdns_bindata){4, (uint8_t *)"IPv4"};
        data = (getdns_bindata){4, addr};
    } else if (inet_pton(AF_INET6, options->server, addr) == 1) {
        type = (getdns_bindata){4, (uint8_t *)"IPv6"};
        data = (getdns_bindata){16, addr};
    } else {
        snprintf(err, errlen, "--server: '%s' is not an IP address", options->server);
        return -1;
    }
    CHECK(getdns_dict_set_bindata(u, "address_type", &type), "address_type");
    CHECK(getdns_dict_set_bindata(u, "address_data", &data), "address_data");
    if (options->protocol == PROTO_DOT) {
        CHECK(getdns_dict_set_int(u, "tls_port", (uint32_t)(options->port ? options->port : 853)), "tls_port");
        auth = (getdns_bindata){strlen(options->tls_name), (uint8_t *)options->tls_name};
        CHECK(getdns_dict_set_bindata(u, "tls_auth_name", &auth), "tls_auth_name");
    } else if (options->port) {
        CHECK(getdns_dict_set_int(u, "port", (uint32_t)options->port), "port");
    }
    return 0;
}

/* Sets the one upstream on ctx. Returns 0, or -1 with err set. */
static int set_upstream(getdns_context *ctx, char *err, size_t errlen)
{
    getdns_dict *u = getdns_dict_create();
    getdns_list *list = getdns_list_create();
    int ret = -1;
    if (!u || !list)
        snprintf(err, errlen, "out of memory");
    else if (!upstream_dict(u, err, errlen)) {
        getdns_return_t r = getdns_list_set_dict(list, 0, u);
        if (r == GETDNS_RETURN_GOOD)
            r = getdns_context_set_upstream_recursive_servers(ctx, list);
        if (r != GETDNS_RETURN_GOOD)
            snprintf(err, errlen, "getdns: upstream: %s", getdns_get_errorstr_by_id(r));
        else
            ret = 0;
    }
    getdns_dict_destroy(u);
    getdns_list_destroy(list);
    return ret;
}

static int configure(getdns_context *ctx, char *err, size_t errlen)
{
    CHECK(getdns_context_set_resolution_type(ctx, GETDNS_RESOLUTION_STUB), "stub mode");
    if (set_upstream(ctx, err, errlen))
        return -1;
    getdns_transport_list_t do53[] = {GETDNS_TRANSPORT_UDP, GETDNS_TRANSPORT_TCP};
    getdns_transport_list_t dot[] = {GETDNS_TRANSPORT_TLS};
    if (options->protocol == PROTO_DOT) {
        CHECK(getdns_context_set_dns_transport_list(ctx, 1, dot), "transport");
        CHECK(getdns_context_set_tls_authentication(ctx, GETDNS_AUTHENTICATION_REQUIRED), "authentication");
        if (options->ca_file)
            CHECK(getdns_context_set_tls_ca_file(ctx, options->ca_file), "CA file");
    } else {
        CHECK(getdns_context_set_dns_transport_list(ctx, 2, do53), "transport");
    }
    CHECK(getdns_context_set_timeout(ctx, (uint64_t)options->timeout_ms), "timeout");
    CHECK(getdns_context_set_idle_timeout(ctx, (uint64_t)options->idle_timeout_ms), "idle timeout");
    if (loop)  /* every other context runs on the first one's event loop */
        CHECK(getdns_context_set_eventloop(ctx, &shared_loop), "event loop");
    return 0;
}

/* A context configured for the upstream. Returns 0, or -1 with err set (and nothing left behind). */
static int make_context(getdns_context **ctx, char *err, size_t errlen)
{
    *ctx = NULL;
    CHECK(getdns_context_create(ctx, 0), "context");  /* 0: ignore the host's resolv.conf */
    if (configure(*ctx, err, errlen)) {
        getdns_context_destroy(*ctx);
        *ctx = NULL;
        return -1;
    }
    return 0;
}

static int init(const struct options *opt, char *err, size_t errlen)
{
    options = opt;
    if (opt->protocol == PROTO_DOT && !opt->tls_name) {
        snprintf(err, errlen, "--tls-name is required for dot (authentication is required)");
        return -1;
    }
    if (make_context(&context, err, errlen))
        return -1;
    CHECK(getdns_context_get_eventloop(context, &loop), "event loop");
    if (!(extensions = getdns_dict_create())) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    connwatch_active = true;
    CHECK(getdns_dict_set_int(extensions, "return_call_reporting", GETDNS_EXTENSION_TRUE), "extensions");
    return 0;
}

static const char *transport_name(getdns_dict *response)
{
    getdns_list *reports;
    getdns_dict *report;
    uint32_t transport;
    if (getdns_dict_get_list(response, "call_reporting", &reports) ||
        getdns_list_get_dict(reports, 0, &report) || getdns_dict_get_int(report, "transport", &transport))
        return NULL;
    switch (transport) {
    case GETDNS_TRANSPORT_UDP: return "udp";
    case GETDNS_TRANSPORT_TCP: return "tcp";
    case GETDNS_TRANSPORT_TLS: return "tls";
    default: return NULL;
    }
}

static void answered(getdns_context *ctx, getdns_callback_type_t kind, getdns_dict *response,
                     void *userarg, getdns_transaction_t id)
{
    (void)id;
    (void)ctx;
    struct query *q = userarg;
    q->end_us = mono_us();
    struct own_context *own = q->backend;
    if (own) {  /* destroyed by wait_once(), outside this callback */
        own->next = spent;
        spent = own;
        q->backend = NULL;
    }
    uint32_t value;
    int answer_id = -1;
    if (response && !getdns_dict_get_int(response, "/replies_tree/0/header/rcode", &value))
        q->rcode = (int)value;
    if (response && !getdns_dict_get_int(response, "/replies_tree/0/header/ancount", &value))
        q->answers = (int)value;
    if (response && !getdns_dict_get_int(response, "/replies_tree/0/header/id", &value))
        answer_id = (int)value;
    if (response)
        q->transport = transport_name(response);
    if (kind == GETDNS_CALLBACK_COMPLETE && q->rcode >= 0) {
        q->status = "ok";
    } else if (kind == GETDNS_CALLBACK_TIMEOUT) {
        q->status = "timeout";
    } else {
        uint32_t status = 0;
        if (response)
            getdns_dict_get_int(response, "status", &status);
        q->status = "error";
        snprintf(q->error, sizeof q->error, "%s",
                 status ? getdns_get_errorstr_by_id(status) : "no response from the resolver");
    }
    struct connection *c = connwatch_claim(q->index, answer_id);
    if (c && !strcmp(q->status, "error") && c->established_us && !c->tls_done_us)
        snprintf(q->error, sizeof q->error, "TLS handshake failed (is the certificate valid for %s?)",
                 options->tls_name);
    if (c) {
        q->new_connection = true;
        q->local_port = c->local_port;
        if (c->established_us)
            q->tcp_setup_us = c->established_us - c->connect_us;
        if (c->established_us && c->tls_done_us)
            q->tls_setup_us = c->tls_done_us - c->established_us;
        if (c->tls_done_us)
            q->resumed = c->resumed;
    }
    if (response)
        getdns_dict_destroy(response);
    query_done(q);
}

static void failed(struct query *q, const char *status, const char *error)
{
    q->end_us = q->start_us ? mono_us() : 0;
    q->status = status;
    snprintf(q->error, sizeof q->error, "%s", error);
    query_done(q);
}

static void submit(struct query *q)
{
    getdns_transaction_t id;
    getdns_context *ctx = context;
    struct own_context *own = NULL;
    char err[256];
    if (options->no_reuse) {
        if (!(own = calloc(1, sizeof *own))) {
            failed(q, "error", "out of memory");
            return;
        }
        if (make_context(&own->ctx, err, sizeof err)) {
            free(own);
            failed(q, "error", err);
            return;
        }
        ctx = own->ctx;
        q->backend = own;
    }
    query_started(q);
    connwatch_begin(q->index);  /* a connection getdns opens now is this query's */
    getdns_return_t r = getdns_general(ctx, q->name, q->type, extensions, q, &id, answered);
    connwatch_end();
    if (r != GETDNS_RETURN_GOOD) {  /* no callback will come */
        if (own) {
            getdns_context_destroy(own->ctx);
            free(own);
            q->backend = NULL;
        }
        failed(q, r == GETDNS_RETURN_BAD_DOMAIN_NAME ? "invalid" : "error", getdns_get_errorstr_by_id(r));
    }
}

static void destroy_spent(void)
{
    while (spent) {
        struct own_context *own = spent;
        spent = own->next;
        getdns_context_destroy(own->ctx);
        free(own);
    }
}

static void no_op(void *arg) { (void)arg; }

static void wait_once(int64_t max_us)
{
    getdns_eventloop_event wakeup = {.timeout_cb = no_op};
    if (max_us >= 0)
        loop->vmt->schedule(loop, -1, (uint64_t)((max_us + 999) / 1000), &wakeup);
    loop->vmt->run_once(loop, 1);
    if (max_us >= 0)
        loop->vmt->clear(loop, &wakeup);
    destroy_spent();
}

static void cleanup(void)
{
    destroy_spent();
    if (extensions)
        getdns_dict_destroy(extensions);
    if (context)
        getdns_context_destroy(context);
}

const struct backend getdns_backend = {"getdns", init, submit, wait_once, cleanup};
