// Package answers is what the minimal peers of pab's benchmarks serve (bench/baseline, the
// standard library's net/http and crypto/tls; bench/shell, pab's MITM shell): recorded
// responses read into memory from bench/gen's cycle files, and the one handler both
// answer them with, so that the two differ in their proxy only. Standard library only.
package answers

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Answer is one recorded response, with its header values ready to be shared.
type Answer struct {
	CType  []string // Content-Type, one value
	CLen   []string // Content-Length, one value: len(Body) in decimal
	Status int
	Body   []byte
}

// Map holds the answers by host (without port) and request URI: the same key for https
// and plain http, so one entry answers both schemes.
type Map map[string]*Answer

var cacheControl = []string{"max-age=3600"}

// CycleFlag is the -cycle flag of the peers (flag.Value): a cycle file's path, given once
// or more.
type CycleFlag []string

// String is the paths given, joined by commas.
func (c *CycleFlag) String() string { return strings.Join(*c, ",") }

// Set adds one path.
func (c *CycleFlag) Set(v string) error { *c = append(*c, v); return nil }

// Load reads one cycle file (bench/gen's cycle.tsv: url, status, content type, body file
// relative to the file's directory, sha256 hex, size; tab-separated, one exchange a line)
// into m, and returns the hosts it names. An error names the file and line: a line
// without six fields, a URL that does not parse, a status that is not a final one
// (200–599: a 1xx is interim, and net/http would answer 200 after it), a body file
// outside the file's directory (absolute, or through ".."), one that cannot be read or
// whose size is not the line's. Symbolic links inside the directory are followed: the
// cycle and its bodies are bench/gen's output, not a download.
func Load(path string, m Map) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var hosts []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		fs := strings.Split(sc.Text(), "\t")
		if len(fs) != 6 {
			return nil, fmt.Errorf("%s line %d: want 6 tab-separated fields", path, n)
		}
		u, err := url.Parse(fs[0])
		if err != nil {
			return nil, fmt.Errorf("%s line %d: %w", path, n, err)
		}
		status, err := strconv.Atoi(fs[1])
		if err != nil || status < 200 || status > 599 {
			return nil, fmt.Errorf("%s line %d: status %q, want a final status from 200 to 599 (RFC 9110 section 15)", path, n, fs[1])
		}
		if !filepath.IsLocal(fs[3]) {
			return nil, fmt.Errorf("%s line %d: body file %q is not a path inside the file's directory", path, n, fs[3])
		}
		body, err := os.ReadFile(filepath.Join(filepath.Dir(path), fs[3]))
		if err != nil {
			return nil, fmt.Errorf("%s line %d: %w", path, n, err)
		}
		if strconv.Itoa(len(body)) != fs[5] {
			return nil, fmt.Errorf("%s line %d: %s has %d bytes, the line says %s", path, n, fs[3], len(body), fs[5])
		}
		h := HostOnly(u.Host)
		m[h+u.RequestURI()] = &Answer{CType: []string{fs[2]}, CLen: []string{fs[5]}, Status: status, Body: body}
		if !slices.Contains(hosts, h) {
			hosts = append(hosts, h)
		}
	}
	return hosts, sc.Err()
}

// HostOnly drops a port from host.
func HostOnly(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		return h
	}
	return host
}

// Handler answers a request from m by its host and request URI: the recorded status,
// Content-Type, Content-Length and Cache-Control "max-age=3600", and the body (none for
// HEAD); anything else 404.
func Handler(m Map) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a := m[HostOnly(r.Host)+r.URL.RequestURI()]
		if a == nil {
			http.Error(w, "not recorded", http.StatusNotFound)
			return
		}
		h := w.Header()
		h["Content-Type"] = a.CType
		h["Content-Length"] = a.CLen
		h["Cache-Control"] = cacheControl
		w.WriteHeader(a.Status)
		if r.Method != http.MethodHead {
			w.Write(a.Body)
		}
	})
}
