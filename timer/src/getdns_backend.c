/* Do53 (UDP, TCP on truncation) and DoT through getdns, asynchronously, so
 * that getdns keeps a DoT connection open for reuse until it has been idle
 * for idle_timeout_ms (getdns honours the idle timeout only for async calls). */
#include <arpa/inet.h>
#include <getdns/getdns.h>
#include <getdns/getdns_extra.h>
#include <stdio.h>
#include <string.h>

#include "timer.h"

static getdns_context *context;  /* shared by all queries, unless --no-reuse */
/* --no-reuse: a context (so a connection) per query, destroyed outside its callback. */
static getdns_context *spent[1024];
static size_t spent_count;
static getdns_eventloop *loop;
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

static int upstream(getdns_list **list, char *err, size_t errlen)
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
    getdns_dict *u = getdns_dict_create();
    *list = getdns_list_create();
    CHECK(getdns_dict_set_bindata(u, "address_type", &type), "address_type");
    CHECK(getdns_dict_set_bindata(u, "address_data", &data), "address_data");
    if (options->protocol == PROTO_DOT) {
        CHECK(getdns_dict_set_int(u, "tls_port", options->port ? options->port : 853), "tls_port");
        auth = (getdns_bindata){strlen(options->tls_name), (uint8_t *)options->tls_name};
        CHECK(getdns_dict_set_bindata(u, "tls_auth_name", &auth), "tls_auth_name");
    } else if (options->port) {
        CHECK(getdns_dict_set_int(u, "port", options->port), "port");
    }
    CHECK(getdns_list_set_dict(*list, 0, u), "upstream list");
    getdns_dict_destroy(u);
    return 0;
}

/* A context configured for the upstream. Returns 0, or -1 with err set. */
static int make_context(getdns_context **ctx, char *err, size_t errlen)
{
    CHECK(getdns_context_create(ctx, 0), "context");  /* 0: ignore the host's resolv.conf */
    CHECK(getdns_context_set_resolution_type(*ctx, GETDNS_RESOLUTION_STUB), "stub mode");
    getdns_list *list;
    if (upstream(&list, err, errlen))
        return -1;
    CHECK(getdns_context_set_upstream_recursive_servers(*ctx, list), "upstream");
    getdns_list_destroy(list);
    getdns_transport_list_t do53[] = {GETDNS_TRANSPORT_UDP, GETDNS_TRANSPORT_TCP};
    getdns_transport_list_t dot[] = {GETDNS_TRANSPORT_TLS};
    if (options->protocol == PROTO_DOT) {
        CHECK(getdns_context_set_dns_transport_list(*ctx, 1, dot), "transport");
        CHECK(getdns_context_set_tls_authentication(*ctx, GETDNS_AUTHENTICATION_REQUIRED), "authentication");
        if (options->ca_file)
            CHECK(getdns_context_set_tls_ca_file(*ctx, options->ca_file), "CA file");
    } else {
        CHECK(getdns_context_set_dns_transport_list(*ctx, 2, do53), "transport");
    }
    CHECK(getdns_context_set_timeout(*ctx, (uint64_t)options->timeout_ms), "timeout");
    CHECK(getdns_context_set_idle_timeout(*ctx, (uint64_t)options->idle_timeout_ms), "idle timeout");
    if (loop)  /* every context runs on the first one's event loop */
        CHECK(getdns_context_set_eventloop(*ctx, loop), "event loop");
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
    extensions = getdns_dict_create();
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
    struct query *q = userarg;
    q->end_us = mono_us();
    if (ctx != context && spent_count < sizeof spent / sizeof *spent)
        spent[spent_count++] = ctx;
    uint32_t value;
    if (response && !getdns_dict_get_int(response, "/replies_tree/0/header/rcode", &value))
        q->rcode = (int)value;
    if (response && !getdns_dict_get_int(response, "/replies_tree/0/header/ancount", &value))
        q->answers = (int)value;
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
    struct connection *c = connwatch_claim(q->start_us, q->end_us);
    if (c && !strcmp(q->status, "error") && c->established_us && !c->tls_done_us)
        snprintf(q->error, sizeof q->error, "TLS handshake failed (is the certificate valid for %s?)",
                 options->tls_name);
    if (c) {
        q->new_connection = true;
        if (c->established_us)
            q->tcp_setup_us = c->established_us - c->connect_us;
        if (c->established_us && c->tls_done_us)
            q->tls_setup_us = c->tls_done_us - c->established_us;
    }
    if (response)
        getdns_dict_destroy(response);
    query_done(q);
}

static void submit(struct query *q)
{
    getdns_transaction_t id;
    getdns_context *ctx = context;
    char err[256];
    if (options->no_reuse && make_context(&ctx, err, sizeof err)) {
        q->status = "error";
        snprintf(q->error, sizeof q->error, "%s", err);
        query_done(q);
        return;
    }
    q->start_us = mono_us();
    getdns_return_t r = getdns_general(ctx, q->name, q->type, extensions, q, &id, answered);
    if (r != GETDNS_RETURN_GOOD) {
        q->end_us = mono_us();
        q->status = r == GETDNS_RETURN_BAD_DOMAIN_NAME ? "invalid" : "error";
        snprintf(q->error, sizeof q->error, "%s", getdns_get_errorstr_by_id(r));
        query_done(q);
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
    while (spent_count)
        getdns_context_destroy(spent[--spent_count]);
}

static void cleanup(void)
{
    if (extensions)
        getdns_dict_destroy(extensions);
    if (context)
        getdns_context_destroy(context);
}

const struct backend getdns_backend = {"getdns", init, submit, wait_once, cleanup};
