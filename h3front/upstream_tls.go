package main

// The replay's upstream: each request passed over TLS to the replay nginx on the address the browser sent
// it to, port 443, with the request's host as SNI and Host, so nginx picks the same server block, exact
// answer and wait as for the browser's own HTTP/2 request (its answers are keyed by scheme, address and
// host; harness/lab/replayfront.py). A request the replay fails on purpose (nginx closes without an answer,
// as the original failed) resets the HTTP/3 stream instead of becoming a made-up 502.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"time"
)

// upstreamTLS names the CA that signed the replay nginx's certificates.
type upstreamTLS struct {
	CA string `json:"ca"`
}

// localAddressKey carries the address a request came to from the handler to the dialer.
type localAddressKey struct{}

// sameAddressProxy passes each request to port 443 of the local address it arrived on, over TLS.
func sameAddressProxy(u *upstreamTLS) (http.Handler, error) {
	pem, err := os.ReadFile(u.CA)
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s: no certificate", u.CA)
	}
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	transport := &http.Transport{
		// Connections are pooled by the URL's host (the request's hostname); each is dialled to the address
		// the request arrived on, which is where the browser would have reached that host over TCP.
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			addr, _ := ctx.Value(localAddressKey{}).(string)
			if addr == "" {
				return nil, fmt.Errorf("no local address for the request")
			}
			return dialer.DialContext(ctx, network, net.JoinHostPort(addr, "443"))
		},
		TLSClientConfig:     &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
		MaxIdleConns:        1024,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     60 * time.Second,
		DisableCompression:  true, // the browser's Accept-Encoding passed as it is
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(&url.URL{Scheme: "https", Host: hostOnly(r.In.Host)})
			r.Out.Host = r.In.Host
		},
		Transport: transport,
		ErrorLog:  log.Default(),
		// nginx closing without an answer is how the replay repeats a failed request: fail it here too.
		ErrorHandler: func(http.ResponseWriter, *http.Request, error) { panic(http.ErrAbortHandler) },
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
		if !ok {
			panic(http.ErrAbortHandler)
		}
		host, _, err := net.SplitHostPort(local.String())
		if err != nil {
			panic(http.ErrAbortHandler)
		}
		proxy.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), localAddressKey{}, host)))
	}), nil
}

// hostOnly is an authority without its port (":443" is the only port the replay serves over TLS).
func hostOnly(authority string) string {
	if host, _, err := net.SplitHostPort(authority); err == nil {
		return host
	}
	return strings.TrimSuffix(authority, ".")
}
