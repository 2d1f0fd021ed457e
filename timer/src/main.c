/* dnstimer: time DNS resolutions over Do53, DoT or DoH, one JSON line each.
 *
 *   dnstimer --protocol do53|dot|doh --server IP [options] [NAMES_FILE]
 *
 * Names come one per line ("name" or "name TYPE") from NAMES_FILE or stdin.
 * Every name yields exactly one record, whatever happens to it: answered,
 * timed out, failed, or refused as malformed before any query is sent. */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "timer.h"

#define WATCHDOG_GRACE_US 5000000  /* a library that outlives its own timeout by this much has hung */
#define MAX_MS 86400000L           /* --timeout-ms, --idle-timeout-ms, --interval-ms: a day at most */
#define MAX_DURATION_S 31536000.0  /* --duration-s: a year at most */

static struct options opt = {
    .timeout_ms = 5000, .idle_timeout_ms = 10000, .concurrency = 1, .resolver = "",
};
static const struct backend *backend;
static size_t outstanding;
static struct query **in_flight;

int64_t mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static double wall_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static const char USAGE[] =
    "usage: dnstimer --protocol do53|dot|doh --server IP [--port N] [--tls-name NAME] [--url URL] "
    "[--ca-file FILE] [--resolver LABEL] [--timeout-ms N] [--idle-timeout-ms N] [--concurrency N] "
    "[--interval-ms X] [--nagle] [--no-reuse] [--resume] [--duration-s X] [NAMES_FILE]\n";

/* A problem as one line on stderr, whatever it quotes: control characters are escaped. */
static void say(const char *message)
{
    fputs("dnstimer: ", stderr);
    for (const unsigned char *p = (const unsigned char *)message; *p; p++) {
        if (*p < 0x20 || *p == 0x7f)
            fprintf(stderr, "\\x%02x", *p);
        else
            fputc(*p, stderr);
    }
    fputc('\n', stderr);
}

/* Refuses the command line in one line (fmt has one %s, for value) and exits with status 2. */
static void refuse(const char *fmt, const char *value)
{
    char message[512];
    snprintf(message, sizeof message, fmt, value);
    say(message);
    exit(2);
}

/* JSON string with everything outside printable ASCII escaped, so a
 * malformed name in the input cannot produce invalid JSON. */
static void put_string(FILE *out, const char *s)
{
    if (!s) {
        fputs("null", out);
        return;
    }
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(out, "\\%c", *p);
        else if (*p < 0x20 || *p >= 0x7f)
            fprintf(out, "\\u%04x", *p);
        else
            fputc(*p, out);
    }
    fputc('"', out);
}

static void put_int_or_null(FILE *out, const char *key, int64_t value)
{
    if (value < 0)
        fprintf(out, ",\"%s\":null", key);
    else
        fprintf(out, ",\"%s\":%lld", key, (long long)value);
}

/* 1: true, 0: false, negative: null. */
static void put_bool_or_null(FILE *out, const char *key, int value)
{
    fprintf(out, ",\"%s\":%s", key, value < 0 ? "null" : value ? "true" : "false");
}

static void emit(const struct query *q)
{
    FILE *out = stdout;
    fprintf(out, "{\"index\":%zu,\"name\":", q->index);
    put_string(out, q->name);
    fprintf(out, ",\"type\":");
    put_string(out, q->type_name);
    fprintf(out, ",\"protocol\":\"%s\",\"resolver\":", opt.protocol_name);
    put_string(out, opt.resolver);
    fprintf(out, ",\"server\":");
    put_string(out, opt.server);
    fprintf(out, ",\"start\":%.6f", q->start_wall);
    put_int_or_null(out, "duration_us", q->end_us && q->start_us ? q->end_us - q->start_us : -1);
    fprintf(out, ",\"new_connection\":%s", q->new_connection ? "true" : "false");
    put_int_or_null(out, "tcp_setup_us", q->tcp_setup_us);
    put_int_or_null(out, "tls_setup_us", q->tls_setup_us);
    put_bool_or_null(out, "resumed", q->resumed);
    /* Neither getdns nor libcurl (7.88, OpenSSL) sends TLS early data: never 0-RTT. */
    put_bool_or_null(out, "zero_rtt", q->resumed < 0 ? -1 : 0);
    put_int_or_null(out, "local_port", q->local_port);
    put_int_or_null(out, "rcode", q->rcode);
    put_int_or_null(out, "answers", q->answers);
    fprintf(out, ",\"status\":\"%s\",\"transport\":", q->status);
    put_string(out, q->transport);
    fprintf(out, ",\"error\":");
    put_string(out, q->error[0] ? q->error : NULL);
    fprintf(out, ",\"concurrency\":%d,\"interval_ms\":%g,\"timeout_ms\":%ld,\"idle_timeout_ms\":%ld,\"nagle\":%s,\"library\":\"%s\",\"reuse\":%s,\"resume\":%s}\n",
            opt.concurrency, opt.interval_ms, opt.timeout_ms, opt.idle_timeout_ms,
            connwatch_nagle ? "true" : "false", backend->name, opt.no_reuse ? "false" : "true",
            opt.resume ? "true" : "false");
    fflush(out);
}

void query_started(struct query *q)
{
    q->start_us = mono_us();
    q->start_wall = wall_seconds();
}

void query_done(struct query *q)
{
    emit(q);
    for (size_t i = 0; i < outstanding; i++) {
        if (in_flight[i] == q) {
            in_flight[i] = in_flight[--outstanding];
            break;
        }
    }
    free(q);
}

static const struct { const char *name; uint16_t value; } TYPES[] = {
    {"A", 1}, {"NS", 2}, {"CNAME", 5}, {"SOA", 6}, {"PTR", 12}, {"MX", 15}, {"TXT", 16},
    {"AAAA", 28}, {"SRV", 33}, {"SVCB", 64}, {"HTTPS", 65},
};

static int parse_type(const char *text, uint16_t *value)
{
    for (size_t i = 0; i < sizeof TYPES / sizeof *TYPES; i++) {
        if (strcasecmp(text, TYPES[i].name) == 0) {
            *value = TYPES[i].value;
            return 0;
        }
    }
    return -1;
}

/* Host names as DNS carries them: at most 253 octets (without the final dot),
 * labels of 1-63 letters, digits, hyphens or underscores. Returns NULL if fine. */
static const char *name_problem(const char *name)
{
    size_t len = strlen(name);
    if (len > 0 && name[len - 1] == '.')
        len--;
    if (len == 0)
        return "empty name";
    if (len > 253)
        return "name longer than 253 octets";
    size_t label = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)name[i];
        if (c == '.') {
            if (label == 0)
                return "empty label";
            label = 0;
        } else if (isalnum(c) || c == '-' || c == '_') {
            if (++label > 63)
                return "label longer than 63 octets";
        } else {
            return "character not allowed in a host name";
        }
    }
    return label == 0 ? "empty label" : NULL;
}

/* Why reading the names stopped early (a read error, no memory); NULL if it did not. */
static const char *input_problem;
static char input_problem_text[256];

/* The next line of the input, without its newline, in buf (MAX_LINE + 1 octets).
 * Returns 1 for a line, 0 at the end, -1 on a read error. A line longer than
 * MAX_LINE octets sets *too_long: buf keeps its first MAX_LINE, the rest is skipped. */
static int next_line(FILE *in, char *buf, bool *too_long)
{
    size_t n = 0;
    int c;
    *too_long = false;
    while ((c = getc(in)) != EOF && c != '\n') {
        if (n < MAX_LINE)
            buf[n++] = (char)c;
        else
            *too_long = true;
    }
    buf[n] = '\0';
    if (ferror(in))
        return -1;
    return c == EOF && n == 0 ? 0 : 1;
}

/* The next query from the input, or NULL at its end (or when input_problem
 * says why it stopped). Malformed lines become queries already finished with
 * status "invalid", and so does a line longer than MAX_LINE octets: what
 * follows it is read as usual. */
static struct query *read_query(FILE *in, size_t index)
{
    static char line[MAX_LINE + 1];
    for (;;) {
        bool too_long;
        int got = next_line(in, line, &too_long);
        if (got < 0) {
            snprintf(input_problem_text, sizeof input_problem_text, "cannot read the names: %s", strerror(errno));
            input_problem = input_problem_text;
        }
        if (got <= 0)
            return NULL;
        char *p = line;
        while (*p && isspace((unsigned char)*p))
            p++;
        if (!too_long && (!*p || *p == '#'))
            continue;
        char *name = strtok(p, " \t\r\n");
        char *type = name ? strtok(NULL, " \t\r\n") : NULL;
        struct query *q = calloc(1, sizeof *q);
        if (!q) {
            input_problem = "out of memory reading the names";
            return NULL;
        }
        q->index = index;
        q->rcode = q->answers = -1;
        q->tcp_setup_us = q->tls_setup_us = -1;
        q->local_port = -1;
        q->resumed = -1;
        snprintf(q->name, sizeof q->name, "%s", name ? name : "");
        snprintf(q->type_name, sizeof q->type_name, "%s", type ? type : "A");
        const char *problem = too_long ? "line longer than 65536 octets"
                              : strlen(name) >= sizeof q->name ? "name longer than 253 octets"
                                                               : name_problem(name);
        if (!problem && parse_type(q->type_name, &q->type))
            problem = "unknown query type";
        if (problem) {
            q->status = "invalid";
            snprintf(q->error, sizeof q->error, "%s", problem);
        }
        return q;
    }
}

/* An integer option from min to max, or the refusal (one line, exit 2). */
static long parse_long(const char *text, const char *refusal, long min, long max)
{
    char *end;
    errno = 0;
    long value = strtol(text, &end, 10);
    if (errno || end == text || *end || value < min || value > max)
        refuse(refusal, text);
    return value;
}

/* A finite number option from min (or just above it, if above) to max, or the refusal. */
static double parse_double(const char *text, const char *refusal, double min, bool above, double max)
{
    char *end;
    errno = 0;
    double value = strtod(text, &end);
    if (errno || end == text || *end || !isfinite(value) || value < min || (above && value == min) || value > max)
        refuse(refusal, text);
    return value;
}

static void parse_args(int argc, char **argv, FILE **in)
{
    static const struct option longs[] = {
        {"protocol", required_argument, 0, 'p'}, {"server", required_argument, 0, 's'},
        {"port", required_argument, 0, 'P'}, {"tls-name", required_argument, 0, 'n'},
        {"url", required_argument, 0, 'u'}, {"ca-file", required_argument, 0, 'c'},
        {"resolver", required_argument, 0, 'r'}, {"timeout-ms", required_argument, 0, 't'},
        {"idle-timeout-ms", required_argument, 0, 'i'}, {"concurrency", required_argument, 0, 'C'},
        {"interval-ms", required_argument, 0, 'I'}, {"nagle", no_argument, 0, 'N'},
        {"no-reuse", no_argument, 0, 'R'}, {"duration-s", required_argument, 0, 'D'},
        {"resume", no_argument, 0, 'S'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0},
    };
    int c;
    opterr = 0;  /* every refusal is our one line */
    while ((c = getopt_long(argc, argv, ":", longs, NULL)) != -1) {
        switch (c) {
        case 'p': opt.protocol_name = optarg; break;
        case 's': opt.server = optarg; break;
        case 'P': opt.port = (int)parse_long(optarg, "--port: not a port number from 1 to 65535: '%s'", 1, 65535); break;
        case 'n': opt.tls_name = optarg; break;
        case 'u': opt.url = optarg; break;
        case 'c': opt.ca_file = optarg; break;
        case 'r': opt.resolver = optarg; break;
        case 't': opt.timeout_ms = parse_long(optarg, "--timeout-ms: not an integer from 1 to 86400000: '%s'", 1, MAX_MS); break;
        case 'i':
            opt.idle_timeout_ms = parse_long(optarg, "--idle-timeout-ms: not an integer from 0 to 86400000: '%s'", 0, MAX_MS);
            break;
        case 'C':
            opt.concurrency = (int)parse_long(optarg, "--concurrency: not an integer from 1 to 65535: '%s'", 1, MAX_CONCURRENCY);
            break;
        case 'N': connwatch_nagle = true; break;
        case 'R': opt.no_reuse = true; break;
        case 'S': opt.resume = connwatch_resume = true; break;
        case 'D':
            opt.duration_s = parse_double(optarg, "--duration-s: not a number above 0 and at most 31536000: '%s'", 0, true,
                                          MAX_DURATION_S);
            break;
        case 'I':
            opt.interval_ms = parse_double(optarg, "--interval-ms: not a number from 0 to 86400000: '%s'", 0, false, MAX_MS);
            break;
        case 'h':
            fputs(USAGE, stdout);
            exit(0);
        case ':': refuse("option '%s' needs a value", argv[optind - 1]); break;
        default: refuse("unknown option '%s' (dnstimer --help: usage)", argv[optind - 1]);
        }
    }
    if (!opt.protocol_name)
        refuse("%s", "--protocol is required (dnstimer --help: usage)");
    if (strcmp(opt.protocol_name, "do53") == 0)
        opt.protocol = PROTO_DO53, backend = &getdns_backend;
    else if (strcmp(opt.protocol_name, "dot") == 0)
        opt.protocol = PROTO_DOT, backend = &getdns_backend;
    else if (strcmp(opt.protocol_name, "doh") == 0)
        opt.protocol = PROTO_DOH, backend = &curl_backend;
    else
        refuse("unknown protocol '%s' (do53, dot, doh; doq and doh3 are quictimer's)", opt.protocol_name);
    if (!opt.server && opt.protocol != PROTO_DOH)
        refuse("%s", "--server is required");
    if (optind + 1 < argc)
        refuse("one names file at most, got also '%s'", argv[optind + 1]);
    *in = stdin;
    if (optind < argc && strcmp(argv[optind], "-") != 0 && !(*in = fopen(argv[optind], "r")))
        refuse("cannot read names file '%s'", argv[optind]);
}

int main(int argc, char **argv)
{
    FILE *in;
    parse_args(argc, argv, &in);
    char err[512] = "";
    if (backend->init(&opt, err, sizeof err)) {
        say(err);
        return 2;
    }
    in_flight = calloc((size_t)opt.concurrency, sizeof *in_flight);
    if (!in_flight) {
        say("out of memory");
        return 2;
    }
    int64_t interval_us = (int64_t)(opt.interval_ms * 1000.0);
    int64_t due = mono_us();
    /* --duration-s: send for this long, then answer what is in flight and stop. */
    int64_t stop_at = opt.duration_s > 0 ? due + (int64_t)(opt.duration_s * 1e6) : INT64_MAX;
    size_t index = 0;
    struct query *next = read_query(in, index);
    while (next || outstanding) {
        int64_t now = mono_us();
        if (next && now >= stop_at) {
            free(next);
            next = NULL;
        }
        while (next && outstanding < (size_t)opt.concurrency && now >= due) {
            struct query *q = next;
            next = read_query(in, ++index);
            q->start_wall = wall_seconds();
            if (q->status) {  /* refused before sending */
                emit(q);
                free(q);
                continue;
            }
            in_flight[outstanding++] = q;
            backend->submit(q);
            due = interval_us ? due + interval_us : now;
            if (due < now - interval_us)
                due = now;  /* after a stall, do not catch up with a burst */
            now = mono_us();
        }
        int64_t wait = -1;
        if (next && outstanding < (size_t)opt.concurrency)
            wait = due > now ? due - now : 0;
        if (outstanding || wait > 0)
            backend->wait(wait);
        /* The libraries enforce the per-query timeout; this only catches one that hangs. */
        now = mono_us();
        for (size_t i = 0; i < outstanding; i++) {
            if (now - in_flight[i]->start_us > opt.timeout_ms * 1000 + WATCHDOG_GRACE_US) {
                fprintf(stderr, "dnstimer: %s did not return a query it should have timed out\n", backend->name);
                for (size_t j = 0; j < outstanding; j++) {
                    in_flight[j]->status = "timeout";
                    snprintf(in_flight[j]->error, sizeof in_flight[j]->error, "library hung past the timeout");
                    emit(in_flight[j]);
                }
                return 3;
            }
        }
    }
    backend->cleanup();
    free(in_flight);
    if (input_problem) {  /* every name read has its record; the rest could not be read */
        say(input_problem);
        return 1;
    }
    return 0;
}
