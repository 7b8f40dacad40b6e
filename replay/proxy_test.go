package replay

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/pab-dev/pab/recording"
	"github.com/pab-dev/pab/tlsca"
)

// testProxy is a running Server on a loopback port with a client that trusts its CA.
type testProxy struct {
	s      *Server
	addr   string
	ca     *tlsca.CA
	b      *recording.Bundle
	log    *bytes.Buffer
	client *http.Client
	tr     *http.Transport
	done   chan error
}

var (
	testCAOnce sync.Once
	testCA     *tlsca.CA
	testCAErr  error
	testCADir  string // removed by TestMain
)

func TestMain(m *testing.M) {
	code := m.Run()
	if testCADir != "" {
		os.RemoveAll(testCADir)
	}
	os.Exit(code)
}

// sharedCA is one CA for all tests of the package (signing is what the cache saves).
func sharedCA(t testing.TB) *tlsca.CA {
	testCAOnce.Do(func() {
		dir, err := os.MkdirTemp("", "pab-replay-ca")
		if err != nil {
			testCAErr = err
			return
		}
		testCADir = dir
		testCA, testCAErr = tlsca.LoadOrCreate(dir)
	})
	if testCAErr != nil {
		t.Fatal(testCAErr)
	}
	return testCA
}

func startProxy(t testing.TB, m recording.Manifest, exs []ex, ruleFiles map[string]string) *testProxy {
	t.Helper()
	b := writeTestBundle(t, t.TempDir(), m, exs)
	return startProxyBundle(t, b, ruleFiles)
}

func startProxyBundle(t testing.TB, b *recording.Bundle, ruleFiles map[string]string, tweak ...func(*Options)) *testProxy {
	t.Helper()
	tp := &testProxy{ca: sharedCA(t), b: b, log: &bytes.Buffer{}, done: make(chan error, 1)}
	opts := Options{Bundle: b, Rules: testRules(t, ruleFiles), CA: tp.ca, Log: tp.log}
	for _, f := range tweak {
		f(&opts)
	}
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := s.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tp.s, tp.addr = s, ln.Addr().String()
	go func() { tp.done <- s.Serve(ln) }()
	tp.tr = &http.Transport{
		Proxy:                 http.ProxyURL(&url.URL{Scheme: "http", Host: tp.addr}),
		TLSClientConfig:       &tls.Config{RootCAs: tp.ca.CertPool()},
		DisableCompression:    true,
		ExpectContinueTimeout: 30 * time.Second,
		MaxIdleConnsPerHost:   2,
	}
	tp.client = &http.Client{Transport: tp.tr, Timeout: 60 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	t.Cleanup(func() { tp.close(t) })
	return tp
}

// close stops the server once.
func (tp *testProxy) close(t testing.TB) {
	if tp.s == nil {
		return
	}
	tp.tr.CloseIdleConnections()
	if err := tp.s.Close(); err != nil {
		t.Error(err)
	}
	if err := <-tp.done; err != nil {
		t.Errorf("serve: %v", err)
	}
	tp.s = nil
}

// logLines closes the server (flushing the log) and parses the log.
func (tp *testProxy) logLines(t testing.TB) []LogLine {
	t.Helper()
	tp.close(t)
	lines, err := ReadLog(bytes.NewReader(tp.log.Bytes()), "log")
	if err != nil {
		t.Fatal(err)
	}
	return lines
}

type result struct {
	status int
	header http.Header
	body   []byte
}

func (tp *testProxy) do(t testing.TB, method, rawURL string, hdr map[string]string, body []byte) result {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, rawURL, rd)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := tp.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, rawURL, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, rawURL, err)
	}
	return result{resp.StatusCode, resp.Header, data}
}

func (tp *testProxy) get(t testing.TB, rawURL string, hdr map[string]string) result {
	return tp.do(t, "GET", rawURL, hdr, nil)
}

func TestProxyHTTPSExact(t *testing.T) {
	exs := siteExchanges()
	tp := startProxy(t, siteManifest(), exs, defaultTestRules)
	r := tp.get(t, "https://site.test/", nil)
	if r.status != 200 || !bytes.Equal(r.body, exs[0].body) {
		t.Fatalf("status %d body %q", r.status, r.body)
	}
	h := r.header
	if h.Get("Content-Type") != "text/html; charset=utf-8" || h.Get("X-Custom") != "kept" {
		t.Errorf("recorded headers lost: %v", h)
	}
	if got := h.Values("Set-Cookie"); len(got) != 2 || got[0] != "a=1" || got[1] != "b=2" {
		t.Errorf("Set-Cookie = %q", got)
	}
	for _, name := range []string{"Transfer-Encoding", "Keep-Alive", "X-Hop", "Alt-Svc"} {
		if v := h.Get(name); v != "" {
			t.Errorf("%s replayed: %q", name, v)
		}
	}
	if h.Get("Content-Length") != strconv.Itoa(len(exs[0].body)) {
		t.Errorf("Content-Length = %q, want %d", h.Get("Content-Length"), len(exs[0].body))
	}
	img := tp.get(t, "https://site.test/img.png", map[string]string{"Sec-Fetch-Dest": "image"})
	if img.status != 200 || !bytes.Equal(img.body, exs[2].body) {
		t.Errorf("image: status %d, %d bytes (want %d)", img.status, len(img.body), len(exs[2].body))
	}
}

func TestProxyHeadAndBodiless(t *testing.T) {
	exs := siteExchanges()
	tp := startProxy(t, siteManifest(), exs, defaultTestRules)
	for round := 0; round < 3; round++ {
		for _, scheme := range []string{"https", "http"} {
			r := tp.do(t, "HEAD", scheme+"://site.test/img.png", nil, nil)
			if r.status != 200 || len(r.body) != 0 || r.header.Get("Content-Length") != strconv.Itoa(len(exs[2].body)) {
				t.Errorf("%s HEAD: status %d, %d body bytes, Content-Length %q", scheme, r.status, len(r.body), r.header.Get("Content-Length"))
			}
			e := tp.get(t, scheme+"://site.test/empty", nil)
			if e.status != 204 || len(e.body) != 0 || e.header.Get("X-Empty") != "yes" {
				t.Errorf("%s 204: %d %q %v", scheme, e.status, e.body, e.header)
			}
			n := tp.get(t, scheme+"://site.test/notmod", nil)
			if n.status != 304 || len(n.body) != 0 || n.header.Get("Etag") != `"x"` {
				t.Errorf("%s 304: %d %q %v", scheme, n.status, n.body, n.header)
			}
			g := tp.get(t, scheme+"://site.test/style.css", nil)
			if g.status != 200 || string(g.body) != "h1{color:red}" {
				t.Errorf("%s GET after bodiless answers: %d %q", scheme, g.status, g.body)
			}
		}
	}
}

// TestProxyKeepAlive sends many requests of every kind over one HTTPS tunnel.
func TestProxyKeepAlive(t *testing.T) {
	exs := siteExchanges()
	tp := startProxy(t, siteManifest(), exs, defaultTestRules)
	tp.tr.MaxConnsPerHost = 1
	for i := 0; i < 60; i++ {
		switch i % 6 {
		case 0:
			if r := tp.get(t, "https://site.test/", nil); r.status != 200 {
				t.Fatal(r.status)
			}
		case 1:
			tp.do(t, "HEAD", "https://site.test/img.png", nil, nil)
		case 2:
			tp.get(t, "https://site.test/empty", nil)
		case 3:
			tp.get(t, "https://site.test/missing.js", nil)
		case 4:
			tp.do(t, "POST", "https://site.test/api/cart", map[string]string{"Content-Type": "application/json"}, []byte(`{"id":1,"qty":2}`))
		case 5:
			tp.get(t, "https://site.test/notmod", nil)
		}
	}
	if n := tp.s.Accepted(); n != 1 {
		t.Errorf("%d connections accepted for 60 requests, want 1 (keep-alive)", n)
	}
}

func TestProxyMatchingThroughProxy(t *testing.T) {
	exs := siteExchanges()
	tp := startProxy(t, siteManifest(), exs, defaultTestRules)
	for _, c := range []struct {
		url    string
		status int
		body   string
	}{
		{"https://site.test/search?q=boots&page=2&sort=new", 200, "boots page 2"},     // fuzzy
		{"https://site.test/search?page=1&q=shoes&utm_source=x", 200, "shoes page 1"}, // exact
		{"https://site.test/cart", 200, "last cart"},                                  // latest
		{"https://site.test/dup", 200, "first copy"},                                  // earliest
		{"https://site.test:8443/port", 200, "port 8443"},                             // non-default port
		{"https://site.test:443/style.css", 200, "h1{color:red}"},                     // default port
		{"http://plain.test/", 200, "plain http home"},                                // plain proxy request
		{"https://plain.test/", 200, "plain http home"},                               // scheme ignored
	} {
		r := tp.get(t, c.url, nil)
		if r.status != c.status || string(r.body) != c.body {
			t.Errorf("%s: %d %q, want %d %q", c.url, r.status, r.body, c.status, c.body)
		}
	}
	post := tp.do(t, "POST", "https://site.test/api/cart", map[string]string{"Content-Type": "application/json"}, []byte(`{"qty":2, "id":1}`))
	if post.status != 200 || string(post.body) != `{"ok":true}` {
		t.Errorf("POST: %d %q", post.status, post.body)
	}
}

// TestProxyMissCORSOwnHeader: a CORS request answered by the site's own recorded 404 page
// gets the CORS fields, and they stay on that answer: the recorded head, shared by every
// answer of its entry, is not edited (the next answer of the page has none).
func TestProxyMissCORSOwnHeader(t *testing.T) {
	tp := startProxy(t, siteManifest(), siteExchanges(), defaultTestRules)
	doc := map[string]string{"Sec-Fetch-Dest": "document"}
	first := tp.get(t, "https://site.test/unknown", doc)
	cors := tp.get(t, "https://site.test/unknown", map[string]string{"Sec-Fetch-Dest": "document", "Origin": "https://app.test"})
	after := tp.get(t, "https://site.test/other-unknown", doc)
	if cors.status != 404 || !strings.Contains(string(cors.body), "the site's own 404") ||
		cors.header.Get("Access-Control-Allow-Origin") != "https://app.test" || cors.header.Get("Vary") != "Origin" {
		t.Errorf("the site's 404 page to a CORS request: %d %v", cors.status, cors.header)
	}
	for _, r := range []result{first, after} {
		if r.status != 404 || r.header.Get("Access-Control-Allow-Origin") != "" || r.header.Get("Vary") != "" {
			t.Errorf("the site's 404 page without Origin: %d %v", r.status, r.header)
		}
	}
}

func TestProxyMissAnswers(t *testing.T) {
	exs := siteExchanges()
	tp := startProxy(t, siteManifest(), exs, defaultTestRules)
	cases := []struct {
		name   string
		method string
		url    string
		hdr    map[string]string
		status int
		ctype  string
		body   string
	}{
		{"image", "GET", "https://site.test/nope.png", nil, 404, "", ""},
		{"font", "GET", "https://site.test/f.woff2", map[string]string{"Sec-Fetch-Dest": "font"}, 404, "", ""},
		{"style", "GET", "https://site.test/x", map[string]string{"Accept": "text/css,*/*;q=0.1"}, 404, "", ""},
		{"script", "GET", "https://site.test/app.js", nil, 404, "", ""},
		{"site 404 page", "GET", "https://site.test/unknown", map[string]string{"Sec-Fetch-Dest": "document"}, 404, "text/html", "<title>Site 404</title>the site's own 404"},
		{"api xhr_not_found", "GET", "https://site.test/api/unknown", map[string]string{"Sec-Fetch-Dest": "empty"}, 404, "application/json", `{"error":"not recorded"}`},
		{"api json accepted", "GET", "https://plain.test/api/x", map[string]string{"Accept": "application/json"}, 404, "application/json", "{}"},
		{"api no json", "GET", "https://plain.test/api/x", map[string]string{"Sec-Fetch-Dest": "empty"}, 404, "", ""},
		{"tracker", "GET", "https://tracker.test/p.gif", nil, 204, "", ""},
		{"unresolved revisit", "GET", "https://site.test/gone", map[string]string{"Sec-Fetch-Dest": "document"}, 404, "text/html", "<title>Site 404</title>the site's own 404"},
		{"excluded", "GET", "https://site.test/captcha/check", map[string]string{"Sec-Fetch-Dest": "document"}, 404, "text/html", "<title>Site 404</title>the site's own 404"},
		{"other", "GET", "https://site.test/file.zip", nil, 404, "text/plain; charset=utf-8", "pab replay: not in the recording: GET https://site.test/file.zip\n"},
	}
	for _, c := range cases {
		r := tp.do(t, c.method, c.url, c.hdr, nil)
		if r.status != c.status || r.header.Get("Content-Type") != c.ctype || string(r.body) != c.body {
			t.Errorf("%s: %d %q %q, want %d %q %q", c.name, r.status, r.header.Get("Content-Type"), r.body, c.status, c.ctype, c.body)
		}
	}
	doc := tp.get(t, "https://plain.test/unknown?a=<b>", map[string]string{"Sec-Fetch-Dest": "document"})
	if doc.status != 404 || !strings.Contains(string(doc.body), "Not in the recording") ||
		!strings.Contains(string(doc.body), "https://plain.test/unknown?a=&lt;b&gt;") {
		t.Errorf("plain 404 page: %d %s", doc.status, doc.body)
	}
	cors := tp.get(t, "https://site.test/api/unknown", map[string]string{"Sec-Fetch-Dest": "empty", "Origin": "https://app.test"})
	if cors.header.Get("Access-Control-Allow-Origin") != "https://app.test" {
		t.Errorf("miss answer to a CORS request: %v", cors.header)
	}

	lines := tp.logLines(t)
	want := []struct {
		typ    string
		source Source
		note   string
	}{
		{"image", "miss", ""}, {"font", "miss", ""}, {"style", "miss", ""}, {"script", "miss", ""},
		{"document", "miss", "site's own 404 page e000011"}, {"api", "miss", ""}, {"api", "miss", ""}, {"api", "miss", ""},
		{"tracker", "blocked", ""}, {"document", "miss", noteUnresolved + "; site's own 404 page e000011"},
		{"document", "miss", noteExcluded + "; site's own 404 page e000011"}, {"other", "miss", ""},
		{"document", "miss", ""}, {"api", "miss", ""},
	}
	if len(lines) != len(want) {
		t.Fatalf("%d log lines, want %d", len(lines), len(want))
	}
	for i, w := range want {
		l := lines[i]
		if l.Type != w.typ || l.Source != w.source || l.Note != w.note {
			t.Errorf("line %d (%s): type %s source %s note %q, want %s %s %q", i, l.URL, l.Type, l.Source, l.Note, w.typ, w.source, w.note)
		}
	}
}

func TestProxyPreflight(t *testing.T) {
	tp := startProxy(t, siteManifest(), siteExchanges(), defaultTestRules)
	r := tp.do(t, "OPTIONS", "https://site.test/api/cart", map[string]string{
		"Origin": "https://shop.test", "Access-Control-Request-Method": "POST",
		"Access-Control-Request-Headers": "content-type,x-token",
	}, nil)
	h := r.header
	if r.status != 204 || h.Get("Access-Control-Allow-Origin") != "https://shop.test" ||
		h.Get("Access-Control-Allow-Methods") != "POST" || h.Get("Access-Control-Allow-Headers") != "content-type,x-token" ||
		h.Get("Access-Control-Allow-Credentials") != "true" || h.Get("Access-Control-Max-Age") == "" {
		t.Errorf("preflight: %d %v", r.status, h)
	}
	plain := tp.do(t, "OPTIONS", "https://site.test/api/cart", nil, nil)
	if plain.status != 404 {
		t.Errorf("OPTIONS without preflight headers: %d", plain.status)
	}
	lines := tp.logLines(t)
	if lines[0].Source != SourcePreflight || lines[0].Status != 204 || lines[1].Source != SourceMiss {
		t.Errorf("log: %+v", lines)
	}
}

// countingReader counts the bytes a client transport actually sent.
type countingReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// TestProxyUpload10MB posts 10 MB through the MITM and through plain HTTP, with
// "Expect: 100-continue", and checks the whole body was read before the answer.
func TestProxyUpload10MB(t *testing.T) {
	payload := bigPayload(10 << 20)
	exs := append(siteExchanges(), ex{method: "POST", url: "https://site.test/upload", reqType: "application/octet-stream",
		reqBody: payload, status: 201, resType: "fetch", header: []string{"Content-Type: application/json"}, body: []byte(`{"stored":true}`)})
	tp := startProxy(t, siteManifest(), exs, defaultTestRules)
	for _, c := range []struct {
		url    string
		body   []byte
		status int
	}{
		{"https://site.test/upload", payload, 201},                // recorded: exact by body digest
		{"http://site.test/upload", payload, 201},                 // plain HTTP proxy request
		{"https://site.test/upload", bigPayload(10<<20 + 1), 404}, // other body: miss
	} {
		cr := &countingReader{r: bytes.NewReader(c.body)}
		req, _ := http.NewRequest("POST", c.url, cr)
		req.ContentLength = int64(len(c.body))
		req.Header.Set("Content-Type", "application/octet-stream")
		req.Header.Set("Expect", "100-continue")
		req.Header.Set("Accept", "application/json")
		resp, err := tp.client.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", c.url, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status || cr.n.Load() != int64(len(c.body)) {
			t.Errorf("%s: status %d, client sent %d of %d bytes", c.url, resp.StatusCode, cr.n.Load(), len(c.body))
		}
	}
	// curl speaks Expect: 100-continue for large bodies by itself.
	if curl, err := exec.LookPath("curl"); err == nil {
		file := filepath.Join(t.TempDir(), "up.bin")
		os.WriteFile(file, payload, 0o644)
		out, err := exec.Command(curl, "-sS", "-o", "/dev/null", "-w", "%{http_code} %{size_upload}",
			"--proxy", "http://"+tp.addr, "--cacert", tp.ca.CertPath(), "--noproxy", "",
			"-H", "Content-Type: application/octet-stream", "-H", "Expect: 100-continue",
			"--data-binary", "@"+file, "https://site.test/upload").CombinedOutput()
		if err != nil || string(out) != fmt.Sprintf("201 %d", len(payload)) {
			t.Errorf("curl upload: %v: %s", err, out)
		}
	}
	lines := tp.logLines(t)
	if len(lines) < 3 || lines[0].Source != SourceExact || lines[1].Source != SourceExact || lines[2].Source != SourceMiss {
		t.Errorf("log: %+v", lines)
	}
}

// dialTunnel opens a CONNECT tunnel to hostport through the proxy and starts TLS with the
// given ALPN protocols.
func dialTunnel(t testing.TB, tp *testProxy, hostport string, alpn []string) *tls.Conn {
	t.Helper()
	c, err := net.Dial("tcp", tp.addr)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", hostport, hostport)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: "CONNECT"})
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT %s: %v %v", hostport, resp, err)
	}
	host, _, _ := net.SplitHostPort(hostport)
	tc := tls.Client(c, &tls.Config{RootCAs: tp.ca.CertPool(), ServerName: host, NextProtos: alpn})
	if err := tc.Handshake(); err != nil {
		t.Fatalf("TLS to %s through the proxy: %v", hostport, err)
	}
	t.Cleanup(func() { tc.Close() })
	return tc
}

func TestProxyWebSocket(t *testing.T) {
	tp := startProxy(t, siteManifest(), siteExchanges(), defaultTestRules)
	tc := dialTunnel(t, tp, "site.test:443", []string{"http/1.1"})
	br := bufio.NewReader(tc)
	io.WriteString(tc, "GET /socket HTTP/1.1\r\nHost: site.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"+
		"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusNotImplemented || !strings.Contains(string(body), "WebSocket") {
		t.Errorf("websocket: %d %q", resp.StatusCode, body)
	}
	// The tunnel still serves requests afterwards.
	io.WriteString(tc, "GET /style.css HTTP/1.1\r\nHost: site.test\r\n\r\n")
	resp, err = http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(body) != "h1{color:red}" {
		t.Errorf("after websocket: %d %q", resp.StatusCode, body)
	}
	// Plain HTTP WebSocket through the proxy.
	c, err := net.Dial("tcp", tp.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "GET http://plain.test/ws HTTP/1.1\r\nHost: plain.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"+
		"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
	resp, err = http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != http.StatusNotImplemented {
		t.Errorf("plain websocket: %v %v", resp, err)
	}
	lines := tp.logLines(t)
	if len(lines) != 3 || lines[0].Note != noteWebSocket || lines[0].Source != SourceMiss || lines[2].Note != noteWebSocket {
		t.Errorf("log: %+v", lines)
	}
}

// TestProxyHTTP2 checks HTTP/2 inside tunnels: by default h2 is negotiated by ALPN (also
// when http/1.1 is offered too) and answered from the recording with the same bytes as
// over HTTP/1.1; with DisableHTTP2 a client offering both gets http/1.1 and an h2-only
// client a clear 505. HTTP/2 without TLS to the listener (prior knowledge) gets a 505
// either way.
func TestProxyHTTP2(t *testing.T) {
	for _, disabled := range []bool{false, true} {
		t.Run(fmt.Sprintf("disabled=%v", disabled), func(t *testing.T) {
			b := writeTestBundle(t, t.TempDir(), siteManifest(), siteExchanges())
			tp := startProxyBundle(t, b, defaultTestRules, func(o *Options) { o.DisableHTTP2 = disabled })
			h2 := &http2.Transport{
				DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
					tc := dialTunnel(t, tp, addr, []string{"h2"})
					if p := tc.ConnectionState().NegotiatedProtocol; p != "h2" {
						return nil, fmt.Errorf("negotiated %q", p)
					}
					return tc, nil
				},
			}
			resp, err := (&http.Client{Transport: h2}).Get("https://site.test/")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			switch {
			case resp.ProtoMajor != 2:
				t.Errorf("h2 over TLS answered over %s", resp.Proto)
			case disabled && (resp.StatusCode != http.StatusHTTPVersionNotSupported || !strings.Contains(string(body), "HTTP/2")):
				t.Errorf("h2 over TLS, h2 off: %d %q", resp.StatusCode, body)
			case !disabled && (resp.StatusCode != 200 || string(body) != "<!doctype html><title>Home</title><h1>home</h1>"):
				t.Errorf("h2 over TLS: %d %q", resp.StatusCode, body)
			}
			h2c := &http2.Transport{AllowHTTP: true,
				DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
					return net.Dial("tcp", tp.addr)
				}}
			resp, err = (&http.Client{Transport: h2c}).Get("http://plain.test/")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusHTTPVersionNotSupported {
				t.Errorf("h2c prior knowledge: %d", resp.StatusCode)
			}
			want := "h2"
			if disabled {
				want = "http/1.1"
			}
			tc := dialTunnel(t, tp, "site.test:443", []string{"h2", "http/1.1"})
			if p := tc.ConnectionState().NegotiatedProtocol; p != want {
				t.Errorf("ALPN with h2 and http/1.1 offered: %q, want %q", p, want)
			}
			tc.Close()
			lines := tp.logLines(t)
			if len(lines) != 2 || lines[1].Note != noteH2C || lines[1].Status != 505 {
				t.Fatalf("log: %+v", lines)
			}
			if disabled && (lines[0].Note != noteHTTP2 || lines[0].Status != 505) || !disabled && (lines[0].Source != SourceExact || lines[0].Status != 200) {
				t.Errorf("log of the h2 request: %+v", lines[0])
			}
		})
	}
}

// TestProxyNeverDials CONNECTs to hosts that have no DNS and checks they are answered
// from the recording (or missed) without any outbound dial (checked in close).
func TestProxyNeverDials(t *testing.T) {
	tp := startProxy(t, siteManifest(), siteExchanges(), defaultTestRules)
	for _, u := range []string{"https://no-such-host.invalid/", "http://no-such-host.invalid/x", "https://127.0.0.2:9/", "https://[::1]:9/"} {
		r := tp.get(t, u, map[string]string{"Sec-Fetch-Dest": "document"})
		if r.status != 404 {
			t.Errorf("%s: %d", u, r.status)
		}
	}
	tp.close(t)
}

func TestProxyControl(t *testing.T) {
	tp := startProxy(t, siteManifest(), siteExchanges(), defaultTestRules)
	tp.get(t, "https://site.test/", nil)
	tp.get(t, "https://site.test/nope.png", nil)
	tp.get(t, "https://tracker.test/x", nil)
	for _, u := range []string{"http://rr.control/stats", "https://rr.control/stats", "http://" + tp.addr + "/stats"} {
		var r result
		if strings.Contains(u, tp.addr) {
			resp, err := http.Get(u) // direct, not through the proxy
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			r = result{resp.StatusCode, resp.Header, body}
		} else {
			r = tp.get(t, u, nil)
		}
		var c Counts
		if err := json.Unmarshal(r.body, &c); err != nil || r.status != 200 {
			t.Fatalf("%s: %d %q %v", u, r.status, r.body, err)
		}
		if c.Total != 3 || c.BySource["exact"] != 1 || c.BySource["miss"] != 1 || c.BySource["blocked"] != 1 ||
			c.ByType["document"] != 1 || c.ByType["image"] != 1 || c.ByType["tracker"] != 1 {
			t.Errorf("%s: %+v", u, c)
		}
	}
	if r := tp.get(t, "https://rr.control/health", nil); r.status != 200 || string(r.body) != "ok\n" {
		t.Errorf("health: %d %q", r.status, r.body)
	}
	if n := len(tp.logLines(t)); n != 3 {
		t.Errorf("%d log lines, want 3 (control requests are not logged)", n)
	}
}

// replaySequence is a fixed request sequence covering every source.
func replaySequence(t *testing.T, tp *testProxy) {
	tp.get(t, "https://site.test/", nil)
	tp.get(t, "https://site.test/search?q=boots&page=2&sort=new", nil)
	tp.get(t, "https://tracker.test/px", nil)
	tp.do(t, "OPTIONS", "https://site.test/api/cart", map[string]string{"Origin": "https://site.test", "Access-Control-Request-Method": "POST"}, nil)
	tp.do(t, "POST", "https://site.test/api/cart", map[string]string{"Content-Type": "application/json"}, []byte(`{"id":1,"qty":2}`))
	tp.get(t, "https://site.test/nope.png", nil)
	tp.get(t, "https://site.test/gone", nil)
	tp.get(t, "http://plain.test/", nil)
	tp.do(t, "HEAD", "https://site.test:8443/port", nil, nil)
}

func TestProxyLogDeterministic(t *testing.T) {
	var runs [2][]LogLine
	for i := range runs {
		tp := startProxy(t, siteManifest(), siteExchanges(), defaultTestRules)
		replaySequence(t, tp)
		runs[i] = tp.logLines(t)
	}
	want := []LogLine{
		{Method: "GET", URL: "https://site.test/", Key: "GET site.test/", Type: "document", Source: "exact", Status: 200, Entry: "e000001", Record: "<urn:uuid:00000000-0000-4000-8000-000000000001>"},
		{Method: "GET", URL: "https://site.test/search?q=boots&page=2&sort=new", Key: "GET site.test/search?page=2&q=boots&sort=new", Type: "document", Source: "fuzzy", Status: 200, Entry: "e000005", Record: "<urn:uuid:00000000-0000-4000-8000-000000000005>"},
		{Method: "GET", URL: "https://tracker.test/px", Key: "GET tracker.test/px", Type: "tracker", Source: "blocked", Rule: "_default.yaml:3", Status: 204},
		{Method: "OPTIONS", URL: "https://site.test/api/cart", Key: "OPTIONS site.test/api/cart", Type: "document", Source: "preflight", Status: 204},
		{Method: "POST", URL: "https://site.test/api/cart", Key: `POST site.test/api/cart #body:{"id":1,"qty":2}`, Type: "document", Source: "exact", Status: 200, Entry: "e000006", Record: "<urn:uuid:00000000-0000-4000-8000-000000000006>"},
		{Method: "GET", URL: "https://site.test/nope.png", Key: "GET site.test/nope.png", Type: "image", Source: "miss", Status: 404},
		{Method: "GET", URL: "https://site.test/gone", Key: "GET site.test/gone", Type: "document", Source: "miss", Status: 404, Entry: "e000011", Record: "<urn:uuid:00000000-0000-4000-8000-000000000011>", Note: noteUnresolved + "; site's own 404 page e000011"},
		{Method: "GET", URL: "http://plain.test/", Key: "GET plain.test/", Type: "document", Source: "exact", Status: 200, Entry: "e000010", Record: "<urn:uuid:00000000-0000-4000-8000-000000000010>"},
		{Method: "HEAD", URL: "https://site.test:8443/port", Key: "HEAD site.test:8443/port", Type: "document", Source: "exact", Status: 200, Entry: "e000009", Record: "<urn:uuid:00000000-0000-4000-8000-000000000009>"},
	}
	for r, lines := range runs {
		if len(lines) != len(want) {
			t.Fatalf("run %d: %d lines, want %d", r, len(lines), len(want))
		}
		for i := range lines {
			l := lines[i]
			if _, err := time.Parse(time.RFC3339Nano, l.Time); err != nil || !strings.HasSuffix(l.Time, "Z") || len(l.Time) != len("2026-01-02T15:04:05.000Z") {
				t.Errorf("run %d line %d: time %q", r, i, l.Time)
			}
			if l.MS < 0 {
				t.Errorf("run %d line %d: ms %v", r, i, l.MS)
			}
			l.Time, l.MS = "", 0
			if l.Rule != "" {
				l.Rule = filepath.Base(l.Rule) // the rules live in a temporary directory
			}
			if l != want[i] {
				t.Errorf("run %d line %d:\n got %+v\nwant %+v", r, i, l, want[i])
			}
		}
	}
}

func TestListenPortInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	b := writeTestBundle(t, t.TempDir(), recording.Manifest{}, siteExchanges())
	s, err := New(Options{Bundle: b, Rules: testRules(t, defaultTestRules), CA: sharedCA(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	addr := ln.Addr().String()
	_, err = s.Listen(addr)
	if err == nil || err.Error() != "listen "+addr+": address already in use" {
		t.Errorf("err = %v", err)
	}
	s.opts.Listen = addr
	if err := s.ListenAndServe(context.Background()); err == nil || !strings.Contains(err.Error(), "address already in use") {
		t.Errorf("ListenAndServe: %v", err)
	}
}

// TestListenAndServeContext serves until the context ends and flushes the log.
func TestListenAndServeContext(t *testing.T) {
	b := writeTestBundle(t, t.TempDir(), recording.Manifest{}, siteExchanges())
	var logBuf bytes.Buffer
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	s, err := New(Options{Bundle: b, Rules: testRules(t, defaultTestRules), CA: sharedCA(t), Log: &logBuf, Listen: addr})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.ListenAndServe(ctx) }()
	var resp *http.Response
	for i := 0; i < 100; i++ {
		c := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: addr})}}
		if resp, err = c.Get("http://plain.test/"); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logBuf.String(), `"url":"http://plain.test/"`) {
		t.Errorf("log after ListenAndServe: %q", logBuf.String())
	}
}

// TestProxyConcurrent hammers the proxy from many goroutines (run with -race).
func TestProxyConcurrent(t *testing.T) {
	exs := siteExchanges()
	tp := startProxy(t, siteManifest(), exs, defaultTestRules)
	tp.tr.MaxIdleConnsPerHost = 16
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				u := []string{"https://site.test/img.png", "http://plain.test/", "https://site.test/x.png", "https://other-" + strconv.Itoa(g) + ".test/"}[i%4]
				resp, err := tp.client.Get(u)
				if err != nil {
					errs <- err
					return
				}
				n, _ := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if i%4 == 0 && n != int64(len(exs[2].body)) {
					errs <- fmt.Errorf("image: %d bytes", n)
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := len(tp.logLines(t)); n != 160 {
		t.Errorf("%d log lines, want 160", n)
	}
}

func TestNewErrors(t *testing.T) {
	if _, err := New(Options{}); err == nil {
		t.Error("no bundle accepted")
	}
	b := writeTestBundle(t, t.TempDir(), recording.Manifest{}, siteExchanges())
	if _, err := New(Options{Bundle: b}); err == nil {
		t.Error("no CA accepted")
	}
	if _, err := New(Options{Bundle: b, CA: sharedCA(t)}); err == nil {
		t.Error("no rules accepted")
	}
}

func TestCloseTwice(t *testing.T) {
	tp := startProxy(t, siteManifest(), siteExchanges(), defaultTestRules)
	tc := dialTunnel(t, tp, "site.test:443", nil)
	tp.close(t)
	// The tunnel was closed by Close.
	tc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := tc.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("tunnel still open after Close: %v", err)
	}
}

// TestIdleTunnelClosed checks that an idle MITM tunnel is closed after the idle timeout.
func TestIdleTunnelClosed(t *testing.T) {
	b := writeTestBundle(t, t.TempDir(), siteManifest(), siteExchanges())
	tp := startProxyBundle(t, b, defaultTestRules, func(o *Options) { o.IdleTimeout = 200 * time.Millisecond })
	tc := dialTunnel(t, tp, "site.test:443", nil)
	io.WriteString(tc, "GET /style.css HTTP/1.1\r\nHost: site.test\r\n\r\n")
	br := bufio.NewReader(tc)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatal(resp, err)
	}
	io.Copy(io.Discard, resp.Body)
	tc.SetReadDeadline(time.Now().Add(20 * time.Second))
	_, err = br.ReadByte()
	if err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("idle tunnel not closed by the proxy: %v", err)
	}
}
