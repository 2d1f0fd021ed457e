/* DoH through libcurl: POST application/dns-message over HTTP/2, every query
 * an easy handle on one multi handle, whose connection cache reuses (and
 * multiplexes on) a connection until it has been idle for idle_timeout_ms.
 *
 * TLS sessions: libcurl keeps them per easy handle, and every query has a new
 * one, so a new connection never resumes; the cache is turned off to say so.
 * With --resume every easy handle shares one session cache (a share handle),
 * so a new connection offers the newest session of an earlier one. */
#include <curl/curl.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "timer.h"

static CURLM *multi;
static CURLSH *share;  /* --resume: the TLS sessions every connection may resume */
static struct curl_slist *headers, *resolve;
static const struct options *options;

struct transfer {
    CURL *easy;
    int resumed;  /* its connection's TLS handshake resumed a session: 1, 0; -1: unknown */
    unsigned char request[512];
    size_t request_len;
    unsigned char response[65535];
    size_t response_len;
    bool overflow;
};

/* A query as on the wire (RFC 1035): ID 0 as RFC 8484 recommends, RD set,
 * one question, and an EDNS(0) OPT record like getdns sends. */
static size_t wire_query(const char *name, uint16_t type, unsigned char *out)
{
    static const unsigned char header[12] = {0, 0, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 1};
    static const unsigned char opt[11] = {0, 0, 41, 0x04, 0xd0, 0, 0, 0, 0, 0, 0};  /* 1232-byte payload */
    size_t n = sizeof header;
    memcpy(out, header, n);
    for (const char *label = name; *label;) {
        const char *dot = strchr(label, '.');
        size_t len = dot ? (size_t)(dot - label) : strlen(label);
        out[n++] = (unsigned char)len;  /* main.c has checked every label is 1-63 octets */
        memcpy(out + n, label, len);
        n += len;
        if (!dot)
            break;
        label = dot + 1;
    }
    out[n++] = 0;
    out[n++] = (unsigned char)(type >> 8);
    out[n++] = (unsigned char)type;
    out[n++] = 0;
    out[n++] = 1;  /* class IN */
    memcpy(out + n, opt, sizeof opt);
    return n + sizeof opt;
}

static size_t collect(char *data, size_t size, size_t count, void *arg)
{
    struct transfer *t = arg;
    size_t len = size * count;
    if (t->response_len + len > sizeof t->response) {
        t->overflow = true;
        return 0;  /* aborts the transfer */
    }
    memcpy(t->response + t->response_len, data, len);
    t->response_len += len;
    return len;
}

static int init(const struct options *opt, char *err, size_t errlen)
{
    options = opt;
    if (!opt->url || strncmp(opt->url, "https://", 8) != 0) {
        snprintf(err, errlen, "--url: DoH needs an https:// URL, got '%s'", opt->url ? opt->url : "");
        return -1;
    }
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK || !(multi = curl_multi_init())) {
        snprintf(err, errlen, "libcurl: initialisation failed");
        return -1;
    }
    curl_multi_setopt(multi, CURLMOPT_PIPELINING, (long)CURLPIPE_MULTIPLEX);
    if (opt->resume && (!(share = curl_share_init()) ||
                        curl_share_setopt(share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION) != CURLSHE_OK)) {
        snprintf(err, errlen, "libcurl: cannot share TLS sessions");
        return -1;
    }
    struct curl_slist *first = curl_slist_append(NULL, "Content-Type: application/dns-message");
    if (!first || !(headers = curl_slist_append(first, "Accept: application/dns-message"))) {
        curl_slist_free_all(first);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (opt->server) {
        /* Address override: the URL's host is only the TLS and HTTP name. */
        CURLU *u = curl_url();
        char *host = NULL, *port = NULL;
        if (!u) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        if (curl_url_set(u, CURLUPART_URL, opt->url, 0) || curl_url_get(u, CURLUPART_HOST, &host, 0)) {
            snprintf(err, errlen, "--url: cannot parse '%s'", opt->url);
            curl_url_cleanup(u);
            return -1;
        }
        curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT);
        char entry[512];
        snprintf(entry, sizeof entry, "%s:%s:%s", host, port ? port : "443", opt->server);
        resolve = curl_slist_append(NULL, entry);
        curl_free(host);
        curl_free(port);
        curl_url_cleanup(u);
        if (!resolve) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
    }
    return 0;
}

/* Runs once the transfer's connection is up, before its request: the one moment its TLS
 * object is at hand (with --no-reuse the connection is gone when the transfer ends). */
static int connected(void *arg, char *primary_ip, char *local_ip, int primary_port, int local_port)
{
    (void)primary_ip, (void)local_ip, (void)primary_port, (void)local_port;
    struct transfer *t = arg;
    struct curl_tlssessioninfo *info = NULL;
    if (curl_easy_getinfo(t->easy, CURLINFO_TLS_SSL_PTR, &info) == CURLE_OK && info &&
        info->backend == CURLSSLBACKEND_OPENSSL && info->internals)
        t->resumed = SSL_session_reused(info->internals);
    return CURL_PREREQFUNC_OK;
}

/* q finished before libcurl had it. */
static void not_sent(struct query *q, const char *error)
{
    q->status = "error";
    snprintf(q->error, sizeof q->error, "%s", error);
    query_done(q);
}

static void submit(struct query *q)
{
    struct transfer *t = calloc(1, sizeof *t);
    CURL *easy = t ? curl_easy_init() : NULL;
    if (!easy) {
        free(t);
        not_sent(q, "out of memory");
        return;
    }
    t->request_len = wire_query(q->name, q->type, t->request);
    t->easy = easy;
    t->resumed = -1;
    q->backend = t;
    curl_easy_setopt(easy, CURLOPT_URL, options->url);
    curl_easy_setopt(easy, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
    curl_easy_setopt(easy, CURLOPT_PIPEWAIT, 1L);  /* wait to multiplex rather than open a second connection */
    curl_easy_setopt(easy, CURLOPT_POSTFIELDS, t->request);
    curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE, (long)t->request_len);
    curl_easy_setopt(easy, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(easy, CURLOPT_WRITEDATA, t);
    curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, options->timeout_ms);
    curl_easy_setopt(easy, CURLOPT_MAXAGE_CONN, (options->idle_timeout_ms + 999) / 1000);
    if (options->no_reuse) {
        curl_easy_setopt(easy, CURLOPT_FRESH_CONNECT, 1L);
        curl_easy_setopt(easy, CURLOPT_FORBID_REUSE, 1L);
    }
    if (share)
        curl_easy_setopt(easy, CURLOPT_SHARE, share);
    else
        curl_easy_setopt(easy, CURLOPT_SSL_SESSIONID_CACHE, 0L);
    curl_easy_setopt(easy, CURLOPT_PREREQFUNCTION, connected);
    curl_easy_setopt(easy, CURLOPT_PREREQDATA, t);
    curl_easy_setopt(easy, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(easy, CURLOPT_SSL_VERIFYHOST, 2L);
    curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
    if (options->ca_file)
        curl_easy_setopt(easy, CURLOPT_CAINFO, options->ca_file);
    if (resolve)
        curl_easy_setopt(easy, CURLOPT_RESOLVE, resolve);
    curl_easy_setopt(easy, CURLOPT_PRIVATE, q);
    query_started(q);
    CURLMcode r = curl_multi_add_handle(multi, easy);
    if (r != CURLM_OK) {
        curl_easy_cleanup(easy);
        free(t);
        q->backend = NULL;
        q->end_us = mono_us();
        not_sent(q, curl_multi_strerror(r));
    }
}

static void finish(CURL *easy, CURLcode result)
{
    struct query *q;
    curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&q);
    struct transfer *t = q->backend;
    long code = 0, connects = 0, version = 0, port = 0;
    curl_off_t lookup = 0, connect = 0, appconnect = 0;
    curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &code);
    curl_easy_getinfo(easy, CURLINFO_NUM_CONNECTS, &connects);
    curl_easy_getinfo(easy, CURLINFO_HTTP_VERSION, &version);
    curl_easy_getinfo(easy, CURLINFO_NAMELOOKUP_TIME_T, &lookup);
    curl_easy_getinfo(easy, CURLINFO_CONNECT_TIME_T, &connect);
    curl_easy_getinfo(easy, CURLINFO_APPCONNECT_TIME_T, &appconnect);
    if (version == CURL_HTTP_VERSION_2_0)
        q->transport = "h2";
    else if (version)
        q->transport = "http/1.1";
    if (connects > 0) {
        q->new_connection = true;
        if (curl_easy_getinfo(easy, CURLINFO_LOCAL_PORT, &port) == CURLE_OK && port > 0)
            q->local_port = (int)port;
        q->tcp_setup_us = connect - lookup;
        if (appconnect > 0) {
            q->tls_setup_us = appconnect - connect;
            q->resumed = t->resumed;
        }
    }
    if (result == CURLE_OPERATION_TIMEDOUT) {
        q->status = "timeout";
    } else if (result != CURLE_OK) {
        q->status = "error";
        snprintf(q->error, sizeof q->error, "%s", curl_easy_strerror(result));
    } else if (code != 200) {
        q->status = "error";
        snprintf(q->error, sizeof q->error, "HTTP status %ld", code);
    } else if (t->response_len < 12 || !(t->response[2] & 0x80)) {
        q->status = "error";
        snprintf(q->error, sizeof q->error, "not a DNS response (%zu bytes)", t->response_len);
    } else {
        q->status = "ok";
        q->rcode = t->response[3] & 0x0f;
        q->answers = (t->response[6] << 8) | t->response[7];
    }
    curl_multi_remove_handle(multi, easy);
    curl_easy_cleanup(easy);
    free(t);
    q->backend = NULL;
    query_done(q);
}

static void wait_once(int64_t max_us)
{
    int running;
    curl_multi_perform(multi, &running);
    CURLMsg *msg;
    int left;
    int finished = 0;
    while ((msg = curl_multi_info_read(multi, &left))) {
        if (msg->msg == CURLMSG_DONE) {
            int64_t now = mono_us();
            struct query *q;
            curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&q);
            q->end_us = now;
            finish(msg->easy_handle, msg->data.result);
            finished++;
        }
    }
    if (!finished) {
        int timeout_ms = max_us < 0 ? 1000 : (int)((max_us + 999) / 1000);
        curl_multi_poll(multi, NULL, 0, timeout_ms, NULL);
    }
}

static void cleanup(void)
{
    curl_multi_cleanup(multi);
    if (share)
        curl_share_cleanup(share);
    curl_slist_free_all(headers);
    curl_slist_free_all(resolve);
    curl_global_cleanup();
}

const struct backend curl_backend = {"libcurl", init, submit, wait_once, cleanup};
