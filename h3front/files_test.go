package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
)

func testServer(t *testing.T) (*fileServer, string, *int) {
	t.Helper()
	dir := t.TempDir()
	for name, body := range map[string]string{
		"pages/a.test/index.html": "<html>a</html>",
		"o/img/256.png":           "png-bytes",
	} {
		path := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	types := filepath.Join(dir, "mime.types")
	if err := os.WriteFile(types, []byte("types {\n    text/html  html htm;\n    image/png  png;\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	passed := 0
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { passed++; w.WriteHeader(http.StatusTeapot) })
	f, err := newFileServer(&fileConfig{
		MimeTypes:  types,
		Sites:      []siteRoot{{Names: []string{"a.test", "*.a.test"}, Root: filepath.Join(dir, "pages", "a.test")}},
		Shared:     map[string]string{"/o/": dir},
		AddHeaders: [][2]string{{"Cache-Control", "no-store"}, {"Alt-Svc", `h3=":443"; ma=86400`}},
	}, next)
	if err != nil {
		t.Fatal(err)
	}
	return f, dir, &passed
}

func TestFilesAreAnsweredWithNginxHeaders(t *testing.T) {
	f, _, passed := testServer(t)
	for url, want := range map[string]string{"https://www.a.test/": "text/html", "https://a.test/o/img/256.png?s=a&i=1": "image/png"} {
		w := httptest.NewRecorder()
		f.ServeHTTP(w, httptest.NewRequest(http.MethodGet, url, nil))
		h := w.Result().Header
		if w.Code != http.StatusOK || h.Get("Content-Type") != want || h.Get("Server") != "nginx" ||
			h.Get("Cache-Control") != "no-store" || h.Get("Alt-Svc") == "" || h.Get("Etag") == "" ||
			h.Get("Last-Modified") == "" || h.Get("Accept-Ranges") != "bytes" || h.Get("Content-Length") == "" {
			t.Errorf("%s: %d %v", url, w.Code, h)
		}
	}
	if *passed != 0 {
		t.Errorf("%d requests passed on", *passed)
	}
}

func TestEverythingElseGoesToNginx(t *testing.T) {
	f, _, passed := testServer(t)
	requests := []*http.Request{
		httptest.NewRequest(http.MethodGet, "https://a.test/missing.html", nil),    // a miss: nginx's 404
		httptest.NewRequest(http.MethodGet, "https://a.test/o/img", nil),           // a directory
		httptest.NewRequest(http.MethodPost, "https://a.test/", nil),               // another method
		httptest.NewRequest(http.MethodGet, "https://b.test/", nil),                // no such server block
		httptest.NewRequest(http.MethodGet, "https://a.test/x/../index.html", nil), // not a clean path
	}
	ranged := httptest.NewRequest(http.MethodGet, "https://a.test/", nil)
	ranged.Header.Set("Range", "bytes=0-1")
	requests = append(requests, ranged)
	for _, r := range requests {
		w := httptest.NewRecorder()
		f.ServeHTTP(w, r)
		if w.Code != http.StatusTeapot {
			t.Errorf("%s %s: answered %d by the front", r.Method, r.URL, w.Code)
		}
	}
	if *passed != len(requests) {
		t.Errorf("%d of %d passed on", *passed, len(requests))
	}
}

func TestABlockWithHeadersOfItsOwnDoesNotInheritTheOthers(t *testing.T) {
	f, dir, _ := testServer(t)
	silent := siteRoot{Names: []string{"b.test"}, Root: filepath.Join(dir, "pages", "a.test"),
		AddHeaders: [][2]string{{"Cache-Control", "no-store"}}}
	f.sites["b.test"] = silent
	for url, altSvc := range map[string]bool{"https://b.test/": false, "https://b.test/o/img/256.png": false, "https://a.test/": true} {
		w := httptest.NewRecorder()
		f.ServeHTTP(w, httptest.NewRequest(http.MethodGet, url, nil))
		h := w.Result().Header
		if w.Code != http.StatusOK || h.Get("Cache-Control") != "no-store" || (h.Get("Alt-Svc") != "") != altSvc {
			t.Errorf("%s: %d %v", url, w.Code, h)
		}
	}
}
