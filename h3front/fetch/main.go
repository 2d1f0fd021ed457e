// h3fetch: the time per request of the lab web over HTTP/2 and over HTTP/3, one client for both
// (benchmarks/h3_front.py runs it in a lab's client namespace).
//
// Every URL is fetched once over each protocol (connections up and warm), then `-rounds` times,
// one request at a time, alternating the protocol round by round. It prints one JSON object:
// {"h2": [ms, ...], "h3": [ms, ...]}, each request's time from sending it to its body's last byte.
// A 2xx or 3xx answer counts and a redirect is not followed (a replay answers what was recorded:
// benchmarks/h3_front.py --replay); any other answer, or one over the other protocol, stops it.
//
// With -answer it fetches each URL once over HTTP/3 and prints what came instead, one JSON object per URL
// ({"url", "proto", "status", "bytes"} or {"url", "error"}): `lab check` compares it with what is expected
// (harness/lab/checks.py).
//
//	h3fetch -ca ca.pem -rounds 5 URL...
//	h3fetch -ca ca.pem -answer URL...
//	h3fetch -ca ca.pem -only h2 -rounds 1 URL...
package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/quic-go/quic-go/http3"
)

// get fetches url and reads its body; an answer other than 2xx or 3xx is an error.
func get(client *http.Client, url string, proto int) error {
	resp, err := client.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode < 200 || resp.StatusCode >= 400 || resp.ProtoMajor != proto {
		return fmt.Errorf("%s: %s over %s", url, resp.Status, resp.Proto)
	}
	return nil
}

// timed fetches every URL once over client and returns each request's milliseconds.
func timed(client *http.Client, urls []string, proto int) ([]float64, error) {
	out := make([]float64, 0, len(urls))
	for _, url := range urls {
		start := time.Now()
		if err := get(client, url, proto); err != nil {
			return nil, err
		}
		out = append(out, float64(time.Since(start).Nanoseconds())/1e6)
	}
	return out, nil
}

func clients(caFile string) (map[string]*http.Client, map[string]int, error) {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, nil, err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return nil, nil, fmt.Errorf("%s: no certificate", caFile)
	}
	h2 := &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: roots},
		ForceAttemptHTTP2:   true,
		MaxIdleConnsPerHost: 4,
		DisableCompression:  true,
	}
	h3 := &http3.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, DisableCompression: true}
	// A redirect is an answer like any other: timed as it came, its target not fetched.
	keep := func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	byProto := map[string]*http.Client{"h2": {Transport: h2, CheckRedirect: keep}, "h3": {Transport: h3, CheckRedirect: keep}}
	return byProto, map[string]int{"h2": 2, "h3": 3}, nil
}

func run(caFile string, rounds int, order []string, urls []string) error {
	byProto, major, err := clients(caFile)
	if err != nil {
		return err
	}
	times := map[string][]float64{"h2": {}, "h3": {}}
	for _, proto := range order { // warm: every connection up before timing
		if _, err := timed(byProto[proto], urls, major[proto]); err != nil {
			return err
		}
	}
	for round := 0; round < rounds; round++ {
		for i := range order {
			proto := order[(round+i)%len(order)] // who goes first alternates
			t, err := timed(byProto[proto], urls, major[proto])
			if err != nil {
				return err
			}
			times[proto] = append(times[proto], t...)
		}
	}
	return json.NewEncoder(os.Stdout).Encode(times)
}

// answer is what one request over HTTP/3 brought: the body's bytes as sent (no decoding), or the error.
type answer struct {
	URL    string `json:"url"`
	Proto  string `json:"proto,omitempty"`
	Status int    `json:"status,omitempty"`
	Bytes  int64  `json:"bytes,omitempty"`
	Error  string `json:"error,omitempty"`
}

func answers(caFile string, urls []string) error {
	byProto, _, err := clients(caFile)
	if err != nil {
		return err
	}
	out := json.NewEncoder(os.Stdout)
	for _, url := range urls {
		a := answer{URL: url}
		if resp, err := byProto["h3"].Get(url); err != nil {
			a.Error = err.Error()
		} else {
			a.Proto, a.Status = resp.Proto, resp.StatusCode
			a.Bytes, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if err != nil {
				a.Error = err.Error()
			}
		}
		if err := out.Encode(a); err != nil {
			return err
		}
	}
	return nil
}

func main() {
	ca := flag.String("ca", "", "the lab CA (PEM)")
	rounds := flag.Int("rounds", 5, "timed passes over the URLs per protocol")
	once := flag.Bool("answer", false, "fetch each URL once over HTTP/3 and print what came")
	only := flag.String("only", "", "time one protocol only: h2 or h3 (benchmarks/tcp_front.py)")
	flag.Parse()
	if *ca == "" || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: h3fetch -ca CA [-rounds N | -answer] URL...")
		os.Exit(2)
	}
	order := []string{"h2", "h3"}
	if *only != "" {
		order = []string{*only}
	}
	var err error
	if *once {
		err = answers(*ca, flag.Args())
	} else if *only != "" && *only != "h2" && *only != "h3" {
		err = fmt.Errorf("-only %q: h2 or h3", *only)
	} else {
		err = run(*ca, *rounds, order, flag.Args())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "h3fetch:", err)
		os.Exit(1)
	}
}
