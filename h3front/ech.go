package main

// Encrypted Client Hello on the front's connections (QUIC, and TCP with `tcp`, tcp.go): the lab writes one ECHConfig (the one its zones
// publish in `record` sites' HTTPS records, harness/lab/ech.py) and its X25519 private key, and Go's TLS
// server decrypts a client's inner ClientHello with them. Each request's log line says whether its
// connection's ECH was accepted, which is how a visit's record learns it (harness/lab/ech.py).

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"github.com/quic-go/quic-go"
)

// echFiles names the ECHConfig (one, as the TLS extension carries it, without the list's length) and its key.
type echFiles struct {
	Config string `json:"config"`
	Key    string `json:"key"`
	Log    string `json:"log"` // one line per connection
}

// echKeys reads the configuration and key; sent as retry configurations too, so a client with a stale
// configuration learns the current one.
func echKeys(files *echFiles) ([]tls.EncryptedClientHelloKey, error) {
	config, err := os.ReadFile(files.Config)
	if err != nil {
		return nil, err
	}
	key, err := os.ReadFile(files.Key)
	if err != nil {
		return nil, err
	}
	if len(key) != 32 {
		return nil, fmt.Errorf("%s: an X25519 private key is 32 bytes, not %d", files.Key, len(key))
	}
	return []tls.EncryptedClientHelloKey{{Config: config, PrivateKey: key, SendAsRetry: true}}, nil
}

// echLog writes a line per connection once its handshake is complete.
type echLog struct {
	mu  sync.Mutex
	out *os.File
}

func openECHLog(file string) (*echLog, error) {
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	return &echLog{out: f}, nil
}

// connContext is the server's ConnContext: it leaves the context as it is and logs the connection.
func (l *echLog) connContext(ctx context.Context, conn *quic.Conn) context.Context {
	go func() {
		select {
		case <-conn.HandshakeComplete():
		case <-conn.Context().Done():
			return
		}
		l.write(conn.RemoteAddr(), conn.ConnectionState().TLS, "quic")
	}()
	return ctx
}

// write logs one connection: when, from where, its server name (the inner one when ECH was accepted), ECH, and
// its transport ("quic" or "tcp").
func (l *echLog) write(remote net.Addr, state tls.ConnectionState, transport string) {
	accepted := 0
	if state.ECHAccepted {
		accepted = 1
	}
	line := fmt.Sprintf("%s %s %s ech=%d %s\n", time.Now().UTC().Format(time.RFC3339Nano), remote, state.ServerName,
		accepted, transport)
	l.mu.Lock()
	_, _ = l.out.WriteString(line)
	l.mu.Unlock()
}
