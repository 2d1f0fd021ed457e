package main

// The synthetic web's files, served by the front itself as nginx serves them (same bytes, same headers),
// without the hop to nginx; anything else (a miss, a directory, a range, a conditional request, another
// method) still goes to nginx.

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"
)

// siteRoot is one nginx server block's files: its names (as in `certificate`), its root and, if the block has
// add_header lines of its own (which stop nginx inheriting the http block's), those.
type siteRoot struct {
	Names      []string    `json:"names"`
	Root       string      `json:"root"`
	AddHeaders [][2]string `json:"add_headers"`
}

// fileConfig is what the front serves from files: nginx's `root` per server block, the shared
// `location /o/ { root ...; }` and nginx's MIME types.
type fileConfig struct {
	MimeTypes  string            `json:"mime_types"`  // /etc/nginx/mime.types
	Sites      []siteRoot        `json:"sites"`       // per server block
	Shared     map[string]string `json:"shared"`      // URL prefix -> root, for every site ("/o/")
	AddHeaders [][2]string       `json:"add_headers"` // nginx's add_header lines, in order
}

type fileServer struct {
	sites      map[string]siteRoot // name or ".parent" of a wildcard -> its server block
	shared     map[string]string
	types      map[string]string // extension without the dot -> type
	addHeaders [][2]string
	next       http.Handler
}

// readMimeTypes parses nginx's `types { type ext ext; ... }` file.
func readMimeTypes(file string) (map[string]string, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	types := make(map[string]string)
	scanner := bufio.NewScanner(strings.NewReader(string(data)))
	for scanner.Scan() {
		line := strings.TrimSpace(strings.SplitN(scanner.Text(), "#", 2)[0])
		fields := strings.Fields(strings.TrimSuffix(line, ";"))
		if len(fields) < 2 || fields[0] == "types" {
			continue
		}
		for _, ext := range fields[1:] {
			types[ext] = fields[0]
		}
	}
	return types, scanner.Err()
}

func newFileServer(c *fileConfig, next http.Handler) (*fileServer, error) {
	types, err := readMimeTypes(c.MimeTypes)
	if err != nil {
		return nil, err
	}
	sites := make(map[string]siteRoot)
	for _, site := range c.Sites {
		for _, name := range site.Names {
			sites[strings.ToLower(strings.TrimPrefix(name, "*"))] = site
		}
	}
	return &fileServer{sites: sites, shared: c.Shared, types: types, addHeaders: c.AddHeaders, next: next}, nil
}

// site is the server block nginx would pick for the request's host (false if none).
func (f *fileServer) site(host string) (siteRoot, bool) {
	host = strings.ToLower(strings.TrimSuffix(strings.Split(host, ":")[0], "."))
	if site, ok := f.sites[host]; ok {
		return site, true
	}
	if dot := strings.IndexByte(host, '.'); dot >= 0 {
		site, ok := f.sites[host[dot:]]
		return site, ok
	}
	return siteRoot{}, false
}

// root is the directory nginx would serve the request's path from in site ("" if none).
func (f *fileServer) root(site siteRoot, urlPath string) string {
	for prefix, root := range f.shared {
		if strings.HasPrefix(urlPath, prefix) {
			return root
		}
	}
	return site.Root
}

// plain says whether nginx would answer the request with the whole file and status 200.
func plain(r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	for _, h := range []string{"Range", "If-Modified-Since", "If-None-Match", "If-Match", "If-Unmodified-Since"} {
		if r.Header.Get(h) != "" {
			return false
		}
	}
	return true
}

// fileName is the file a clean path names (nginx's default `index` for a directory); false: not clean.
func fileName(urlPath string) (string, bool) {
	name := urlPath
	if strings.HasSuffix(name, "/") {
		name += "index.html"
	}
	return name, strings.HasPrefix(name, "/") && path.Clean(name) == name
}

func (f *fileServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	site, known := f.site(r.Host)
	root := f.root(site, r.URL.Path)
	name, clean := fileName(r.URL.Path)
	if !known || root == "" || !clean || !plain(r) {
		f.next.ServeHTTP(w, r)
		return
	}
	file, err := os.Open(filepath.Join(root, filepath.FromSlash(name)))
	if err != nil {
		f.next.ServeHTTP(w, r) // nginx's 404 (or 403) as nginx writes it
		return
	}
	defer file.Close()
	info, err := file.Stat()
	if err != nil || !info.Mode().IsRegular() {
		f.next.ServeHTTP(w, r)
		return
	}
	f.writeHeaders(w.Header(), name, info, site)
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		_, _ = file.WriteTo(w)
	}
}

// writeHeaders writes what nginx 1.22 sends with a static file (server_tokens off), then its add_header lines.
func (f *fileServer) writeHeaders(h http.Header, name string, info os.FileInfo, site siteRoot) {
	kind := f.types[strings.TrimPrefix(path.Ext(name), ".")]
	if kind == "" {
		kind = "application/octet-stream" // nginx.conf's default_type
	}
	modified := info.ModTime()
	h["Server"] = []string{"nginx"}
	h["Date"] = []string{time.Now().UTC().Format(http.TimeFormat)}
	h["Content-Type"] = []string{kind}
	h["Content-Length"] = []string{fmt.Sprint(info.Size())}
	h["Last-Modified"] = []string{modified.UTC().Format(http.TimeFormat)}
	h["Etag"] = []string{fmt.Sprintf("\"%x-%x\"", modified.Unix(), info.Size())}
	addHeaders := f.addHeaders
	if site.AddHeaders != nil {
		addHeaders = site.AddHeaders
	}
	for _, kv := range addHeaders {
		h[http.CanonicalHeaderKey(kv[0])] = append(h[http.CanonicalHeaderKey(kv[0])], kv[1])
	}
	h["Accept-Ranges"] = []string{"bytes"}
}
