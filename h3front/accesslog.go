package main

// The front's access log: one line per request it answered, buffered and written once a second, in
// the order of nginx's `lab` format (time, client, SNI, protocol, request, status, bytes, seconds).

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"sync"
	"time"
)

type accessLog struct {
	mu  sync.Mutex
	out *bufio.Writer
}

func openAccessLog(file string) (*accessLog, error) {
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	l := &accessLog{out: bufio.NewWriterSize(f, 64<<10)}
	go func() {
		for range time.Tick(time.Second) {
			l.mu.Lock()
			_ = l.out.Flush()
			l.mu.Unlock()
		}
	}()
	return l, nil
}

// recorder notes the status and the body bytes of an answer.
type recorder struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
	r.ResponseWriter.WriteHeader(status)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	n, err := r.ResponseWriter.Write(b)
	r.bytes += int64(n)
	return n, err
}

// Flush passes a flush on (the reverse proxy flushes streamed answers).
func (r *recorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// wrap logs every request next answers.
func (l *accessLog) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &recorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		sni := "-"
		if r.TLS != nil && r.TLS.ServerName != "" {
			sni = r.TLS.ServerName
		}
		line := fmt.Sprintf("%s %s %s %s \"%s %s %s\" %d %d %.3f\n", start.Format(time.RFC3339), r.RemoteAddr, sni,
			r.Proto, r.Method, r.RequestURI, r.Proto, rec.status, rec.bytes, time.Since(start).Seconds())
		l.mu.Lock()
		_, _ = l.out.WriteString(line)
		l.mu.Unlock()
	})
}
