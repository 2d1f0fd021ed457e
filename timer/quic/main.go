// quictimer times DNS over QUIC (RFC 9250) and DNS over HTTP/3 (RFC 8484 on
// HTTP/3) with quic-go, writing the same JSON records as dnstimer (C).
//
//	quictimer --protocol doq|doh3 --server IP --tls-name NAME [options] [NAMES_FILE]
//
// QUIC sets up transport and TLS 1.3 in one handshake, so a new connection's
// whole handshake is reported as tls_setup_us and tcp_setup_us is null.
//
// With --resume, TLS sessions (tickets) are kept across connections and a new
// connection offers the newest; DoQ then sends its query in 0-RTT when the
// ticket allows it, and tls_setup_us is the time until the connection could
// carry the query, not the handshake's end. DoH3 posts its queries, and quic-go
// sends no POST in 0-RTT (it is not replay-safe), so a resumed DoH3
// connection still waits for its handshake.
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
)

type options struct {
	protocol, resolver, server, tlsName, url, caFile string
	port                                             int
	timeout, idleTimeout                             time.Duration
	concurrency                                      int
	intervalMS, durationS                            float64
	reuse, resume                                    bool
}

// record is one line of output; the fields and their order are dnstimer's.
type record struct {
	Index         int     `json:"index"`
	Name          string  `json:"name"`
	Type          string  `json:"type"`
	Protocol      string  `json:"protocol"`
	Resolver      string  `json:"resolver"`
	Server        string  `json:"server"`
	Start         float64 `json:"start"`
	DurationUS    *int64  `json:"duration_us"`
	NewConnection bool    `json:"new_connection"`
	TCPSetupUS    *int64  `json:"tcp_setup_us"`
	TLSSetupUS    *int64  `json:"tls_setup_us"`
	Resumed       *bool   `json:"resumed"`
	ZeroRTT       *bool   `json:"zero_rtt"`
	LocalPort     *int    `json:"local_port"`
	Rcode         *int    `json:"rcode"`
	Answers       *int    `json:"answers"`
	Status        string  `json:"status"`
	Transport     *string `json:"transport"`
	Error         *string `json:"error"`
	Concurrency   int     `json:"concurrency"`
	IntervalMS    float64 `json:"interval_ms"`
	TimeoutMS     int64   `json:"timeout_ms"`
	IdleTimeoutMS int64   `json:"idle_timeout_ms"`
	Nagle         bool    `json:"nagle"`
	Library       string  `json:"library"`
	Reuse         bool    `json:"reuse"`
	Resume        bool    `json:"resume"`
}

const usageLine = "usage: quictimer --protocol doq|doh3 --server IP --tls-name NAME [--port N] [--url URL] " +
	"[--ca-file FILE] [--resolver LABEL] [--timeout-ms N] [--idle-timeout-ms N] [--concurrency N] " +
	"[--interval-ms X] [--reuse=false] [--resume] [--duration-s X] [NAMES_FILE]"

const (
	maxConcurrency = 65535    // as dnstimer
	maxMS          = 86400000 // --timeout-ms, --idle-timeout-ms, --interval-ms: a day at most
	maxDurationS   = 31536000 // --duration-s: a year at most
	maxLine        = 65536    // octets in a line of names; a longer one is refused as a record
)

// say writes one line on stderr, control characters escaped, whatever it quotes.
func say(format string, args ...any) {
	text := fmt.Sprintf(format, args...)
	var b strings.Builder
	for _, r := range text {
		if r < 0x20 || r == 0x7f {
			fmt.Fprintf(&b, "\\x%02x", r)
		} else {
			b.WriteRune(r)
		}
	}
	fmt.Fprintf(os.Stderr, "quictimer: %s\n", b.String())
}

// usage refuses the command line in one line and exits with status 2.
func usage(format string, args ...any) {
	say(format, args...)
	os.Exit(2)
}

// nameProblem applies dnstimer's rules: at most 253 octets, labels of 1-63
// letters, digits, hyphens or underscores.
func nameProblem(name string) string {
	name = strings.TrimSuffix(name, ".")
	switch {
	case name == "":
		return "empty name"
	case len(name) > 253:
		return "name longer than 253 octets"
	}
	for _, label := range strings.Split(name, ".") {
		if label == "" {
			return "empty label"
		}
		if len(label) > 63 {
			return "label longer than 63 octets"
		}
		for _, c := range []byte(label) {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return "character not allowed in a host name"
			}
		}
	}
	return ""
}

// connection is the one QUIC connection queries share (when reusing).
type connection struct {
	mu      sync.Mutex // guards the fields; never held while dialling
	conn    *quic.Conn
	h3      *http3.ClientConn
	dialing chan struct{} // closed when the dial in progress ends; nil if none is
}

type timer struct {
	opt     options
	tlsConf *tls.Config
	addr    string
	shared  connection
	out     *json.Encoder
	outMu   sync.Mutex
}

// dial opens a connection; it returns once the connection can carry a query:
// at the end of the handshake, or at once when DoQ resumes with 0-RTT.
func (t *timer) dial(ctx context.Context) (*quic.Conn, time.Duration, error) {
	start := time.Now()
	conf := &quic.Config{MaxIdleTimeout: t.opt.idleTimeout, HandshakeIdleTimeout: t.opt.timeout}
	dial := quic.DialAddr
	if t.opt.resume && t.opt.protocol == "doq" {
		dial = quic.DialAddrEarly
	}
	conn, err := dial(ctx, t.addr, t.tlsConf, conf)
	return conn, time.Since(start), err
}

// resumption says whether conn resumed a TLS session and used 0-RTT, once its
// handshake is over (a 0-RTT connection learns it when the server's flight
// arrives, by the time the answer does); nil if it never ended.
func resumption(ctx context.Context, conn *quic.Conn) (resumed, zeroRTT *bool) {
	select {
	case <-conn.HandshakeComplete():
	case <-conn.Context().Done(): // closed before its handshake ended
	case <-ctx.Done():
	}
	select {
	case <-conn.HandshakeComplete():
		state := conn.ConnectionState()
		return &state.TLS.DidResume, &state.Used0RTT
	default:
		return nil, nil
	}
}

// replace swaps c's connection for next (after the server rejected 0-RTT on it).
func (c *connection) replace(old, next *quic.Conn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn == old {
		c.conn = next
	}
}

// get returns a live connection, dialling one if there is none. A query that
// finds a dial in progress waits for it (or for its own deadline) without
// holding the lock, then looks again: it uses the new connection, or dials
// itself if that dial failed. The handshake time is returned only to the
// query that dialled.
func (t *timer) get(ctx context.Context, c *connection) (*quic.Conn, *http3.ClientConn, *time.Duration, error) {
	for {
		c.mu.Lock()
		if c.conn != nil {
			select {
			case <-c.conn.Context().Done(): // closed, e.g. idle for longer than the idle timeout
				c.conn, c.h3 = nil, nil
			default:
				conn, h3 := c.conn, c.h3
				c.mu.Unlock()
				return conn, h3, nil, nil
			}
		}
		if wait := c.dialing; wait != nil {
			c.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return nil, nil, nil, ctx.Err()
			}
		}
		done := make(chan struct{})
		c.dialing = done
		c.mu.Unlock()

		conn, took, err := t.dial(ctx)
		var h3 *http3.ClientConn
		if err == nil && t.opt.protocol == "doh3" {
			h3 = (&http3.Transport{}).NewClientConn(conn)
		}
		c.mu.Lock()
		c.dialing = nil
		if err == nil {
			c.conn, c.h3 = conn, h3
		}
		c.mu.Unlock()
		close(done)
		return conn, h3, &took, err
	}
}

func (t *timer) exchange(ctx context.Context, r *record, msg *dns.Msg) error {
	c := &t.shared
	if !t.opt.reuse {
		c = &connection{}
		defer func() {
			if c.conn != nil {
				c.conn.CloseWithError(0, "")
			}
		}()
	}
	conn, h3conn, handshake, err := t.get(ctx, c)
	if handshake != nil {
		r.NewConnection = true
		if err == nil {
			us := handshake.Microseconds()
			r.TLSSetupUS = &us
			if local, ok := conn.LocalAddr().(*net.UDPAddr); ok {
				r.LocalPort = &local.Port
			}
			defer func() { r.Resumed, r.ZeroRTT = resumption(ctx, conn) }()
		}
	}
	if err != nil {
		return err
	}
	wire, err := msg.Pack()
	if err != nil {
		return err
	}
	var answer []byte
	if t.opt.protocol == "doq" {
		answer, err = doqExchange(ctx, conn, wire)
		if errors.Is(err, quic.Err0RTTRejected) { // what was sent early is lost: send it again
			var next *quic.Conn
			if next, err = conn.NextConnection(ctx); err == nil {
				c.replace(conn, next)
				answer, err = doqExchange(ctx, next, wire)
			}
		}
	} else {
		answer, err = doh3Exchange(ctx, h3conn, t.opt.url, wire)
	}
	if err != nil {
		return err
	}
	reply := new(dns.Msg)
	if err := reply.Unpack(answer); err != nil {
		return fmt.Errorf("not a DNS response (%d bytes): %v", len(answer), err)
	}
	rcode, answers := reply.Rcode, len(reply.Answer)
	r.Rcode, r.Answers = &rcode, &answers
	return nil
}

// doqExchange sends one query on a new stream, as RFC 9250 section 4.2 says:
// a 2-octet length prefix, then the message; the stream's send side closed.
func doqExchange(ctx context.Context, conn *quic.Conn, wire []byte) ([]byte, error) {
	stream, err := conn.OpenStreamSync(ctx)
	if err != nil {
		return nil, err
	}
	if deadline, ok := ctx.Deadline(); ok {
		stream.SetDeadline(deadline)
	}
	framed := binary.BigEndian.AppendUint16(nil, uint16(len(wire)))
	if _, err := stream.Write(append(framed, wire...)); err != nil {
		return nil, err
	}
	stream.Close()
	var size uint16
	if err := binary.Read(stream, binary.BigEndian, &size); err != nil {
		return nil, fmt.Errorf("reading the length prefix: %w", err)
	}
	answer := make([]byte, size)
	_, err = io.ReadFull(stream, answer)
	return answer, err
}

func doh3Exchange(ctx context.Context, conn *http3.ClientConn, url string, wire []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(wire))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/dns-message")
	req.Header.Set("Accept", "application/dns-message")
	resp, err := conn.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("HTTP status %d", resp.StatusCode)
	}
	return io.ReadAll(io.LimitReader(resp.Body, 65536))
}

func (t *timer) run(index int, name, qtype, problem string) {
	transport := map[string]string{"doq": "quic", "doh3": "h3"}[t.opt.protocol]
	r := &record{Index: index, Name: name, Type: qtype, Protocol: t.opt.protocol, Resolver: t.opt.resolver,
		Server: t.opt.server, Concurrency: t.opt.concurrency, IntervalMS: t.opt.intervalMS,
		TimeoutMS: t.opt.timeout.Milliseconds(), IdleTimeoutMS: t.opt.idleTimeout.Milliseconds(),
		Library: "quic-go", Reuse: t.opt.reuse, Resume: t.opt.resume}
	now := time.Now()
	r.Start = float64(now.UnixNano()) / 1e9
	if problem == "" {
		problem = nameProblem(name)
	}
	code, known := dns.StringToType[strings.ToUpper(qtype)]
	if problem == "" && !known {
		problem = "unknown query type"
	}
	if problem != "" {
		r.Status, r.Error = "invalid", &problem
		t.emit(r)
		return
	}
	msg := new(dns.Msg)
	msg.SetQuestion(dns.Fqdn(name), code)
	msg.Id = 0 // RFC 9250 section 4.2.1 and RFC 8484 section 4.1
	msg.SetEdns0(1232, false)
	ctx, cancel := context.WithTimeout(context.Background(), t.opt.timeout)
	defer cancel()
	start := time.Now() // monotonic
	err := t.exchange(ctx, r, msg)
	took := time.Since(start).Microseconds()
	r.DurationUS = &took
	switch {
	case err == nil:
		r.Status, r.Transport = "ok", &transport
	case errors.Is(err, context.DeadlineExceeded) || isTimeout(err):
		r.Status = "timeout"
	default:
		r.Status = "error"
		text := err.Error()
		r.Error = &text
	}
	t.emit(r)
}

func isTimeout(err error) bool {
	var idle *quic.IdleTimeoutError
	var hs *quic.HandshakeTimeoutError
	var ne net.Error
	return errors.As(err, &idle) || errors.As(err, &hs) || (errors.As(err, &ne) && ne.Timeout())
}

func (t *timer) emit(r *record) {
	t.outMu.Lock()
	defer t.outMu.Unlock()
	t.out.Encode(r)
}

func parseArgs() (options, []string) {
	var o options
	// Numbers are taken as text and parsed here, so that a refusal quotes what was given.
	var port, concurrency, timeoutMS, idleMS, intervalMS, durationS string
	flags := flag.NewFlagSet("quictimer", flag.ContinueOnError)
	flags.SetOutput(io.Discard) // every refusal is our one line
	flags.StringVar(&o.protocol, "protocol", "", "doq or doh3")
	flags.StringVar(&o.server, "server", "", "resolver IP address")
	flags.StringVar(&port, "port", "", "port (default 853 for doq, 443 or the URL's for doh3)")
	flags.StringVar(&o.tlsName, "tls-name", "", "name the resolver's certificate must match")
	flags.StringVar(&o.url, "url", "", "DoH3 URL")
	flags.StringVar(&o.caFile, "ca-file", "", "PEM file of trusted CAs (default: the system's)")
	flags.StringVar(&o.resolver, "resolver", "", "label stored in every record")
	flags.StringVar(&timeoutMS, "timeout-ms", "5000", "per-query timeout")
	flags.StringVar(&idleMS, "idle-timeout-ms", "10000", "close a connection idle this long")
	flags.StringVar(&concurrency, "concurrency", "1", "queries in flight at most")
	flags.StringVar(&intervalMS, "interval-ms", "0", "at least this long between two sends")
	flags.BoolVar(&o.reuse, "reuse", true, "share one connection between queries")
	flags.BoolVar(&o.resume, "resume", false, "keep TLS sessions across connections and resume them (0-RTT for DoQ)")
	flags.StringVar(&durationS, "duration-s", "0", "stop sending after this many seconds (0: at the end of the names)")
	if err := flags.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Println(usageLine)
			os.Exit(0)
		}
		usage("%v (quictimer --help: usage)", err)
	}
	integer := func(text, refusal string, lo, hi int64) int64 {
		v, err := strconv.ParseInt(text, 10, 64)
		if err != nil || v < lo || v > hi {
			usage(refusal, text)
		}
		return v
	}
	number := func(text, refusal string, lo, hi float64) float64 {
		v, err := strconv.ParseFloat(text, 64)
		if err != nil || math.IsNaN(v) || v < lo || v > hi {
			usage(refusal, text)
		}
		return v
	}
	switch {
	case o.protocol != "doq" && o.protocol != "doh3":
		usage("unknown protocol '%s' (doq, doh3; do53, dot and doh are dnstimer's)", o.protocol)
	case net.ParseIP(o.server) == nil:
		usage("--server: '%s' is not an IP address", o.server)
	case o.protocol == "doh3" && !strings.HasPrefix(o.url, "https://"):
		usage("--url: DoH3 needs an https:// URL, got '%s'", o.url)
	case flags.NArg() > 1:
		usage("one names file at most, got also '%s'", flags.Arg(1))
	}
	if port != "" {
		o.port = int(integer(port, "--port: not a port number from 1 to 65535: '%s'", 1, 65535))
	}
	o.concurrency = int(integer(concurrency, "--concurrency: not an integer from 1 to 65535: '%s'", 1, maxConcurrency))
	timeout := integer(timeoutMS, "--timeout-ms: not an integer from 1 to 86400000: '%s'", 1, maxMS)
	idle := integer(idleMS, "--idle-timeout-ms: not an integer from 1 to 86400000: '%s'", 1, maxMS)
	o.intervalMS = number(intervalMS, "--interval-ms: not a number from 0 to 86400000: '%s'", 0, maxMS)
	o.durationS = number(durationS, "--duration-s: not a number from 0 to 31536000: '%s'", 0, maxDurationS)
	o.timeout, o.idleTimeout = time.Duration(timeout)*time.Millisecond, time.Duration(idle)*time.Millisecond
	if o.tlsName == "" && o.url != "" {
		if host, _, err := net.SplitHostPort(strings.Split(strings.TrimPrefix(o.url, "https://"), "/")[0]); err == nil {
			o.tlsName = host
		} else {
			o.tlsName = strings.Split(strings.TrimPrefix(o.url, "https://"), "/")[0]
		}
	}
	if o.tlsName == "" {
		usage("--tls-name is required (authentication is required)")
	}
	if o.port == 0 {
		o.port = 853
		if o.protocol == "doh3" {
			o.port = 443
			if _, p, err := net.SplitHostPort(strings.Split(strings.TrimPrefix(o.url, "https://"), "/")[0]); err == nil {
				if port, err := strconv.Atoi(p); err != nil || port < 1 || port > 65535 {
					usage("--url: not a port number from 1 to 65535: '%s'", p)
				} else {
					o.port = port
				}
			}
		}
	}
	return o, flags.Args()
}

// readLine returns the next line without its newline, at most maxLine octets
// of it: tooLong says the rest of a longer line was skipped. It returns io.EOF
// at the end of the input, or the read error.
func readLine(in *bufio.Reader) (line []byte, tooLong bool, err error) {
	for {
		chunk, isPrefix, err := in.ReadLine()
		if err != nil {
			if err == io.EOF && (len(line) > 0 || tooLong) {
				return line, tooLong, nil // a last line without a newline
			}
			return line, tooLong, err
		}
		if room := maxLine - len(line); len(chunk) > room {
			line, tooLong = append(line, chunk[:room]...), true
		} else {
			line = append(line, chunk...)
		}
		if !isPrefix {
			return line, tooLong, nil
		}
	}
}

func main() {
	opt, args := parseArgs()
	tlsConf := &tls.Config{ServerName: opt.tlsName, NextProtos: []string{"doq"}, MinVersion: tls.VersionTLS13}
	if opt.protocol == "doh3" {
		tlsConf.NextProtos = []string{http3.NextProtoH3}
	}
	if opt.resume {
		tlsConf.ClientSessionCache = tls.NewLRUClientSessionCache(0)
	}
	if opt.caFile != "" {
		pem, err := os.ReadFile(opt.caFile)
		pool := x509.NewCertPool()
		if err != nil || !pool.AppendCertsFromPEM(pem) {
			usage("--ca-file: cannot read certificates from '%s'", opt.caFile)
		}
		tlsConf.RootCAs = pool
	}
	in := os.Stdin
	if len(args) > 0 && args[0] != "-" {
		f, err := os.Open(args[0])
		if err != nil {
			usage("cannot read names file '%s'", args[0])
		}
		in = f
	}
	t := &timer{opt: opt, tlsConf: tlsConf, addr: net.JoinHostPort(opt.server, strconv.Itoa(opt.port)),
		out: json.NewEncoder(os.Stdout)}
	t.out.SetEscapeHTML(false)
	slots := make(chan struct{}, opt.concurrency)
	var wg sync.WaitGroup
	interval := time.Duration(opt.intervalMS * float64(time.Millisecond))
	next := time.Now()
	stopAt := time.Now().Add(time.Duration(opt.durationS * float64(time.Second)))
	reader := bufio.NewReaderSize(in, 64*1024)
	index := 0
	var readErr error
	for {
		if opt.durationS > 0 && !time.Now().Before(stopAt) {
			break
		}
		line, tooLong, err := readLine(reader)
		if err != nil {
			if err != io.EOF {
				readErr = err
			}
			break
		}
		fields := strings.Fields(string(line))
		problem := ""
		if tooLong {
			problem = fmt.Sprintf("line longer than %d octets", maxLine)
			if len(fields) == 0 {
				fields = []string{""}
			}
		} else if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		if len(fields[0]) > 255 { // the record keeps 255 octets of a name, as dnstimer's does
			fields[0] = fields[0][:255]
		}
		qtype := "A"
		if len(fields) > 1 {
			qtype = fields[1]
		}
		slots <- struct{}{}
		if wait := time.Until(next); wait > 0 {
			time.Sleep(wait)
		}
		if opt.durationS > 0 && !time.Now().Before(stopAt) {
			<-slots
			break
		}
		next = time.Now().Add(interval)
		wg.Add(1)
		go func(i int, name, qtype, problem string) {
			defer func() { <-slots; wg.Done() }()
			t.run(i, name, qtype, problem)
		}(index, fields[0], qtype, problem)
		index++
	}
	wg.Wait()
	if t.shared.conn != nil {
		t.shared.conn.CloseWithError(0, "")
	}
	if readErr != nil { // every name read has its record; the rest could not be read
		say("cannot read the names: %v", readErr)
		os.Exit(1)
	}
}
