// h3front: HTTP/3 (quic-go) on the lab's web addresses, in front of the lab's nginx.
//
// It listens on UDP 443 of every web address the configuration names, with
// the lab CA's certificates picked by SNI as nginx picks them, and passes
// every request, unchanged, to nginx over plain HTTP/1.1 on loopback
// (kept-alive connections). nginx answers it as it answers HTTP/2: the same
// bytes, the same headers, the same waits (docs/web.md, "HTTP/3"). With
// `files` (the synthetic web, which has no waits) it answers a plain GET of
// an existing file itself, as nginx would, without that hop (files.go).
//
// Once every UDP socket is bound it accepts TCP on the configuration's
// `ready` address, which is how the lab sees it is up (nothing else is read
// there). With `tcp` (a lab with ECH, which nginx cannot decrypt) it also
// serves TLS over TCP on the same addresses with the same handler (tcp.go). It parses network data, so the lab runs it as an unprivileged
// account with only CAP_NET_BIND_SERVICE.
//
//	h3front -config h3front.json
package main

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
)

// certificate is one certificate file and the names it serves (exact names and "*.zone" wildcards).
type certificate struct {
	Names []string `json:"names"`
	Cert  string   `json:"cert"`
}

// config is what the lab writes (harness/lab/h3front.py).
type config struct {
	Addresses    []string      `json:"addresses"`    // the web addresses, UDP port `port` on each
	Port         int           `json:"port"`         // 443
	Key          string        `json:"key"`          // the key every certificate shares
	Certificates []certificate `json:"certificates"` // per SNI name
	Upstream     string        `json:"upstream"`     // nginx's plain HTTP listener, host:port
	UpstreamTLS  *upstreamTLS  `json:"upstream_tls"` // instead: the replay nginx over TLS (upstream_tls.go)
	Ready        string        `json:"ready"`        // TCP host:port opened once every UDP socket is bound
	AccessLog    string        `json:"access_log"`   // one line per request
	Files        *fileConfig   `json:"files"`        // optional: files answered without the hop to nginx
	ECH          *echFiles     `json:"ech"`          // optional: Encrypted Client Hello (ech.go)
	TCP          bool          `json:"tcp"`          // also TLS over TCP `port`, HTTP/2 and HTTP/1.1 (tcp.go)
}

func readConfig(path string) (*config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var c config
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(c.Addresses) == 0 || c.Port <= 0 || c.Ready == "" || c.AccessLog == "" || len(c.Certificates) == 0 {
		return nil, fmt.Errorf("%s: addresses, port, ready, access_log and certificates are required", path)
	}
	if (c.Upstream == "") == (c.UpstreamTLS == nil) {
		return nil, fmt.Errorf("%s: exactly one of upstream and upstream_tls is required", path)
	}
	if c.TCP && c.UpstreamTLS != nil {
		return nil, fmt.Errorf("%s: tcp is served only in front of the synthetic web's nginx (upstream)", path)
	}
	if c.UpstreamTLS != nil && c.Files != nil {
		return nil, fmt.Errorf("%s: files are answered only in front of the synthetic web's nginx (upstream)", path)
	}
	return &c, nil
}

// certificates maps each exact name and each wildcard's parent ("*.a.test" -> ".a.test") to its certificate.
func certificates(c *config) (map[string]*tls.Certificate, error) {
	key, err := os.ReadFile(c.Key)
	if err != nil {
		return nil, err
	}
	byName := make(map[string]*tls.Certificate)
	for _, entry := range c.Certificates {
		pem, err := os.ReadFile(entry.Cert)
		if err != nil {
			return nil, err
		}
		pair, err := tls.X509KeyPair(pem, key)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", entry.Cert, err)
		}
		for _, name := range entry.Names {
			name = strings.ToLower(strings.TrimPrefix(name, "*"))
			if _, seen := byName[name]; !seen { // the first certificate naming a name wins, as in nginx
				byName[name] = &pair
			}
		}
	}
	return byName, nil
}

// pick returns the certificate for the SNI name: an exact name first, then the wildcard of its parent.
func pick(byName map[string]*tls.Certificate) func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
		name := strings.ToLower(strings.TrimSuffix(hello.ServerName, "."))
		if cert, ok := byName[name]; ok {
			return cert, nil
		}
		if dot := strings.IndexByte(name, '.'); dot >= 0 {
			if cert, ok := byName[name[dot:]]; ok {
				return cert, nil
			}
		}
		return nil, fmt.Errorf("no certificate for %q", hello.ServerName)
	}
}

// proxy passes each request to nginx over plain HTTP/1.1, the Host (HTTP/3's :authority) kept.
func proxy(upstream string) http.Handler {
	target := &url.URL{Scheme: "http", Host: upstream}
	transport := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConns:        1024,
		MaxIdleConnsPerHost: 1024, // one upstream: every kept-alive connection is to it
		IdleConnTimeout:     60 * time.Second,
		DisableCompression:  true, // no Accept-Encoding of its own: the browser's is passed as it is
		ForceAttemptHTTP2:   false,
	}
	return &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Host = r.In.Host
		},
		Transport: transport,
		ErrorLog:  log.Default(),
	}
}

// handler is the proxy to nginx, behind the file server if there is one, behind the access log.
func handler(c *config) (http.Handler, error) {
	h := proxy(c.Upstream)
	if c.UpstreamTLS != nil {
		var err error
		if h, err = sameAddressProxy(c.UpstreamTLS); err != nil {
			return nil, err
		}
	}
	if c.Files != nil {
		files, err := newFileServer(c.Files, h)
		if err != nil {
			return nil, err
		}
		h = files
	}
	access, err := openAccessLog(c.AccessLog)
	if err != nil {
		return nil, err
	}
	return access.wrap(h), nil
}

// listen binds UDP `port` on every address, before anything is served.
func listen(c *config) ([]net.PacketConn, error) {
	conns := make([]net.PacketConn, 0, len(c.Addresses))
	for _, addr := range c.Addresses {
		conn, err := net.ListenPacket("udp", net.JoinHostPort(addr, fmt.Sprint(c.Port)))
		if err != nil {
			return nil, err
		}
		conns = append(conns, conn)
	}
	return conns, nil
}

// announceReady accepts (and closes) TCP connections on `ready` for as long as the front runs.
func announceReady(ready string) error {
	ln, err := net.Listen("tcp", ready)
	if err != nil {
		return err
	}
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			conn.Close()
		}
	}()
	return nil
}

func run(path string) error {
	c, err := readConfig(path)
	if err != nil {
		return err
	}
	byName, err := certificates(c)
	if err != nil {
		return err
	}
	handler, err := handler(c)
	if err != nil {
		return err
	}
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS13, GetCertificate: pick(byName)}
	var echLog *echLog
	if c.ECH != nil {
		if tlsConfig.EncryptedClientHelloKeys, err = echKeys(c.ECH); err != nil {
			return err
		}
		if echLog, err = openECHLog(c.ECH.Log); err != nil {
			return err
		}
	}
	server := &http3.Server{
		TLSConfig:   http3.ConfigureTLSConfig(tlsConfig),
		QUICConfig:  &quic.Config{MaxIdleTimeout: 65 * time.Second}, // nginx's keepalive_timeout
		Handler:     handler,
		IdleTimeout: 65 * time.Second,
	}
	if echLog != nil {
		server.ConnContext = echLog.connContext
	}
	conns, err := listen(c)
	if err != nil {
		return err
	}
	serveTLS := func(chan<- error) {}
	if c.TCP {
		if serveTLS, err = serveTCP(c, tlsConfig, handler, echLog); err != nil {
			return err
		}
	}
	if err := announceReady(c.Ready); err != nil {
		return err
	}
	log.Printf("h3front: HTTP/3 on %d addresses, port %d, %d names; TCP too: %v; upstream %s", len(conns), c.Port,
		len(byName), c.TCP, upstreamName(c))
	errs := make(chan error, 2*len(conns))
	for _, conn := range conns {
		go func(conn net.PacketConn) { errs <- server.Serve(conn) }(conn)
	}
	serveTLS(errs)
	return <-errs
}

func upstreamName(c *config) string {
	if c.UpstreamTLS != nil {
		return "each address's port 443 over TLS"
	}
	return c.Upstream
}

func main() {
	path := flag.String("config", "", "the front's JSON configuration")
	flag.Parse()
	if *path == "" {
		fmt.Fprintln(os.Stderr, "usage: h3front -config FILE")
		os.Exit(2)
	}
	if err := run(*path); err != nil {
		fmt.Fprintln(os.Stderr, "h3front:", err)
		os.Exit(1)
	}
}
