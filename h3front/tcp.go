package main

// The front's TCP side, for a lab with Encrypted Client Hello: Debian 12's nginx (OpenSSL 3.0) cannot decrypt
// ECH, so with `tcp` the front also takes TCP `port` on every web address, TLS 1.2 and 1.3 (nginx's
// ssl_protocols) with ECH, HTTP/2 and HTTP/1.1 (Go's net/http), and passes every request as over HTTP/3:
// the same handler, so the same answers, headers and waits (docs/web.md, "ECH"). nginx then listens only on
// the front's upstream. Each connection is logged once with its ECH, as the QUIC ones are.

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"
)

// serveTCP binds TCP `port` on every address and serves each with TLS; the returned function serves them all
// and reports the first error. Binding happens here, before anything is served, as for UDP.
func serveTCP(c *config, tlsConfig *tls.Config, handler http.Handler, echLog *echLog) (func(chan<- error), error) {
	listeners := make([]net.Listener, 0, len(c.Addresses))
	for _, addr := range c.Addresses {
		ln, err := net.Listen("tcp", net.JoinHostPort(addr, fmt.Sprint(c.Port)))
		if err != nil {
			return nil, err
		}
		listeners = append(listeners, ln)
	}
	config := tlsConfig.Clone()
	config.MinVersion = tls.VersionTLS12
	config.NextProtos = []string{"h2", "http/1.1"}
	server := &http.Server{
		Handler:           handler,
		IdleTimeout:       65 * time.Second, // nginx's keepalive_timeout
		ReadHeaderTimeout: 60 * time.Second, // nginx's client_header_timeout
	}
	if echLog != nil {
		server.ConnState = echLog.connState()
	}
	return func(errs chan<- error) {
		for _, ln := range listeners {
			go func(ln net.Listener) { errs <- server.Serve(tls.NewListener(ln, config)) }(ln)
		}
	}, nil
}

// connState is a server's ConnState hook that logs each TLS connection once, when it first becomes active:
// its handshake is complete by then (net/http handshakes before reading a request or handing over to HTTP/2).
func (l *echLog) connState() func(net.Conn, http.ConnState) {
	var logged sync.Map
	return func(conn net.Conn, state http.ConnState) {
		switch state {
		case http.StateActive:
			tlsConn, ok := conn.(*tls.Conn)
			if _, seen := logged.LoadOrStore(conn, true); !seen && ok {
				l.write(conn.RemoteAddr(), tlsConn.ConnectionState(), "tcp")
			}
		case http.StateClosed, http.StateHijacked:
			logged.Delete(conn)
		}
	}
}
